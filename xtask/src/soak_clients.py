# Soak clients, driven by `cargo xtask soak` (xtask/src/soak.rs):
#   ledger  PROTO PORT WRITER SECONDS OUT  commit numbered rows; write every acknowledged seq
#   ledger-reconnect ...                    the same with a new connection per commit (as
#                                           short-lived clients do; the takeover test)
#   (LEDGER_TABLE names the table; default ledger)
#   victim  PROTO PORT                      open a transaction, insert, never commit (killed)
#   burst   PROTO PORT COUNT                COUNT connect+login+SELECT 1+close, 50 at a time
# PROTO is mysql (PyMySQL) or pgsql (psycopg); every client logs in as app/app through Sluice.
import json, os, sys, threading, time

def connect(proto, port):
    if proto == "mysql":
        import pymysql
        return pymysql.connect(host="127.0.0.1", port=port, user="app", password="app",
                               database="app", autocommit=False, connect_timeout=10,
                               read_timeout=30, write_timeout=30)
    import psycopg
    return psycopg.connect(host="127.0.0.1", port=port, user="app", password="app",
                           dbname="app", sslmode="disable", connect_timeout=10, autocommit=False)

def ledger(proto, port, writer, seconds, out, reconnect=False):
    table = os.environ.get("LEDGER_TABLE", "ledger")
    deadline = time.time() + seconds
    acked, unknown, wrong, errors = [], [], [], {}
    conn, seq = None, 0
    while time.time() < deadline:
        seq += 1
        try:
            if conn is None:
                conn = connect(proto, port)
            cur = conn.cursor()
            cur.execute(f"INSERT INTO {table} (writer, seq) VALUES (%s, %s)", (writer, seq))
            # Inside the transaction the row must be visible: it runs on the writer.
            cur.execute(f"SELECT COUNT(*) FROM {table} WHERE writer = %s AND seq = %s", (writer, seq))
            seen = cur.fetchone()[0]
            if seen != 1:
                wrong.append((seq, seen))
            conn.commit()
            acked.append(seq)
            if reconnect:
                conn.close()
                conn = None
        except Exception as e:  # the commit's fate is unknown: not counted either way
            unknown.append(seq)
            if "results from command" in str(e):  # a protocol reply that is not one result
                wrong.append((seq, str(e)[:80]))
            key = type(e).__name__ + ": " + str(e).split("\n")[0][:80]
            errors[key] = errors.get(key, 0) + 1
            try:
                conn.close()
            except Exception:
                pass
            conn = None
            time.sleep(0.05)
    if conn is not None:
        conn.close()
    with open(out, "w") as f:
        json.dump({"acked": acked, "unknown": unknown, "wrong": wrong, "errors": errors}, f)

def victim(proto, port):
    conn = connect(proto, port)
    cur = conn.cursor()
    cur.execute("INSERT INTO ledger (writer, seq) VALUES (99, 0)")
    print("open", flush=True)
    time.sleep(3600)

def burst(proto, port, count):
    ok, failed, lock = [0], {}, threading.Lock()
    def one(n):
        for _ in range(n):
            try:
                c = connect(proto, port)
                cur = c.cursor()
                cur.execute("SELECT 1")
                assert cur.fetchone()[0] == 1
                c.close()
                with lock:
                    ok[0] += 1
            except Exception as e:
                key = type(e).__name__ + ": " + str(e).split("\n")[0][:80]
                with lock:
                    failed[key] = failed.get(key, 0) + 1
    threads = [threading.Thread(target=one, args=(count // 50,)) for _ in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({"ok": ok[0], "failed": failed}))

mode, proto, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode in ("ledger", "ledger-reconnect"):
    ledger(proto, port, int(sys.argv[4]), float(sys.argv[5]), sys.argv[6],
           reconnect=mode == "ledger-reconnect")
elif mode == "victim":
    victim(proto, port)
else:
    burst(proto, port, int(sys.argv[4]))
