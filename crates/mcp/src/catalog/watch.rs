//! DDL seen in the data path marks the catalog stale: [`DdlWatcher`] is the frontends'
//! statement hook (it never changes what a statement does); it notes `CREATE`, `ALTER`,
//! `DROP` and `RENAME` of tables and views, and [`refresh`] marks the catalog's entries stale
//! and harvests them again. On PostgreSQL the hook sees the statement that begins each
//! transaction: DDL inside a longer transaction is caught at the next harvest.

use crate::auth::{Caller, Endpoint};
use crate::readonly::lexer::{Token, tokenize};
use crate::service::{CallTrace, McpService};
use crate::targets::protocol_name;
use sluice_core::Protocol;
use sluice_core::query::{Dialect, HookDecision, HookStatement, StatementHook};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Events waiting for the refresher; beyond it new ones are dropped (the next harvest
/// catches up) and counted.
const QUEUE: usize = 1024;

/// One table or view a statement changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DdlEvent {
    /// The frontend it came through.
    pub protocol: Protocol,
    /// Its schema when the statement names it, else the session's (MySQL only).
    pub schema: Option<String>,
    /// Its name.
    pub table: String,
}

/// The frontends' statement hook that notes DDL for the catalog.
pub struct DdlWatcher {
    protocol: Protocol,
    tx: mpsc::Sender<DdlEvent>,
}

impl std::fmt::Debug for DdlWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DdlWatcher")
            .field("protocol", &self.protocol)
            .finish()
    }
}

impl DdlWatcher {
    /// A watcher for `protocol`'s frontend, and the receiving end for [`refresh`].
    pub(crate) fn pair() -> (Arc<DdlWatcher>, Arc<DdlWatcher>, mpsc::Receiver<DdlEvent>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        (
            Arc::new(DdlWatcher {
                protocol: Protocol::Mysql,
                tx: tx.clone(),
            }),
            Arc::new(DdlWatcher {
                protocol: Protocol::Pgsql,
                tx,
            }),
            rx,
        )
    }
}

/// Whether `sql` starts with a DDL keyword: the test every statement of the data path takes,
/// without allocating.
fn starts_ddl(sql: &str) -> bool {
    let t = sql.trim_start().as_bytes();
    [b"CREATE".as_slice(), b"ALTER", b"DROP", b"RENAME"]
        .iter()
        .any(|k| t.get(..k.len()).is_some_and(|p| p.eq_ignore_ascii_case(k)))
}

/// The tables and views `sql` creates, alters, drops or renames: (schema if named, name).
pub(crate) fn changed_objects(sql: &str, dialect: Dialect) -> Vec<(Option<String>, String)> {
    let Ok(tokens) = tokenize(sql, dialect) else {
        return Vec::new();
    };
    let word = |i: usize| match tokens.get(i) {
        Some(Token::Word(w)) => Some(w.as_str()),
        _ => None,
    };
    let name_at = |i: usize| -> Option<(Option<String>, String, usize)> {
        let part = |i: usize| match tokens.get(i) {
            Some(Token::Word(w)) => Some(w.to_ascii_lowercase()),
            Some(Token::Quoted(q)) => Some(q.clone()),
            _ => None,
        };
        let first = part(i)?;
        if tokens.get(i + 1) == Some(&Token::Punct(".")) {
            Some((Some(first), part(i + 2)?, i + 3))
        } else {
            Some((None, first, i + 1))
        }
    };
    let mut i = 1;
    let verb = word(0).unwrap_or("");
    // Modifiers before the object word.
    while matches!(word(i), Some("OR" | "REPLACE" | "UNLOGGED" | "ONLY")) {
        i += 1;
    }
    if matches!(word(i), Some("TEMPORARY" | "TEMP")) {
        return Vec::new();
    }
    if !matches!(word(i), Some("TABLE" | "VIEW")) {
        return Vec::new();
    }
    i += 1;
    while matches!(word(i), Some("IF" | "NOT" | "EXISTS" | "ONLY")) {
        i += 1;
    }
    let mut out = Vec::new();
    while let Some((schema, name, next)) = name_at(i) {
        out.push((schema, name));
        i = next;
        match (verb, tokens.get(i)) {
            ("RENAME", Some(Token::Word(w))) if w == "TO" => i += 1,
            (_, Some(Token::Punct(","))) if verb != "CREATE" && verb != "ALTER" => i += 1,
            ("ALTER", Some(Token::Word(w))) if w == "RENAME" => {
                // ALTER TABLE a RENAME TO b: the new name too.
                if matches!(tokens.get(i + 1), Some(Token::Word(t)) if t == "TO") {
                    i += 2;
                } else {
                    break;
                }
            }
            _ => break,
        }
    }
    out
}

impl StatementHook for DdlWatcher {
    fn on_statement(&self, stmt: &HookStatement<'_>) -> HookDecision {
        if starts_ddl(stmt.sql) {
            let dialect = match self.protocol {
                Protocol::Mysql => Dialect::Mysql,
                Protocol::Pgsql => Dialect::Pgsql,
            };
            for (schema, table) in changed_objects(stmt.sql, dialect) {
                let schema = schema.or_else(|| {
                    (self.protocol == Protocol::Mysql && !stmt.schema.is_empty())
                        .then(|| stmt.schema.to_string())
                });
                let event = DdlEvent {
                    protocol: self.protocol,
                    schema,
                    table,
                };
                if self.tx.try_send(event).is_err() {
                    tracing::debug!(
                        "MCP catalog: DDL events queue full; the next harvest catches up"
                    );
                }
            }
        }
        HookDecision::Continue
    }
}

/// Marks the catalog's entries stale and harvests them again, for each DDL event, until
/// `shutdown`.
pub(crate) async fn refresh(
    svc: Arc<McpService>,
    mut rx: mpsc::Receiver<DdlEvent>,
    shutdown: CancellationToken,
) {
    let caller = Caller {
        name: "catalog-refresh".into(),
        user: None,
        endpoint: Endpoint::Query,
        peer: std::net::IpAddr::from([127, 0, 0, 1]),
    };
    loop {
        let first = tokio::select! {
            e = rx.recv() => match e { Some(e) => e, None => return },
            _ = shutdown.cancelled() => return,
        };
        // The DDL runs after the hook saw it: give it a moment, and batch what follows.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut batch = vec![first];
        while let Ok(e) = rx.try_recv() {
            if !batch.contains(&e) {
                batch.push(e);
            }
        }
        let Some(store) = svc.catalog_if_open() else {
            continue;
        };
        for e in batch {
            let rt = svc.config.load();
            let ids: Vec<String> = crate::targets::all(&rt)
                .into_iter()
                .filter(|t| t.protocol == e.protocol)
                .map(|t| t.id)
                .collect();
            let mut targets: Vec<(String, String)> = Vec::new();
            for id in &ids {
                match store.mark_stale(id, e.schema.as_deref(), &e.table).await {
                    Ok(marked) => targets.extend(marked.into_iter().map(|(t, s, _)| (t, s))),
                    Err(err) => tracing::warn!("MCP catalog: cannot mark {} stale: {err}", e.table),
                }
            }
            if let Some(schema) = &e.schema
                && let Ok(covering) = store.targets_with_schema(schema).await
            {
                for t in covering.into_iter().filter(|t| ids.contains(t)) {
                    if !targets.iter().any(|(id, s)| *id == t && s == schema) {
                        targets.push((t, schema.clone()));
                    }
                }
            }
            for (target_id, schema) in targets {
                let Ok(target) = svc.target(&rt, &caller, Some(&target_id)) else {
                    continue;
                };
                if target.protocol != e.protocol {
                    continue;
                }
                let cancel = CancellationToken::new();
                let cx = crate::tools::Cx {
                    svc: &svc,
                    caller: &caller,
                    cancel: &cancel,
                };
                let r = harvest_until_changed(cx, store, &target, &schema, &e.table).await;
                match r {
                    Ok(()) => tracing::info!(
                        target = %target_id,
                        protocol = protocol_name(e.protocol),
                        "MCP catalog: {schema}.{} changed in the data path; harvested again",
                        e.table
                    ),
                    Err(err) => tracing::warn!(
                        target = %target_id,
                        "MCP catalog: {schema}.{} changed; harvesting it again failed: {err}",
                        e.table
                    ),
                }
            }
        }
    }
}

/// Harvests one table again until its entry differs from what the catalog held (the target
/// is a replica: the DDL may reach it a moment later), at most [`HARVEST_TRIES`] times a
/// second apart.
async fn harvest_until_changed(
    cx: crate::tools::Cx<'_>,
    store: &crate::catalog::Store,
    target: &crate::targets::Target,
    schema: &str,
    table: &str,
) -> Result<(), crate::Error> {
    let before = store
        .object(&target.id, schema, table)
        .await?
        .map(|(d, _)| d);
    for attempt in 1..=HARVEST_TRIES {
        let mut trace = CallTrace::default();
        crate::tools::harvest_into_catalog(cx, target, schema, table, &mut trace).await?;
        let now = store
            .object(&target.id, schema, table)
            .await?
            .map(|(d, _)| d);
        if now != before || attempt == HARVEST_TRIES {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Ok(())
}

/// Harvests of one changed table before the catalog takes the target's answer as final.
const HARVEST_TRIES: u32 = 10;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ddl_statements_name_what_they_change() {
        let my = |s: &str| changed_objects(s, Dialect::Mysql);
        assert_eq!(
            my("CREATE TABLE IF NOT EXISTS shop.t (a int)"),
            [(Some("shop".into()), "t".into())]
        );
        assert_eq!(
            my("alter table `Orders` add column x int"),
            [(None, "Orders".into())]
        );
        assert_eq!(
            my("DROP TABLE IF EXISTS a, shop.b"),
            [(None, "a".into()), (Some("shop".into()), "b".into())]
        );
        assert_eq!(
            my("RENAME TABLE a TO b"),
            [(None, "a".into()), (None, "b".into())]
        );
        assert!(my("CREATE TEMPORARY TABLE t (a int)").is_empty());
        assert!(my("CREATE INDEX i ON t (a)").is_empty());
        let pg = changed_objects("CREATE OR REPLACE VIEW s.v AS SELECT 1", Dialect::Pgsql);
        assert_eq!(pg, [(Some("s".into()), "v".into())]);
        let pg = changed_objects("ALTER TABLE s.a RENAME TO b", Dialect::Pgsql);
        assert_eq!(pg, [(Some("s".into()), "a".into()), (None, "b".into())]);
        assert!(starts_ddl("  drop table x") && !starts_ddl("SELECT 1"));
    }
}
