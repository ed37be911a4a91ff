"""Load for `cargo xtask bench causal`: write-then-read loops through Sluice's MySQL port, with
reads routed to the replica by rule.

    bench_causal.py PORT SECONDS THREADS

With BENCH_CAUSAL_READS_ONLY=1 the loops only read (no write, so no token to wait for).

Each thread owns one row of causal_bench.t; each iteration increments it (on the writer) and
reads it back (a point select, on the replica): a read that returns an older value is stale.
Prints JSON: iterations, the reads' p50/p99 (ms), stale reads and errors. Bounded by SECONDS.
"""

import json
import os
import sys
import threading
import time

import pymysql

port, seconds, threads_n = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
writes = os.environ.get("BENCH_CAUSAL_READS_ONLY") != "1"
lock = threading.Lock()
reads, stale, errors, iterations = [], [0], [], [0]


def connect():
    return pymysql.connect(host="127.0.0.1", port=port, user="app", password="app",
                           database="causal_bench", autocommit=True, connect_timeout=10)


def worker(row):
    c = connect()
    cur = c.cursor()
    cur.execute("SELECT /* hostgroup=0 */ v FROM t WHERE id = %s", (row,))
    value = cur.fetchone()[0]
    mine, mine_stale, n = [], 0, 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            if writes:
                cur.execute("UPDATE t SET v = v + 1 WHERE id = %s", (row,))
                value += 1
            began = time.monotonic()
            cur.execute("SELECT v FROM t WHERE id = %s", (row,))
            seen = cur.fetchone()[0]
            mine.append((time.monotonic() - began) * 1000)
            mine_stale += seen < value
            n += 1
        except pymysql.err.MySQLError as e:
            with lock:
                errors.append(str(e))
            break
    with lock:
        reads.extend(mine)
        stale[0] += mine_stale
        iterations[0] += n


threads = [threading.Thread(target=worker, args=(i + 1,)) for i in range(threads_n)]
for t in threads:
    t.start()
for t in threads:
    t.join(seconds + 60)
reads.sort()


def q(p):
    return reads[min(len(reads) - 1, int(p * len(reads)))] if reads else None


print(json.dumps({"iterations": iterations[0], "p50": q(0.5), "p99": q(0.99),
                  "stale": stale[0], "errors": len(errors), "first_error": errors[:1]}))
