//! Checking the replication-pair and cluster hostgroup tables.

use super::super::*;
use super::Reader;
use crate::Error;
use std::collections::HashSet;
use toml::Spanned;

impl Reader<'_> {
    /// `table` is `mysql_replication_hostgroups` or `pgsql_replication_hostgroups`.
    pub(super) fn replication_hostgroups(
        &mut self,
        table: &str,
        rows: Vec<Spanned<ReplicationHostgroup>>,
    ) -> Result<(), Error> {
        const CHECKS: [&str; 5] = [
            "read_only",
            "innodb_read_only",
            "super_read_only",
            "read_only|innodb_read_only",
            "read_only&innodb_read_only",
        ];
        let mut used = HashSet::new();
        let mut pairs = Vec::with_capacity(rows.len());
        for row in rows {
            let offset = row.span().start;
            let r = row.into_inner();
            if r.writer_hostgroup == r.reader_hostgroup
                || !used.insert(r.writer_hostgroup)
                || !used.insert(r.reader_hostgroup)
            {
                return Err(self.invalid(
                    offset,
                    format!(
                        "{table}: ({}, {}): each hostgroup may appear in one pair only, and writer and reader must differ",
                        r.writer_hostgroup, r.reader_hostgroup
                    ),
                ));
            }
            if !CHECKS.contains(&r.check_type.to_ascii_lowercase().as_str()) {
                return Err(self.invalid(
                    offset,
                    format!(
                        "{table}: check_type {:?} is not one of {CHECKS:?}",
                        r.check_type
                    ),
                ));
            }
            pairs.push(r);
        }
        if table.starts_with("mysql") {
            self.cfg.mysql_replication_hostgroups = pairs;
        } else {
            self.cfg.pgsql_replication_hostgroups = pairs;
        }
        Ok(())
    }

    /// Group Replication and Galera rows: four distinct hostgroups each, none shared.
    pub(super) fn cluster_hostgroups(
        &mut self,
        group_replication: Vec<Spanned<GroupReplicationHostgroup>>,
        galera: Vec<Spanned<GroupReplicationHostgroup>>,
    ) -> Result<(), Error> {
        let mut seen = HashSet::new();
        let rows = group_replication
            .into_iter()
            .map(|r| (false, r))
            .chain(galera.into_iter().map(|r| (true, r)));
        for (galera, row) in rows {
            let offset = row.span().start;
            let g = row.into_inner();
            let hgs = g.hostgroups();
            let distinct: HashSet<u32> = hgs.iter().copied().collect();
            if distinct.len() != 4
                || hgs.iter().any(|h| !seen.insert(*h))
                || g.writer_is_also_reader > 2
            {
                let table = if galera {
                    "mysql_galera_hostgroups"
                } else {
                    "mysql_group_replication_hostgroups"
                };
                return Err(self.invalid(
                    offset,
                    format!(
                        "{table} {hgs:?}: the four hostgroups must differ and appear in one row only; writer_is_also_reader is 0, 1 or 2"
                    ),
                ));
            }
            if galera {
                self.cfg.mysql_galera_hostgroups.push(g);
            } else {
                self.cfg.mysql_group_replication_hostgroups.push(g);
            }
        }
        Ok(())
    }
}
