//! An etcd v3 client over the JSON gateway every etcd 3.4+ member serves on its client port
//! (`/v3/kv/range`, `/v3/kv/txn`, `/v3/watch`, `/v3/lease/*`). Keys and values travel
//! base64-encoded, 64-bit numbers as strings. A request goes to the member that answered last
//! and moves on to the next member when that one does not answer.

use super::http::{Answer, post};
use crate::Error;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// One key's value and the revision that wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Kv {
    pub key: String,
    pub value: Vec<u8>,
    pub mod_revision: u64,
}

/// A watch event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Event {
    /// A key was written.
    Put(Kv),
    /// A key was deleted.
    Delete(String),
}

/// What one watch message said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct WatchMessage {
    /// The store's revision when the message was sent.
    pub revision: u64,
    /// The changes, in order.
    pub events: Vec<Event>,
    /// The member cancelled the watch (e.g. the start revision was compacted).
    pub canceled: bool,
}

/// The members of one etcd cluster.
#[derive(Debug)]
pub(crate) struct EtcdClient {
    endpoints: Vec<String>,
    current: AtomicUsize,
    timeout: Duration,
}

fn num(v: &Value) -> u64 {
    match v {
        Value::String(s) => s.parse().unwrap_or(0),
        Value::Number(n) => n.as_u64().unwrap_or(0),
        _ => 0,
    }
}

fn b64(s: &str) -> String {
    B64.encode(s.as_bytes())
}

/// The end of the key range that holds every key starting with `prefix`.
fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

fn parse_kv(v: &Value, endpoint: &str) -> Result<Kv, Error> {
    let bad = |why: &str| Error::Malformed {
        endpoint: endpoint.to_string(),
        why: why.to_string(),
    };
    let decode = |field: &str| -> Result<Vec<u8>, Error> {
        match v.get(field).and_then(Value::as_str) {
            Some(s) => B64
                .decode(s)
                .map_err(|_| bad("a key or value is not base64")),
            None => Ok(Vec::new()),
        }
    };
    Ok(Kv {
        key: String::from_utf8(decode("key")?).map_err(|_| bad("a key is not UTF-8"))?,
        value: decode("value")?,
        mod_revision: num(v.get("mod_revision").unwrap_or(&Value::Null)),
    })
}

fn revision_of(v: &Value) -> u64 {
    num(v.pointer("/header/revision").unwrap_or(&Value::Null))
}

impl EtcdClient {
    /// A client for `endpoints` (`host:port` each), `timeout` per request.
    pub(crate) fn new(endpoints: Vec<String>, timeout: Duration) -> EtcdClient {
        EtcdClient {
            endpoints,
            current: AtomicUsize::new(0),
            timeout,
        }
    }

    /// Sends one request, trying each member in turn from the last one that answered.
    async fn open(&self, path: &str, body: &Value) -> Result<(String, Answer), Error> {
        let body = body.to_string();
        let start = self.current.load(Ordering::Relaxed);
        let mut failures = Vec::new();
        for i in 0..self.endpoints.len() {
            let at = (start + i) % self.endpoints.len();
            let endpoint = &self.endpoints[at];
            match post(endpoint, path, body.as_bytes(), self.timeout).await {
                Ok(answer) => {
                    self.current.store(at, Ordering::Relaxed);
                    return Ok((endpoint.clone(), answer));
                }
                Err(Error::Unreachable(why)) => failures.push(why),
                // A member without quorum answers 503; another may have it.
                Err(e @ Error::Http { status: 500.., .. }) => failures.push(e.to_string()),
                Err(e) => return Err(e),
            }
        }
        Err(Error::Unreachable(failures.join("; ")))
    }

    async fn call(&self, path: &str, body: Value) -> Result<Value, Error> {
        let (endpoint, mut answer) = self.open(path, &body).await?;
        let bytes = tokio::time::timeout(self.timeout, answer.whole())
            .await
            .map_err(|_| {
                Error::Unreachable(format!("{endpoint}: answer not complete in time"))
            })??;
        serde_json::from_slice(&bytes).map_err(|e| Error::Malformed {
            endpoint,
            why: e.to_string(),
        })
    }

    /// Every key under `prefix` and the store's revision.
    pub(crate) async fn range_prefix(&self, prefix: &str) -> Result<(u64, Vec<Kv>), Error> {
        let v = self
            .call(
                "/v3/kv/range",
                json!({"key": b64(prefix), "range_end": B64.encode(prefix_end(prefix))}),
            )
            .await?;
        let mut kvs = Vec::new();
        for kv in v.get("kvs").and_then(Value::as_array).into_iter().flatten() {
            kvs.push(parse_kv(kv, "range")?);
        }
        Ok((revision_of(&v), kvs))
    }

    /// One key, and the store's revision.
    pub(crate) async fn get(&self, key: &str) -> Result<(u64, Option<Kv>), Error> {
        let v = self.call("/v3/kv/range", json!({"key": b64(key)})).await?;
        let kv = match v
            .get("kvs")
            .and_then(Value::as_array)
            .and_then(|a| a.first())
        {
            Some(kv) => Some(parse_kv(kv, "range")?),
            None => None,
        };
        Ok((revision_of(&v), kv))
    }

    /// Writes `puts` (key, value) in one transaction; returns the revision it created.
    pub(crate) async fn txn_put(&self, puts: &[(&str, &[u8])]) -> Result<u64, Error> {
        let success: Vec<Value> = puts
            .iter()
            .map(|(k, v)| json!({"request_put": {"key": b64(k), "value": B64.encode(v)}}))
            .collect();
        let v = self
            .call("/v3/kv/txn", json!({"compare": [], "success": success}))
            .await?;
        Ok(revision_of(&v))
    }

    /// Writes `key` attached to lease `lease` (it disappears when the lease expires).
    pub(crate) async fn put_leased(
        &self,
        key: &str,
        value: &[u8],
        lease: i64,
    ) -> Result<u64, Error> {
        let v = self
            .call(
                "/v3/kv/put",
                json!({"key": b64(key), "value": B64.encode(value), "lease": lease.to_string()}),
            )
            .await?;
        Ok(revision_of(&v))
    }

    /// A new lease of `ttl` seconds.
    pub(crate) async fn grant(&self, ttl: u64) -> Result<i64, Error> {
        let v = self
            .call("/v3/lease/grant", json!({"TTL": ttl.to_string()}))
            .await?;
        let id = num(v.get("ID").unwrap_or(&Value::Null));
        i64::try_from(id)
            .ok()
            .filter(|id| *id != 0)
            .ok_or_else(|| Error::Malformed {
                endpoint: "lease grant".into(),
                why: format!("no lease id in {v}"),
            })
    }

    /// Renews lease `id`; returns its remaining TTL (0: it had expired).
    pub(crate) async fn keepalive(&self, id: i64) -> Result<u64, Error> {
        let v = self
            .call("/v3/lease/keepalive", json!({"ID": id.to_string()}))
            .await?;
        Ok(num(v.pointer("/result/TTL").unwrap_or(&Value::Null)))
    }

    /// Ends lease `id` now (its keys disappear at once).
    pub(crate) async fn revoke(&self, id: i64) -> Result<(), Error> {
        self.call("/v3/lease/revoke", json!({"ID": id.to_string()}))
            .await
            .map(|_| ())
    }

    /// Watches every key under `prefix` from revision `from`.
    pub(crate) async fn watch(&self, prefix: &str, from: u64) -> Result<Watch, Error> {
        let body = json!({"create_request": {
            "key": b64(prefix),
            "range_end": B64.encode(prefix_end(prefix)),
            "start_revision": from.to_string(),
        }});
        let (endpoint, answer) = self.open("/v3/watch", &body).await?;
        Ok(Watch { endpoint, answer })
    }
}

/// An open watch.
pub(crate) struct Watch {
    pub endpoint: String,
    answer: Answer,
}

impl Watch {
    /// The next message; `None` when the member closed the stream.
    pub(crate) async fn next(&mut self) -> Result<Option<WatchMessage>, Error> {
        let Some(bytes) = self.answer.next_message().await? else {
            return Ok(None);
        };
        let v: Value = serde_json::from_slice(&bytes).map_err(|e| Error::Malformed {
            endpoint: self.endpoint.clone(),
            why: e.to_string(),
        })?;
        if let Some(err) = v.get("error") {
            let why = err
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("an error");
            return Err(Error::Unreachable(format!(
                "{}: the watch ended: {why}",
                self.endpoint
            )));
        }
        let r = v.get("result").unwrap_or(&Value::Null);
        let mut msg = WatchMessage {
            revision: revision_of(r),
            canceled: r.get("canceled").and_then(Value::as_bool).unwrap_or(false),
            events: Vec::new(),
        };
        for e in r
            .get("events")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let kv = parse_kv(e.get("kv").unwrap_or(&Value::Null), &self.endpoint)?;
            if e.get("type").and_then(Value::as_str) == Some("DELETE") {
                msg.events.push(Event::Delete(kv.key));
            } else {
                msg.events.push(Event::Put(kv));
            }
        }
        Ok(Some(msg))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_range_ends_after_its_last_key() {
        assert_eq!(prefix_end("/sluice/"), b"/sluice0".to_vec());
        assert_eq!(prefix_end("a\u{7f}"), b"a\x80".to_vec());
    }

    #[test]
    fn gateway_numbers_come_as_strings_or_numbers() {
        assert_eq!(num(&json!("42")), 42);
        assert_eq!(num(&json!(7)), 7);
        assert_eq!(num(&json!(null)), 0);
        let kv = parse_kv(
            &json!({"key": b64("/a"), "value": b64("v"), "mod_revision": "9"}),
            "test",
        )
        .expect("kv");
        assert_eq!(
            kv,
            Kv {
                key: "/a".into(),
                value: b"v".to_vec(),
                mod_revision: 9
            }
        );
        assert!(parse_kv(&json!({"key": "%%%"}), "test").is_err());
    }
}
