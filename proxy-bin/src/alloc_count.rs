//! The counting allocator of `--features count-allocations`: every heap allocation, reallocation
//! and free is counted, so `cargo xtask bench alloc` can read how many a statement costs from
//! `stats_memory_metrics` (rows `heap_allocations`, `heap_reallocations`, `heap_deallocations`,
//! `heap_bytes_allocated`).

use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};
use std::alloc::System;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// The counters since the process started, as `stats_memory_metrics` rows.
pub(crate) fn rows() -> [(&'static str, u64); 4] {
    let s = GLOBAL.stats();
    [
        ("heap_allocations", s.allocations as u64),
        ("heap_reallocations", s.reallocations as u64),
        ("heap_deallocations", s.deallocations as u64),
        ("heap_bytes_allocated", s.bytes_allocated as u64),
    ]
}
