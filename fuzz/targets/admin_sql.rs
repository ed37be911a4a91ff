//! Admin statements before SQLite sees them: LOAD/SAVE/SET/SHOW/PROXYSQL grammar, the
//! PgBouncer console words and the guard against ATTACH, VACUUM INTO and writable PRAGMAs.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    sluice_admin::fuzz_statement(&String::from_utf8_lossy(data));
});
