//! Readiness for load balancers and Kubernetes probes: every writer hostgroup must have an
//! ONLINE server, or clients routed there would only get errors.

use crate::config::ServerStatus;
use crate::runtime::{HostgroupServer, RuntimeConfig};
use std::collections::{BTreeMap, BTreeSet};

/// The writer hostgroups of one protocol side: the writers of its replication pairs and
/// clusters, or — when it has none — the default hostgroups of its frontend users.
fn writers(
    pairs: impl Iterator<Item = u32>,
    user_defaults: impl Iterator<Item = u32>,
) -> BTreeSet<u32> {
    let managed: BTreeSet<u32> = pairs.collect();
    if managed.is_empty() {
        user_defaults.collect()
    } else {
        managed
    }
}

fn first_gap(
    side: &str,
    writers: &BTreeSet<u32>,
    hostgroups: &BTreeMap<u32, Vec<HostgroupServer>>,
) -> Option<String> {
    let online = |hg: &u32| {
        hostgroups
            .get(hg)
            .is_some_and(|v| v.iter().any(|s| s.status == ServerStatus::Online))
    };
    let missing: Vec<String> = writers
        .iter()
        .filter(|hg| !online(hg))
        .map(u32::to_string)
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "no ONLINE server in {side} writer hostgroup(s) {}",
            missing.join(", ")
        )
    })
}

/// Why the configuration cannot serve writes now (a writer hostgroup without an ONLINE
/// server, on either protocol side), or `None` when every writer hostgroup has one.
pub fn writers_without_online_server(rt: &RuntimeConfig) -> Option<String> {
    let my = &rt.mysql;
    let my_writers = writers(
        my.replication
            .iter()
            .map(|p| p.writer_hostgroup)
            .chain(my.group_replication.iter().map(|g| g.writer_hostgroup))
            .chain(my.galera.iter().map(|g| g.writer_hostgroup)),
        my.frontend_users.values().map(|u| u.default_hostgroup.0),
    );
    let pg = &rt.pgsql;
    let pg_writers = writers(
        pg.replication.iter().map(|p| p.writer_hostgroup),
        pg.frontend_users.values().map(|u| u.default_hostgroup.0),
    );
    let gaps: Vec<String> = [
        first_gap("MySQL", &my_writers, &my.hostgroups),
        first_gap("PostgreSQL", &pg_writers, &pg.hostgroups),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!gaps.is_empty()).then(|| gaps.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn a_writer_hostgroup_without_an_online_server_is_not_ready() {
        let cfg = Config::parse(
            "[[mysql_servers]]\nhostgroup_id = 0\nhostname = \"a\"\nport = 3306\n\
             [[mysql_servers]]\nhostgroup_id = 1\nhostname = \"b\"\nport = 3306\n\
             [[mysql_users]]\nusername = \"app\"\npassword = \"x\"\n",
        )
        .expect("config");
        let mut rt = RuntimeConfig::build(&cfg);
        assert_eq!(writers_without_online_server(&rt), None);
        // The reader hostgroup 1 going away does not matter; the users' hostgroup 0 does.
        rt.mysql.hostgroups.get_mut(&1).expect("hg 1")[0].status = ServerStatus::Shunned;
        assert_eq!(writers_without_online_server(&rt), None);
        rt.mysql.hostgroups.get_mut(&0).expect("hg 0")[0].status = ServerStatus::Shunned;
        assert_eq!(
            writers_without_online_server(&rt).as_deref(),
            Some("no ONLINE server in MySQL writer hostgroup(s) 0")
        );
    }

    #[test]
    fn replication_pairs_name_the_writers() {
        let cfg = Config::parse(
            "[[pgsql_servers]]\nhostgroup_id = 10\nhostname = \"a\"\nport = 5432\n\
             [[pgsql_users]]\nusername = \"app\"\npassword = \"x\"\ndefault_hostgroup = 10\n\
             [[pgsql_replication_hostgroups]]\nwriter_hostgroup = 10\nreader_hostgroup = 11\n",
        )
        .expect("config");
        let mut rt = RuntimeConfig::build(&cfg);
        assert_eq!(writers_without_online_server(&rt), None);
        rt.pgsql.hostgroups.clear();
        assert_eq!(
            writers_without_online_server(&rt).as_deref(),
            Some("no ONLINE server in PostgreSQL writer hostgroup(s) 10")
        );
    }
}
