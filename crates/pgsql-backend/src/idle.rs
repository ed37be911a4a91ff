//! The PostgreSQL side of the pool core's idle lists (`sluice_core::pool::IdleLists`): the
//! borrowed pool key a checkout looks up by, and what the lists read of a connection.

use crate::conn::PgConn;
use crate::pool::PgKey;
use sluice_core::metrics::ServerTraffic;
use sluice_core::pool::{BorrowedKey, IdleConnection, ServerConnection};
use sluice_core::runtime::ServerKey;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

/// The hasher of the budgets' map, looked up at every checkout, whose keys are hostgroup ids
/// (few, and told apart by comparison): SipHash on them cost ~140 instructions a lookup.
pub(crate) type PassThrough = BuildHasherDefault<PassThroughHasher>;

/// See [`PassThrough`].
#[derive(Debug, Default)]
pub(crate) struct PassThroughHasher(u64);

impl Hasher for PassThroughHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Not reached for `u32` keys; any other input is folded in FNV-1a's way.
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn write_u32(&mut self, hostgroup: u32) {
        self.0 = u64::from(hostgroup);
    }
}

/// A [`PgKey`] made of the request's borrowed fields: it hashes and compares as the owned key
/// (the field order and types match, `&str` hashes as `String`), so a lookup clones nothing.
#[derive(Debug, Clone, Copy, Hash)]
pub(crate) struct KeyRef<'a> {
    pub hostgroup: u32,
    pub server: &'a ServerKey,
    pub user: &'a str,
    pub database: &'a str,
}

impl hashbrown::Equivalent<Arc<PgKey>> for KeyRef<'_> {
    fn equivalent(&self, k: &Arc<PgKey>) -> bool {
        k.hostgroup == self.hostgroup
            && k.server == *self.server
            && k.user == self.user
            && k.database == self.database
    }
}

impl BorrowedKey<PgKey> for KeyRef<'_> {
    fn to_key(&self) -> PgKey {
        PgKey {
            hostgroup: self.hostgroup,
            server: self.server.clone(),
            user: self.user.to_string(),
            database: self.database.to_string(),
        }
    }
}

impl IdleConnection for PgConn {
    fn home(&self) -> Option<usize> {
        self.home
    }

    fn owner(&self) -> Option<u64> {
        self.owner
    }
}

impl ServerConnection for PgConn {
    type KillHandle = crate::stream::KillHandle;

    fn kill_handle(&self) -> &Arc<Self::KillHandle> {
        &self.kill_handle
    }

    fn backend_id(&self) -> u64 {
        u64::from(self.key.0)
    }

    fn settle(&mut self, traffic: Arc<ServerTraffic>, home: Option<usize>) {
        self.traffic = traffic;
        self.home = home;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::pool::{Headroom, IdleLists};

    #[test]
    fn a_borrowed_key_finds_its_pool_and_only_its_own() {
        let server = ServerKey {
            hostname: "127.0.0.1".into(),
            port: 5432,
        };
        let mut idle: IdleLists<PgKey, PgConn> = IdleLists::default();
        let k = |user, database| KeyRef {
            hostgroup: 0,
            server: &server,
            user,
            database,
        };
        let (a, _) = idle.take(&k("u", "db"), None, None, Headroom::NONE);
        let (a2, _) = idle.take(&k("u", "db"), None, None, Headroom::NONE);
        assert!(
            Arc::ptr_eq(&a, &a2),
            "the borrowed key hashes as the owned one"
        );
        // Field boundaries count: ("ab", "c") is not ("a", "bc").
        let (d, _) = idle.take(&k("ab", "c"), None, None, Headroom::NONE);
        let (e, _) = idle.take(&k("a", "bc"), None, None, Headroom::NONE);
        assert!(!Arc::ptr_eq(&d, &e) && !Arc::ptr_eq(&a, &d));
        assert_eq!(idle.iter().count(), 3);
    }
}
