//! What Sluice answers itself: version queries, COM_PING (also while a query runs), and the
//! client idle timeout (`SET wait_timeout`, clamped by `mysql-wait_timeout`).

use sluice_tests::*;

#[test]
fn version_queries_come_from_server_version_unless_forwarded() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let sql = "SELECT @@version; SELECT VERSION(); select @@version_comment limit 1; SELECT VERSION() AS v;";
    let s = Sluice::start(&standard_config("", ""));
    let out = ok_stdout(&mariadb(s.port, "app", "app", &["--skip-ssl"], sql));
    assert_eq!(out, "8.0.36\n8.0.36\n(Sluice)\n8.0.36\n");
    let headed = ok_stdout(&mariadb(
        s.port,
        "app",
        "app",
        &["--skip-ssl", "--column-names"],
        "SELECT VERSION() AS v;",
    ));
    assert!(
        headed.starts_with("v\n"),
        "alias is the column name: {headed}"
    );
    let fwd = Sluice::start(&standard_config("select_version_forwarding = 1", ""));
    let out = ok_stdout(&mariadb(
        fwd.port,
        "app",
        "app",
        &["--skip-ssl"],
        "SELECT @@version;",
    ));
    assert!(out.starts_with("10.11"), "forwarded to MariaDB: {out}");
}

#[test]
fn ping_never_touches_a_backend_and_waits_behind_a_running_query() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    // A hostgroup whose only server is down: queries fail, pings still answer.
    let dead = free_port();
    let cfg = format!(
        "[mysql_variables]\ninterfaces = \"127.0.0.1:{{port}}\"\nconnect_timeout_server_max = 300\n\
         [[mysql_servers]]\nhostname = \"127.0.0.1\"\nport = {dead}\n\
         [[mysql_users]]\nusername = \"app\"\npassword = \"app\"\n"
    );
    let s = Sluice::start(&cfg);
    let ping = mariadb_admin(s.port, &["ping"]);
    assert!(ok_stdout(&ping).contains("mysqld is alive"));
    let q = mariadb(s.port, "app", "app", &["--skip-ssl"], "SELECT 1;");
    assert!(String::from_utf8_lossy(&q.stderr).contains("ERROR 9001"));

    // A COM_PING sent right behind a query (pipelined) is answered after the query's result.
    let live = Sluice::start(&standard_config("", ""));
    let script = r#"
import sys, struct, pymysql
c = pymysql.connect(host='127.0.0.1', port=int(sys.argv[1]), user='app', password='app', ssl_disabled=True)
q = b"SELECT SLEEP(0.5), 7"
c._sock.sendall(struct.pack('<I', len(q) + 1)[:3] + b'\x00\x03' + q + b'\x01\x00\x00\x00\x0e')
c._next_seq_id = 1
r = pymysql.connections.MySQLResult(c)
r.read()
print("rows", r.rows)
c._next_seq_id = 1
p = c._read_packet()
print("ping ok", p.is_ok_packet())
"#;
    let out = ok_stdout(&python(script, &[&live.port.to_string()]));
    assert_eq!(out, "rows ((0, 7),)\nping ok True\n");
}

const IDLE_SCRIPT: &str = r#"
import sys, time, pymysql
port, set_to, idle = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
c = pymysql.connect(host='127.0.0.1', port=port, user='app', password='app', ssl_disabled=True)
cur = c.cursor()
if set_to != '-':
    cur.execute("SET wait_timeout = " + set_to)
time.sleep(idle)
try:
    cur.execute("SELECT 1"); print("alive")
except pymysql.err.OperationalError as e:
    print("closed", e.args[0])
"#;

#[test]
fn idle_clients_are_closed_after_wait_timeout() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let p = s.port.to_string();
    assert_eq!(ok_stdout(&python(IDLE_SCRIPT, &[&p, "-", "2"])), "alive\n");
    let out = ok_stdout(&python(IDLE_SCRIPT, &[&p, "1", "2.5"]));
    assert!(
        out.starts_with("closed"),
        "SET wait_timeout = 1 is honoured: {out}"
    );
    // The global mysql-wait_timeout caps what a client asks for.
    let capped = Sluice::start(&standard_config("wait_timeout = 1500", ""));
    let out = ok_stdout(&python(
        IDLE_SCRIPT,
        &[&capped.port.to_string(), "3600", "2.5"],
    ));
    assert!(
        out.starts_with("closed"),
        "clamped to mysql-wait_timeout: {out}"
    );
    wait_for("the wait_timeout log line", || {
        capped.log().contains("(wait_timeout)")
    });
}
