//! The global prepared-statement registry: one entry per (user, schema, statement text), shared by
//! every client session. Sessions map their own statement ids to entries; backend connections
//! map entries to their server-side ids (see `sluice_mysql_backend::StmtCache`).

use bytes::Bytes;
use hashbrown::{Equivalent, HashMap};
use sluice_core::util::lock;
use sluice_mysql_backend::Prepared;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A statement known to Sluice, with the metadata clients get when they prepare it.
#[derive(Debug)]
pub struct StmtMeta {
    /// Sluice's id for the statement text, the same for every client that prepares it
    /// (`stats_mysql_prepared_statements_info.global_stmt_id`).
    pub global_id: u64,
    /// User that prepared it.
    pub user: String,
    /// Schema it was prepared in.
    pub schema: String,
    /// The statement as prepared.
    pub sql: Bytes,
    /// Placeholders (`?`) the statement takes.
    pub num_params: u16,
    /// Columns its results have.
    pub num_columns: u16,
    /// Parameter definitions (payloads).
    pub params: Vec<Bytes>,
    /// Column definitions (payloads).
    pub columns: Vec<Bytes>,
    /// Client statement handles that refer to it.
    pub client_refs: AtomicU32,
    /// Times it was prepared on a backend connection.
    pub backend_prepares: AtomicU64,
    /// COM_STMT_EXECUTEs of this statement by any client.
    pub executions: AtomicU64,
    /// The statement's digest and the `query_digests_max_digest_length` it was made with,
    /// computed at the first execution: every later execution, by any client, reuses it.
    pub digest: std::sync::OnceLock<(u32, sluice_core::query::Digest)>,
}

/// User, schema, whether column definitions carry MariaDB's extended metadata (they differ in
/// shape, so clients that negotiated it never share an entry with those that did not), text.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Key {
    user: String,
    schema: String,
    extended_metadata: bool,
    sql: Bytes,
}

/// A [`Key`] of borrowed parts: it hashes and compares as the owned key (the fields in the same
/// order; `&str` hashes as `String`, `&[u8]` as `Bytes`), so a lookup — one per execution when
/// a client prepares and closes its statement every time — clones no strings.
#[derive(Hash)]
struct KeyRef<'a> {
    user: &'a str,
    schema: &'a str,
    extended_metadata: bool,
    sql: &'a [u8],
}

impl Equivalent<Key> for KeyRef<'_> {
    fn equivalent(&self, k: &Key) -> bool {
        self.extended_metadata == k.extended_metadata
            && self.sql == k.sql.as_ref()
            && self.user == k.user
            && self.schema == k.schema
    }
}

/// The first three parts of an entry's key.
#[derive(Debug, Clone, Copy)]
pub struct StmtScope<'a> {
    /// The user that prepares it.
    pub user: &'a str,
    /// The schema selected.
    pub schema: &'a str,
    /// The client negotiated MariaDB's extended column metadata.
    pub extended_metadata: bool,
}

impl<'a> StmtScope<'a> {
    fn key(&self, sql: &Bytes) -> Key {
        Key {
            user: self.user.to_string(),
            schema: self.schema.to_string(),
            extended_metadata: self.extended_metadata,
            sql: sql.clone(),
        }
    }

    fn key_ref(&self, sql: &'a [u8]) -> KeyRef<'a> {
        KeyRef {
            user: self.user,
            schema: self.schema,
            extended_metadata: self.extended_metadata,
            sql,
        }
    }
}

/// Every prepared statement text any client has open, shared so a statement prepared by many
/// clients is described once.
#[derive(Debug)]
pub struct StmtRegistry {
    map: Mutex<HashMap<Key, Arc<StmtMeta>>>,
    next_id: AtomicU64,
    /// Entries kept without client handles beyond this are forgotten (`mysql-max_stmts_cache`).
    max_unreferenced: usize,
}

/// A row of the prepared-statements view (`stats_mysql_prepared_statements_info`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StmtInfo {
    /// Sluice's id for the statement text.
    pub global_id: u64,
    /// Schema selected when it was first prepared.
    pub schema: String,
    /// Account that first prepared it.
    pub username: String,
    /// Client statement handles open on it now.
    pub ref_count_client: u32,
    /// Backend prepares so far.
    pub backend_prepares: u64,
    /// Placeholders it takes.
    pub num_params: u16,
    /// Columns its results have.
    pub num_columns: u16,
    /// The statement text.
    pub query: String,
}

impl StmtRegistry {
    /// An empty registry.
    pub fn new(max_unreferenced: usize) -> Arc<Self> {
        Arc::new(StmtRegistry {
            map: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            max_unreferenced,
        })
    }

    /// The entry for a statement, if known.
    pub fn get(&self, scope: StmtScope<'_>, sql: &Bytes) -> Option<Arc<StmtMeta>> {
        lock(&self.map).get(&scope.key_ref(sql)).cloned()
    }

    /// Registers a statement just prepared on a backend (or returns the existing entry).
    pub fn insert(&self, scope: StmtScope<'_>, sql: Bytes, p: &Prepared) -> Arc<StmtMeta> {
        let mut map = lock(&self.map);
        if let Some(m) = map.get(&scope.key_ref(&sql)) {
            return m.clone();
        }
        if map.len() >= self.max_unreferenced {
            map.retain(|_, m| m.client_refs.load(Ordering::Relaxed) > 0);
        }
        let meta = Arc::new(StmtMeta {
            digest: std::sync::OnceLock::new(),
            global_id: self.next_id.fetch_add(1, Ordering::Relaxed),
            user: scope.user.to_string(),
            schema: scope.schema.to_string(),
            sql,
            num_params: p.num_params,
            num_columns: p.num_columns,
            params: p.params.clone(),
            columns: p.columns.clone(),
            client_refs: AtomicU32::new(0),
            backend_prepares: AtomicU64::new(1),
            executions: AtomicU64::new(0),
        });
        map.insert(scope.key(&meta.sql), meta.clone());
        meta
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        lock(&self.map).len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A snapshot for the admin views.
    pub fn info(&self) -> Vec<StmtInfo> {
        let mut v: Vec<StmtInfo> = lock(&self.map)
            .values()
            .map(|m| StmtInfo {
                global_id: m.global_id,
                schema: m.schema.clone(),
                username: m.user.clone(),
                ref_count_client: m.client_refs.load(Ordering::Relaxed),
                backend_prepares: m.backend_prepares.load(Ordering::Relaxed),
                num_params: m.num_params,
                num_columns: m.num_columns,
                query: String::from_utf8_lossy(&m.sql).into_owned(),
            })
            .collect();
        v.sort_by_key(|i| i.global_id);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prep() -> Prepared {
        Prepared {
            backend_id: 7,
            num_params: 1,
            num_columns: 2,
            params: vec![],
            columns: vec![],
        }
    }

    fn scope<'a>(user: &'a str, schema: &'a str) -> StmtScope<'a> {
        StmtScope {
            user,
            schema,
            extended_metadata: false,
        }
    }

    #[test]
    fn one_entry_per_user_schema_metadata_shape_and_text() {
        let r = StmtRegistry::new(100);
        let sql = Bytes::from_static(b"SELECT ?");
        let a = r.insert(scope("u", "app"), sql.clone(), &prep());
        let b = r.insert(scope("u", "app"), sql.clone(), &prep());
        assert_eq!(a.global_id, b.global_id);
        let c = r.insert(scope("u", "other"), sql.clone(), &prep());
        assert_ne!(a.global_id, c.global_id);
        let extended = StmtScope {
            extended_metadata: true,
            ..scope("u", "app")
        };
        assert!(r.get(extended, &sql).is_none());
        let d = r.insert(extended, sql.clone(), &prep());
        assert_ne!(a.global_id, d.global_id);
        assert!(r.get(scope("u", "app"), &sql).is_some());
        assert!(r.get(scope("v", "app"), &sql).is_none());
        assert_eq!(r.info().len(), 3);
    }

    #[test]
    fn unreferenced_entries_are_bounded() {
        let r = StmtRegistry::new(2);
        let kept = r.insert(scope("u", "s"), Bytes::from_static(b"1"), &prep());
        kept.client_refs.fetch_add(1, Ordering::Relaxed);
        r.insert(scope("u", "s"), Bytes::from_static(b"2"), &prep());
        r.insert(scope("u", "s"), Bytes::from_static(b"3"), &prep());
        assert_eq!(r.len(), 2, "the unreferenced entry was dropped");
        assert!(r.get(scope("u", "s"), &Bytes::from_static(b"1")).is_some());
    }
}
