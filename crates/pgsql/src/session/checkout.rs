//! Getting a server connection for a session from the pool.

use crate::frontend::PgFrontend;
use crate::login::Login;
use sluice_core::config::Priority;
use sluice_core::pool::PoolOptions;
use sluice_pgsql_backend::Error as PgError;
use sluice_pgsql_backend::{PgCheckout, PgPooled, pool_options};

/// Gets a server connection for the session.
pub(crate) async fn checkout(
    fe: &PgFrontend,
    rt: &sluice_core::runtime::RuntimeConfig,
    l: &Login,
    hg: u32,
    session: u64,
    priority: Priority,
) -> Result<PgPooled, PgError> {
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
    match fe.pool.try_checkout_idle(&req) {
        Some(c) => Ok(c),
        // Boxed: opening a connection or waiting for a slot is rare next to reusing an idle
        // one, and its retry state would otherwise be part of every step's future, which the
        // session moves into its reused block for every message.
        None => Box::pin(fe.pool.checkout(&req)).await,
    }
}
