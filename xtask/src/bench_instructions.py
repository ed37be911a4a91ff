"""Client for `cargo xtask bench instructions`: point selects over connections kept open.

    bench_instructions.py WORKLOAD PORT CLIENTS

Opens CLIENTS connections to PORT (user app, database sbbench for MySQL, app for PostgreSQL),
runs a warm-up of 20 statements on each (so server connections exist — for PostgreSQL one per
client, opened by a transaction held on every connection at once —, statements are prepared
and psycopg has passed its prepare threshold), prints `ready`, then reads lines from stdin: a
number N runs N statements round-robin over the connections and prints `done N`; `quit` (or end
of input) closes the connections. Logins therefore never fall inside a counted window.

WORKLOAD is one of
  mysql-prepared  sysbench's point select as COM_STMT_EXECUTE (mysql-connector, prepared cursor)
  mysql-text      sysbench's point select as COM_QUERY (PyMySQL)
  pgsql-simple    pgbench -S's select as one simple Query (psycopg ClientCursor)
  pgsql-extended  Parse/Bind/Describe/Execute/Sync with the unnamed statement (psycopg)
  pgsql-prepared  Bind/Describe/Execute/Sync of a named statement (psycopg, prepare=True)

Ids are drawn from a fixed-seed generator so every target answers the same statements.
"""

import random
import socket
import sys

workload, port, clients = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
TABLES, ROWS = 4, 100_000
ACCOUNTS = 1_000_000  # pgbench scale 10
WARMUP = 20
rng = random.Random(42)
# The connections, kept for the life of the process (mysql-connector's cursors hold only a weak
# reference to theirs).
CONNECTIONS = []


def mysql_text():
    import pymysql

    conns = [
        # Plaintext, as sysbench runs: PyMySQL negotiates TLS whenever the server offers it.
        pymysql.connect(
            host="127.0.0.1", port=port, user="app", password="app", database="sbbench",
            autocommit=True, ssl_disabled=True,
        )
        for _ in range(clients)
    ]
    CONNECTIONS.extend(conns)
    cursors = [c.cursor() for c in conns]

    def one(i):
        cur = cursors[i % clients]
        cur.execute("SELECT c FROM sbtest%d WHERE id=%d" % (rng.randint(1, TABLES), rng.randint(1, ROWS)))
        cur.fetchall()

    return one


def mysql_prepared():
    import mysql.connector

    conns = [
        mysql.connector.connect(
            host="127.0.0.1", port=port, user="app", password="app", database="sbbench",
            autocommit=True, use_pure=True, ssl_disabled=True,
            # A MariaDB collation: the connector's default (utf8mb4_0900_ai_ci) is MySQL 8's,
            # which it picks when the greeting says MySQL 8, as Sluice's does by default.
            charset="utf8mb4", collation="utf8mb4_general_ci",
        )
        for _ in range(clients)
    ]
    CONNECTIONS.extend(conns)
    for c in conns:
        # mysql-connector sends COM_STMT_RESET before every execution of a prepared statement
        # (two commands per statement, the second held back by Nagle); sysbench and the other
        # connectors do not, and a reset is only needed after long data.
        c.cmd_stmt_reset = lambda *args, **kwargs: None
        # It does not set TCP_NODELAY either (PyMySQL, libpq and libmysqlclient do).
        c._socket.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    # One prepared cursor per table per connection, as sysbench prepares one statement per table.
    cursors = [[c.cursor(prepared=True) for _ in range(TABLES)] for c in conns]
    # The statement texts are made once: a prepared cursor re-prepares (COM_STMT_CLOSE, then
    # COM_STMT_PREPARE) whenever it is given a text that is not the very object it executed
    # last (`operation is not self._executed`), and `"…" % t` makes a new one at each call.
    texts = ["SELECT c FROM sbtest%d WHERE id=?" % t for t in range(1, TABLES + 1)]
    # Every cursor prepares its statement before the warm-up ends (the random warm-up could miss
    # one, and its prepare would fall in a counted window).
    for per_connection in cursors:
        for cur, text in zip(per_connection, texts):
            cur.execute(text, (1,))
            cur.fetchall()

    def one(i):
        t = rng.randint(1, TABLES)
        cur = cursors[i % clients][t - 1]
        cur.execute(texts[t - 1], (rng.randint(1, ROWS),))
        cur.fetchall()

    return one


def pgsql(mode):
    import psycopg

    dsn = f"host=127.0.0.1 port={port} user=app password=app dbname=app sslmode=disable"
    conns = [psycopg.connect(dsn, autocommit=True, prepare_threshold=0) for _ in range(clients)]
    CONNECTIONS.extend(conns)
    # A transaction open on every connection at once: the pooler opens one server connection per
    # client, as a pool with room for its clients does under load. Run one after the other, the
    # statements would share one server connection, and each would first move it to its own
    # session (PgBouncer passes it on as it is; Sluice resets the other session's settings and
    # applies this one's, an extra Query with its reply).
    for c in conns:
        c.execute("BEGIN", prepare=False)
        c.execute("SELECT 1", prepare=False)
    for c in conns:
        c.execute("COMMIT", prepare=False)
    sql = "SELECT abalance FROM pgbench_accounts WHERE aid = %s"
    if mode == "simple":
        cursors = [psycopg.ClientCursor(c) for c in conns]

        def one(i):
            cur = cursors[i % clients]
            cur.execute(sql, (rng.randint(1, ACCOUNTS),))
            cur.fetchall()

        return one
    prepare = mode == "prepared"
    cursors = [c.cursor() for c in conns]

    def one(i):
        cur = cursors[i % clients]
        cur.execute(sql, (rng.randint(1, ACCOUNTS),), prepare=prepare)
        cur.fetchall()

    return one


def statement_runner():
    if workload == "mysql-text":
        return mysql_text()
    if workload == "mysql-prepared":
        return mysql_prepared()
    if workload.startswith("pgsql-"):
        return pgsql(workload.removeprefix("pgsql-"))
    sys.exit(f"unknown workload {workload}")


def main():
    one = statement_runner()
    for i in range(WARMUP * clients):
        one(i)
    print("ready", flush=True)
    for line in sys.stdin:
        line = line.strip()
        if line == "quit":
            break
        n = int(line)
        for i in range(n):
            one(i)
        print(f"done {n}", flush=True)


main()
