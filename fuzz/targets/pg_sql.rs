//! The PostgreSQL frontend's SQL readers: statement splitter, pin tracker, SET/RESET
//! classifier, pg_cancel_backend/pg_terminate_backend parser.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    sluice_pgsql::fuzzing::sql(data);
});
