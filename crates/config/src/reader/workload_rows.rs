//! Checking the `workload_classes` rows (read before the query rules that name them).

use super::Reader;
use crate::Error;
use crate::{DEFAULT_CLASS, WorkloadClass, WorkloadGuard};
use std::collections::HashSet;
use toml::Spanned;

impl Reader<'_> {
    pub(super) fn workload_classes(
        &mut self,
        rows: Vec<Spanned<WorkloadClass>>,
    ) -> Result<(), Error> {
        let mut names = HashSet::new();
        for row in rows {
            let offset = row.span().start;
            let mut c = row.into_inner();
            c.name = c.name.trim().to_string();
            c.priority = c.priority.trim().to_ascii_lowercase();
            if let Err(why) = c.check() {
                return Err(self.invalid(
                    offset,
                    format!("workload_classes.{why} (class {:?})", c.name),
                ));
            }
            if !names.insert(c.name.clone()) {
                return Err(self.invalid(
                    offset,
                    format!("workload_classes: duplicate name {:?}", c.name),
                ));
            }
            self.cfg.workload_classes.push(c);
        }
        self.cfg
            .workload_classes
            .sort_by(|a, b| a.name.cmp(&b.name));
        Ok(())
    }

    pub(super) fn workload_guards(
        &mut self,
        rows: Vec<Spanned<WorkloadGuard>>,
    ) -> Result<(), Error> {
        let mut ids = HashSet::new();
        for row in rows {
            let offset = row.span().start;
            let mut g = row.into_inner();
            g.signal = g.signal.trim().to_ascii_lowercase();
            g.mode = g.mode.trim().to_ascii_lowercase();
            g.protocol = g.protocol.trim().to_ascii_lowercase();
            if let Err(why) = g.check(|c| self.knows_class(c)) {
                return Err(self.invalid(
                    offset,
                    format!("workload_guards.{why} (guard {})", g.guard_id),
                ));
            }
            if !ids.insert(g.guard_id) {
                return Err(self.invalid(
                    offset,
                    format!("workload_guards: duplicate guard_id {}", g.guard_id),
                ));
            }
            self.cfg.workload_guards.push(g);
        }
        self.cfg.workload_guards.sort_by_key(|g| g.guard_id);
        Ok(())
    }

    /// Whether a query rule may name `class`: a configured class or the default one.
    pub(super) fn knows_class(&self, class: &str) -> bool {
        class == DEFAULT_CLASS || self.cfg.workload_classes.iter().any(|c| c.name == class)
    }
}
