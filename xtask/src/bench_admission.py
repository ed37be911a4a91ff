"""Load for `cargo xtask bench admission`: OLTP point selects at a fixed rate, optionally beside
a burst of CPU-heavy "vector-style" statements, through Sluice's MySQL port.

    bench_admission.py PORT SECONDS OLTP_THREADS OLTP_RATE BURST_THREADS SETTLE_SECONDS

Each OLTP thread sends OLTP_RATE statements per second on a fixed schedule (a late statement is
sent at once, not skipped); each burst thread runs `SELECT BENCHMARK(...)` back to back. Prints
JSON: the OLTP latencies' p50/p99 (ms) over the whole run and the p99 of the statements sent
after the first SETTLE_SECONDS (once a guard has had time to act), their count and errors, and
the burst's statements and refusals. Bounded by SECONDS (plus the last statements in flight).
"""

import json
import random
import sys
import threading
import time

import pymysql

port, seconds = int(sys.argv[1]), float(sys.argv[2])
oltp_threads, oltp_rate, burst_threads = int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
settle = float(sys.argv[6])
HEAVY = "SELECT BENCHMARK(500000, MD5('sluice'))"


def connect():
    return pymysql.connect(host="127.0.0.1", port=port, user="app", password="app",
                           database="sbbench", autocommit=True, connect_timeout=10)


latencies, settled, oltp_errors = [], [], []
burst = {"done": 0, "refused": 0, "other": 0}
lock = threading.Lock()
start = time.monotonic() + 1.0
end = start + seconds


def oltp():
    c = connect()
    cur = c.cursor()
    mine, mine_settled, n = [], [], 0
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
            took = (time.monotonic() - began) * 1000
            mine.append(took)
            if began >= start + settle:
                mine_settled.append(took)
        except pymysql.err.MySQLError as e:
            with lock:
                oltp_errors.append(str(e))
        n += 1
    with lock:
        latencies.extend(mine)
        settled.extend(mine_settled)


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
        if key != "done":
            time.sleep(0.05)  # a cooperating job backs off before it retries


threads = [threading.Thread(target=oltp) for _ in range(oltp_threads)]
threads += [threading.Thread(target=heavy) for _ in range(burst_threads)]
for t in threads:
    t.start()
for t in threads:
    t.join(seconds + 120)
latencies.sort()
settled.sort()


def q(values, p):
    if not values:
        return None
    return values[min(len(values) - 1, int(p * len(values)))]


print(json.dumps({"p50": q(latencies, 0.5), "p99": q(latencies, 0.99),
                  "p99_settled": q(settled, 0.99), "n": len(latencies),
                  "errors": len(oltp_errors), "burst": burst}))
