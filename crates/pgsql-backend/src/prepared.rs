//! Which protocol-level prepared statements a server connection holds, least recently used first
//! out, so Sluice can map client statement names onto pooled connections (as PgBouncer 1.21+
//! does) and keep each connection under `pgsql-max_prepared_statements`.

/// hashbrown's map with its randomly seeded foldhash (std's SipHash costs ~190 instructions per
/// statement name; a checkout touches one).
type HashMap<K, V> = hashbrown::HashMap<K, V>;

/// Statement names prepared on one server connection, with their last use.
#[derive(Debug, Default)]
pub struct PreparedSet {
    names: HashMap<String, u64>,
    tick: u64,
}

impl PreparedSet {
    /// True when `name` is prepared here; marks it used.
    pub fn touch(&mut self, name: &str) -> bool {
        self.tick += 1;
        match self.names.get_mut(name) {
            Some(t) => {
                *t = self.tick;
                true
            }
            None => false,
        }
    }

    /// Records `name` as prepared.
    pub fn insert(&mut self, name: String) {
        self.tick += 1;
        self.names.insert(name, self.tick);
    }

    /// Forgets statement `name` (it was closed on the server).
    pub fn remove(&mut self, name: &str) {
        self.names.remove(name);
    }

    /// Forgets everything (after `DISCARD ALL` / `DEALLOCATE ALL`).
    pub fn clear(&mut self) {
        self.names.clear();
    }

    /// How many statements are prepared.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True when none is.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Removes and returns the least recently used name.
    pub fn evict_oldest(&mut self) -> Option<String> {
        let oldest = self
            .names
            .iter()
            .min_by_key(|(_, t)| **t)
            .map(|(n, _)| n.clone())?;
        self.names.remove(&oldest);
        Some(oldest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_the_least_recently_used() {
        let mut s = PreparedSet::default();
        s.insert("a".into());
        s.insert("b".into());
        s.insert("c".into());
        assert!(s.touch("a"));
        assert!(!s.touch("zz"));
        assert_eq!(s.evict_oldest().as_deref(), Some("b"));
        assert_eq!(s.evict_oldest().as_deref(), Some("c"));
        assert_eq!(s.len(), 1);
        s.clear();
        assert!(s.is_empty());
        assert_eq!(s.evict_oldest(), None);
    }
}
