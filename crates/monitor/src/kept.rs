//! The part every kept-connection checker shares: one monitor connection per server, kept
//! between checks, taken out for a check and put back only when the check's statements worked.
//! A backend crate supplies how to open a connection ([`MonitorConnector`]) and writes each
//! check as statements on a [`Kept`] connection; everything else is here.

use super::CheckError;
use super::checker::{CheckFuture, CheckTarget};
use sluice_core::runtime::ServerKey;
use sluice_core::util::lock;
use std::collections::HashMap;
use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// How a backend crate opens a monitor connection.
pub trait MonitorConnector: Send + Sync + 'static {
    /// The connection.
    type Conn: Send + 'static;
    /// What opening one needs (address, account, TLS), read from the target before the check
    /// runs.
    type Params: Send + 'static;
    /// The parameters for `target` (fails when its TLS settings cannot be used).
    fn params(&self, target: &CheckTarget) -> Result<Self::Params, CheckError>;
    /// Opens and logs in a connection.
    fn open(params: &Self::Params) -> impl Future<Output = Result<Self::Conn, CheckError>> + Send;
}

/// Monitor connections kept per server between checks, and the connector that opens them.
/// Cheap to clone (the checks' futures each hold one).
pub struct KeptConnections<M: MonitorConnector> {
    connector: Arc<M>,
    held: Arc<Mutex<HashMap<ServerKey, M::Conn>>>,
}

impl<M: MonitorConnector> Clone for KeptConnections<M> {
    fn clone(&self) -> Self {
        KeptConnections {
            connector: self.connector.clone(),
            held: self.held.clone(),
        }
    }
}

impl<M: MonitorConnector> std::fmt::Debug for KeptConnections<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeptConnections")
            .field("servers", &lock(&self.held).len())
            .finish()
    }
}

impl<M: MonitorConnector> KeptConnections<M> {
    /// No connections yet; `connector` opens them.
    pub fn new(connector: M) -> Self {
        KeptConnections {
            connector: Arc::new(connector),
            held: Arc::default(),
        }
    }

    /// The `connect` check: opens a new connection (not kept); its time in µs.
    pub fn connect_time(&self, target: &CheckTarget) -> CheckFuture<u64> {
        let params = self.connector.params(target);
        Box::pin(async move {
            let params = params?;
            let started = Instant::now();
            M::open(&params).await?;
            Ok(started.elapsed().as_micros() as u64)
        })
    }

    /// Starts a check on `target`'s server: its kept connection taken out now (so two checks
    /// never share one), or the parameters to open one. Call [`Checkout::open`] in the check's
    /// future.
    pub fn checkout(&self, target: &CheckTarget) -> Checkout<M> {
        Checkout {
            params: self.connector.params(target),
            held: lock(&self.held).remove(&target.server),
            server: target.server.clone(),
            kept: self.clone(),
        }
    }

    /// Forgets the connection to `server` (after a failure or a shun).
    pub fn forget(&self, server: &ServerKey) {
        lock(&self.held).remove(server);
    }

    fn put(&self, server: ServerKey, conn: M::Conn) {
        lock(&self.held).insert(server, conn);
    }
}

/// A check's claim on its server's monitor connection, not yet opened.
pub struct Checkout<M: MonitorConnector> {
    params: Result<M::Params, CheckError>,
    held: Option<M::Conn>,
    server: ServerKey,
    kept: KeptConnections<M>,
}

impl<M: MonitorConnector> Checkout<M> {
    /// The kept connection, or a new one.
    pub async fn open(self) -> Result<Kept<M>, CheckError> {
        let params = self.params?;
        let conn = match self.held {
            Some(conn) => conn,
            None => M::open(&params).await?,
        };
        Ok(Kept {
            conn,
            server: self.server,
            kept: self.kept,
        })
    }
}

/// A monitor connection in use by one check. [`Kept::keep`] puts it back for the next check;
/// dropped without it (a statement failed, the check's future was dropped), it is closed and
/// the next check opens a new one.
pub struct Kept<M: MonitorConnector> {
    conn: M::Conn,
    server: ServerKey,
    kept: KeptConnections<M>,
}

impl<M: MonitorConnector> Kept<M> {
    /// The statements worked: keep the connection for the next check.
    pub fn keep(self) {
        self.kept.put(self.server, self.conn);
    }
}

impl<M: MonitorConnector> Deref for Kept<M> {
    type Target = M::Conn;
    fn deref(&self) -> &M::Conn {
        &self.conn
    }
}

impl<M: MonitorConnector> DerefMut for Kept<M> {
    fn deref_mut(&mut self) -> &mut M::Conn {
        &mut self.conn
    }
}

/// A number a check read as text: its trimmed value parsed, or `Unreadable` naming `what`.
pub fn parse_number<T: std::str::FromStr>(what: &str, value: &str) -> Result<T, CheckError> {
    value
        .trim()
        .parse()
        .map_err(|_| CheckError::Unreadable(format!("{what} {value:?} is not a number")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    /// A connector counting the connections it opened; a connection is its number.
    #[derive(Default)]
    struct Counting(Arc<AtomicU32>);

    impl MonitorConnector for Counting {
        type Conn = u32;
        type Params = Arc<AtomicU32>;
        fn params(&self, t: &CheckTarget) -> Result<Self::Params, CheckError> {
            if t.use_ssl {
                return Err(CheckError::Unsupported("no TLS here"));
            }
            Ok(self.0.clone())
        }
        async fn open(opened: &Self::Params) -> Result<u32, CheckError> {
            Ok(opened.fetch_add(1, Ordering::Relaxed) + 1)
        }
    }

    fn target(port: u16) -> CheckTarget {
        CheckTarget {
            server: ServerKey {
                hostname: "127.0.0.1".into(),
                port,
            },
            username: "monitor".into(),
            password: "monitor".into(),
            dbname: String::new(),
            check_type: String::new(),
            timeout: Duration::from_secs(1),
            heartbeat_table: String::new(),
            use_ssl: false,
            ssl_params: Vec::new(),
        }
    }

    #[tokio::test]
    async fn a_connection_is_reused_only_after_a_check_kept_it() {
        let kept = KeptConnections::new(Counting::default());
        let a = target(1);
        let first = kept.checkout(&a).open().await.expect("opens");
        assert_eq!(*first, 1);
        first.keep();
        let again = kept.checkout(&a).open().await.expect("reuses");
        assert_eq!(*again, 1, "kept after the first check");
        drop(again); // a failed check: not kept
        let fresh = kept.checkout(&a).open().await.expect("opens anew");
        assert_eq!(*fresh, 2);
        fresh.keep();
        let other = kept.checkout(&target(2)).open().await.expect("per server");
        assert_eq!(*other, 3);
        kept.forget(&a.server);
        assert_eq!(*kept.checkout(&a).open().await.expect("forgotten"), 4);
    }

    #[tokio::test]
    async fn two_checks_of_one_server_never_share_a_connection() {
        let kept = KeptConnections::new(Counting::default());
        let a = target(1);
        kept.checkout(&a).open().await.expect("opens").keep();
        let one = kept.checkout(&a);
        let two = kept.checkout(&a);
        let (one, two) = (
            one.open().await.expect("one"),
            two.open().await.expect("two"),
        );
        assert_ne!(*one, *two);
    }

    #[tokio::test]
    async fn unusable_parameters_fail_the_check_before_connecting() {
        let kept = KeptConnections::new(Counting::default());
        let mut tls = target(1);
        tls.use_ssl = true;
        assert!(kept.checkout(&tls).open().await.is_err());
        assert!(kept.connect_time(&tls).await.is_err());
        assert!(kept.connect_time(&target(1)).await.is_ok());
    }

    #[test]
    fn numbers_read_as_text_parse_or_say_what_they_were() {
        assert_eq!(parse_number::<i64>("lag", " 42 ").ok(), Some(42));
        let e = parse_number::<i64>("lag", "x").expect_err("not a number");
        assert_eq!(
            e.to_string(),
            CheckError::Unreadable("lag \"x\" is not a number".into()).to_string()
        );
    }
}
