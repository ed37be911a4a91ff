"""Load for `cargo xtask bench notify`: notification delivery latency to many listeners.

    bench_notify.py PORT DATABASE LISTENERS NOTIFICATIONS

Opens LISTENERS connections (psycopg, asyncio, one process) that LISTEN bench_notify, then a
sender sends NOTIFICATIONS notifications 20 ms apart, each payload its send time. Each listener
records when each notification reached it. Prints JSON: delivered and expected counts, the
delivery latency p50/p99 (ms, send to receipt), and the server connections of user app on
DATABASE while everyone listened (pg_stat_activity, read on the primary directly). Bounded: the
listeners stop 10 s after the last send.
"""

import asyncio
import json
import resource
import sys
import time

import psycopg

port, database, n_listeners, n_notify = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
PRIMARY = 15432
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
DSN = f"host=127.0.0.1 port={port} user=app password=app dbname={database} sslmode=disable"


async def listener(conn, lat, done):
    async for n in conn.notifies(timeout=None, stop_after=n_notify):
        lat.append(time.time() - float(n.payload))
        if len(lat) >= n_notify * n_listeners:
            done.set()


async def main():
    conns = []
    for i in range(0, n_listeners, 50):
        batch = min(50, n_listeners - i)
        conns += await asyncio.gather(*[psycopg.AsyncConnection.connect(DSN, autocommit=True) for _ in range(batch)])
    for i in range(0, n_listeners, 100):
        await asyncio.gather(*[c.execute("LISTEN bench_notify") for c in conns[i:i + 100]])
    d = await psycopg.AsyncConnection.connect(
        f"host=127.0.0.1 port={PRIMARY} user=app password=app dbname=app sslmode=disable", autocommit=True)
    cur = await d.execute("SELECT count(*) FROM pg_stat_activity WHERE usename = 'app' AND datname = %s", (database,))
    servers = (await cur.fetchone())[0]
    lat, done = [], asyncio.Event()
    tasks = [asyncio.create_task(listener(c, lat, done)) for c in conns]
    sender = await psycopg.AsyncConnection.connect(DSN, autocommit=True)
    for _ in range(n_notify):
        await sender.execute(f"NOTIFY bench_notify, '{time.time():.6f}'")
        await asyncio.sleep(0.02)
    try:
        await asyncio.wait_for(done.wait(), timeout=10)
    except asyncio.TimeoutError:
        pass
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    lat.sort()
    def q(p):
        return 1000 * lat[min(len(lat) - 1, int(p * len(lat)))] if lat else float("nan")
    print(json.dumps({"delivered": len(lat), "expected": n_notify * n_listeners,
                      "p50": q(0.5), "p99": q(0.99), "servers": servers}))
    for c in conns + [sender, d]:
        await c.close()


asyncio.run(main())
