"""A TCP relay that adds `Authorization: Bearer <token>` to every HTTP request it passes on.

The MCP conformance suite has no option for a header, and Sluice's MCP endpoint refuses a
request without a token; this relay lets the suite's own requests reach Sluice unchanged
otherwise (Host, Origin and every other header as the suite sent them).

Usage: auth_relay.py LISTEN_PORT TARGET_PORT TOKEN  (prints "ready" once listening)."""

import asyncio
import sys

LISTEN, TARGET, TOKEN = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]


async def pump(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def requests(client, server):
    """Copies requests, adding the header to each head; bodies by Content-Length or chunks."""
    try:
        while True:
            head = await client.readuntil(b"\r\n\r\n")
            lines = head[:-4].split(b"\r\n")
            lines = [l for l in lines if not l.lower().startswith(b"authorization:")]
            lines.insert(1, b"Authorization: Bearer " + TOKEN.encode())
            server.write(b"\r\n".join(lines) + b"\r\n\r\n")
            headers = {l.split(b":", 1)[0].strip().lower(): l.split(b":", 1)[1].strip() for l in lines[1:] if b":" in l}
            if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
                while True:
                    size_line = await client.readuntil(b"\r\n")
                    server.write(size_line)
                    size = int(size_line.split(b";")[0], 16)
                    server.write(await client.readexactly(size + 2))
                    if size == 0:
                        break
            else:
                n = int(headers.get(b"content-length", b"0"))
                if n:
                    server.write(await client.readexactly(n))
            await server.drain()
    except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        pass
    finally:
        server.close()


async def handle(client_r, client_w):
    server_r, server_w = await asyncio.open_connection("127.0.0.1", TARGET)
    await asyncio.gather(requests(client_r, server_w), pump(server_r, client_w))


async def main():
    srv = await asyncio.start_server(handle, "127.0.0.1", LISTEN, limit=1 << 20)
    print("ready", flush=True)
    async with srv:
        await srv.serve_forever()


asyncio.run(main())
