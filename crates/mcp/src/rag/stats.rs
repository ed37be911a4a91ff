//! What each RAG source's syncs did (`stats_rag_sources`, `sluice_rag_*` metrics).

use sluice_core::admin::AdminRows;
use sluice_core::metrics::Exposition;
use sluice_rag::sync::SyncReport;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// One source's counters and state.
#[derive(Debug, Clone, Default)]
pub(crate) struct SourceStatus {
    pub name: String,
    pub syncing: bool,
    pub runs: u64,
    pub failed_runs: u64,
    pub documents: u64,
    pub chunks: u64,
    /// Finished runs' counts.
    pub totals: SyncReport,
    /// The running run's counts so far (empty between runs).
    pub current: SyncReport,
    pub last_run_start: u64,
    pub last_run_ms: u64,
    /// When the last good run started (everything committed before it is indexed).
    pub last_ok_start: u64,
    pub last_sweep: u64,
    pub last_error: String,
}

/// The sources' status, by id.
#[derive(Debug, Default)]
pub(crate) struct RagStats {
    sources: Mutex<BTreeMap<u32, SourceStatus>>,
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl RagStats {
    fn with<R>(&self, id: u32, f: impl FnOnce(&mut SourceStatus) -> R) -> R {
        let mut m = self.sources.lock().unwrap_or_else(|p| p.into_inner());
        f(m.entry(id).or_default())
    }

    /// Marks a run of `id` started; false if one is already running.
    pub(crate) fn start(&self, id: u32, name: &str) -> bool {
        self.with(id, |s| {
            if s.syncing {
                return false;
            }
            s.name = name.to_string();
            s.syncing = true;
            s.current = SyncReport::default();
            s.last_run_start = now();
            true
        })
    }

    /// Records a running run's counts so far (after each page), shown until it finishes.
    pub(crate) fn progress(&self, id: u32, so_far: &SyncReport) {
        self.with(id, |s| s.current = so_far.clone());
    }

    /// Records a finished run.
    pub(crate) fn finish(
        &self,
        id: u32,
        r: &SyncReport,
        error: Option<&String>,
        ms: u64,
        counts: Option<(u64, u64)>,
    ) {
        self.with(id, |s| {
            s.syncing = false;
            s.current = SyncReport::default();
            s.runs += 1;
            s.last_run_ms = ms;
            if let Some((d, c)) = counts {
                s.documents = d;
                s.chunks = c;
            }
            let t = &mut s.totals;
            t.rows_read += r.rows_read;
            t.docs_changed += r.docs_changed;
            t.docs_unchanged += r.docs_unchanged;
            t.chunks_embedded += r.chunks_embedded;
            t.chunks_unchanged += r.chunks_unchanged;
            t.docs_deleted += r.docs_deleted;
            if r.swept {
                s.last_sweep = now();
            }
            match error {
                None => {
                    s.last_ok_start = s.last_run_start;
                    s.last_error.clear();
                }
                Some(e) => {
                    s.failed_runs += 1;
                    s.last_error = e.clone();
                }
            }
        })
    }

    /// When `id` last finished a sweep (epoch seconds, 0: never).
    pub(crate) fn last_sweep(&self, id: u32) -> u64 {
        self.with(id, |s| s.last_sweep)
    }

    /// When `id` last started a run (epoch seconds, 0: never).
    pub(crate) fn last_start(&self, id: u32) -> u64 {
        self.with(id, |s| s.last_run_start)
    }

    /// `stats_rag_sources`.
    pub(crate) fn table(&self) -> AdminRows {
        let m = self.sources.lock().unwrap_or_else(|p| p.into_inner());
        let t = now();
        let columns = [
            "source_id",
            "name",
            "state",
            "runs",
            "failed_runs",
            "documents",
            "chunks",
            "rows_read",
            "docs_changed",
            "docs_unchanged",
            "chunks_embedded",
            "chunks_unchanged",
            "docs_deleted",
            "last_run_start",
            "last_run_ms",
            "last_ok",
            "lag_seconds",
            "last_sweep",
            "last_error",
        ];
        let rows = m
            .iter()
            .map(|(id, s)| {
                let n = |v: u64| Some(v.to_string());
                vec![
                    n(u64::from(*id)),
                    Some(s.name.clone()),
                    Some(if s.syncing { "syncing" } else { "idle" }.to_string()),
                    n(s.runs),
                    n(s.failed_runs),
                    n(s.documents),
                    n(s.chunks),
                    n(s.totals.rows_read + s.current.rows_read),
                    n(s.totals.docs_changed + s.current.docs_changed),
                    n(s.totals.docs_unchanged + s.current.docs_unchanged),
                    n(s.totals.chunks_embedded + s.current.chunks_embedded),
                    n(s.totals.chunks_unchanged + s.current.chunks_unchanged),
                    n(s.totals.docs_deleted + s.current.docs_deleted),
                    n(s.last_run_start),
                    n(s.last_run_ms),
                    n(s.last_ok_start),
                    (s.last_ok_start > 0).then(|| t.saturating_sub(s.last_ok_start).to_string()),
                    n(s.last_sweep),
                    Some(s.last_error.clone()),
                ]
            })
            .collect();
        AdminRows {
            columns: columns.iter().map(|c| c.to_string()).collect(),
            rows,
        }
    }

    /// Writes `sluice_rag_*` families.
    pub(crate) fn write_metrics(&self, out: &mut Exposition) {
        let m = self.sources.lock().unwrap_or_else(|p| p.into_inner());
        for (id, s) in m.iter() {
            let id = id.to_string();
            let l = [("source", id.as_str()), ("name", s.name.as_str())];
            let t = &s.totals;
            out.counter(
                "sluice_rag_sync_runs_total",
                "RAG sync runs per source",
                &l,
                s.runs,
            );
            out.counter(
                "sluice_rag_sync_failures_total",
                "RAG sync runs that failed",
                &l,
                s.failed_runs,
            );
            out.counter(
                "sluice_rag_rows_read_total",
                "Source rows read by RAG syncs",
                &l,
                t.rows_read,
            );
            out.counter(
                "sluice_rag_chunks_embedded_total",
                "Chunks sent to the embedding model",
                &l,
                t.chunks_embedded,
            );
            out.counter(
                "sluice_rag_chunks_unchanged_total",
                "Chunks of changed documents kept without embedding again",
                &l,
                t.chunks_unchanged,
            );
            out.counter(
                "sluice_rag_docs_deleted_total",
                "Documents removed by the delete sweep",
                &l,
                t.docs_deleted,
            );
            out.gauge(
                "sluice_rag_documents",
                "Documents in the index",
                &l,
                s.documents as f64,
            );
            out.gauge(
                "sluice_rag_chunks",
                "Chunks in the index",
                &l,
                s.chunks as f64,
            );
        }
    }
}
