"""Load for `cargo xtask bench admission`: OLTP point selects at a fixed rate, optionally beside
a burst of CPU-heavy "vector-style" statements, through Sluice's MySQL port.

    bench_admission.py PORT SECONDS OLTP_THREADS OLTP_RATE BURST_THREADS

Each OLTP thread sends OLTP_RATE statements per second on a fixed schedule (a late statement is
sent at once, not skipped); each burst thread runs `SELECT BENCHMARK(...)` back to back. Prints
JSON: the OLTP latencies' p50/p99 (ms), their count and errors, and the burst's statements and
refusals. Bounded by SECONDS (plus the last statements in flight).
"""

import json
import random
import sys
import threading
import time

import pymysql

port, seconds = int(sys.argv[1]), float(sys.argv[2])
oltp_threads, oltp_rate, burst_threads = int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
HEAVY = "SELECT BENCHMARK(500000, MD5('sluice'))"


def connect():
    return pymysql.connect(host="127.0.0.1", port=port, user="app", password="app",
                           database="sbbench", autocommit=True, connect_timeout=10)


latencies, oltp_errors, burst = [], [], {"done": 0, "refused": 0, "other": 0}
lock = threading.Lock()
start = time.monotonic() + 1.0
end = start + seconds


def oltp():
    c = connect()
    cur = c.cursor()
    mine, n = [], 0
    while True:
        due = start + n / oltp_rate
        if due >= end:
            break
        wait = due - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        began = time.monotonic()
        try:
            cur.execute("SELECT c FROM sbtest1 WHERE id = %s", (random.randint(1, 10000),))
            cur.fetchall()
            mine.append((time.monotonic() - began) * 1000)
        except pymysql.err.MySQLError as e:
            with lock:
                oltp_errors.append(str(e))
        n += 1
    with lock:
        latencies.extend(mine)


def heavy():
    c = connect()
    cur = c.cursor()
    while time.monotonic() < start:
        time.sleep(0.01)
    while time.monotonic() < end:
        try:
            cur.execute(HEAVY)
            cur.fetchall()
            key = "done"
        except pymysql.err.MySQLError as e:
            key = "refused" if e.args and e.args[0] in (9100, 9101, 9102) else "other"
        with lock:
            burst[key] += 1


threads = [threading.Thread(target=oltp) for _ in range(oltp_threads)]
threads += [threading.Thread(target=heavy) for _ in range(burst_threads)]
for t in threads:
    t.start()
for t in threads:
    t.join(seconds + 120)
latencies.sort()


def q(p):
    if not latencies:
        return None
    return latencies[min(len(latencies) - 1, int(p * len(latencies)))]


print(json.dumps({"p50": q(0.5), "p99": q(0.99), "n": len(latencies), "errors": len(oltp_errors),
                  "burst": burst}))
