//! The listener task: one server connection per writer hostgroup and database that LISTENs to
//! every channel some session listens to, and hands each NotificationResponse to those
//! sessions' mailboxes. Lost (terminated, server down) or left behind by a failover, it is
//! opened again and every channel listened to again; sessions waiting for a new channel hear
//! only once the server's own LISTEN completed.

use super::hub::{ListenHub, Listener, ListenerKey, ListenerLogin, Refused};
use super::mailbox::{ChannelCounters, Mail};
use super::statement::quoted;
use crate::frontend::PgFrontend;
use bytes::Bytes;
use sluice_core::config::ServerStatus;
use sluice_core::metrics::NotifyStats;
use sluice_core::runtime::ConfigHandle;
use sluice_core::util::lock;
use sluice_pgsql_backend::{PgCheckout, PgPool, PgPooled};
use sluice_pgsql_backend::{PgConn, query_message};
use sluice_pgsql_proto::frame::{complete_len, parse_error};
use sluice_pgsql_proto::tag::server;
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// How often the task checks that its server is still an ONLINE writer.
const WRITER_CHECK: Duration = Duration::from_secs(1);
/// The first pause before opening a lost connection again; doubled up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(200);
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// What the task needs, owned.
struct Ctx {
    pool: Arc<PgPool>,
    config: ConfigHandle,
    signals: Arc<crate::pids::SessionSignals>,
    stats: Arc<NotifyStats>,
    shutdown: CancellationToken,
    hub: Arc<ListenHub>,
    login: ListenerLogin,
}

/// Starts the task of a new listener.
pub(crate) fn spawn(fe: &PgFrontend, hub: Arc<ListenHub>, l: Arc<Listener>, login: ListenerLogin) {
    let ctx = Ctx {
        pool: fe.pool.clone(),
        config: fe.config.clone(),
        signals: fe.cancels.clone(),
        stats: fe.stats.notify.clone(),
        shutdown: fe.shutdown.clone(),
        hub,
        login,
    };
    fe.tasks.spawn(run(ctx, l));
}

/// Why a listener connection's service ended.
enum Ended {
    /// Nothing is listened to any more.
    Idle,
    /// Sluice stops.
    Shutdown,
    /// The connection broke or its server is no longer the writer.
    Lost(String),
}

async fn run(ctx: Ctx, l: Arc<Listener>) {
    let ListenerKey {
        hostgroup,
        database,
    } = l.key.clone();
    let mut lost: Option<String> = None;
    let mut pause = FIRST_PAUSE;
    loop {
        if ctx.shutdown.is_cancelled() || ctx.hub.retire_if_idle(&l) {
            break;
        }
        let mut conn = match open(&ctx, &l.key).await {
            Ok(c) => c,
            Err(e) => {
                warn!(hostgroup, database = %database, "pgsql: the LISTEN connection could not be opened ({e}); new LISTENs fail, retrying in {pause:?}");
                lock(&l.status).last_error = Some(e.to_string());
                fail_waiters(
                    &l,
                    &format!("the listener connection could not be opened: {e}"),
                );
                if sleep_unless_shutdown(&ctx, pause).await {
                    break;
                }
                pause = (pause * 2).min(MAX_PAUSE);
                continue;
            }
        };
        pause = FIRST_PAUSE;
        let c = conn.conn();
        {
            let mut s = lock(&l.status);
            s.server = Some(c.server.clone());
            s.backend_pid = Some(c.key.0);
            if lost.is_some() {
                s.reconnects += 1;
                ctx.stats.reconnects.add(1);
            }
        }
        info!(hostgroup, database = %database, server = %c.server, backend_pid = c.key.0, "pgsql: LISTEN connection open");
        let ended = serve(&ctx, &l, c, lost.take()).await;
        drop(conn);
        for ch in lock(&l.channels).values_mut() {
            ch.live = false;
        }
        {
            let mut s = lock(&l.status);
            s.server = None;
            s.backend_pid = None;
        }
        match ended {
            Ended::Idle => {}
            Ended::Shutdown => break,
            Ended::Lost(why) => {
                warn!(hostgroup, database = %database, "pgsql: the LISTEN connection was lost ({why}); opening it again and listening to every channel again");
                lock(&l.status).last_error = Some(why.clone());
                lost = Some(why);
                if sleep_unless_shutdown(&ctx, FIRST_PAUSE).await {
                    break;
                }
            }
        }
    }
}

/// Sleeps `d`; true when Sluice stops meanwhile.
async fn sleep_unless_shutdown(ctx: &Ctx, d: Duration) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => false,
        _ = ctx.shutdown.cancelled() => true,
    }
}

/// A server connection of the writer hostgroup, accounted in the pool.
async fn open(ctx: &Ctx, key: &ListenerKey) -> Result<PgPooled, sluice_pgsql_backend::Error> {
    let rt = ctx.config.load();
    let servers = rt
        .pgsql
        .hostgroups
        .get(&key.hostgroup)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let req = PgCheckout {
        hostgroup: key.hostgroup,
        servers,
        user: &ctx.login.user,
        secret: &ctx.login.secret,
        database: &key.database,
        session: None,
        options: sluice_core::pool::PoolOptions {
            worker: ctx.login.worker,
            config: Some(&ctx.config),
            ..sluice_pgsql_backend::pool_options(&rt.pgsql.variables)
        },
    };
    ctx.pool.checkout(&req).await
}

/// Tells every session waiting for a channel to become live that it will not.
fn fail_waiters(l: &Listener, why: &str) {
    let refused = Refused {
        code: "08006".into(),
        message: why.into(),
    };
    for ch in lock(&l.channels).values_mut() {
        for w in ch.waiters.drain(..) {
            let _ = w.send(Err(refused.clone()));
        }
    }
}

/// One LISTEN/UNLISTEN round trip in flight.
struct Batch {
    listen: Vec<Arc<str>>,
    unlisten: Vec<Arc<str>>,
    failed: Option<Refused>,
    /// Sessions waiting until every notification committed before now was fanned out.
    syncs: Vec<oneshot::Sender<()>>,
}

/// Serves one open connection until it is lost, idle, or Sluice stops.
async fn serve(ctx: &Ctx, l: &Listener, conn: &mut PgConn, lost: Option<String>) -> Ended {
    let mut on_server: HashSet<Arc<str>> = HashSet::new();
    let mut inflight: VecDeque<Batch> = VecDeque::new();
    let mut reset = lost.filter(|_| !reset_channel(ctx).is_empty());
    let mut check = tokio::time::interval(WRITER_CHECK);
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let batch = {
            let channels = lock(&l.channels);
            let syncs = std::mem::take(&mut *lock(&l.syncs));
            let listen: Vec<Arc<str>> = (channels.values())
                .filter(|c| !on_server.contains(&c.name))
                .map(|c| c.name.clone())
                .collect();
            let unlisten: Vec<Arc<str>> = (on_server.iter())
                .filter(|c| !channels.contains_key(*c))
                .cloned()
                .collect();
            if listen.is_empty()
                && unlisten.is_empty()
                && inflight.is_empty()
                && channels.is_empty()
            {
                return Ended::Idle;
            }
            (!listen.is_empty() || !unlisten.is_empty() || !syncs.is_empty()).then_some(Batch {
                listen,
                unlisten,
                failed: None,
                syncs,
            })
        };
        if let Some(b) = batch {
            if let Err(e) = send(conn, &b).await {
                return Ended::Lost(e.to_string());
            }
            ctx.stats
                .channels_changed(b.listen.len() as i64 - b.unlisten.len() as i64);
            on_server.extend(b.listen.iter().cloned());
            for c in &b.unlisten {
                on_server.remove(c);
            }
            inflight.push_back(b);
        } else if inflight.is_empty()
            && let Some(why) = reset.take()
        {
            send_reset(ctx, l, &why);
        }
        tokio::select! {
            _ = l.wake.notified() => {}
            r = conn.reader.fill(&mut conn.stream) => {
                if let Err(e) = r {
                    ctx.stats.channels_changed(-(on_server.len() as i64));
                    return Ended::Lost(e.to_string());
                }
                if let Err(e) = frames(ctx, l, conn, &mut inflight, &mut on_server) {
                    ctx.stats.channels_changed(-(on_server.len() as i64));
                    return Ended::Lost(e.to_string());
                }
            }
            _ = check.tick() => {
                if let Some(why) = writer_moved(ctx, l, conn) {
                    ctx.stats.channels_changed(-(on_server.len() as i64));
                    return Ended::Lost(why);
                }
            }
            _ = ctx.shutdown.cancelled() => return Ended::Shutdown,
        }
    }
}

fn reset_channel(ctx: &Ctx) -> String {
    ctx.config
        .load()
        .pgsql
        .variables
        .listen
        .reset_channel
        .clone()
}

/// One Query with the batch's LISTENs and UNLISTENs (PostgreSQL runs it as one implicit
/// transaction: all or nothing); empty for a sync alone. Before any ReadyForQuery PostgreSQL
/// sends the notifications it was signalled about, so the reply to it comes after every
/// notification committed before it was sent.
async fn send(conn: &mut PgConn, b: &Batch) -> std::io::Result<()> {
    let mut sql = String::new();
    for c in &b.listen {
        sql.push_str(&format!("LISTEN {};", quoted(c)));
    }
    for c in &b.unlisten {
        sql.push_str(&format!("UNLISTEN {};", quoted(c)));
    }
    let mut out = Vec::with_capacity(sql.len() + 6);
    query_message(&sql, &mut out);
    conn.stream.write_all(&out).await
}

/// Handles every complete frame read: notifications fanned out, batches settled.
fn frames(
    ctx: &Ctx,
    l: &Listener,
    conn: &mut PgConn,
    inflight: &mut VecDeque<Batch>,
    on_server: &mut HashSet<Arc<str>>,
) -> Result<(), sluice_pgsql_proto::Error> {
    while let Some(n) = complete_len(&conn.reader.buf)? {
        let mut f = conn.reader.buf.split_to(n);
        match f[0] {
            server::NOTIFICATION_RESPONSE => {
                crate::pids::rewrite_notify_pid(&ctx.signals, &conn.server, &mut f);
                fan_out(ctx, l, f.freeze());
            }
            server::ERROR_RESPONSE => {
                if let Some(b) = inflight.front_mut() {
                    let (code, message) = parse_error(sluice_pgsql_proto::message::body(&f));
                    b.failed = Some(Refused { code, message });
                }
            }
            server::READY_FOR_QUERY => {
                if let Some(b) = inflight.pop_front() {
                    settle(ctx, l, b, on_server);
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// A batch's reply is complete: its channels are live, or their waiters hear why not.
fn settle(ctx: &Ctx, l: &Listener, b: Batch, on_server: &mut HashSet<Arc<str>>) {
    for s in b.syncs {
        let _ = s.send(());
    }
    let mut channels = lock(&l.channels);
    match b.failed {
        None => {
            for name in &b.listen {
                if let Some(ch) = channels.get_mut(name) {
                    ch.live = true;
                    for w in ch.waiters.drain(..) {
                        let _ = w.send(Ok(()));
                    }
                }
            }
        }
        Some(refused) => {
            warn!(hostgroup = l.key.hostgroup, database = %l.key.database, code = %refused.code, "pgsql: the server refused LISTEN on {:?}: {}; the sessions asking are told", b.listen, refused.message);
            ctx.stats
                .channels_changed(b.unlisten.len() as i64 - b.listen.len() as i64);
            for name in &b.listen {
                on_server.remove(name);
                if let Some(mut ch) = channels.remove(name) {
                    for w in ch.waiters.drain(..) {
                        let _ = w.send(Err(refused.clone()));
                    }
                }
            }
            // Rolled back with the rest: still listened to on the server.
            on_server.extend(b.unlisten.iter().cloned());
        }
    }
}

/// The channel of a NotificationResponse frame (pid, channel, payload).
fn channel_of(frame: &[u8]) -> Option<&[u8]> {
    let rest = frame.get(9..)?;
    let end = memchr::memchr(0, rest)?;
    Some(&rest[..end])
}

/// Queues one notification for every session listening to its channel.
fn fan_out(ctx: &Ctx, l: &Listener, frame: Bytes) {
    ctx.stats.received.add(1);
    let Some(name) = channel_of(&frame).and_then(|c| std::str::from_utf8(c).ok()) else {
        return;
    };
    let arrived = Instant::now();
    let channels = lock(&l.channels);
    let Some(ch) = channels.get(name) else {
        return;
    };
    ch.counters.received.fetch_add(1, Relaxed);
    for mailbox in ch.subscribers.values() {
        let mail = Mail {
            frame: frame.clone(),
            arrived,
            counters: ch.counters.clone(),
            channel: ch.name.clone(),
        };
        if !mailbox.push(mail) {
            ctx.stats.dropped.add(1);
        }
    }
}

/// After a reconnect: every listening session gets a notification on the reset channel, its
/// payload the reason, so it can resynchronise what it may have missed.
fn send_reset(ctx: &Ctx, l: &Listener, why: &str) {
    let channel = reset_channel(ctx);
    let frame = Bytes::from(notification(0, &channel, why));
    let counters = Arc::new(ChannelCounters::default());
    let name: Arc<str> = channel.as_str().into();
    let mut told = HashSet::new();
    let arrived = Instant::now();
    for ch in lock(&l.channels).values() {
        for (id, mailbox) in &ch.subscribers {
            if told.insert(*id) {
                mailbox.push(Mail {
                    frame: frame.clone(),
                    arrived,
                    counters: counters.clone(),
                    channel: name.clone(),
                });
            }
        }
    }
    info!(hostgroup = l.key.hostgroup, database = %l.key.database, sessions = told.len(), "pgsql: told the listening sessions on '{channel}' that notifications may have been missed ({why})");
}

/// A NotificationResponse frame.
pub(crate) fn notification(pid: u32, channel: &str, payload: &str) -> Vec<u8> {
    let mut body = pid.to_be_bytes().to_vec();
    body.extend_from_slice(channel.as_bytes());
    body.push(0);
    body.extend_from_slice(payload.as_bytes());
    body.push(0);
    sluice_pgsql_proto::frame::message(server::NOTIFICATION_RESPONSE, &body)
}

/// Why the connection's server no longer serves as the writer, if it does not.
fn writer_moved(ctx: &Ctx, l: &Listener, conn: &PgConn) -> Option<String> {
    let rt = ctx.config.load();
    let hg = l.key.hostgroup;
    let online = rt.pgsql.hostgroups.get(&hg).is_some_and(|servers| {
        servers.iter().any(|s| {
            s.status == ServerStatus::Online
                && conn.server.as_ref() == format!("{}:{}", s.key.hostname, s.key.port)
        })
    });
    (!online).then(|| {
        format!(
            "{} is no longer an ONLINE server of hostgroup {hg}",
            conn.server
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notification_frame_names_its_channel() {
        let f = notification(7, "jobs", "payload");
        assert_eq!(channel_of(&f), Some(&b"jobs"[..]));
        assert_eq!(channel_of(b"A\0\0\0\x08\0\0\0"), None);
    }
}
