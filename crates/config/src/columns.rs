//! The columns each config table accepts, read from the row types' serde declarations so that
//! tools translating other proxies' files (`sluice import`) know what carries over without a
//! second list to keep in step.

use super::*;
use serde::Deserialize;
use serde::de::{self, Visitor};
use std::fmt;

/// The column names a `[[table]]` row accepts in Sluice's TOML, or `None` for a name that is not
/// a row table of the config file.
///
/// ```
/// let cols = sluice_config::table_columns("mysql_servers").unwrap();
/// assert!(cols.contains(&"hostgroup_id"));
/// assert!(sluice_config::table_columns("mysql_variables").is_none());
/// ```
pub fn table_columns(table: &str) -> Option<&'static [&'static str]> {
    Some(match table {
        "mysql_servers" => fields_of::<MysqlServer>(),
        "mysql_users" => fields_of::<MysqlUser>(),
        "mysql_hostgroup_attributes" => fields_of::<MysqlHostgroupAttributes>(),
        "pgsql_servers" => fields_of::<PgsqlServer>(),
        "pgsql_users" => fields_of::<PgsqlUser>(),
        "mysql_query_rules" | "pgsql_query_rules" => fields_of::<QueryRule>(),
        "mysql_query_rules_fast_routing" | "pgsql_query_rules_fast_routing" => {
            fields_of::<FastRoute>()
        }
        "mysql_replication_hostgroups" | "pgsql_replication_hostgroups" => {
            fields_of::<ReplicationHostgroup>()
        }
        "mysql_group_replication_hostgroups" | "mysql_galera_hostgroups" => {
            fields_of::<GroupReplicationHostgroup>()
        }
        "mysql_servers_ssl_params" | "pgsql_servers_ssl_params" => fields_of::<ServerSslParams>(),
        "proxysql_servers" => fields_of::<ProxysqlServer>(),
        "mcp_users" => fields_of::<McpUser>(),
        "mcp_targets" => fields_of::<McpTarget>(),
        "mcp_query_rules" => fields_of::<McpQueryRule>(),
        "rag_sources" => fields_of::<RagSource>(),
        "workload_classes" => fields_of::<WorkloadClass>(),
        "workload_guards" => fields_of::<WorkloadGuard>(),
        _ => return None,
    })
}

/// The field list serde's derive hands to `deserialize_struct`, caught by a deserializer that
/// records it and stops.
fn fields_of<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    let mut probe = FieldProbe { fields: &[] };
    let _ = T::deserialize(&mut probe);
    probe.fields
}

struct FieldProbe {
    fields: &'static [&'static str],
}

#[derive(Debug)]
struct Probed;

impl fmt::Display for Probed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("field list probed")
    }
}

impl std::error::Error for Probed {}

impl de::Error for Probed {
    fn custom<M: fmt::Display>(_: M) -> Self {
        Probed
    }
}

impl<'de> de::Deserializer<'de> for &mut FieldProbe {
    type Error = Probed;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Probed> {
        Err(Probed)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Probed> {
        self.fields = fields;
        Err(Probed)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_table_of_the_file_lists_its_columns() {
        for t in [
            "mysql_users",
            "pgsql_users",
            "mysql_query_rules",
            "proxysql_servers",
        ] {
            let cols = table_columns(t).unwrap();
            assert!(cols.len() > 2, "{t}: {cols:?}");
        }
        assert!(
            table_columns("mysql_query_rules")
                .unwrap()
                .contains(&"match_digest")
        );
        assert!(
            !table_columns("pgsql_servers")
                .unwrap()
                .contains(&"gtid_port")
        );
    }
}
