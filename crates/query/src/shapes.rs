//! Statement shapes shared by the sessions of one thread. A session's [`DigestMemo`] keeps its
//! own last statement; a workload that alternates statements (sysbench's point selects over
//! four tables, an application's handful of lookups) misses it at almost every statement. The
//! sessions of one event-loop thread share a [`ShapeCache`] of the shapes digested lately, so
//! such a statement is matched, not tokenized again.
//!
//! A shape's digest is a pure function of its text (see `digest/numbers.rs`): nothing of one
//! client reaches another through the cache but the digest the other's text has anyway.
//!
//! [`DigestMemo`]: crate::DigestMemo

use crate::counters::PerThread;
use crate::digest::{Dialect, Digest, NumberSpans};
use std::sync::Mutex;

/// One [`ShapeCache`] per thread, each behind a lock only its thread's sessions take (threads
/// beyond the slot count share one, which stays correct).
pub type SharedShapes = PerThread<Mutex<ShapeCache>>;

/// Shapes kept per cache: slots chosen by the shape's key, a newer shape replacing an older
/// one in its slot.
const SLOTS: usize = 16;

/// Texts longer than this are not kept: the copy would cost more than the match saves, and a
/// slot should not hold a large buffer.
pub const SHAPE_MAX_SQL: usize = 1024;

/// One digested text, its literals' spans and its digest.
#[derive(Debug, Default)]
struct Shape {
    key: u64,
    sql: String,
    numbers: NumberSpans,
    dialect: Option<Dialect>,
    limit: u32,
    digest: Digest,
}

/// The shapes lately digested by the sessions of one thread (see the module doc); behind a
/// lock per thread, which only that thread's sessions take.
#[derive(Debug, Default)]
pub struct ShapeCache {
    /// Empty until the first shape is kept, then [`SLOTS`] long.
    slots: Vec<Shape>,
}

impl ShapeCache {
    /// The spans of `sql`'s literals and the digest of the shape `sql` has, when a text of
    /// that shape (same dialect and digest length) is kept.
    pub(crate) fn find(
        &self,
        key: u64,
        sql: &str,
        dialect: Dialect,
        limit: u32,
    ) -> Option<(NumberSpans, &Digest)> {
        let s = self.slots.get(key as usize % SLOTS)?;
        if s.key != key || s.dialect != Some(dialect) || s.limit != limit {
            return None;
        }
        let numbers = s.numbers.match_shape(s.sql.as_bytes(), sql.as_bytes())?;
        Some((numbers, &s.digest))
    }

    /// Keeps `sql`'s shape, replacing the one in its slot; its buffers are reused (no
    /// allocation once they are large enough).
    pub(crate) fn keep(
        &mut self,
        key: u64,
        (sql, numbers): (&str, NumberSpans),
        (dialect, limit): (Dialect, u32),
        digest: &Digest,
    ) {
        if sql.len() > SHAPE_MAX_SQL {
            return;
        }
        if self.slots.is_empty() {
            self.slots.resize_with(SLOTS, Shape::default);
        }
        let Some(slot) = self.slots.get_mut(key as usize % SLOTS) else {
            return;
        };
        slot.key = key;
        slot.sql.clear();
        slot.sql.push_str(sql);
        slot.numbers = numbers;
        slot.dialect = Some(dialect);
        slot.limit = limit;
        slot.digest.assign_from(digest);
    }
}
