//! One sync of a source: keyset pages from the cursor (less the re-scan window), each page's
//! rows made documents, only changed documents chunked, only changed chunks embedded, and the
//! page written with the cursor in one index transaction, so a run that fails half-way resumes
//! where its last page committed. Deleted rows are found by a sweep over every key, never by
//! what one run did not see.

use crate::Error;
use crate::chunk::{Chunking, chunks};
use crate::embed::{Embedder, Role};
use crate::index::{ChunkRow, DocRow, Index};
use crate::source_sql::{Bound, SourceSql, minus_window};
use serde_json::{Map, Value};
use sluice_core::config::{RagSource, TemplatePart, parse_template};

/// Rows of a page a reader returns.
#[derive(Debug, Clone, Default)]
pub struct Page {
    /// Column names, in the statement's order.
    pub columns: Vec<String>,
    /// Rows, values typed as JSON.
    pub rows: Vec<Vec<Value>>,
    /// The reader cut the page short (a byte cap).
    pub truncated: bool,
}

/// A [`SourceReader`]'s own error, carried with its source chain.
pub type ReadError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Reads a source: runs one read with bound parameters and returns at most `max_rows` rows.
pub trait SourceReader: Sync {
    /// Runs `sql` with `params`.
    fn read(
        &self,
        source: &RagSource,
        sql: &str,
        params: &[Value],
        max_rows: u64,
    ) -> impl Future<Output = Result<Page, ReadError>> + Send;
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Source rows read.
    pub rows_read: u64,
    /// Documents written (new or changed).
    pub docs_changed: u64,
    /// Documents read again and found unchanged.
    pub docs_unchanged: u64,
    /// Chunks embedded.
    pub chunks_embedded: u64,
    /// Chunks of changed documents whose text did not change (not embedded again).
    pub chunks_unchanged: u64,
    /// Documents the sweep removed.
    pub docs_deleted: u64,
    /// Pages committed.
    pub pages: u64,
    /// The sweep ran to its end.
    pub swept: bool,
    /// The index was emptied first (the model or dimension changed).
    pub rebuilt: bool,
}

/// The SHA-256 of `parts` (each ended by a zero byte) in hex: how a document's or chunk's
/// content is recognised unchanged.
pub fn content_hash(parts: &[&str]) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for p in parts {
        ctx.update(p.as_bytes());
        ctx.update(&[0]);
    }
    ctx.finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A value as template text.
fn text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Runs one sync of `source` (and its delete sweep when `sweep`): what it did, and how it
/// ended. A run that fails keeps (and reports) every page it committed before the failure.
/// `on_page` sees the run's counts so far after each committed page (live progress).
pub async fn run<R: SourceReader>(
    source: &RagSource,
    reader: &R,
    embedder: &Embedder,
    index: &Index,
    sweep: bool,
    on_page: &(dyn Fn(&SyncReport) + Sync),
) -> (SyncReport, Result<(), Error>) {
    let mut report = SyncReport::default();
    let outcome = run_into(source, reader, embedder, index, sweep, &mut report, on_page).await;
    (report, outcome)
}

async fn run_into<R: SourceReader>(
    source: &RagSource,
    reader: &R,
    embedder: &Embedder,
    index: &Index,
    sweep: bool,
    report: &mut SyncReport,
    on_page: &(dyn Fn(&SyncReport) + Sync),
) -> Result<(), Error> {
    let sync = Run::new(source, reader, embedder, index)?;
    report.rebuilt = index
        .prepare_source(source.source_id, embedder.dimension(), &sync.model_key)
        .await?;
    let state = index.sync_state(source.source_id).await?;
    let mut bound = match &state.cursor {
        None => Bound::Start,
        Some((change, _)) => {
            let c: Value = serde_json::from_str(change).unwrap_or(Value::Null);
            Bound::AtLeast(minus_window(&c, source.rescan_window))
        }
    };
    loop {
        let (sql, params) = sync.sql.page(&bound, source.batch_size);
        let page = sync.read(&sql, &params, source.batch_size).await?;
        let n = page.rows.len();
        if let Some(next) = sync.apply(page, report).await? {
            bound = next;
        }
        report.pages += 1;
        on_page(report);
        if n < source.batch_size as usize {
            break;
        }
    }
    if sweep {
        report.docs_deleted = sync.sweep().await?;
        report.swept = true;
    }
    Ok(())
}

struct Run<'a, R> {
    source: &'a RagSource,
    sql: SourceSql,
    reader: &'a R,
    embedder: &'a Embedder,
    index: &'a Index,
    template: Vec<TemplatePart>,
    chunking: Chunking,
    model_key: String,
}

/// Column positions in a page.
struct Positions {
    pk: usize,
    change: usize,
    title: Option<usize>,
    metadata: Vec<(String, usize)>,
    all: Vec<String>,
}

impl<'a, R: SourceReader> Run<'a, R> {
    fn new(
        source: &'a RagSource,
        reader: &'a R,
        embedder: &'a Embedder,
        index: &'a Index,
    ) -> Result<Self, Error> {
        let template = parse_template(&source.text_template).map_err(|why| Error::Source {
            source_id: source.source_id,
            why: format!("text_template: {why}"),
        })?;
        Ok(Run {
            source,
            sql: SourceSql::new(source),
            reader,
            embedder,
            index,
            template,
            chunking: Chunking {
                size: source.chunk_size as usize,
                overlap: source.chunk_overlap as usize,
                min: source.chunk_min as usize,
            },
            model_key: embedder.describe(),
        })
    }

    async fn read(&self, sql: &str, params: &[Value], max_rows: u32) -> Result<Page, Error> {
        let page = self
            .reader
            .read(self.source, sql, params, u64::from(max_rows))
            .await
            .map_err(|source| Error::Reader {
                source_id: self.source.source_id,
                source,
            })?;
        if page.truncated {
            return Err(Error::Read {
                source_id: self.source.source_id,
                why: format!(
                    "a page of {} rows was cut at the reader's byte cap; lower batch_size",
                    page.rows.len()
                ),
            });
        }
        Ok(page)
    }

    fn positions(&self, columns: &[String]) -> Result<Positions, Error> {
        let find = |name: &str| {
            columns
                .iter()
                .position(|c| c.eq_ignore_ascii_case(name))
                .ok_or_else(|| Error::Source {
                    source_id: self.source.source_id,
                    why: format!("the source has no column {name:?}"),
                })
        };
        let mut metadata = Vec::new();
        for m in self.source.metadata() {
            metadata.push((m.clone(), find(&m)?));
        }
        Ok(Positions {
            pk: find(&self.source.pk_column)?,
            change: find(&self.source.change_column)?,
            title: match self.source.title_column.as_str() {
                "" => None,
                t => Some(find(t)?),
            },
            metadata,
            all: columns.to_vec(),
        })
    }

    fn render(&self, row: &[Value], at: &Positions) -> Result<String, Error> {
        let mut out = String::new();
        for part in &self.template {
            match part {
                TemplatePart::Text(t) => out.push_str(t),
                TemplatePart::Column(c) => {
                    let i = at
                        .all
                        .iter()
                        .position(|x| x.eq_ignore_ascii_case(c))
                        .ok_or_else(|| Error::Source {
                            source_id: self.source.source_id,
                            why: format!(
                                "text_template names {c:?}, which the source does not have"
                            ),
                        })?;
                    out.push_str(&text(&row[i]));
                }
            }
        }
        Ok(out)
    }

    /// Builds, embeds and writes one page; the bound after it.
    async fn apply(&self, page: Page, total: &mut SyncReport) -> Result<Option<Bound>, Error> {
        // Counted into `total` only once the page is committed.
        let mut report = SyncReport::default();
        let next = self.build_and_write(page, &mut report).await?;
        total.rows_read += report.rows_read;
        total.docs_changed += report.docs_changed;
        total.docs_unchanged += report.docs_unchanged;
        total.chunks_embedded += report.chunks_embedded;
        total.chunks_unchanged += report.chunks_unchanged;
        Ok(next)
    }

    async fn build_and_write(
        &self,
        page: Page,
        report: &mut SyncReport,
    ) -> Result<Option<Bound>, Error> {
        if page.rows.is_empty() {
            return Ok(None);
        }
        let at = self.positions(&page.columns)?;
        let id = self.source.source_id;
        if let Some(row) = page.rows.iter().find(|r| r.len() != page.columns.len()) {
            return Err(Error::Read {
                source_id: id,
                why: format!(
                    "the server sent a row of {} values for {} columns",
                    row.len(),
                    page.columns.len()
                ),
            });
        }
        let mut docs = Vec::with_capacity(page.rows.len());
        for row in &page.rows {
            let (pk, change) = (&row[at.pk], &row[at.change]);
            let title = at.title.map(|i| text(&row[i])).unwrap_or_default();
            let body = self.render(row, &at)?;
            let metadata: Map<String, Value> = at
                .metadata
                .iter()
                .map(|(name, i)| (name.clone(), row[*i].clone()))
                .collect();
            let metadata_json = Value::Object(metadata).to_string();
            docs.push(DocRow {
                doc_id: format!("{id}:{}", text(pk)),
                pk_json: pk.to_string(),
                content_hash: content_hash(&[&title, &body, &metadata_json]),
                title,
                body,
                metadata_json,
                change_value: Some(change.to_string()),
                chunks: Vec::new(),
            });
        }
        report.rows_read += docs.len() as u64;
        let last = page
            .rows
            .last()
            .map(|r| (r[at.change].clone(), r[at.pk].clone()));
        let ids: Vec<String> = docs.iter().map(|d| d.doc_id.clone()).collect();
        let known = self.index.doc_hashes(&ids).await?;
        docs.retain(|d| known.get(&d.doc_id) != Some(&d.content_hash));
        report.docs_unchanged += (ids.len() - docs.len()) as u64;
        report.docs_changed += docs.len() as u64;
        let mut inputs = Vec::new();
        let mut slots = Vec::new();
        for (di, d) in docs.iter_mut().enumerate() {
            let held = self.index.chunk_hashes(&d.doc_id).await?;
            for (i, body) in chunks(&d.body, self.chunking).into_iter().enumerate() {
                let input = if d.title.is_empty() {
                    body.clone()
                } else {
                    format!("{}\n{body}", d.title)
                };
                let chunk_id = format!("{}#{i}", d.doc_id);
                let content_hash = content_hash(&[&self.model_key, &input]);
                if held.get(&chunk_id) == Some(&content_hash) {
                    report.chunks_unchanged += 1;
                } else {
                    slots.push((di, d.chunks.len()));
                    inputs.push(input);
                }
                d.chunks.push(ChunkRow {
                    chunk_id,
                    index: i as u32,
                    content_hash,
                    body,
                    vector: None,
                });
            }
        }
        let vectors = self.embedder.embed(&inputs, Role::Passage).await?;
        report.chunks_embedded += vectors.len() as u64;
        for ((di, ci), v) in slots.into_iter().zip(vectors) {
            docs[di].chunks[ci].vector = Some(v);
        }
        let cursor = last.as_ref().map(|(c, p)| (c.to_string(), p.to_string()));
        self.index.apply_batch(id, &docs, cursor.as_ref()).await?;
        Ok(last.map(|(c, p)| Bound::After(c, p)))
    }

    /// Marks every document whose key is still in the source, then removes the rest.
    async fn sweep(&self) -> Result<u64, Error> {
        let id = self.source.source_id;
        let generation = self.index.sweep_begin(id).await?;
        let mut after: Option<Value> = None;
        loop {
            let (sql, params) = self.sql.keys(after.as_ref(), self.source.batch_size);
            let page = self.read(&sql, &params, self.source.batch_size).await?;
            let ids: Vec<String> = page
                .rows
                .iter()
                .filter_map(|r| r.first())
                .map(|pk| format!("{id}:{}", text(pk)))
                .collect();
            self.index.sweep_mark(generation, &ids).await?;
            let n = page.rows.len();
            after = page.rows.last().and_then(|r| r.first().cloned());
            if n < self.source.batch_size as usize {
                break;
            }
        }
        self.index.sweep_finish(id, generation).await
    }
}
