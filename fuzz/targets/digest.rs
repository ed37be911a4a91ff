//! The digest tokenizer in both dialects, comment hints, and rule evaluation on the result.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_core::query::hints::Hints;
use sluice_core::query::{Dialect, digest};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for dialect in [Dialect::Mysql, Dialect::Pgsql] {
        for max in [16, 2048] {
            let d = digest(&text, dialect, max);
            assert!(d.text.len() <= max, "digest text exceeds its bound");
            if let Some((start, end)) = d.first_comment {
                let comment = text
                    .get(start..end)
                    .expect("comment range inside the query");
                let _ = Hints::parse(comment);
            }
        }
    }
    let _ = Hints::parse(&text);
});
