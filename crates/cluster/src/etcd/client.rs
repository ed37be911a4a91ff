//! The etcd v3 calls the store and the sync make, over etcd's native gRPC API through the
//! maintained `etcd-client` crate (tonic): a watch stream, lease keep-alives, transactions.
//! One channel per member; a request goes to the member that answered last and moves on to the
//! next when that one cannot be reached or has no leader (`require_leader`: a partitioned
//! member refuses at once instead of holding a watch that never fires). Every call is bounded
//! in time here.

use crate::Error;
use etcd_client::{
    Client, ConnectOptions, EventType, GetOptions, KeyValue, PutOptions, ResponseHeader, Txn,
    TxnOp, WatchOptions, WatchStream,
};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::OnceCell;

/// How long a request keeps trying while a member answers that the cluster has no leader: an
/// election after the leader died takes etcd about its election timeout (1 s by default) and a
/// round or two of votes; a `SAVE … TO CLUSTER` in that window waits for the new leader instead
/// of failing.
const ELECTION_WAIT: Duration = Duration::from_secs(5);

/// The pause between two rounds over the members while an election runs.
const ELECTION_ROUND_PAUSE: Duration = Duration::from_millis(100);

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

/// The members of one etcd cluster, and a channel to each (opened on first use).
pub(crate) struct EtcdClient {
    members: Vec<Member>,
    /// The member that answered last.
    current: AtomicUsize,
    timeout: Duration,
}

/// One member and its channel.
struct Member {
    endpoint: String,
    client: OnceCell<Client>,
}

impl std::fmt::Debug for EtcdClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let endpoints: Vec<&str> = self.members.iter().map(|m| m.endpoint.as_str()).collect();
        f.debug_struct("EtcdClient")
            .field("endpoints", &endpoints)
            .field("current", &self.current)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// The store revision a response was read at (etcd's revisions start at 1; 0 if absent).
fn revision_of(header: Option<&ResponseHeader>) -> u64 {
    header.map_or(0, |h| u64::try_from(h.revision()).unwrap_or(0))
}

fn kv_of(kv: &KeyValue) -> Result<Kv, Error> {
    let key = kv.key_str().map_err(|e| Error::Etcd {
        doing: "reading a key",
        source: e,
    })?;
    Ok(Kv {
        key: key.to_string(),
        value: kv.value().to_vec(),
        mod_revision: u64::try_from(kv.mod_revision()).unwrap_or(0),
    })
}

/// An etcd error, sorted: a member that could not be reached or has no leader (another try
/// may do) apart from one that refused the request.
fn sorted(doing: &'static str, e: etcd_client::Error) -> Error {
    use etcd_client::Error as E;
    let unreachable = match &e {
        E::TransportError(_) | E::IoError(_) => true,
        E::GRpcStatus(s) => matches!(
            s.code(),
            tonic::Code::Unavailable | tonic::Code::DeadlineExceeded | tonic::Code::Unknown
        ),
        _ => false,
    };
    if unreachable {
        Error::Unreachable(format!("{doing}: {}", reason(&e)))
    } else {
        Error::Etcd { doing, source: e }
    }
}

/// Whether a member answered that the cluster has no leader (etcd's `ErrNoLeader`, which gRPC
/// carries only as an Unavailable status with this message): an election is under way.
fn no_leader(e: &etcd_client::Error) -> bool {
    matches!(e, etcd_client::Error::GRpcStatus(s)
        if s.code() == tonic::Code::Unavailable && s.message().contains("no leader"))
}

/// Why a request found no member, in a line: the status's message and the innermost cause
/// ("tcp connect error: Connection refused (os error 111)"), not the nested debug form.
fn reason(e: &etcd_client::Error) -> String {
    let etcd_client::Error::GRpcStatus(status) = e else {
        return e.to_string();
    };
    let mut why = if status.message().is_empty() {
        status.code().description().to_string()
    } else {
        status.message().to_string()
    };
    let mut innermost = None;
    let mut cause = std::error::Error::source(status);
    while let Some(c) = cause {
        innermost = Some(c);
        cause = c.source();
    }
    if let Some(c) = innermost {
        why = format!("{why}: {c}");
    }
    why
}

impl EtcdClient {
    /// A client for `endpoints` (`host:port` each), `timeout` per request.
    pub(crate) fn new(endpoints: Vec<String>, timeout: Duration) -> EtcdClient {
        let members = endpoints
            .into_iter()
            .map(|endpoint| Member {
                endpoint,
                client: OnceCell::new(),
            })
            .collect();
        EtcdClient {
            members,
            current: AtomicUsize::new(0),
            timeout,
        }
    }

    /// Member `at`'s channel, made the first time (it connects when a request needs it, and
    /// again after the member comes back).
    async fn member(&self, at: usize) -> Result<Client, Error> {
        let member = &self.members[at];
        let client = member
            .client
            .get_or_try_init(|| async {
                // No HTTP/2 pings: the sync's lease renewal every 1.5 s already finds a
                // member that stopped answering, on the channel its watch uses.
                let options = ConnectOptions::new()
                    .with_connect_timeout(self.timeout)
                    .with_require_leader(true);
                Client::connect([member.endpoint.as_str()], Some(options))
                    .await
                    .map_err(|e| sorted("connecting", e))
            })
            .await?;
        Ok(client.clone())
    }

    /// Runs `call` on the member that answered last, then on each other member in turn while
    /// they cannot be reached; each try bounded by the timeout. While a member says the cluster
    /// has no leader, the rounds go on for up to [`ELECTION_WAIT`]; a store that is down fails
    /// after one round.
    async fn call<T, F, Fut>(&self, doing: &'static str, mut call: F) -> Result<T, Error>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        let began = tokio::time::Instant::now();
        loop {
            let start = self.current.load(Ordering::Relaxed);
            let mut failures = Vec::new();
            let mut electing = false;
            for i in 0..self.members.len() {
                let at = (start + i) % self.members.len();
                let endpoint = &self.members[at].endpoint;
                let tried = match self.member(at).await {
                    Ok(client) => match tokio::time::timeout(self.timeout, call(client)).await {
                        Ok(answer) => answer.map_err(|e| {
                            electing |= no_leader(&e);
                            sorted(doing, e)
                        }),
                        Err(_) => Err(Error::Unreachable(format!(
                            "{doing}: no answer within {} ms",
                            self.timeout.as_millis()
                        ))),
                    },
                    Err(e) => Err(e),
                };
                match tried {
                    Ok(answer) => {
                        self.current.store(at, Ordering::Relaxed);
                        return Ok(answer);
                    }
                    Err(Error::Unreachable(why)) => failures.push(format!("{endpoint}: {why}")),
                    Err(e) => return Err(e),
                }
            }
            if !electing || began.elapsed() >= ELECTION_WAIT {
                return Err(Error::Unreachable(failures.join("; ")));
            }
            tracing::debug!(
                doing,
                "etcd has no leader (an election is under way); trying again"
            );
            tokio::time::sleep(ELECTION_ROUND_PAUSE).await;
        }
    }

    /// Every key under `prefix` and the store's revision.
    pub(crate) async fn range_prefix(&self, prefix: &str) -> Result<(u64, Vec<Kv>), Error> {
        let answer = self
            .call("reading a prefix", |mut client| async move {
                let options = GetOptions::new().with_prefix();
                client.get(prefix, Some(options)).await
            })
            .await?;
        let kvs = answer.kvs().iter().map(kv_of).collect::<Result<_, _>>()?;
        Ok((revision_of(answer.header()), kvs))
    }

    /// One key, and the store's revision.
    pub(crate) async fn get(&self, key: &str) -> Result<(u64, Option<Kv>), Error> {
        let answer = self
            .call("reading a key", |mut client| async move {
                client.get(key, None).await
            })
            .await?;
        let kv = answer.kvs().first().map(kv_of).transpose()?;
        Ok((revision_of(answer.header()), kv))
    }

    /// Writes `puts` (key, value) in one transaction; returns the revision it created.
    pub(crate) async fn txn_put(&self, puts: &[(&str, &[u8])]) -> Result<u64, Error> {
        let answer = self
            .call("writing a transaction", |mut client| async move {
                let ops: Vec<TxnOp> = puts.iter().map(|(k, v)| TxnOp::put(*k, *v, None)).collect();
                client.txn(Txn::new().and_then(ops)).await
            })
            .await?;
        Ok(revision_of(answer.header()))
    }

    /// Writes `key` attached to lease `lease` (it disappears when the lease expires).
    pub(crate) async fn put_leased(
        &self,
        key: &str,
        value: &[u8],
        lease: i64,
    ) -> Result<u64, Error> {
        let answer = self
            .call("writing a leased key", |mut client| async move {
                let options = PutOptions::new().with_lease(lease);
                client.put(key, value, Some(options)).await
            })
            .await?;
        Ok(revision_of(answer.header()))
    }

    /// A new lease of `ttl` seconds.
    pub(crate) async fn grant(&self, ttl: u64) -> Result<i64, Error> {
        let ttl = i64::try_from(ttl).unwrap_or(i64::MAX);
        let answer = self
            .call("granting a lease", |mut client| async move {
                client.lease_grant(ttl, None).await
            })
            .await?;
        Ok(answer.id())
    }

    /// Renews lease `id`; returns its remaining TTL (0: it had expired).
    pub(crate) async fn keepalive(&self, id: i64) -> Result<u64, Error> {
        let answer = self
            .call("renewing the lease", |mut client| async move {
                let (mut keeper, mut answers) = client.lease_keep_alive(id).await?;
                keeper.keep_alive().await?;
                answers.message().await
            })
            .await?;
        Ok(answer.map_or(0, |a| u64::try_from(a.ttl()).unwrap_or(0)))
    }

    /// Ends lease `id` now (its keys disappear at once).
    pub(crate) async fn revoke(&self, id: i64) -> Result<(), Error> {
        self.call("revoking the lease", |mut client| async move {
            client.lease_revoke(id).await
        })
        .await
        .map(|_| ())
    }

    /// Watches every key under `prefix` from revision `from`.
    pub(crate) async fn watch(&self, prefix: &str, from: u64) -> Result<Watch, Error> {
        let from = i64::try_from(from).unwrap_or(i64::MAX);
        let stream = self
            .call("opening a watch", |mut client| async move {
                let options = WatchOptions::new().with_prefix().with_start_revision(from);
                client.watch(prefix, Some(options)).await
            })
            .await?;
        Ok(Watch { stream })
    }
}

/// An open watch.
pub(crate) struct Watch {
    stream: WatchStream,
}

impl Watch {
    /// The next message; `None` when the member closed the stream.
    pub(crate) async fn next(&mut self) -> Result<Option<WatchMessage>, Error> {
        let Some(answer) = self
            .stream
            .message()
            .await
            .map_err(|e| sorted("watching", e))?
        else {
            return Ok(None);
        };
        let mut message = WatchMessage {
            revision: revision_of(answer.header()),
            canceled: answer.canceled(),
            events: Vec::with_capacity(answer.events().len()),
        };
        for event in answer.events() {
            let Some(kv) = event.kv() else { continue };
            let kv = kv_of(kv)?;
            message.events.push(match event.event_type() {
                EventType::Put => Event::Put(kv),
                EventType::Delete => Event::Delete(kv.key),
            });
        }
        Ok(Some(message))
    }
}
