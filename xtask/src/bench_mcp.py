"""`cargo xtask bench mcp`'s load: CLIENTS agents calling run_sql_readonly with a point select
for SECS seconds through Sluice's MCP endpoint, then the same statement with PyMySQL straight
to the replica from as many threads; per-call latencies, one JSON line each."""

import asyncio, json, random, sys, threading, time
import httpx2, pymysql
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

URL, TOKEN, REPLICA_PORT, CLIENTS, SECS, DB = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
SQL = "SELECT c FROM {db}.sbtest1 WHERE id = {id}"


def summary(name, lat, secs, errors):
    lat.sort()
    q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1000 if lat else float("nan")
    print(json.dumps({"target": name, "calls": len(lat), "per_sec": len(lat) / secs,
                      "p50_ms": q(0.50), "p99_ms": q(0.99), "errors": errors}), flush=True)


async def mcp_load():
    lat, errors = [], 0
    stop = time.monotonic() + SECS

    async def agent():
        nonlocal errors
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
        async with Client(streamable_http_client(URL, http_client=http), mode="2026-07-28") as c:
            while time.monotonic() < stop:
                sql = SQL.format(db=DB, id=random.randint(1, 100000))
                t = time.perf_counter()
                r = await c.call_tool("run_sql_readonly", {"target_id": "mysql_hg1", "sql": sql})
                lat.append(time.perf_counter() - t)
                errors += bool(r.is_error)

    start = time.monotonic()
    await asyncio.gather(*[agent() for _ in range(CLIENTS)])
    summary("mcp run_sql_readonly", lat, time.monotonic() - start, errors)


def direct_load():
    lat, lock = [], threading.Lock()
    stop = time.monotonic() + SECS

    def worker():
        conn = pymysql.connect(host="127.0.0.1", port=REPLICA_PORT, user="app", password="app", ssl_disabled=True)
        mine = []
        while time.monotonic() < stop:
            t = time.perf_counter()
            with conn.cursor() as cur:
                cur.execute(SQL.format(db=DB, id=random.randint(1, 100000)))
                cur.fetchall()
            mine.append(time.perf_counter() - t)
        conn.close()
        with lock:
            lat.extend(mine)

    start = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    summary("direct (PyMySQL to the replica)", lat, time.monotonic() - start, 0)


asyncio.run(mcp_load())
direct_load()
