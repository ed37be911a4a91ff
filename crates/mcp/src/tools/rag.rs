//! `/mcp/rag`: search over the RAG index (text, vector, hybrid), chunks and documents by id,
//! the source row as it is now, and the sources' stats. Every call is admitted (the caller's
//! calls per minute), capped (`mcp-rag_*`) and recorded like the query tools.

use super::query::recorded;
use super::rag_args::*;
use crate::auth::Caller;
use crate::error::Error;
use crate::rag::ProxyReader;
use crate::service::McpService;
use serde::Serialize;
use serde_json::Value;
use sluice_core::config::RagSource;
use sluice_rag::embed::Role;
use sluice_rag::fuse::{Leg, rerank, rrf};
use sluice_rag::source_sql::SourceSql;
use sluice_rag::sync::SourceReader;
use sluice_rag::{Hit, SearchFilter};
use std::collections::{BTreeMap, HashMap};

/// Results returned when `k` is not given.
const DEFAULT_K: u64 = 10;

/// The enabled sources a search covers, and the index filter for them.
fn resolve(svc: &McpService, scope: Scope<'_>) -> Result<(Vec<RagSource>, SearchFilter), Error> {
    let rt = svc.config.load();
    let enabled: Vec<&RagSource> = rt.mcp.rag_sources.iter().filter(|s| s.enabled.0).collect();
    for id in scope.source_ids {
        if !enabled.iter().any(|s| s.source_id == *id) {
            return Err(Error::Arguments(format!("no enabled rag source {id}")));
        }
    }
    for n in scope.source_names {
        if !enabled.iter().any(|s| &s.name == n) {
            return Err(Error::Arguments(format!(
                "no enabled rag source named {n:?}"
            )));
        }
    }
    let chosen: Vec<RagSource> = enabled
        .into_iter()
        .filter(|s| {
            (scope.source_ids.is_empty() && scope.source_names.is_empty())
                || scope.source_ids.contains(&s.source_id)
                || scope.source_names.contains(&s.name)
        })
        .cloned()
        .collect();
    if chosen.is_empty() {
        return Err(Error::Arguments(
            "no enabled rag source (configure rag_sources and LOAD RAG SOURCES TO RUNTIME)".into(),
        ));
    }
    let filter = SearchFilter {
        source_ids: chosen.iter().map(|s| s.source_id).collect(),
        metadata: scope
            .filters
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    };
    Ok((chosen, filter))
}

fn k_of(svc: &McpService, k: Option<u64>) -> usize {
    let max = svc.config.load().mcp.variables.rag_k_max;
    k.unwrap_or(DEFAULT_K).clamp(1, max) as usize
}

fn depth(svc: &McpService, d: Option<u64>, default: u64) -> usize {
    let max = svc.config.load().mcp.variables.rag_candidates_max;
    d.unwrap_or(default).clamp(1, max) as usize
}

fn check_query(svc: &McpService, q: &str) -> Result<(), Error> {
    let max = svc.config.load().mcp.variables.rag_query_max_bytes;
    if q.trim().is_empty() {
        return Err(Error::Arguments("the query is empty".into()));
    }
    if q.len() as u64 > max {
        return Err(Error::Arguments(format!(
            "the query has {} bytes, over mcp-rag_query_max_bytes = {max}",
            q.len()
        )));
    }
    Ok(())
}

/// Items serialised until the answer would pass `mcp-rag_response_max_bytes`.
fn capped<T: Serialize>(
    svc: &McpService,
    items: impl IntoIterator<Item = T>,
) -> (Vec<Value>, bool) {
    let max = svc.config.load().mcp.variables.rag_response_max_bytes as usize;
    let (mut out, mut size) = (Vec::new(), 0usize);
    for item in items {
        let v = serde_json::to_value(&item).unwrap_or(Value::Null);
        size += v.to_string().len() + 1;
        if size > max {
            return (out, true);
        }
        out.push(v);
    }
    (out, false)
}

fn hits_answer(svc: &McpService, sources: &[RagSource], hits: Vec<Hit>) -> Value {
    let names: HashMap<u32, &str> = sources
        .iter()
        .map(|s| (s.source_id, s.name.as_str()))
        .collect();
    let (results, truncated) = capped(
        svc,
        hits.into_iter().map(|h| RagHit {
            source_name: names.get(&h.source_id).unwrap_or(&"").to_string(),
            chunk_id: h.chunk_id,
            doc_id: h.doc_id,
            source_id: h.source_id,
            title: h.title,
            body: h.body,
            metadata: h.metadata,
            score: h.score,
        }),
    );
    serde_json::json!({ "results": results, "truncated": truncated })
}

/// The query's vector in each source's model (sources sharing a model embed once).
async fn query_vectors(
    svc: &McpService,
    sources: &[RagSource],
    text: &str,
) -> Result<HashMap<u32, Vec<f32>>, Error> {
    let mut by_model: HashMap<String, Vec<f32>> = HashMap::new();
    let mut out = HashMap::new();
    for s in sources {
        let e = svc.rag_embedder(s)?;
        let key = format!("{}|{}", e.describe(), s.embedding_query_prefix);
        let v = match by_model.get(&key) {
            Some(v) => v.clone(),
            None => {
                let v = e
                    .embed(&[text.to_string()], Role::Query)
                    .await?
                    .pop()
                    .unwrap_or_default();
                by_model.insert(key, v.clone());
                v
            }
        };
        out.insert(s.source_id, v);
    }
    Ok(out)
}

/// The `k` nearest chunks over `sources`, each searched with its own query vector.
async fn vector_leg(
    svc: &McpService,
    sources: &[RagSource],
    filter: &SearchFilter,
    vectors: &HashMap<u32, Vec<f32>>,
    k: usize,
) -> Result<Vec<Hit>, Error> {
    let index = svc.rag_index().await?;
    let candidates = depth(svc, None, 200);
    let mut hits = Vec::new();
    for s in sources {
        let Some(v) = vectors.get(&s.source_id) else {
            continue;
        };
        let f = SearchFilter {
            source_ids: vec![s.source_id],
            metadata: filter.metadata.clone(),
        };
        hits.extend(
            index
                .search_vector(s.source_id, v, &f, k, candidates)
                .await?,
        );
    }
    hits.sort_by(|a, b| b.score.total_cmp(&a.score));
    hits.truncate(k);
    Ok(hits)
}

fn admit(svc: &McpService, caller: &Caller) -> Result<(), Error> {
    svc.admit(&svc.config.load(), caller)
}

/// `rag.search_fts`.
pub(crate) async fn search_fts(
    svc: &McpService,
    caller: &Caller,
    a: FtsArgs,
) -> Result<Value, Error> {
    recorded(svc, caller, "rag.search_fts", None, |trace| async move {
        let r = async {
            admit(svc, caller)?;
            check_query(svc, &a.query)?;
            let (sources, filter) = resolve(svc, a.scope())?;
            let hits = svc
                .rag_index()
                .await?
                .search_fts(&a.query, &filter, k_of(svc, a.k))
                .await?;
            Ok(hits_answer(svc, &sources, hits))
        }
        .await;
        (r, trace)
    })
    .await
}

/// `rag.search_vector`.
pub(crate) async fn search_vector(
    svc: &McpService,
    caller: &Caller,
    a: VectorArgs,
) -> Result<Value, Error> {
    recorded(svc, caller, "rag.search_vector", None, |trace| async move {
        let r = async {
            admit(svc, caller)?;
            let (sources, filter) = resolve(svc, a.scope())?;
            let vectors = match (&a.query_text, &a.query_vector) {
                (Some(t), None) => {
                    check_query(svc, t)?;
                    query_vectors(svc, &sources, t).await?
                }
                (None, Some(v)) => {
                    let mut v = v.clone();
                    sluice_rag::embed::normalise(&mut v);
                    let fits: HashMap<u32, Vec<f32>> = sources
                        .iter()
                        .filter(|s| s.embedding_dimension as usize == v.len())
                        .map(|s| (s.source_id, v.clone()))
                        .collect();
                    if fits.is_empty() {
                        return Err(Error::Arguments(format!(
                            "query_vector has {} dimensions; no source in scope has that many",
                            v.len()
                        )));
                    }
                    fits
                }
                _ => {
                    return Err(Error::Arguments(
                        "give query_text or query_vector (one of them)".into(),
                    ));
                }
            };
            let hits = vector_leg(svc, &sources, &filter, &vectors, k_of(svc, a.k)).await?;
            Ok(hits_answer(svc, &sources, hits))
        }
        .await;
        (r, trace)
    })
    .await
}

/// `rag.search_hybrid`.
pub(crate) async fn search_hybrid(
    svc: &McpService,
    caller: &Caller,
    a: HybridArgs,
) -> Result<Value, Error> {
    recorded(svc, caller, "rag.search_hybrid", None, |trace| async move {
        let r = async {
            admit(svc, caller)?;
            check_query(svc, &a.query)?;
            let (sources, filter) = resolve(svc, a.scope())?;
            let k = k_of(svc, a.k);
            let index = svc.rag_index().await?;
            let vectors = query_vectors(svc, &sources, &a.query).await?;
            let hits = match a.mode.as_deref().unwrap_or("fuse") {
                "fuse" => {
                    let fts = index
                        .search_fts(&a.query, &filter, depth(svc, a.fts_k, 50))
                        .await?;
                    let vec = vector_leg(svc, &sources, &filter, &vectors, depth(svc, a.vec_k, 50))
                        .await?;
                    rrf(
                        &[
                            Leg {
                                hits: &fts,
                                weight: a.fts_weight.unwrap_or(1.0),
                            },
                            Leg {
                                hits: &vec,
                                weight: a.vec_weight.unwrap_or(1.0),
                            },
                        ],
                        a.rrf_k0.unwrap_or(60.0).max(0.0),
                        k,
                    )
                }
                "fts_then_vec" => {
                    let cands = index
                        .search_fts(&a.query, &filter, depth(svc, a.candidates, 200))
                        .await?;
                    let mut by_source: BTreeMap<u32, Vec<Hit>> = BTreeMap::new();
                    for h in cands {
                        by_source.entry(h.source_id).or_default().push(h);
                    }
                    let mut out = Vec::new();
                    for (id, group) in by_source {
                        let rowids: Vec<i64> = group.iter().map(|h| h.rowid).collect();
                        let stored = index.vectors(id, &rowids).await?;
                        if let Some(q) = vectors.get(&id) {
                            out.extend(rerank(group, &stored, q, k));
                        }
                    }
                    out.sort_by(|x, y| y.score.total_cmp(&x.score));
                    out.truncate(k);
                    out
                }
                other => {
                    return Err(Error::Arguments(format!(
                        "mode {other:?} is not fuse or fts_then_vec"
                    )));
                }
            };
            Ok(hits_answer(svc, &sources, hits))
        }
        .await;
        (r, trace)
    })
    .await
}

/// Ids asked for at most in one call.
const MAX_IDS: usize = 200;

fn check_ids(ids: &[String]) -> Result<(), Error> {
    if ids.is_empty() || ids.len() > MAX_IDS {
        return Err(Error::Arguments(format!("give 1 to {MAX_IDS} ids")));
    }
    Ok(())
}

/// The sources enabled now, by id.
fn enabled_ids(svc: &McpService) -> Vec<u32> {
    svc.config
        .load()
        .mcp
        .rag_sources
        .iter()
        .filter(|s| s.enabled.0)
        .map(|s| s.source_id)
        .collect()
}

/// `rag.get_chunks`.
pub(crate) async fn get_chunks(
    svc: &McpService,
    caller: &Caller,
    a: ChunkIds,
) -> Result<Value, Error> {
    recorded(svc, caller, "rag.get_chunks", None, |trace| async move {
        let r = async {
            admit(svc, caller)?;
            check_ids(&a.chunk_ids)?;
            let enabled = enabled_ids(svc);
            let rt = svc.config.load();
            let mut hits = svc.rag_index().await?.chunks_by_id(&a.chunk_ids).await?;
            hits.retain(|h| enabled.contains(&h.source_id));
            Ok(hits_answer(svc, &rt.mcp.rag_sources, hits))
        }
        .await;
        (r, trace)
    })
    .await
}

/// `rag.get_docs`.
pub(crate) async fn get_docs(svc: &McpService, caller: &Caller, a: DocIds) -> Result<Value, Error> {
    recorded(svc, caller, "rag.get_docs", None, |trace| async move {
        let r = async {
            admit(svc, caller)?;
            check_ids(&a.doc_ids)?;
            let enabled = enabled_ids(svc);
            let docs = svc.rag_index().await?.docs_by_id(&a.doc_ids).await?;
            let (docs, truncated) = capped(
                svc,
                docs.into_iter()
                    .filter(|d| enabled.contains(&d.source_id))
                    .map(|d| RagDoc {
                        doc_id: d.doc_id,
                        source_id: d.source_id,
                        pk: d.pk,
                        title: d.title,
                        body: d.body,
                        metadata: d.metadata,
                    }),
            );
            Ok(serde_json::json!({ "docs": docs, "truncated": truncated }))
        }
        .await;
        (r, trace)
    })
    .await
}

/// `rag.fetch_from_source`.
pub(crate) async fn fetch_from_source(
    svc: &McpService,
    caller: &Caller,
    a: FetchArgs,
) -> Result<Value, Error> {
    recorded(
        svc,
        caller,
        "rag.fetch_from_source",
        None,
        |mut trace| async move {
            let r = async {
                admit(svc, caller)?;
                let id: u32 = a
                    .doc_id
                    .split_once(':')
                    .and_then(|(s, _)| s.parse().ok())
                    .ok_or_else(|| {
                        Error::Arguments(format!(
                            "{:?} is not a document id (<source>:<key>)",
                            a.doc_id
                        ))
                    })?;
                let source = svc
                    .rag_source(id)
                    .ok_or_else(|| Error::Arguments(format!("no enabled rag source {id}")))?;
                trace.target = format!("rag_source_{id}");
                let doc = svc
                    .rag_index()
                    .await?
                    .docs_by_id(std::slice::from_ref(&a.doc_id))
                    .await?
                    .pop()
                    .ok_or_else(|| {
                        Error::Arguments(format!("no document {:?} in the index", a.doc_id))
                    })?;
                let (sql, params) = SourceSql::new(&source).row(&doc.pk);
                let page = ProxyReader { svc }
                    .read(&source, &sql, &params, 1)
                    .await
                    .map_err(|e| match e.downcast::<Error>() {
                        Ok(call_error) => *call_error,
                        Err(other) => Error::Backend(other.to_string()),
                    })?;
                let row = page.rows.into_iter().next().map(|r| {
                    page.columns
                        .iter()
                        .cloned()
                        .zip(r)
                        .collect::<BTreeMap<String, Value>>()
                });
                Ok(serde_json::to_value(SourceRow {
                    doc_id: a.doc_id.clone(),
                    row,
                })
                .unwrap_or(Value::Null))
            }
            .await;
            (r, trace)
        },
    )
    .await
}

/// `rag.admin.stats`.
pub(crate) async fn admin_stats(
    svc: &McpService,
    caller: &Caller,
    _: NoRagArgs,
) -> Result<Value, Error> {
    recorded(svc, caller, "rag.admin.stats", None, |trace| async move {
        let r = async {
            admit(svc, caller)?;
            let table = svc.stats.rag.table();
            let sources = table
                .rows
                .iter()
                .map(|row| {
                    table
                        .columns
                        .iter()
                        .zip(row)
                        .map(|(c, v)| {
                            let v = match v {
                                None => Value::Null,
                                Some(s) => s
                                    .parse::<i64>()
                                    .map(Value::from)
                                    .unwrap_or_else(|_| Value::from(s.clone())),
                            };
                            (c.clone(), v)
                        })
                        .collect()
                })
                .collect();
            let index = svc.rag_index().await?;
            Ok(serde_json::to_value(RagStatsAnswer {
                sources,
                index_bytes: index.size_bytes().await?,
                sqlite_vec: index.vec_version().await?,
            })
            .unwrap_or(Value::Null))
        }
        .await;
        (r, trace)
    })
    .await
}
