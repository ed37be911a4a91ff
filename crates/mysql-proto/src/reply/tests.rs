use super::*;
use crate::packets::{eof_payload, err_payload, ok_payload};

fn feed_all(t: &mut ReplyTracker, packets: &[Vec<u8>]) -> Result<usize, ReplyError> {
    for (i, p) in packets.iter().enumerate() {
        t.feed(p, p.len())?;
        if t.done() {
            return Ok(i + 1);
        }
    }
    Ok(usize::MAX)
}

fn coldef() -> Vec<u8> {
    vec![
        3, b'd', b'e', b'f', 0, 0, 0, 1, b'a', 0, 0x0c, 0x21, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0,
    ]
}

fn row(v: &[u8]) -> Vec<u8> {
    let mut r = vec![v.len() as u8];
    r.extend_from_slice(v);
    r
}

#[test]
fn ok_and_err() {
    let mut t = ReplyTracker::new(ReplyKind::ResultSets, false);
    assert_eq!(feed_all(&mut t, &[ok_payload(3, 7, 2, 0)]), Ok(1));
    assert_eq!((t.affected_rows, t.last_insert_id, t.status), (3, 7, 2));
    let mut t = ReplyTracker::new(ReplyKind::ResultSets, false);
    assert_eq!(
        feed_all(&mut t, &[err_payload(1064, "42000", "syntax")]),
        Ok(1)
    );
    assert!(t.error);
}

#[test]
fn classic_result_set_then_more_results() {
    let mut t = ReplyTracker::new(ReplyKind::ResultSets, false);
    let more = status::MORE_RESULTS_EXISTS | status::AUTOCOMMIT;
    let pk = vec![
        vec![1],
        coldef(),
        eof_payload(2, 0),
        row(b"1"),
        row(b"2"),
        eof_payload(more, 0),
        ok_payload(1, 0, 2, 0),
    ];
    assert_eq!(feed_all(&mut t, &pk), Ok(7));
    assert_eq!(t.results, 2);
}

#[test]
fn deprecate_eof_result_set() {
    let mut t = ReplyTracker::new(ReplyKind::ResultSets, true);
    let mut end = ok_payload(0, 0, 2, 0);
    end[0] = 0xfe;
    let pk = vec![vec![1], coldef(), row(b"x"), end];
    assert_eq!(feed_all(&mut t, &pk), Ok(4));
    assert_eq!(t.status, 2);
}

#[test]
fn error_in_the_middle_of_rows() {
    let mut t = ReplyTracker::new(ReplyKind::ResultSets, false);
    let pk = vec![
        vec![1],
        coldef(),
        eof_payload(2, 0),
        row(b"1"),
        err_payload(1317, "70100", "interrupted"),
    ];
    assert_eq!(feed_all(&mut t, &pk), Ok(5));
    assert!(t.error);
}

#[test]
fn prepare_ok_with_params_and_columns() {
    let mut prep = vec![0u8];
    prep.extend_from_slice(&9u32.to_le_bytes());
    prep.extend_from_slice(&1u16.to_le_bytes());
    prep.extend_from_slice(&2u16.to_le_bytes());
    prep.extend_from_slice(&[0, 0, 0]);
    let mut t = ReplyTracker::new(ReplyKind::Prepare, false);
    let pk = vec![
        prep.clone(),
        coldef(),
        coldef(),
        eof_payload(2, 0),
        coldef(),
        eof_payload(2, 0),
    ];
    assert_eq!(feed_all(&mut t, &pk), Ok(6));
    assert_eq!(t.stmt_id, Some(9));
    let mut t = ReplyTracker::new(ReplyKind::Prepare, true);
    let pk = vec![prep, coldef(), coldef(), coldef()];
    assert_eq!(feed_all(&mut t, &pk), Ok(4));
}

#[test]
fn prepare_without_params_or_columns() {
    let mut prep = vec![0u8, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    prep[5] = 0;
    let mut t = ReplyTracker::new(ReplyKind::Prepare, false);
    assert_eq!(feed_all(&mut t, &[prep]), Ok(1));
}

#[test]
fn cursor_ends_reply_after_column_eof() {
    let mut t = ReplyTracker::new(ReplyKind::CursorResultSets, false);
    let pk = vec![vec![1], coldef(), eof_payload(status::CURSOR_EXISTS, 0)];
    assert_eq!(feed_all(&mut t, &pk), Ok(3));
    // A stored procedure with an open cursor flags its result sets CURSOR_EXISTS too (mariadb-test
    // sp-cursor): without a cursor asked for, the rows and the rest of the CALL's reply follow.
    let mut t = ReplyTracker::new(ReplyKind::ResultSets, false);
    let flags = status::CURSOR_EXISTS | status::MORE_RESULTS_EXISTS;
    let pk = vec![
        vec![1],
        coldef(),
        eof_payload(flags, 0),
        vec![1, b'1'],
        eof_payload(flags, 0),
        vec![0, 0, 0, 2, 0, 0, 0],
    ];
    assert_eq!(feed_all(&mut t, &pk), Ok(6));
    assert!(t.done());
    let mut t = ReplyTracker::new(ReplyKind::Fetch, false);
    let pk = vec![vec![0, 0, 1], eof_payload(status::LAST_ROW_SENT, 0)];
    assert_eq!(feed_all(&mut t, &pk), Ok(2));
}

#[test]
fn large_rows_span_chunks() {
    let mut t = ReplyTracker::new(ReplyKind::ResultSets, false);
    t.feed(&[1], 1).unwrap();
    t.feed(&coldef(), 22).unwrap();
    t.feed(&eof_payload(2, 0), 5).unwrap();
    // A row of exactly 16 MiB - 1 bytes: its next chunk starts with 0xfe but is a continuation.
    t.feed(&[0xfe, 1, 2], MAX_CHUNK).unwrap();
    t.feed(&[0xfe, 0, 0, 2, 0], 5).unwrap();
    assert!(!t.done(), "continuation chunk must not be read as EOF");
    t.feed(&eof_payload(2, 0), 5).unwrap();
    assert!(t.done());
}

#[test]
fn field_list_and_single() {
    let mut t = ReplyTracker::new(ReplyKind::FieldList, false);
    assert_eq!(
        feed_all(&mut t, &[coldef(), coldef(), eof_payload(2, 0)]),
        Ok(3)
    );
    let mut t = ReplyTracker::new(ReplyKind::Single, false);
    assert_eq!(feed_all(&mut t, &[b"Uptime: 5".to_vec()]), Ok(1));
}

#[test]
fn local_infile_request_pauses_the_reply_until_the_file_is_sent() {
    let mut t = ReplyTracker::new(ReplyKind::ResultSets, false);
    assert_eq!(t.feed(b"\xfb/tmp/data.csv", 14), Ok(()));
    assert!(t.wants_local_file() && !t.done());
    // Nothing may come from the server while it waits for the file.
    assert!(t.clone().feed(&[0x00, 0, 0, 2, 0, 0, 0], 7).is_err());
    t.local_file_sent();
    assert!(!t.wants_local_file());
    assert_eq!(t.feed(&[0x00, 5, 0, 2, 0, 0, 0], 7), Ok(()));
    assert!(t.done());
    assert_eq!(t.affected_rows, 5);
}

/// An OK with `status` (plus SESSION_STATE_CHANGED) carrying `last_gtid = gtid`.
fn ok_with_gtid(header: u8, status: u16, gtid: &str) -> Vec<u8> {
    let mut p = vec![header, 1, 0];
    p.extend_from_slice(&(status | status::SESSION_STATE_CHANGED).to_le_bytes());
    p.extend_from_slice(&[0, 0, 0]);
    let mut item = Vec::new();
    crate::lenenc::put_lenenc_bytes(&mut item, b"last_gtid");
    crate::lenenc::put_lenenc_bytes(&mut item, gtid.as_bytes());
    let mut block = vec![0u8];
    crate::lenenc::put_lenenc_bytes(&mut block, &item);
    crate::lenenc::put_lenenc_bytes(&mut p, &block);
    p
}

#[test]
fn committed_gtids_of_oks_and_result_set_terminators() {
    // An autocommit INSERT's OK.
    let mut t = ReplyTracker::new(ReplyKind::ResultSets, true);
    let ok = ok_with_gtid(0x00, 2, "0-1-41");
    assert_eq!(feed_all(&mut t, &[ok]), Ok(1));
    assert_eq!(t.committed_gtid.as_deref(), Some("0-1-41"));
    assert_eq!(t.take_state_offset(), Some(8));
    assert_eq!(t.take_state_offset(), None, "taken once");
    assert_eq!(t.status, 2 | status::SESSION_STATE_CHANGED);
    // INSERT … RETURNING: the terminator of the result set carries it (DEPRECATE_EOF).
    let mut t = ReplyTracker::new(ReplyKind::ResultSets, true);
    let end = ok_with_gtid(0xfe, 2, "0-1-42");
    t.feed(&[1], 1).expect("column count");
    t.feed(&coldef(), coldef().len()).expect("column");
    t.feed(&row(b"7"), 2).expect("row");
    t.feed(&end, end.len()).expect("end");
    assert!(t.done());
    assert_eq!(t.committed_gtid.as_deref(), Some("0-1-42"));
    assert!(t.take_state_offset().is_some());
    // A classic EOF never counts as a tracked OK.
    let mut t = ReplyTracker::new(ReplyKind::ResultSets, false);
    let eof = eof_payload(0, status::SESSION_STATE_CHANGED);
    feed_all(&mut t, &[vec![1], coldef(), eof.clone(), eof]).expect("result set");
    assert_eq!(t.take_state_offset(), None);
}
