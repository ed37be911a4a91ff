//! The prepared statements one backend connection holds, least recently used first out.

use bytes::Bytes;

/// A statement prepared on one backend connection.
#[derive(Debug, Clone)]
pub struct BackendStmt {
    /// Sluice's global statement id (registry key).
    pub global_id: u64,
    /// The id the server gave it on this connection.
    pub backend_id: u32,
    /// Number of parameters.
    pub num_params: u16,
    /// Parameter types last bound on this connection (from an execute with new-params-bound=1).
    pub bound_types: Option<Bytes>,
    last_used: u64,
}

impl BackendStmt {
    /// A freshly prepared statement.
    pub fn new(global_id: u64, backend_id: u32, num_params: u16) -> Self {
        BackendStmt {
            global_id,
            backend_id,
            num_params,
            bound_types: None,
            last_used: 0,
        }
    }
}

/// Statements prepared on a connection; small (`mysql-max_stmts_per_connection`), so a vector.
#[derive(Debug, Default)]
pub struct StmtCache {
    items: Vec<BackendStmt>,
    tick: u64,
}

impl StmtCache {
    /// The statement for `global_id`, marked as just used.
    pub fn get_mut(&mut self, global_id: u64) -> Option<&mut BackendStmt> {
        self.tick += 1;
        let tick = self.tick;
        let s = self.items.iter_mut().find(|s| s.global_id == global_id)?;
        s.last_used = tick;
        Some(s)
    }

    /// Adds a statement; returns the least recently used ones that must be closed on the server
    /// to stay within `cap`.
    pub fn insert(&mut self, mut stmt: BackendStmt, cap: usize) -> Vec<BackendStmt> {
        self.tick += 1;
        stmt.last_used = self.tick;
        // The same statement prepared twice (two clients raced to prepare it): the older server
        // handle is returned for closing too, so nothing leaks on the server.
        let mut evicted: Vec<BackendStmt> = Vec::new();
        if let Some(i) = self
            .items
            .iter()
            .position(|s| s.global_id == stmt.global_id)
        {
            evicted.push(self.items.swap_remove(i));
        }
        while self.items.len() >= cap.max(1) {
            let Some((i, _)) = self
                .items
                .iter()
                .enumerate()
                .min_by_key(|(_, s)| s.last_used)
            else {
                break;
            };
            evicted.push(self.items.swap_remove(i));
        }
        self.items.push(stmt);
        evicted
    }

    /// Forgets everything (after a reset the server has dropped them).
    pub fn clear(&mut self) {
        self.items.clear();
    }

    /// Number of statements held.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// True when none are held.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_least_recently_used() {
        let mut c = StmtCache::default();
        assert!(c.insert(BackendStmt::new(1, 101, 0), 2).is_empty());
        assert!(c.insert(BackendStmt::new(2, 102, 0), 2).is_empty());
        assert!(c.get_mut(1).is_some());
        let ev = c.insert(BackendStmt::new(3, 103, 0), 2);
        assert_eq!(
            ev.iter().map(|s| s.backend_id).collect::<Vec<_>>(),
            vec![102]
        );
        assert!(c.get_mut(2).is_none());
        assert_eq!(c.len(), 2);
        let dup = c.insert(BackendStmt::new(1, 201, 0), 2);
        assert_eq!(
            dup.iter().map(|s| s.backend_id).collect::<Vec<_>>(),
            vec![101],
            "replaced handle is closed"
        );
        c.clear();
        assert!(c.is_empty());
    }
}
