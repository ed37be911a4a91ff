//! The discovery catalog: what `discovery.run_static` harvested ([`store`]), kept fresh by
//! watching DDL pass through the data path ([`watch`]), searched by words or by meaning
//! ([`semantic`]).

mod semantic;
mod store;
mod watch;

pub(crate) use semantic::{SearchMode, fuse};
pub(crate) use store::{Harvested, Hit, Relationship, Store, Template};
pub use watch::DdlWatcher;
pub(crate) use watch::{DdlEvent, refresh};
