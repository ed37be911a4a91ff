//! What MariaDB's own test suite (mariadb-test) found to differ through Sluice, each case written
//! here as our own and checked against the same statements sent to the server directly: stored
//! procedures returning several result sets and a cursor's rows, `SET` of a local variable inside
//! a stored program or a compound statement, `LAST_INSERT_ID()` after an explicit negative id.

use mysql_async::prelude::*;
use mysql_async::{Conn, Opts};
use sluice_tests::*;

/// The same script through Sluice and directly: the outputs must be the same.
fn same_as_direct(s: &Sluice, script: &str) -> String {
    let args = ["-Dapp", "--skip-ssl"];
    let direct = ok_stdout(&mariadb(ports::MY_PRIMARY, "app", "app", &args, script));
    let proxied = mariadb(s.port, "app", "app", &args, script);
    assert_eq!(
        String::from_utf8_lossy(&proxied.stdout),
        direct,
        "through Sluice: {}\n{}",
        String::from_utf8_lossy(&proxied.stderr),
        s.log()
    );
    direct
}

#[test]
fn procedures_with_result_sets_and_cursors_answer_as_directly() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let setup = "DELIMITER //\n\
        CREATE OR REPLACE PROCEDURE app.fid_two() BEGIN SELECT 1 AS a; SELECT 2 AS b, 'x' AS c; END//\n\
        CREATE OR REPLACE PROCEDURE app.fid_cursor() BEGIN DECLARE done INT DEFAULT 0; DECLARE v INT; \
        DECLARE c CURSOR FOR SELECT 1 UNION SELECT 2; DECLARE CONTINUE HANDLER FOR NOT FOUND SET done = 1; \
        OPEN c; l: LOOP FETCH c INTO v; IF done THEN LEAVE l; END IF; SELECT v; END LOOP; CLOSE c; END//\n";
    ok_stdout(&mariadb(
        ports::MY_PRIMARY,
        "app",
        "app",
        &["--skip-ssl"],
        setup,
    ));
    // Two result sets, then a cursor's rows as result sets while the cursor is open (the server
    // flags those CURSOR_EXISTS), then the connection goes on.
    let out = same_as_direct(
        &s,
        "CALL fid_two(); CALL fid_cursor(); CALL fid_two(); SELECT 'after';",
    );
    assert_eq!(out, "1\n2\tx\n1\n2\n1\n2\tx\nafter\n");
    assert!(!s.log().contains("unexpected reply"), "{}", s.log());
}

#[test]
fn local_variables_of_stored_programs_and_blocks_are_not_session_variables() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    // One server connection for two clients: each statement of A may follow B's on it, so any
    // session variable Sluice believed A set would be replayed there.
    let s = Sluice::start(&capped_config(1, "connect_timeout_server_max = 2000", ""));
    let url = |u: &str| Opts::from_url(&s.url(u, u, "app")).expect("url");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let mut a = Conn::new(url("app")).await.expect("a");
        let mut b = Conn::new(url("app")).await.expect("b");
        a.query_drop(
            "CREATE OR REPLACE PROCEDURE app.fid_local() BEGIN DECLARE x INT; SET x = 5; SELECT x; END",
        )
        .await
        .expect("create procedure");
        let seven: Option<i64> = b.query_first("SELECT 7").await.expect("b on the connection");
        assert_eq!(seven, Some(7));
        let five: Option<i64> = a
            .query_first("CALL app.fid_local()")
            .await
            .expect("the procedure's local SET was not replayed as a session variable (1193)");
        assert_eq!(five, Some(5));
        b.disconnect().await.expect("disconnect b");
        // A block run now: its local SET is not the session's either; what it may do to the
        // session cannot be followed, so the session keeps its connection.
        let x: Option<String> = a
            .query_first("BEGIN NOT ATOMIC DECLARE v VARCHAR(30); SET v = CAST('xxx' AS CHAR(1)); SELECT v; END")
            .await
            .expect("compound statement");
        assert_eq!(x.as_deref(), Some("x"));
        let one: Option<i64> = a.query_first("SELECT 1").await.expect("next statement");
        assert_eq!(one, Some(1));
        let reason = s.admin_ok("SELECT pin_reason FROM stats_mysql_processlist");
        assert_eq!(reason.trim(), "compound statement");
        a.disconnect().await.expect("disconnect a");
    });
}

#[test]
fn last_insert_id_after_an_explicit_negative_id_is_the_server_s() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let script = "CREATE OR REPLACE TABLE app.fid_ai (id INT AUTO_INCREMENT PRIMARY KEY); \
        INSERT INTO app.fid_ai VALUES (NULL); SELECT LAST_INSERT_ID(); \
        INSERT INTO app.fid_ai VALUES (-1); SELECT LAST_INSERT_ID(); \
        INSERT INTO app.fid_ai VALUES (NULL); SELECT LAST_INSERT_ID();";
    let out = same_as_direct(&s, script);
    // An explicit id does not change LAST_INSERT_ID(), though the OK packet carries it.
    assert_eq!(out.lines().nth(1), Some("1"), "{out}");
}

/// mariadb-test's `SET GLOBAL` cases: a client that connects after another client's
/// `SET GLOBAL` sees the new default in its session, as a new direct connection would — the
/// pooled connections opened before (which carry the old value) are not handed to it.
#[test]
fn a_client_connecting_after_set_global_sees_the_new_default() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let url = Opts::from_url(&s.url("app", "app", "app")).expect("url");
    let seen = rt.block_on(async {
        // Warm the pool: a few connections, idle with the server's current default.
        let mut warm = Vec::new();
        for _ in 0..3 {
            let mut c = Conn::new(url.clone()).await.expect("connect");
            c.query_drop("BEGIN").await.expect("begin");
            warm.push(c);
        }
        for mut c in warm {
            c.query_drop("COMMIT").await.expect("commit");
            c.disconnect().await.expect("disconnect");
        }
        let mut a = Conn::new(url.clone()).await.expect("a");
        let old: Option<u64> = a
            .query_first("SELECT @@global.net_read_timeout")
            .await
            .expect("read the global");
        a.query_drop("SET GLOBAL net_read_timeout = 77")
            .await
            .expect("set global");
        let mut c = Conn::new(url.clone()).await.expect("a later client");
        let seen: Option<u64> = c
            .query_first("SELECT @@session.net_read_timeout")
            .await
            .expect("read the session value");
        a.query_drop(format!(
            "SET GLOBAL net_read_timeout = {}",
            old.unwrap_or(30)
        ))
        .await
        .expect("restore");
        for x in [a, c] {
            x.disconnect().await.expect("disconnect");
        }
        seen
    });
    assert_eq!(seen, Some(77), "{}", s.log());
}

/// mariadb-test `transaction_timeout`: the server ends a transaction left idle past
/// `idle_transaction_timeout` by closing its connection. The client's next statement gets an
/// error that says the transaction is gone, and the session ends, as a direct connection does —
/// it does not go on in autocommit on another connection as if its transaction were still open.
#[test]
fn a_transaction_the_server_ended_while_idle_ends_the_session() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let url = Opts::from_url(&s.url("app", "app", "app")).expect("url");
    rt.block_on(async {
        let mut c = Conn::new(url).await.expect("connect");
        c.query_drop("SET SESSION idle_transaction_timeout = 1")
            .await
            .expect("set");
        c.query_drop("BEGIN").await.expect("begin");
        c.query_drop("SELECT 1").await.expect("in the transaction");
        tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
        match c.query_drop("SELECT 2").await {
            Err(mysql_async::Error::Server(e)) => {
                assert_eq!(e.code, 1927, "{e:?}");
                assert!(
                    e.message.contains("the transaction it held is gone"),
                    "{e:?}"
                );
                assert!(!e.message.contains("protocol error"), "{e:?}");
            }
            other => panic!("the lost transaction must be reported, got {other:?}"),
        }
        let after = c.query_drop("SELECT 3").await;
        assert!(
            !matches!(after, Ok(()) | Err(mysql_async::Error::Server(_))),
            "the session must be closed after its transaction was lost: {after:?}"
        );
    });
}

/// mariadb-test's KILL cases: `KILL CONNECTION` of a session running a statement closes its
/// connection mid-statement — its client sees the connection lost (2013), as when a direct
/// connection is killed, not the 1317 "Query execution was interrupted" of a `KILL QUERY`.
#[test]
fn kill_connection_of_a_running_statement_closes_it_as_directly() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let script = r#"
import sys, threading, time, pymysql
def seen(port):
    v = pymysql.connect(host="127.0.0.1", port=port, user="app", password="app", ssl_disabled=True)
    k = pymysql.connect(host="127.0.0.1", port=port, user="app", password="app", ssl_disabled=True)
    got = {}
    def run():
        try:
            v.cursor().execute("SELECT SLEEP(20)")
            got["r"] = "finished"
        except pymysql.MySQLError as e:
            got["r"] = e.args[0]
    t = threading.Thread(target=run)
    t.start()
    for _ in range(200):
        c = k.cursor()
        c.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = 'SELECT SLEEP(20)'")
        if c.fetchone()[0]:
            break
        time.sleep(0.025)
    k.cursor().execute(f"KILL CONNECTION {v.thread_id()}")
    t.join(10)
    return got.get("r")
print(seen(int(sys.argv[2])), seen(int(sys.argv[1])))
"#;
    let out = ok_stdout(&python(
        script,
        &[&s.port.to_string(), &ports::MY_PRIMARY.to_string()],
    ));
    assert_eq!(
        out.trim(),
        "2013 2013",
        "direct, then through Sluice\n{}",
        s.log()
    );
}

/// mariadb-test's KILL cases: `KILL QUERY` of a session running a procedure that loops forever
/// (no SLEEP to wake) interrupts it with 1317, the loop no longer runs on the server, and the
/// session goes on with its next statement — as on a direct connection.
#[test]
fn kill_query_of_a_looping_procedure_interrupts_it_as_directly() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    ok_stdout(&mariadb(
        ports::MY_PRIMARY,
        "app",
        "app",
        &["--skip-ssl"],
        "DELIMITER //\nCREATE OR REPLACE PROCEDURE app.fid_spin() BEGIN DECLARE i INT DEFAULT 0; \
         WHILE 1 DO SET i = i + 1; END WHILE; END//\n",
    ));
    let script = r#"
import sys, threading, time, pymysql
def seen(port):
    v = pymysql.connect(host="127.0.0.1", port=port, user="app", password="app", database="app", ssl_disabled=True)
    k = pymysql.connect(host="127.0.0.1", port=port, user="app", password="app", ssl_disabled=True)
    got = {}
    def run():
        try:
            v.cursor().execute("CALL fid_spin()")
            got["r"] = "finished"
        except pymysql.MySQLError as e:
            got["r"] = e.args[0]
    running = "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = 'CALL fid_spin()'"
    t = threading.Thread(target=run)
    t.start()
    for _ in range(200):
        c = k.cursor()
        c.execute(running)
        if c.fetchone()[0]:
            break
        time.sleep(0.025)
    k.cursor().execute(f"KILL QUERY {v.thread_id()}")
    t.join(10)
    c = k.cursor()
    c.execute(running)
    left = c.fetchone()[0]
    c = v.cursor()
    c.execute("SELECT 'next'")
    return f"{got.get('r')}/{left}/{c.fetchone()[0]}"
print(seen(int(sys.argv[2])), seen(int(sys.argv[1])))
"#;
    let out = ok_stdout(&python(
        script,
        &[&s.port.to_string(), &ports::MY_PRIMARY.to_string()],
    ));
    assert_eq!(
        out.trim(),
        "1317/0/next 1317/0/next",
        "direct, then through Sluice\n{}",
        s.log()
    );
}

/// mariadb-test's change-user cases: a COM_CHANGE_USER with a wrong password is refused (1045)
/// and the session goes on as the user it was, as on a direct connection.
#[test]
fn a_refused_change_user_leaves_the_session_as_it_was() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let seen = |url: String| {
        rt.block_on(async move {
            let mut c = Conn::new(Opts::from_url(&url).expect("url"))
                .await
                .expect("connect");
            c.query_drop("SET @kept = 7").await.expect("set");
            let refused = c
                .change_user(
                    mysql_async::ChangeUserOpts::default()
                        .with_user(Some("app".into()))
                        .with_pass(Some("wrong".into())),
                )
                .await;
            let code = match refused {
                Err(mysql_async::Error::Server(e)) => e.code,
                other => panic!("expected a refusal, got {other:?}"),
            };
            let after: Result<Option<(String, Option<i64>)>, _> =
                c.query_first("SELECT CURRENT_USER(), @kept").await;
            (code, after.map_err(|e| e.to_string()))
        })
    };
    let direct = seen(format!(
        "mysql://app:app@127.0.0.1:{}/app",
        ports::MY_PRIMARY
    ));
    let proxied = seen(s.url("app", "app", "app"));
    assert_eq!(direct.0, 1045, "{direct:?}");
    assert_eq!(proxied.0, direct.0);
    assert_eq!(
        proxied
            .1
            .as_ref()
            .map(|r| r.as_ref().map(|(_, kept)| *kept)),
        direct.1.as_ref().map(|r| r.as_ref().map(|(_, kept)| *kept)),
        "direct {direct:?}, through Sluice {proxied:?}\n{}",
        s.log()
    );
}
