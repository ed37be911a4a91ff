//! The discovery catalog's tools (ProxySQL 4.0's names): `discovery.run_static` harvests a
//! target's schemas into the catalog with declared and inferred relationships; the
//! `catalog.*` tools search and read it; `catalog.save_template` / `catalog.search_templates`
//! keep working SQL for a question (the NL2SQL reuse loop). The run id is optional: the
//! catalog keeps the latest harvest of each object.

use super::args::TableDescription;
use super::catalog_args::*;
use super::harvest::read_tables;
use super::query::{Cx, discovery_target, internal, recorded};
use super::sql_text::literal;
use crate::auth::Caller;
use crate::catalog::{Harvested, Relationship, SearchMode, Template};
use crate::error::Error;
use crate::readonly;
use crate::service::{CallTrace, McpService};
use crate::targets::Target;
use serde::Serialize;
use serde_json::Value;
use sluice_core::Protocol;
use sluice_core::query::Dialect;
use tokio_util::sync::CancellationToken;

fn to_value<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

fn split_key(key: &str) -> Result<(&str, &str), Error> {
    key.split_once('.')
        .filter(|(s, t)| !s.is_empty() && !t.is_empty())
        .ok_or_else(|| Error::Arguments(format!("object_key {key:?} is schema.table")))
}

/// A harvested table as the catalog stores it, with declared keys; inferred ones are added
/// by [`infer`].
fn harvested(t: &TableDescription) -> Harvested {
    Harvested {
        schema: t.schema.clone(),
        name: t.table.clone(),
        kind: t.kind.clone(),
        comment: t.comment.clone().unwrap_or_default(),
        // Column names and comments are both searched.
        columns: t
            .columns
            .iter()
            .map(|c| match &c.comment {
                Some(comment) => format!("{} {comment}", c.name),
                None => c.name.clone(),
            })
            .collect(),
        definition: to_value(t),
        relationships: t
            .foreign_keys
            .iter()
            .map(|f| Relationship {
                name: f.name.clone(),
                columns: f.columns.clone(),
                references_table: f.references_table.clone(),
                references_columns: f.references_columns.clone(),
                kind: "foreign_key".into(),
                confidence: 1.0,
            })
            .collect(),
    }
}

/// Relationships from names: a column `<thing>_id` without a declared key points at a table
/// `<thing>`, `<thing>s`, `<thing>es` or `<thin>ies` of the same schema whose primary key is
/// one column (confidence 0.7).
fn infer(tables: &[TableDescription], out: &mut [Harvested]) -> usize {
    let mut n = 0;
    for (t, h) in tables.iter().zip(out.iter_mut()) {
        for c in &t.columns {
            let Some(base) = c.name.strip_suffix("_id").filter(|b| !b.is_empty()) else {
                continue;
            };
            if t.foreign_keys.iter().any(|f| f.columns == [c.name.clone()]) {
                continue;
            }
            let names = [
                base.to_string(),
                format!("{base}s"),
                format!("{base}es"),
                base.strip_suffix('y')
                    .map(|b| format!("{b}ies"))
                    .unwrap_or_default(),
            ];
            let Some(other) = tables.iter().find(|o| {
                names.contains(&o.table) && o.primary_key.len() == 1 && o.table != t.table
            }) else {
                continue;
            };
            h.relationships.push(Relationship {
                name: format!("inferred:{}", c.name),
                columns: vec![c.name.clone()],
                references_table: format!("{}.{}", other.schema, other.table),
                references_columns: other.primary_key.clone(),
                kind: "inferred".into(),
                confidence: 0.7,
            });
            n += 1;
        }
    }
    n
}

/// The schemas of `t` a harvest covers: `filter`, or every schema but the system ones.
async fn schemas_of(
    cx: Cx<'_>,
    t: &Target,
    filter: Option<Vec<String>>,
    trace: &mut CallTrace,
) -> Result<Vec<String>, Error> {
    if let Some(f) = filter.filter(|f| !f.is_empty()) {
        return Ok(f);
    }
    let sql = match t.protocol {
        Protocol::Mysql => {
            "SELECT schema_name FROM information_schema.schemata WHERE schema_name NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys') ORDER BY schema_name"
        }
        Protocol::Pgsql => {
            "SELECT nspname FROM pg_catalog.pg_namespace WHERE left(nspname, 3) <> 'pg_' AND nspname <> 'information_schema' ORDER BY nspname"
        }
    };
    let rs = internal(
        cx,
        "discovery.run_static",
        t,
        sql.to_string(),
        10_000,
        trace,
    )
    .await?;
    Ok(rs
        .rows
        .iter()
        .filter_map(|r| r.first().and_then(Value::as_str).map(str::to_string))
        .collect())
}

/// Harvests `tables` (or whole schemas) of `t` into the catalog; what was stored.
pub(crate) async fn harvest(
    cx: Cx<'_>,
    t: &Target,
    schemas: &[String],
    table: Option<&str>,
    trace: &mut CallTrace,
) -> Result<RunSummary, Error> {
    let store = cx.svc.catalog().await?;
    let run_id = store
        .begin_run(&t.id, crate::targets::protocol_name(t.protocol))
        .await?;
    let (mut objects, mut foreign_keys, mut inferred) = (0, 0, 0);
    for schema in schemas {
        let tables = read_tables(cx, "discovery.run_static", t, schema, table, trace).await?;
        let mut rows: Vec<Harvested> = tables.iter().map(harvested).collect();
        foreign_keys += rows.iter().map(|h| h.relationships.len()).sum::<usize>();
        if table.is_none() {
            inferred += infer(&tables, &mut rows);
        }
        objects += rows.len();
        let only = table.map(|t| vec![t.to_string()]);
        store
            .store(
                &t.id,
                run_id,
                std::slice::from_ref(schema),
                only.as_deref(),
                &rows,
            )
            .await?;
    }
    Ok(RunSummary {
        run_id,
        target_id: t.id.clone(),
        schemas: schemas.to_vec(),
        objects,
        foreign_keys,
        inferred,
    })
}

/// `discovery.run_static`.
pub(crate) async fn run_static(
    svc: &McpService,
    caller: &Caller,
    a: RunStaticArgs,
    cancel: &CancellationToken,
) -> Result<Value, Error> {
    recorded(
        svc,
        caller,
        "discovery.run_static",
        None,
        |mut trace| async move {
            let r = async {
                let t = discovery_target(svc, caller, a.target_id.as_deref())?;
                trace.target = t.id.clone();
                let cx = Cx {
                    svc,
                    caller,
                    cancel,
                };
                let schemas = schemas_of(cx, &t, a.schema_filter, &mut trace).await?;
                let summary = harvest(cx, &t, &schemas, None, &mut trace).await?;
                tracing::info!(
                    mcp_user = %caller.name,
                    target = %t.id,
                    objects = summary.objects,
                    schemas = summary.schemas.len(),
                    "MCP catalog: harvested"
                );
                Ok(to_value(&summary))
            }
            .await;
            (r, trace)
        },
    )
    .await
}

/// The target of a catalog read (any usable target the caller may use, when none is named).
fn catalog_target(svc: &McpService, caller: &Caller, id: Option<&str>) -> Result<Target, Error> {
    discovery_target(svc, caller, id)
}

/// The target a search is limited to (checked) and its result count.
fn search_scope(
    svc: &McpService,
    caller: &Caller,
    a: &SearchArgs,
) -> Result<(Option<String>, u32), Error> {
    let target = match a.target_id.as_deref() {
        Some(id) => Some(catalog_target(svc, caller, Some(id))?.id),
        None => None,
    };
    Ok((target, a.limit.unwrap_or(25).clamp(1, 100)))
}

/// The model of `mcp-catalog_embedding_source` for the semantic modes of `catalog.search`.
fn catalog_embedder(
    svc: &McpService,
) -> Result<std::sync::Arc<sluice_rag::embed::Embedder>, Error> {
    let rt = svc.config.load();
    let id = rt.mcp.variables.catalog_embedding_source;
    if id == 0 {
        return Err(Error::Arguments(
            "semantic and hybrid search need an embedding model: set mcp-catalog_embedding_source to the rag_sources row whose model to use (mode fts needs none)".into(),
        ));
    }
    let Some(source) = rt
        .mcp
        .rag_sources
        .iter()
        .find(|s| u64::from(s.source_id) == id)
    else {
        return Err(Error::Arguments(format!(
            "mcp-catalog_embedding_source = {id} names no rag_sources row at runtime"
        )));
    };
    svc.rag_embedder(source)
}

/// Whether `caller` may see entries of `target`.
fn visible(caller: &Caller, target: &str) -> bool {
    caller
        .user
        .as_ref()
        .is_none_or(|u| u.may_use_target(target))
}

/// `catalog.search`.
pub(crate) async fn search(
    svc: &McpService,
    caller: &Caller,
    a: SearchArgs,
) -> Result<Value, Error> {
    recorded(
        svc,
        caller,
        "catalog.search",
        None,
        |mut trace| async move {
            let r = async {
                let (target, limit) = search_scope(svc, caller, &a)?;
                trace.target = target.clone().unwrap_or_default();
                let store = svc.catalog().await?;
                let target = target.as_deref();
                // Hidden targets' hits are dropped after ranking: a leg searches deeper first.
                let depth = (limit * 2).max(50);
                let mut hits = match a.mode.unwrap_or_default() {
                    SearchMode::Fts => store.search(target, &a.query, limit).await?,
                    SearchMode::Semantic => {
                        let e = catalog_embedder(svc)?;
                        store.search_semantic(&e, target, &a.query, limit).await?
                    }
                    SearchMode::Hybrid => {
                        let e = catalog_embedder(svc)?;
                        let text = store.search(target, &a.query, depth).await?;
                        let meaning = store.search_semantic(&e, target, &a.query, depth).await?;
                        crate::catalog::fuse(text, meaning, limit)
                    }
                };
                hits.retain(|h| visible(caller, &h.target_id));
                Ok(to_value(&Hits { hits }))
            }
            .await;
            (r, trace)
        },
    )
    .await
}

/// `catalog.get_object`.
pub(crate) async fn get_object(
    svc: &McpService,
    caller: &Caller,
    a: ObjectArgs,
) -> Result<Value, Error> {
    recorded(
        svc,
        caller,
        "catalog.get_object",
        None,
        |mut trace| async move {
            let r = async {
                let t = catalog_target(svc, caller, a.target_id.as_deref())?;
                trace.target = t.id.clone();
                let (schema, name) = split_key(&a.object_key)?;
                let store = svc.catalog().await?;
                let Some((definition, stale)) = store.object(&t.id, schema, name).await? else {
                    return Err(Error::Arguments(format!(
                        "{} is not in the catalog of {} (discovery.run_static harvests it)",
                        a.object_key, t.id
                    )));
                };
                let (mut relationships, _) = store.relationships(&t.id, schema, name).await?;
                if a.include_inferred == Some(false) {
                    relationships.retain(|r| r.kind != "inferred");
                }
                Ok(to_value(&ObjectEntry {
                    object_key: a.object_key.clone(),
                    stale,
                    definition,
                    relationships,
                }))
            }
            .await;
            (r, trace)
        },
    )
    .await
}

/// `catalog.list_objects`.
pub(crate) async fn list_objects(
    svc: &McpService,
    caller: &Caller,
    a: ListObjectsArgs,
) -> Result<Value, Error> {
    recorded(
        svc,
        caller,
        "catalog.list_objects",
        None,
        |mut trace| async move {
            let r = async {
                let t = catalog_target(svc, caller, a.target_id.as_deref())?;
                trace.target = t.id.clone();
                let size = a.page_size.unwrap_or(100).clamp(1, 1000);
                let offset: u64 = match &a.page_token {
                    None => 0,
                    Some(p) => p.parse().map_err(|_| {
                        Error::Arguments("page_token is a previous next_page_token".into())
                    })?,
                };
                let rows = svc
                    .catalog()
                    .await?
                    .list(&t.id, a.schema_name.as_deref(), size + 1, offset)
                    .await?;
                let more = rows.len() > size as usize;
                let objects = rows
                    .into_iter()
                    .take(size as usize)
                    .map(|(s, n, kind, stale)| Listed {
                        object_key: format!("{s}.{n}"),
                        kind,
                        stale,
                    })
                    .collect();
                Ok(to_value(&ObjectList {
                    objects,
                    next_page_token: more.then(|| (offset + u64::from(size)).to_string()),
                }))
            }
            .await;
            (r, trace)
        },
    )
    .await
}

/// `catalog.get_relationships`.
pub(crate) async fn get_relationships(
    svc: &McpService,
    caller: &Caller,
    a: ObjectArgs,
) -> Result<Value, Error> {
    recorded(
        svc,
        caller,
        "catalog.get_relationships",
        None,
        |mut trace| async move {
            let r = async {
                let t = catalog_target(svc, caller, a.target_id.as_deref())?;
                trace.target = t.id.clone();
                let (schema, name) = split_key(&a.object_key)?;
                let (mut outgoing, incoming) = svc
                    .catalog()
                    .await?
                    .relationships(&t.id, schema, name)
                    .await?;
                let mut incoming: Vec<Incoming> = incoming
                    .into_iter()
                    .map(|(from, relationship)| Incoming { from, relationship })
                    .collect();
                if a.include_inferred == Some(false) {
                    outgoing.retain(|r| r.kind != "inferred");
                    incoming.retain(|i| i.relationship.kind != "inferred");
                }
                Ok(to_value(&Relationships {
                    object_key: a.object_key.clone(),
                    outgoing,
                    incoming,
                }))
            }
            .await;
            (r, trace)
        },
    )
    .await
}

/// `catalog.save_template`: only SQL that is one read is kept.
pub(crate) async fn save_template(
    svc: &McpService,
    caller: &Caller,
    a: SaveTemplateArgs,
) -> Result<Value, Error> {
    recorded(
        svc,
        caller,
        "catalog.save_template",
        None,
        |mut trace| async move {
            let r = async {
                let t = catalog_target(svc, caller, a.target_id.as_deref())?;
                trace.target = t.id.clone();
                let d = match t.protocol {
                    Protocol::Mysql => Dialect::Mysql,
                    Protocol::Pgsql => Dialect::Pgsql,
                };
                readonly::check_read(&a.sql, d, u64::MAX)?;
                literal(d, &a.question)?;
                let template_id = svc
                    .catalog()
                    .await?
                    .save_template(&Template {
                        template_id: 0,
                        target_id: t.id.clone(),
                        question: a.question.clone(),
                        sql: a.sql.clone(),
                        notes: a.notes.clone().unwrap_or_default(),
                        created_by: caller.name.clone(),
                    })
                    .await?;
                Ok(to_value(&Saved { template_id }))
            }
            .await;
            (r, trace)
        },
    )
    .await
}

/// `catalog.search_templates`.
pub(crate) async fn search_templates(
    svc: &McpService,
    caller: &Caller,
    a: SearchArgs,
) -> Result<Value, Error> {
    recorded(
        svc,
        caller,
        "catalog.search_templates",
        None,
        |mut trace| async move {
            let r = async {
                let (target, limit) = search_scope(svc, caller, &a)?;
                trace.target = target.clone().unwrap_or_default();
                if a.mode.is_some_and(|m| m != SearchMode::Fts) {
                    return Err(Error::Arguments(
                        "catalog.search_templates searches by words only (mode fts)".into(),
                    ));
                }
                let mut templates = svc
                    .catalog()
                    .await?
                    .search_templates(target.as_deref(), &a.query, limit)
                    .await?;
                templates.retain(|t| visible(caller, &t.target_id));
                Ok(to_value(&Templates { templates }))
            }
            .await;
            (r, trace)
        },
    )
    .await
}
