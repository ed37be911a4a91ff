//! Getting a server connection for a session from the pool.

use crate::frontend::PgFrontend;
use crate::login::Login;
use sluice_core::config::Priority;
use sluice_core::pool::PoolOptions;
use sluice_core::util::EventClock;
use sluice_pgsql_backend::Error as PgError;
use sluice_pgsql_backend::{PgCheckout, PgPooled, pool_options};

/// Whether a checkout had to wait (for a connection to open or a slot to free).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Waited {
    /// An idle connection was taken at once.
    No,
    /// The pool opened a connection or queued the request.
    Yes,
}

/// Gets a server connection for the session.
pub(crate) async fn checkout(
    fe: &PgFrontend,
    rt: &sluice_core::runtime::RuntimeConfig,
    l: &Login,
    hg: u32,
    session: u64,
    priority: Priority,
) -> Result<PgPooled, PgError> {
    let now = std::time::Instant::now();
    checkout_at(fe, rt, l, (hg, session, priority), now).await.0
}

/// Gets a server connection for a transaction of the session, timed from the statement's
/// `clock`: the wait goes into `stats_pgsql_global`'s wait time (none when an idle connection
/// was taken at once), and a checkout that waited starts the statement's clock again.
pub(crate) async fn timed_checkout(
    fe: &PgFrontend,
    rt: &sluice_core::runtime::RuntimeConfig,
    l: &Login,
    (hg, session, priority): (u32, u64, Priority),
    clock: &mut EventClock,
) -> Result<PgPooled, PgError> {
    let waiting = clock.now();
    let (checked_out, waited) = checkout_at(fe, rt, l, (hg, session, priority), waiting).await;
    let waited = match waited {
        Waited::No => 0,
        Waited::Yes => {
            *clock = EventClock::at(std::time::Instant::now());
            let waited = clock.now().saturating_duration_since(waiting);
            u64::try_from(waited.as_micros()).unwrap_or(u64::MAX)
        }
    };
    let hg = i64::from(hg);
    fe.stats.wait_us.add(hg, waited);
    fe.stats.transactions.add(hg, 1);
    checked_out
}

/// Gets a server connection for the session, `now` being the caller's clock reading, and says
/// whether it had to wait.
async fn checkout_at(
    fe: &PgFrontend,
    rt: &sluice_core::runtime::RuntimeConfig,
    l: &Login,
    (hg, session, priority): (u32, u64, Priority),
    now: std::time::Instant,
) -> (Result<PgPooled, PgError>, Waited) {
    let servers = rt
        .pgsql
        .hostgroups
        .get(&hg)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let req = PgCheckout {
        hostgroup: hg,
        servers,
        user: &l.user.username,
        secret: &l.secret,
        database: &l.database,
        session: Some(session),
        options: PoolOptions {
            worker: l.worker,
            config: Some(&fe.config),
            priority,
            ..pool_options(&rt.pgsql.variables)
        },
    };
    match fe.pool.try_checkout_idle_at(&req, now) {
        Some(c) => (Ok(c), Waited::No),
        // Boxed: opening a connection or waiting for a slot is rare next to reusing an idle
        // one, and its retry state would otherwise be part of every step's future, which the
        // session moves into its reused block for every message.
        None => (Box::pin(fe.pool.checkout(&req)).await, Waited::Yes),
    }
}
