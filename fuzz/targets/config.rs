//! The TOML configuration file: every section, value and ProxySQL variable name.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_core::config::Config;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Config::parse(text);
    }
});
