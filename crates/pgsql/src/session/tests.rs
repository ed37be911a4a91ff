//! Unit tests of the parent module.

use super::*;

#[test]
fn sets_in_queries_and_unnamed_parses_are_tracked_named_parses_pin() {
    let mut pins = PinSet::default();
    let mut pending = Vec::new();
    note(
        b"Q\0\0\0\x19SET work_mem = '8MB'\0",
        &mut pins,
        &mut pending,
    );
    let mut unnamed = b"P\0\0\0\0\0SET application_name = 'x'\0\0\0".to_vec();
    let len = (unnamed.len() - 1) as u32;
    unnamed[1..5].copy_from_slice(&len.to_be_bytes());
    note(&unnamed, &mut pins, &mut pending);
    assert_eq!(pending.len(), 2);
    assert_eq!(pins.reason(), None);
    note(
        b"P\0\0\0\0s1\0SET work_mem = 1\0\0\0",
        &mut pins,
        &mut pending,
    );
    assert_eq!(pins.reason(), Some("session state"));
}
