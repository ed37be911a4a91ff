//! The MySQL frontend's SQL readers: statement splitter, lexer, classifier, SET parser.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    sluice_mysql::fuzzing::sql(&String::from_utf8_lossy(data));
});
