"""Times SAVE ... TO CLUSTER and its arrival on the other nodes, for `cargo xtask bench etcd`.

argv: the admin ports of the group's nodes (the first one saves), the number of saves, the first
weight. For each save: node 0 changes the replica's weight, loads it to runtime and saves it to
the store (the SAVE timed alone); then every other node is polled every 0.5 ms until its runtime
row shows the new weight (arrival timed from the SAVE's start). Prints one JSON line of
per-save milliseconds.
"""
import json
import sys
import time

import pymysql


def connect(port):
    return pymysql.connect(host="127.0.0.1", port=port, user="admin", password="admin",
                           autocommit=True, connect_timeout=5, read_timeout=10)


def weight(cur):
    cur.execute("SELECT weight FROM runtime_mysql_servers WHERE hostgroup_id = 1")
    row = cur.fetchone()
    return int(row[0]) if row else None


def main():
    ports = [int(p) for p in sys.argv[1].split(",")]
    saves, first = int(sys.argv[2]), int(sys.argv[3])
    nodes = [connect(p).cursor() for p in ports]
    save_ms, arrival_ms = [], []
    for w in range(first, first + saves):
        nodes[0].execute(f"UPDATE mysql_servers SET weight = {w} WHERE hostgroup_id = 1")
        nodes[0].execute("LOAD MYSQL SERVERS TO RUNTIME")
        start = time.perf_counter()
        nodes[0].execute("SAVE MYSQL SERVERS TO CLUSTER")
        save_ms.append((time.perf_counter() - start) * 1000)
        for other in nodes[1:]:
            deadline = start + 5
            while weight(other) != w:
                if time.perf_counter() > deadline:
                    raise SystemExit(f"weight {w} did not arrive within 5 s")
                time.sleep(0.0005)
            arrival_ms.append((time.perf_counter() - start) * 1000)
    print(json.dumps({"save_ms": save_ms, "arrival_ms": arrival_ms}))


main()
