//! The store's layout and its address: modules under `<prefix>config/<module>` (one JSON
//! document each, written in one transaction), live nodes under `<prefix>nodes/<node>` (attached
//! to the node's lease). [`EtcdStore`] is what `SAVE/LOAD … TO/FROM CLUSTER` talk to.

use super::client::EtcdClient;
use crate::Error;
use serde_json::{Value, json};
use sluice_admin::{ConfigStore, ModuleRows, StoreFuture};
use sluice_core::admin::AdminRows;
use std::sync::Arc;
use std::time::Duration;

/// Where the store is: `etcd://host:port[,host:port…]/prefix`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreAddress {
    /// The members' client endpoints (`host:port`).
    pub endpoints: Vec<String>,
    /// The key prefix, with a leading and a trailing `/` (default `/sluice/`).
    pub prefix: String,
}

impl StoreAddress {
    /// Parses `etcd://host:port[,host:port…][/prefix]`.
    pub fn parse(url: &str) -> Result<StoreAddress, Error> {
        let bad = |why| Error::BadUrl {
            url: url.to_string(),
            why,
        };
        let rest = url
            .strip_prefix("etcd://")
            .ok_or_else(|| bad("it must start with etcd://"))?;
        let (hosts, prefix) = rest.split_once('/').unwrap_or((rest, "sluice"));
        let endpoints: Vec<String> = hosts
            .split(',')
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .map(str::to_string)
            .collect();
        if endpoints.is_empty() {
            return Err(bad("it names no etcd member"));
        }
        if endpoints.iter().any(|e| {
            e.rsplit_once(':')
                .and_then(|(_, p)| p.parse::<u16>().ok())
                .is_none()
        }) {
            return Err(bad("every member needs host:port"));
        }
        let prefix = prefix.trim_matches('/');
        let prefix = if prefix.is_empty() {
            "/sluice/".to_string()
        } else {
            format!("/{prefix}/")
        };
        Ok(StoreAddress { endpoints, prefix })
    }

    /// The address as written.
    pub fn url(&self) -> String {
        format!(
            "etcd://{}{}",
            self.endpoints.join(","),
            self.prefix.trim_end_matches('/')
        )
    }

    pub(crate) fn config_prefix(&self) -> String {
        format!("{}config/", self.prefix)
    }

    pub(crate) fn module_key(&self, module: &str) -> String {
        format!("{}config/{module}", self.prefix)
    }

    pub(crate) fn nodes_prefix(&self) -> String {
        format!("{}nodes/", self.prefix)
    }

    pub(crate) fn client(&self) -> EtcdClient {
        EtcdClient::new(self.endpoints.clone(), Duration::from_secs(2))
    }
}

/// A module as stored: its rows, checksum and who saved it.
pub(crate) fn encode_module(module: &str, rows: &ModuleRows, saved_by: &str) -> Vec<u8> {
    let tables: Vec<Value> = rows
        .tables
        .iter()
        .map(|(name, r)| json!({"name": name, "columns": r.columns, "rows": r.rows}))
        .collect();
    let saved_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    json!({
        "module": module,
        "checksum": rows.checksum(),
        "saved_by": saved_by,
        "saved_at": saved_at,
        "tables": tables,
    })
    .to_string()
    .into_bytes()
}

/// Reads a stored module; its rows must have the checksum stored with them.
pub(crate) fn decode_module(key: &str, bytes: &[u8]) -> Result<(String, ModuleRows), Error> {
    let bad = |why: String| Error::BadModule {
        key: key.to_string(),
        why,
    };
    let v: Value = serde_json::from_slice(bytes).map_err(|e| bad(e.to_string()))?;
    let module = v
        .get("module")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("no module name".into()))?
        .to_string();
    let mut rows = ModuleRows::default();
    for t in v
        .get("tables")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = t.get("name").and_then(Value::as_str).unwrap_or_default();
        let columns: Vec<String> =
            serde_json::from_value(t.get("columns").cloned().unwrap_or_default())
                .map_err(|e| bad(format!("{name} columns: {e}")))?;
        let table_rows: Vec<Vec<Option<String>>> =
            serde_json::from_value(t.get("rows").cloned().unwrap_or_default())
                .map_err(|e| bad(format!("{name} rows: {e}")))?;
        rows.tables.push((
            name.to_string(),
            AdminRows {
                columns,
                rows: table_rows,
            },
        ));
    }
    let stored = v
        .get("checksum")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let computed = rows.checksum();
    if stored != computed {
        return Err(bad(format!(
            "its rows have checksum {computed}, the document says {stored}"
        )));
    }
    Ok((module, rows))
}

/// `SAVE/LOAD … TO/FROM CLUSTER` against etcd.
pub struct EtcdStore {
    address: StoreAddress,
    client: Arc<EtcdClient>,
    node: String,
}

impl EtcdStore {
    /// The store at `address`, writing as node `node`.
    pub fn new(address: StoreAddress, node: String) -> EtcdStore {
        EtcdStore {
            client: Arc::new(address.client()),
            address,
            node,
        }
    }
}

impl ConfigStore for EtcdStore {
    fn save<'a>(&'a self, module: &'a str, rows: &'a ModuleRows) -> StoreFuture<'a, u64> {
        Box::pin(async move {
            let doc = encode_module(module, rows, &self.node);
            let key = self.address.module_key(module);
            self.client
                .txn_put(&[(key.as_str(), doc.as_slice())])
                .await
                .map_err(Into::into)
        })
    }

    fn load<'a>(&'a self, module: &'a str) -> StoreFuture<'a, Option<(u64, ModuleRows)>> {
        Box::pin(async move {
            let key = self.address.module_key(module);
            let (_, kv) = self.client.get(&key).await?;
            let Some(kv) = kv else {
                return Ok(None);
            };
            let (_, rows) = decode_module(&key, &kv.value)?;
            Ok(Some((kv.mod_revision, rows)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_addresses_name_members_and_a_prefix() {
        let a = StoreAddress::parse("etcd://10.0.0.1:2379,10.0.0.2:2379/prod/sluice").expect("ok");
        assert_eq!(a.endpoints, ["10.0.0.1:2379", "10.0.0.2:2379"]);
        assert_eq!(a.prefix, "/prod/sluice/");
        assert_eq!(
            a.module_key("mysql_servers"),
            "/prod/sluice/config/mysql_servers"
        );
        assert_eq!(
            StoreAddress::parse("etcd://h:1").expect("ok").prefix,
            "/sluice/"
        );
        for bad in ["http://h:1/x", "etcd:///x", "etcd://h/x", "etcd://h:port/x"] {
            assert!(StoreAddress::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_stored_module_round_trips_and_a_tampered_one_is_refused() {
        let rows = ModuleRows {
            tables: vec![(
                "proxysql_servers".into(),
                AdminRows {
                    columns: vec!["hostname".into(), "comment".into()],
                    rows: vec![vec![Some("h".into()), None]],
                },
            )],
        };
        let doc = encode_module("proxysql_servers", &rows, "node-a");
        let (module, back) = decode_module("k", &doc).expect("decodes");
        assert_eq!((module.as_str(), &back), ("proxysql_servers", &rows));
        let tampered = String::from_utf8(doc)
            .expect("utf8")
            .replace("\"h\"", "\"x\"");
        assert!(decode_module("k", tampered.as_bytes()).is_err());
        assert!(decode_module("k", b"not json").is_err());
    }
}
