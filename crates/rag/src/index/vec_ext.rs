//! sqlite-vec's `vec0` on an index connection. The extension is compiled into the binary
//! (the `sqlite-vec` crate builds its C source with `SQLITE_CORE`), so its entry point is
//! called directly on the connection's handle: the only unsafe code in Sluice.
#![allow(unsafe_code)]

use crate::Error;
use sqlx::sqlite::SqliteConnection;
use std::ffi::{c_char, c_int, c_void};

type InitFn = unsafe extern "C" fn(*mut c_void, *mut *mut c_char, *const c_void) -> c_int;

/// Registers `vec0` and the `vec_*` functions on `conn`.
pub(super) async fn register(conn: &mut SqliteConnection) -> Result<(), Error> {
    let mut handle = conn.lock_handle().await?;
    let db = handle.as_raw_handle().as_ptr().cast::<c_void>();
    // SAFETY: `sqlite3_vec_init` is the extension's entry point, declared by the sqlite-vec
    // crate without its parameters; its C signature is `int (sqlite3*, char**, const
    // sqlite3_api_routines*)`, which `InitFn` spells. Built with SQLITE_CORE it ignores the
    // API table and does not write the error pointer when passed NULL. `db` is the live handle
    // of the connection locked above, held for the call.
    let rc = unsafe {
        let init: InitFn = std::mem::transmute(sqlite_vec::sqlite3_vec_init as *const ());
        init(db, std::ptr::null_mut(), std::ptr::null())
    };
    if rc != 0 {
        return Err(Error::VectorExtension(format!(
            "its entry point failed with SQLite code {rc}"
        )));
    }
    Ok(())
}
