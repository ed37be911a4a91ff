//! Unit tests of the parent module.

#[test]
fn an_integer_cast_of_the_argument_is_the_argument() {
    assert_eq!(
        parse_call(b"select pg_terminate_backend($1::int)"),
        Some((Signal::Terminate, "$1".to_string()))
    );
    assert_eq!(
        parse(b"SELECT pg_cancel_backend(42 :: bigint)"),
        Some((Signal::Cancel, 42))
    );
    assert_eq!(
        parse_call(b"select pg_terminate_backend($1::text)").map(|c| c.1),
        Some("$1::text".into())
    );
}

#[test]
fn a_bound_pid_is_replaced_in_its_own_format() {
    let mut text = b"B\0\0\0\0\0s1\0\0\0\0\x01\0\0\0\x0a1104381936\0\0".to_vec();
    let n = (text.len() - 1) as u32;
    text[1..5].copy_from_slice(&n.to_be_bytes());
    let mut stmts = SignalStatements::default();
    stmts.parsed(b"P\0\0\0\0s1\0SELECT pg_terminate_backend($1)\0\0\0");
    assert_eq!(stmts.bound_pid(&text), Some(1_104_381_936));
    let out = with_first_param(&text, 4242).expect("rewritten");
    assert_eq!(stmts.bound_pid(&out), Some(4242));
    assert_eq!(
        u32::from_be_bytes(out[1..5].try_into().unwrap()) as usize,
        out.len() - 1
    );
    let mut binary = b"B\0\0\0\0\0s1\0\0\x01\0\x01\0\x01\0\0\0\x04\x41\xd3\x3b\x30\0\0".to_vec();
    let n = (binary.len() - 1) as u32;
    binary[1..5].copy_from_slice(&n.to_be_bytes());
    let out = with_first_param(&binary, 4242).expect("rewritten");
    assert_eq!(stmts.bound_pid(&out), Some(4242));
    assert_eq!(out.len(), binary.len());
}

use super::*;

#[test]
fn reads_the_signal_functions_only_as_whole_statements() {
    assert_eq!(
        parse(b"SELECT pg_cancel_backend(42)\0"),
        Some((Signal::Cancel, 42))
    );
    assert_eq!(
        parse(b"select pg_catalog.PG_TERMINATE_BACKEND( 7 );"),
        Some((Signal::Terminate, 7))
    );
    for sql in [
        &b"SELECT pg_cancel_backend(pid) FROM pg_stat_activity"[..],
        b"SELECT pg_cancel_backend(1), 2",
        b"SELECT pg_cancel_backend(99999999999)",
        b"selectpg_cancel_backend(1)",
        b"SELECT pg_terminate_backend(1, 1000)",
    ] {
        assert_eq!(parse(sql), None, "{}", String::from_utf8_lossy(sql));
    }
}

#[tokio::test]
async fn only_the_same_user_may_signal() {
    let s = SessionSignals::default();
    let (pid, _, handle) = s.register("app");
    let Outcome::Reply(r) = carry_out(&s, ("other", 1), (Signal::Terminate, pid)).await else {
        panic!("a Sluice pid is answered");
    };
    assert_eq!(r[0], b'E');
    assert!(!handle.signal.is_raised(sluice_net::Signal::End));
    assert!(matches!(
        carry_out(&s, ("app", 1), (Signal::Cancel, pid ^ 1)).await,
        Outcome::NotOurs
    ));
    let Outcome::Reply(r) = carry_out(&s, ("app", 1), (Signal::Terminate, pid)).await else {
        panic!("answered");
    };
    assert_eq!(r[0], b'T');
    assert!(handle.signal.is_raised(sluice_net::Signal::End));
}

fn parse_msg(name: &str, sql: &str) -> Vec<u8> {
    message(b'P', format!("{name}\0{sql}\0\0\0").as_bytes())
}

fn bind_msg(name: &str, binary: bool, value: &[u8]) -> Vec<u8> {
    let mut b = format!("\0{name}\0").into_bytes();
    b.extend_from_slice(&1u16.to_be_bytes());
    b.extend_from_slice(&u16::from(binary).to_be_bytes());
    b.extend_from_slice(&1u16.to_be_bytes());
    b.extend_from_slice(&(value.len() as i32).to_be_bytes());
    b.extend_from_slice(value);
    b.extend_from_slice(&0u16.to_be_bytes());
    message(b'B', &b)
}

#[test]
fn a_bind_of_pg_terminate_backend_gives_its_pid_in_text_or_binary() {
    let mut st = SignalStatements::default();
    let pid: u32 = 1_234_567_890;
    assert_eq!(
        st.bound_pid(&bind_msg("", false, b"1")),
        None,
        "nothing noted"
    );
    st.parsed(&parse_msg("", "select pg_terminate_backend($1)"));
    st.parsed(&parse_msg(
        "s1",
        "SELECT pg_catalog.PG_TERMINATE_BACKEND( $1 );",
    ));
    assert_eq!(
        st.bound_pid(&bind_msg("", false, pid.to_string().as_bytes())),
        Some(pid)
    );
    assert_eq!(
        st.bound_pid(&bind_msg("s1", true, &(pid as i32).to_be_bytes())),
        Some(pid)
    );
    assert_eq!(
        st.bound_pid(&bind_msg("s1", true, &i64::from(pid).to_be_bytes())),
        Some(pid)
    );
    assert_eq!(st.bound_pid(&bind_msg("s1", true, b"abc")), None, "no int");
    assert_eq!(
        st.bound_pid(&bind_msg("s2", false, b"7")),
        None,
        "another statement"
    );
    // Defined again as something else: forgotten.
    st.parsed(&parse_msg("", "select $1"));
    assert_eq!(st.bound_pid(&bind_msg("", false, b"7")), None);
    // Cancels, other arguments and other shapes are not noted.
    for sql in [
        "select pg_cancel_backend($1)",
        "select pg_terminate_backend($2)",
        "select pg_terminate_backend($1), 1",
    ] {
        st.parsed(&parse_msg("x", sql));
        assert_eq!(st.bound_pid(&bind_msg("x", false, b"7")), None, "{sql}");
    }
    // Truncated Binds are read as nothing, never past their end.
    let full = bind_msg("s1", false, b"42");
    for cut in 5..full.len() - 2 {
        assert_eq!(st.bound_pid(&full[..cut]), None, "cut at {cut}");
    }
}

#[tokio::test]
async fn a_session_signalling_itself_ends_or_has_its_statement_cancelled() {
    let s = SessionSignals::default();
    let (pid, _, handle) = s.register("app");
    assert!(matches!(
        carry_out(&s, ("app", pid), (Signal::Terminate, pid)).await,
        Outcome::OwnTerminate
    ));
    let Outcome::Reply(r) = carry_out(&s, ("app", pid), (Signal::Cancel, pid)).await else {
        panic!("answered");
    };
    assert_eq!(r[0], b'E');
    assert!(String::from_utf8_lossy(&r).contains("57014"));
    assert!(
        !handle.signal.is_raised(sluice_net::Signal::End),
        "nothing else happened"
    );
}
