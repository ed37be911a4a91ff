"""Clients for tests/tests/admission.rs, one code path for both protocols (PyMySQL, psycopg).

    admission_clients.py burst KIND PORT DIRECT_PORT CLIENTS SECONDS
        CLIENTS sessions call the stand-in vector function (it sleeps SECONDS) at once through
        Sluice, an OLTP session runs 20 `SELECT 1` meanwhile, and a sampler counts on the server
        itself (DIRECT_PORT) the vector statements running and the app connections open.
        Prints JSON: results ([code, message, detail, hint] per client), oltp_errors,
        max_running, max_app_conns.
    admission_clients.py steps KIND PORT SESSION:SQL ...
        Runs each statement on session A or B in order; prints "ok" or "CODE MESSAGE" a line each.
    admission_clients.py each KIND PORT SQL ...
        Runs each statement, ignoring the server's answer.
    admission_clients.py lag mysql PORT HTTP_PORT PRIMARY REPLICA
        Seed 002's scenario against a lag guard: users `batch` and `app` insert through Sluice
        every 50 ms while the replica is made to lag (MASTER_DELAY), then to catch up, then to
        stop (NULL lag), then to run again; `/throttler/check?app=gh-ost` is read with curl
        every 100 ms. Prints JSON: statements [t, user, phase, ms, code, message] and checks
        [t, phase, status, value].
    admission_clients.py p99 mysql PORT HEAVY_THREADS
        A p99 guard's scenario: one OLTP session updates row 1 of app.p99_row every 20 ms for
        8 s; from 2 s to 7 s HEAVY_THREADS sessions run statements of class `heavy` that lock
        that row for 0.4 s each, 50 ms apart. Prints JSON: oltp [t, ms, code] and heavy
        [t, code, message].

KIND is mysql or pgsql. Every loop is bounded (the burst's threads are joined with a timeout).
"""

import json
import sys
import threading
import time

import psycopg
import pymysql

PROBE = {"mysql": "SELECT admission.vec_probe(%s)", "pgsql": "SELECT vec_probe(%s)"}
SAMPLE = {
    "mysql": "SELECT SUM(INFO LIKE '%admission.vec_probe%' AND INFO NOT LIKE '%PROCESSLIST%'), "
    "SUM(USER = 'app') FROM information_schema.PROCESSLIST",
    "pgsql": "SELECT count(*) FILTER (WHERE state = 'active' AND query LIKE '%vec_probe%'), "
    "count(*) FILTER (WHERE usename = 'app' AND backend_type = 'client backend') "
    "FROM pg_stat_activity WHERE pid <> pg_backend_pid()",
}


def connect(kind, port, direct=False):
    if kind == "mysql":
        user, password = ("root", "root") if direct else ("app", "app")
        return pymysql.connect(host="127.0.0.1", port=port, user=user, password=password,
                               autocommit=True, connect_timeout=10)
    return psycopg.connect(host="127.0.0.1", port=port, user="app", password="app",
                           dbname="app", autocommit=True, connect_timeout=10)


def run(kind, conn, sql, params=None):
    """[code, message, detail, hint]; code "ok" when the statement succeeded."""
    try:
        if kind == "mysql":
            with conn.cursor() as cur:
                cur.execute(sql, params)
                rows = cur.fetchall()
        else:
            cur = conn.execute(sql, params)
            rows = cur.fetchall() if cur.description else []
        return ["ok", "", "", ""], rows
    except pymysql.err.MySQLError as e:
        return [str(e.args[0]), str(e.args[1]) if len(e.args) > 1 else "", "", ""], []
    except psycopg.Error as e:
        d = e.diag
        return [e.sqlstate or "", d.message_primary or "", d.message_detail or "",
                d.message_hint or ""], []


def burst(kind, port, direct_port, clients, seconds):
    conns = [connect(kind, port) for _ in range(clients)]
    oltp = connect(kind, port)
    direct = connect(kind, direct_port, direct=True)
    start = threading.Barrier(clients + 1)
    results, oltp_errors, samples = [], [], []
    done = threading.Event()
    lock = threading.Lock()

    def vector(conn):
        start.wait()
        outcome, _ = run(kind, conn, PROBE[kind], (seconds,))
        with lock:
            results.append(outcome)

    def sampler():
        while not done.is_set():
            _, rows = run(kind, direct, SAMPLE[kind])
            running, app = rows[0] if rows else (0, 0)
            samples.append((int(running or 0), int(app or 0)))
            time.sleep(0.02)

    threads = [threading.Thread(target=vector, args=(c,)) for c in conns]
    for t in threads:
        t.start()
    watcher = threading.Thread(target=sampler)
    watcher.start()
    start.wait()
    time.sleep(0.2)
    for _ in range(20):
        outcome, _ = run(kind, oltp, "SELECT 1")
        if outcome[0] != "ok":
            oltp_errors.append(outcome)
    for t in threads:
        t.join(120)
    done.set()
    watcher.join(10)
    print(json.dumps({
        "results": results,
        "oltp_errors": oltp_errors,
        "max_running": max(r for r, _ in samples),
        "max_app_conns": max(a for _, a in samples),
    }))


def steps(kind, port, items):
    sessions = {"A": connect(kind, port), "B": connect(kind, port)}
    for item in items:
        session, sql = item.split(":", 1)
        outcome, _ = run(kind, sessions[session], sql)
        print("ok" if outcome[0] == "ok" else f"{outcome[0]} {outcome[1]}")


def each(kind, port, statements):
    conn = connect(kind, port)
    for sql in statements:
        run(kind, conn, sql)


def replica_reports_lag(rep, limit):
    """When the replica's `Seconds_Behind_Master` is a number again (monotonic time), or None."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        with rep.cursor() as cur:
            cur.execute("SHOW SLAVE STATUS")
            row = cur.fetchone()
            names = [d[0] for d in cur.description or []]
        if row and "Seconds_Behind_Master" in names and row[names.index("Seconds_Behind_Master")] is not None:
            return time.monotonic()
        time.sleep(0.05)
    return None


def lag(port, http_port, primary, replica):
    import subprocess
    root = connect("mysql", primary, direct=True)
    rep = connect("mysql", replica, direct=True)
    run("mysql", root, "CREATE TABLE IF NOT EXISTS admission.ticks (id INT AUTO_INCREMENT PRIMARY KEY, who VARCHAR(8), at TIMESTAMP(6) DEFAULT CURRENT_TIMESTAMP(6))")
    batch = pymysql.connect(host="127.0.0.1", port=port, user="batch", password="batch", autocommit=True)
    app = connect("mysql", port)
    t0 = time.monotonic()
    phase = ["baseline"]
    statements, checks = [], []
    done = threading.Event()
    paused = threading.Event()

    def writer(conn, user):
        while not done.is_set():
            if paused.is_set():
                time.sleep(0.02)
                continue
            began = time.monotonic()
            outcome, _ = run("mysql", conn, "INSERT INTO admission.ticks (who) VALUES (%s)", (user,))
            ms = (time.monotonic() - began) * 1000
            statements.append([began - t0, user, phase[0], ms, outcome[0], outcome[1]])
            time.sleep(0.05)

    def check():
        out = subprocess.run(["curl", "-s", "--max-time", "5", "-w", "\n%{http_code}",
                              f"http://127.0.0.1:{http_port}/throttler/check?app=gh-ost"],
                             capture_output=True, text=True).stdout
        body, _, code = out.rpartition("\n")
        value = json.loads(body)["Value"] if body.strip() else None
        checks.append([time.monotonic() - t0, phase[0], int(code or 0), value])
        return int(code or 0), value

    def until(name, want, limit):
        phase[0] = name
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            status, value = check()
            if want(status, value):
                return True
            time.sleep(0.1)
        return False

    def hold_while_open(name):
        """Keeps phase `name` until batch has tried a statement in it while the guard is open:
        the first 429 may come while batch sleeps in the ramp's delay or between two of its
        statements (bounded: 5 s)."""
        hold_until = time.monotonic() + 5
        while time.monotonic() < hold_until and not any(
                st[1] == "batch" and st[2] == name and st[4] == "9102" for st in list(statements)):
            time.sleep(0.05)

    threads = [threading.Thread(target=writer, args=(c, u)) for c, u in ((batch, "batch"), (app, "app"))]
    for t in threads:
        t.start()
    until("baseline", lambda s, v: False, 1.0)
    # Setting the delay stops replication for a moment: a monitor poll then reads NULL lag
    # (monitor_slave_lag_when_null, 60 s), which opens the guard and sheds at once, held for
    # min_open_ms (clean-clone CI failures of this test: the ramp was never seen). The ramp is
    # measured from when replication runs again with the guard closed, and the lag that opens
    # it must be the delay's (at most 8 s), not the NULL stand-in. The writers pause meanwhile:
    # their rows are what the delayed replica lags behind, so while they wrote the lag climbed
    # past the closing floor (0.5 s) before min_open_ms had passed, and the guard stayed open
    # through the whole ramp (a clean-clone CI failure of 2026-12-05). With nothing written
    # the lag stays 0 until the guard has closed; the ramp starts when the writers do.
    paused.set()
    phase[0] = "reconfiguring"
    run("mysql", rep, "STOP SLAVE")
    run("mysql", rep, "CHANGE MASTER TO MASTER_DELAY = 8")
    run("mysql", rep, "START SLAVE")
    # The NULL reading can come after START SLAVE returns (the threads are still connecting), so
    # a check that says "closed, lag 0" right away may be the monitor's reading from before the
    # stop (a clean-clone CI failure: the guard opened on NULL just after the writers resumed).
    # Wait until the replica itself reports a lag again, then for a closed guard the monitor saw
    # after that: three of its polls (monitor_replication_lag_interval = 200 ms) later.
    resumed = replica_reports_lag(rep, 20)
    until("reconfiguring", lambda s, v: resumed is not None and time.monotonic() >= resumed + 0.6
          and s == 200 and v is not None and v < 1, 20)
    paused.clear()
    opened = until("lagging", lambda s, v: s == 429 and v is not None and 6 <= v <= 9, 40)
    hold_while_open("lagging")
    run("mysql", rep, "STOP SLAVE")
    run("mysql", rep, "CHANGE MASTER TO MASTER_DELAY = 0")
    run("mysql", rep, "START SLAVE")
    closed = until("catching_up", lambda s, v: s == 200 and v is not None and v < 0.5, 40)
    run("mysql", rep, "STOP SLAVE")
    stopped = until("stopped", lambda s, v: s == 429, 20)
    if stopped:
        hold_while_open("stopped")
    run("mysql", rep, "START SLAVE")
    back = until("restarted", lambda s, v: s == 200, 40)
    done.set()
    for t in threads:
        t.join(30)
    print(json.dumps({"statements": statements, "checks": checks,
                      "opened": opened, "closed": closed, "stopped": stopped, "back": back}))


def p99(port, heavy_threads):
    oltp_conn = connect("mysql", port)
    heavy_conns = [connect("mysql", port) for _ in range(heavy_threads)]
    t0 = time.monotonic()
    oltp, heavy = [], []
    lock = threading.Lock()

    def oltp_loop():
        n = 0
        while True:
            due = t0 + n * 0.02
            if due >= t0 + 8.0:
                return
            time.sleep(max(0.0, due - time.monotonic()))
            began = time.monotonic()
            res, _ = run("mysql", oltp_conn, "UPDATE app.p99_row SET n = n + 1 WHERE id = 1")
            oltp.append([round(began - t0, 3), round((time.monotonic() - began) * 1000, 1), res[0]])
            n += 1

    def heavy_loop(conn):
        time.sleep(max(0.0, t0 + 2.0 - time.monotonic()))
        while time.monotonic() < t0 + 7.0:
            # An autocommit UPDATE holds the row's lock for the whole statement (a locking
            # SELECT would not: autocommit ends its transaction, and its lock, at once).
            res, _ = run("mysql", conn, "/* workload=heavy */ UPDATE app.p99_row "
                         "SET n = n + SLEEP(0.4) WHERE id = 1")
            with lock:
                heavy.append([round(time.monotonic() - t0, 3), res[0], res[1]])
            time.sleep(0.05)

    threads = [threading.Thread(target=oltp_loop)]
    threads += [threading.Thread(target=heavy_loop, args=(c,)) for c in heavy_conns]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    print(json.dumps({"oltp": oltp, "heavy": heavy}))


def main():
    command, kind, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rest = sys.argv[4:]
    if command == "burst":
        burst(kind, port, int(rest[0]), int(rest[1]), float(rest[2]))
    elif command == "steps":
        steps(kind, port, rest)
    elif command == "each":
        each(kind, port, rest)
    elif command == "p99":
        p99(port, int(rest[0]))
    elif command == "lag":
        lag(port, int(rest[0]), int(rest[1]), int(rest[2]))
    else:
        raise SystemExit(f"unknown command {command}")


if __name__ == "__main__":
    main()
