"""`cargo xtask bench rag`'s agent: every question of the labelled set through `/mcp/rag` with the
MCP Python SDK, for each search; prints one JSON line per search with recall@10, MRR@10 and
the calls' p50/p99 in ms. Usage: bench_rag.py URL TOKEN QUESTIONS.json SOURCE_ID LABEL"""

import asyncio
import json
import sys
import time

import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

URL, TOKEN, QUESTIONS = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3]))
SOURCE, LABEL = int(sys.argv[4]), sys.argv[5]
SEARCHES = [
    ("fts", "rag.search_fts", lambda q: {"query": q}),
    ("vector", "rag.search_vector", lambda q: {"query_text": q}),
    ("hybrid fuse", "rag.search_hybrid", lambda q: {"query": q}),
    ("hybrid fts_then_vec", "rag.search_hybrid", lambda q: {"query": q, "mode": "fts_then_vec"}),
]


def pct(xs, p):
    xs = sorted(xs)
    return xs[round((len(xs) - 1) * p)]


async def main():
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120)
    async with Client(streamable_http_client(URL, http_client=http), mode="legacy") as c:
        for name, tool, args in SEARCHES:
            hits, rr, times = 0, 0.0, []
            for q in QUESTIONS:
                t = time.perf_counter()
                r = await c.call_tool(tool, dict(args(q["question"]), k=10, source_ids=[SOURCE]))
                times.append((time.perf_counter() - t) * 1000)
                titles = [h["doc_id"] for h in r.structured_content["results"]]
                want = f"{SOURCE}:{q['doc_id'].split(':')[1]}"
                if want in titles:
                    hits += 1
                    rr += 1 / (titles.index(want) + 1)
            n = len(QUESTIONS)
            print(json.dumps({"search": f"{LABEL}: {name}", "recall10": hits / n, "mrr10": rr / n,
                              "p50_ms": pct(times, 0.5), "p99_ms": pct(times, 0.99), "n": n}), flush=True)


asyncio.run(main())
