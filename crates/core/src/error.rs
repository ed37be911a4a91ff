//! The core crate's errors: the configuration's, which are all it raises (loading and validating
//! a config happens in `sluice-config`).

pub use sluice_config::{Error, RuleError};
