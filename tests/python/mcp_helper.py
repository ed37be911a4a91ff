"""What the MCP end-to-end tests share: a client of the official MCP Python SDK (installed by
`cargo xtask test`) with a bearer token, and a call that returns what an agent would see."""

import json
import sys

import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client


def client(url, token, mode="legacy", verify=True):
    """An MCP client of `url` sending `Authorization: Bearer <token>`; `mode` is "legacy"
    (initialize, 2025-11-25), "auto" or a modern version ("2026-07-28")."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    http = httpx2.AsyncClient(headers=headers, timeout=120, verify=verify)
    return Client(streamable_http_client(url, http_client=http), mode=mode)


async def call(c, tool, args):
    """Calls `tool`; {"error": bool, "text": first text block, "data": structuredContent}."""
    r = await c.call_tool(tool, args)
    text = r.content[0].text if r.content else ""
    return {"error": bool(r.is_error), "text": text, "data": r.structured_content}


def emit(**kv):
    """One JSON line for the Rust side."""
    print(json.dumps(kv), flush=True)
    sys.stdout.flush()
