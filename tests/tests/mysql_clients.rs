//! Real MySQL clients through Sluice to the real MariaDB primary: the mariadb CLI, PyMySQL and
//! mysql_async, with both auth plugins, with and without TLS, text and binary protocol.

use mysql_async::prelude::*;
use sluice_tests::*;

const HASH_OF_SECRET_PW: &str = "*14E65567ABDB5135D0CFD9A70B3032C179A49EE7"; // PASSWORD('secret')

fn hashed_user_tables() -> String {
    // `hashed` logs in with a native hash configured; its backend credentials come from the
    // client's own login (native scramble → SHA1(pw), or the cleartext of full authentication).
    format!(
        "[[mysql_users]]\nusername = \"hashed\"\npassword = \"{HASH_OF_SECRET_PW}\"\ndefault_hostgroup = 0\n"
    )
}

fn setup_hashed_backend_user() {
    primary_root(
        "CREATE USER IF NOT EXISTS 'hashed'@'%' IDENTIFIED BY 'secret'; GRANT ALL ON app.* TO 'hashed'@'%';",
    );
}

#[test]
fn mariadb_cli_plain_tls_and_both_plugins() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    // Plain, native password: the backend's own port proves the query reached MariaDB.
    let out = ok_stdout(&mariadb(
        s.port,
        "app",
        "app",
        &["--skip-ssl"],
        "SELECT @@port;",
    ));
    assert_eq!(out.trim(), "13306");
    // TLS: the session cipher seen by the client is Sluice's TLS.
    let out = ok_stdout(&mariadb(
        s.port,
        "app",
        "app",
        &["--ssl", "--ssl-verify-server-cert=0"],
        "SELECT @@port;\\s",
    ));
    assert!(out.starts_with("13306"), "{out}");
    assert!(
        out.contains("Cipher in use is TLS_AES"),
        "client reports TLS: {out}"
    );
    // caching_sha2_password chosen by the client (AuthSwitch + fast path), plain and TLS.
    for tls in ["--skip-ssl", "--ssl"] {
        let out = mariadb(
            s.port,
            "app",
            "app",
            &[tls, "--default-auth=caching_sha2_password"],
            "SELECT 1+1;",
        );
        assert_eq!(ok_stdout(&out).trim(), "2", "caching_sha2 with {tls}");
    }
    // Multi-statements, DDL, DML, SELECT, USE.
    let out = ok_stdout(&mariadb(
        s.port,
        "app",
        "app",
        &["--skip-ssl"],
        "CREATE DATABASE IF NOT EXISTS e2e_cli; USE e2e_cli; DROP TABLE IF EXISTS t; \
         CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10)); INSERT INTO t VALUES (1,'a'),(2,'b'); \
         UPDATE t SET v='c' WHERE id=2; SELECT id, v FROM t ORDER BY id; SELECT DATABASE();",
    ));
    assert_eq!(out, "1\ta\n2\tc\ne2e_cli\n");
    // COM_STATISTICS through mariadb-admin, COM_PING.
    let st = mariadb_admin(s.port, &["status", "ping"]);
    let text = ok_stdout(&st);
    assert!(
        text.contains("Uptime:") && text.contains("mysqld is alive"),
        "{text}"
    );
}

#[test]
fn pymysql_native_sha2_fast_and_full_auth() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    setup_hashed_backend_user();
    let s = Sluice::start(&standard_config("", &hashed_user_tables()));
    let script = r#"
import sys, ssl, pymysql
port = int(sys.argv[1])
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
def run(user, pw, **kw):
    if 'ssl' not in kw: kw['ssl_disabled'] = True
    c = pymysql.connect(host='127.0.0.1', port=port, user=user, password=pw, database='app', **kw)
    cur = c.cursor()
    cur.execute("SELECT @@port, CURRENT_USER()")
    port_, who = cur.fetchone()
    cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
    c.close()
    return port_, who.split('@')[0]
print("native", *run('app', 'app'))
print("native_tls", *run('app', 'app', ssl=ctx))
print("hashed_native", *run('hashed', 'secret'))
try:
    run('app', 'wrong'); print("wrong_ok")
except pymysql.err.OperationalError as e:
    print("wrong", e.args[0])
# multi statements and a parameterised query (client-side interpolation)
c = pymysql.connect(host='127.0.0.1', port=port, user='app', password='app', database='app', ssl_disabled=True,
                    client_flag=pymysql.constants.CLIENT.MULTI_STATEMENTS)
cur = c.cursor()
cur.execute("CREATE TABLE IF NOT EXISTS py_t (id INT PRIMARY KEY, v TEXT); DELETE FROM py_t")
while cur.nextset(): pass
cur.executemany("INSERT INTO py_t VALUES (%s, %s)", [(1, 'x'), (2, "it's")])
c.commit()
cur.execute("SELECT v FROM py_t WHERE id = %s", (2,))
print("param", cur.fetchone()[0])
cur.execute("SELECT 1; SELECT 2")
a = cur.fetchall(); cur.nextset(); b = cur.fetchall()
print("multi", a[0][0], b[0][0])
"#;
    let out = ok_stdout(&python(script, &[&s.port.to_string()]));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "native 13306 app");
    assert_eq!(lines[1], "native_tls 13306 app");
    assert_eq!(lines[2], "hashed_native 13306 hashed");
    assert_eq!(lines[3], "wrong 1045");
    assert_eq!(lines[4], "param it's");
    assert_eq!(lines[5], "multi 1 2");

    // caching_sha2_password announced by Sluice: PyMySQL uses the fast path for a cleartext
    // password, and full authentication over TLS for a user configured with a hash only.
    let s2 = Sluice::start(&standard_config(
        "default_authentication_plugin = \"caching_sha2_password\"",
        &hashed_user_tables(),
    ));
    let script = r#"
import sys, ssl, pymysql
port = int(sys.argv[1])
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
def run(user, pw, **kw):
    if 'ssl' not in kw: kw['ssl_disabled'] = True
    c = pymysql.connect(host='127.0.0.1', port=port, user=user, password=pw, database='app', **kw)
    cur = c.cursor(); cur.execute("SELECT @@port"); v = cur.fetchone()[0]; c.close(); return v
print("fast", run('app', 'app'))
print("full_tls", run('hashed', 'secret', ssl=ctx))
try:
    run('hashed', 'secret'); print("full_plain_ok")
except pymysql.err.OperationalError as e:
    print("full_plain", e.args[0])
try:
    run('hashed', 'nope', ssl=ctx); print("full_wrong_ok")
except pymysql.err.OperationalError as e:
    print("full_wrong", e.args[0])
"#;
    let out = ok_stdout(&python(script, &[&s2.port.to_string()]));
    assert_eq!(
        out,
        "fast 13306\nfull_tls 13306\nfull_plain 1045\nfull_wrong 1045\n",
        "log:\n{}",
        s2.log()
    );
}

#[tokio::test]
async fn mysql_async_text_binary_tls_reset_and_change_user() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let opts = mysql_async::Opts::from_url(&s.url("app", "app", "app")).expect("url");
    let mut conn = mysql_async::Conn::new(opts.clone()).await.expect("connect");
    let port: u16 = conn
        .query_first("SELECT @@port")
        .await
        .expect("q")
        .expect("row");
    assert_eq!(port, 13306);
    conn.query_drop("DROP TABLE IF EXISTS rs_t")
        .await
        .expect("drop");
    conn.query_drop(
        "CREATE TABLE rs_t (id INT PRIMARY KEY AUTO_INCREMENT, name VARCHAR(50), n DOUBLE, b BLOB)",
    )
    .await
    .expect("create");
    // Server-side prepared statements (COM_STMT_PREPARE / EXECUTE / CLOSE), binary results.
    let stmt = conn
        .prep("INSERT INTO rs_t (name, n, b) VALUES (?, ?, ?)")
        .await
        .expect("prepare");
    for i in 0..20 {
        conn.exec_drop(
            &stmt,
            (format!("row{i}"), f64::from(i) * 1.5, vec![i as u8; 3000]),
        )
        .await
        .expect("exec insert");
    }
    conn.close(stmt).await.expect("close stmt");
    let rows: Vec<(i32, String, f64)> = conn
        .exec(
            "SELECT id, name, n FROM rs_t WHERE id > ? ORDER BY id",
            (10,),
        )
        .await
        .expect("exec select");
    assert_eq!(rows.len(), 10);
    assert_eq!(rows[0], (11, "row10".to_string(), 15.0));
    // A large text result set streamed through the relay.
    let total: Vec<(i32, Vec<u8>)> = conn
        .query("SELECT id, b FROM rs_t")
        .await
        .expect("blob rows");
    assert_eq!(total.len(), 20);
    assert!(total.iter().all(|(_, b)| b.len() == 3000));
    // Multi-statement text query.
    let mut res = conn
        .query_iter("SELECT 1; SELECT 'two'")
        .await
        .expect("multi");
    let a: Vec<i32> = res.collect().await.expect("first set");
    let b: Vec<String> = res.collect().await.expect("second set");
    assert_eq!((a, b), (vec![1], vec!["two".to_string()]));
    // COM_PING, COM_RESET_CONNECTION, COM_CHANGE_USER (same user, other schema).
    conn.ping().await.expect("ping");
    conn.query_drop("SET @x = 5").await.expect("set");
    conn.reset().await.expect("reset");
    let x: Option<Option<i32>> = conn.query_first("SELECT @x").await.expect("select @x");
    assert_eq!(x, Some(None), "COM_RESET_CONNECTION clears user variables");
    conn.change_user(
        mysql_async::ChangeUserOpts::default()
            .with_user(Some("app".into()))
            .with_pass(Some("app".into()))
            .with_db_name(Some("mysql".into())),
    )
    .await
    .expect("change user");
    let db: Option<String> = conn.query_first("SELECT DATABASE()").await.expect("db");
    assert_eq!(db.as_deref(), Some("mysql"));
    conn.disconnect().await.expect("disconnect");

    // TLS with mysql_async (rustls).
    let tls = mysql_async::OptsBuilder::from_opts(opts.clone())
        .ssl_opts(mysql_async::SslOpts::default().with_danger_accept_invalid_certs(true));
    let mut c3 = mysql_async::Conn::new(tls).await.expect("tls connect");
    let v: Option<(String, String)> = c3
        .query_first("SHOW SESSION STATUS LIKE 'Ssl_version'")
        .await
        .expect("q");
    assert!(v.is_some());
    c3.disconnect().await.expect("disconnect");
}

#[tokio::test]
async fn mysql_async_with_caching_sha2_announced() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let s = Sluice::start(&standard_config(
        "default_authentication_plugin = \"caching_sha2_password\"",
        "",
    ));
    let mut conn = mysql_async::Conn::from_url(s.url("app", "app", "app"))
        .await
        .expect("sha2 connect");
    let v: u16 = conn
        .exec_first("SELECT @@port + ?", (0,))
        .await
        .expect("q")
        .expect("row");
    assert_eq!(v, 13306);
    conn.disconnect().await.expect("disconnect");
    let bad = mysql_async::Conn::from_url(s.url("app", "bad", "app")).await;
    match bad {
        Err(mysql_async::Error::Server(e)) => assert_eq!(e.code, 1045),
        other => panic!("expected access denied, got {other:?}"),
    }
}

#[test]
fn backend_tls_when_use_ssl_is_set() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let cfg = standard_config("", "").replacen("port = 13306\n", "port = 13306\nuse_ssl = 1\n", 1);
    let s = Sluice::start(&cfg);
    let out = ok_stdout(&mariadb(
        s.port,
        "app",
        "app",
        &["--skip-ssl"],
        "SHOW SESSION STATUS LIKE 'Ssl_cipher';",
    ));
    let cipher = out.split('\t').nth(1).unwrap_or("").trim();
    assert!(
        !cipher.is_empty(),
        "backend connection uses TLS, got {out:?}"
    );
}

#[tokio::test]
async fn pool_reuses_backend_connections_of_finished_sessions() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let opts = mysql_async::Opts::from_url(&s.url("app", "app", "app")).expect("url");
    let mut c1 = mysql_async::Conn::new(opts.clone()).await.expect("connect");
    let thread: u32 = c1
        .query_first(BACKEND_THREAD_ID)
        .await
        .expect("id")
        .expect("row");
    c1.query_drop("SET @x = 5; USE mysql")
        .await
        .expect("session state");
    c1.disconnect().await.expect("disconnect");
    // The connection is reset in the background after the session ends, then idles in the pool.
    let admin_port = s.admin_port;
    tokio::task::spawn_blocking(move || {
        wait_for("the connection back in the pool", || {
            let free = ok_stdout(&mariadb(
                admin_port,
                "admin",
                "admin",
                &["--skip-ssl"],
                "SELECT SUM(ConnFree) FROM stats_mysql_connection_pool;",
            ));
            free.trim().parse::<u32>().unwrap_or(0) >= 1
        })
    })
    .await
    .expect("poll");
    let mut c2 = mysql_async::Conn::new(opts).await.expect("connect again");
    let thread2: u32 = c2
        .query_first(BACKEND_THREAD_ID)
        .await
        .expect("id")
        .expect("row");
    assert_eq!(
        thread2,
        thread,
        "second session reuses the pooled backend connection; log:\n{}",
        s.log()
    );
    let x: Option<Option<i32>> = c2.query_first("SELECT @x").await.expect("@x");
    assert_eq!(x, Some(None), "no user variables leak between sessions");
    let db: Option<String> = c2.query_first("SELECT DATABASE()").await.expect("db");
    assert_eq!(
        db.as_deref(),
        Some("app"),
        "the new session's schema, not the previous one's"
    );
    c2.disconnect().await.expect("disconnect");
}

/// The commands common drivers rarely send, through libmariadb's C API (the library behind the
/// mariadb CLI and sysbench) driven with Python's ctypes: COM_FIELD_LIST, COM_SET_OPTION,
/// COM_STMT_PREPARE/RESET/CLOSE, COM_STATISTICS, COM_PING.
#[test]
fn libmariadb_field_list_set_option_stmt_reset() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    primary_root("CREATE TABLE IF NOT EXISTS app.fl_t (id INT PRIMARY KEY, a VARCHAR(5), b DATE);");
    let s = Sluice::start(&standard_config("", ""));
    let script = r#"
import sys, ctypes
from ctypes import c_void_p, c_char_p, c_uint, c_ulong, c_int
port = int(sys.argv[1])
lib = ctypes.CDLL('libmariadb.so.3')
def sig(name, res, args):
    f = getattr(lib, name); f.restype = res; f.argtypes = args; return f
init = sig('mysql_init', c_void_p, [c_void_p])
connect = sig('mysql_real_connect', c_void_p, [c_void_p, c_char_p, c_char_p, c_char_p, c_char_p, c_uint, c_char_p, c_ulong])
error = sig('mysql_error', c_char_p, [c_void_p])
list_fields = sig('mysql_list_fields', c_void_p, [c_void_p, c_char_p, c_char_p])
num_fields = sig('mysql_num_fields', c_uint, [c_void_p])
free_result = sig('mysql_free_result', None, [c_void_p])
set_option = sig('mysql_set_server_option', c_int, [c_void_p, c_int])
query = sig('mysql_query', c_int, [c_void_p, c_char_p])
errno = sig('mysql_errno', c_uint, [c_void_p])
store = sig('mysql_store_result', c_void_p, [c_void_p])
next_result = sig('mysql_next_result', c_int, [c_void_p])
stat = sig('mysql_stat', c_char_p, [c_void_p])
ping = sig('mysql_ping', c_int, [c_void_p])
stmt_init = sig('mysql_stmt_init', c_void_p, [c_void_p])
stmt_prepare = sig('mysql_stmt_prepare', c_int, [c_void_p, c_char_p, c_ulong])
stmt_param_count = sig('mysql_stmt_param_count', c_ulong, [c_void_p])
stmt_reset = sig('mysql_stmt_reset', c_int, [c_void_p])
stmt_close = sig('mysql_stmt_close', c_int, [c_void_p])
close = sig('mysql_close', None, [c_void_p])
m = init(None)
CLIENT_MULTI_STATEMENTS = 1 << 16
if not connect(m, b'127.0.0.1', b'app', b'app', b'app', port, None, CLIENT_MULTI_STATEMENTS):
    print("connect failed", error(m)); sys.exit(1)
res = list_fields(m, b'fl_t', None)
print("field_list", num_fields(res) if res else error(m)); free_result(res)
def multi():
    if query(m, b"SELECT 1; SELECT 2") != 0:
        return errno(m)
    n = 0
    while True:
        r = store(m); free_result(r); n += 1
        if next_result(m) != 0: break
    return "ok%d" % n
print("multi_on", multi())
print("option_off", set_option(m, 1))
print("multi_off", multi())
print("option_on", set_option(m, 0))
print("multi_again", multi())
st = stmt_init(m)
q = b"SELECT ? + 1"
print("prepare", stmt_prepare(st, q, len(q)), stmt_param_count(st))
print("stmt_reset", stmt_reset(st))
print("stmt_close", stmt_close(st))
print("stat", stat(m).decode().split(':')[0])
print("ping", ping(m))
close(m)
"#;
    let out = ok_stdout(&python(script, &[&s.port.to_string()]));
    assert_eq!(
        out,
        "field_list 3\nmulti_on ok2\noption_off 0\nmulti_off 1064\noption_on 0\nmulti_again ok2\n\
         prepare 0 1\nstmt_reset 0\nstmt_close 0\nstat Uptime\nping 0\n",
        "log:\n{}",
        s.log()
    );
}

/// A 17 MiB parameter goes as COM_STMT_SEND_LONG_DATA, and comes back as a row larger than one
/// 16 MiB packet, in the binary and the text protocol.
#[tokio::test]
async fn long_data_and_rows_over_16_mib() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let mut conn = mysql_async::Conn::from_url(s.url("app", "app", "app"))
        .await
        .expect("connect");
    conn.query_drop("CREATE TABLE IF NOT EXISTS big_t (id INT PRIMARY KEY, b LONGBLOB)")
        .await
        .expect("create");
    conn.query_drop("DELETE FROM big_t").await.expect("delete");
    let blob: Vec<u8> = (0..17 * 1024 * 1024 + 3).map(|i| (i % 251) as u8).collect();
    conn.exec_drop("INSERT INTO big_t VALUES (1, ?)", (blob.clone(),))
        .await
        .expect("insert via long data");
    let (len, binary): (u64, Vec<u8>) = conn
        .exec_first("SELECT LENGTH(b), b FROM big_t WHERE id = ?", (1,))
        .await
        .expect("binary select")
        .expect("row");
    assert_eq!(len, blob.len() as u64);
    assert!(binary == blob, "binary protocol returns the same bytes");
    let text: Vec<u8> = conn
        .query_first("SELECT b FROM big_t")
        .await
        .expect("text select")
        .expect("row");
    assert!(text == blob, "text protocol returns the same bytes");
    let after: i32 = conn
        .query_first("SELECT 5")
        .await
        .expect("next query")
        .expect("row");
    assert_eq!(after, 5);
    conn.disconnect().await.expect("disconnect");
}
