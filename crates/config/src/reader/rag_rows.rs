//! Checking the `rag_sources` rows.

use super::Reader;
use crate::Error;
use crate::RagSource;
use std::collections::HashSet;
use toml::Spanned;

impl Reader<'_> {
    pub(super) fn rag_sources(&mut self, rows: Vec<Spanned<RagSource>>) -> Result<(), Error> {
        let mut ids = HashSet::new();
        let mut names = HashSet::new();
        for row in rows {
            let offset = row.span().start;
            let mut s = row.into_inner();
            s.protocol = s.protocol.trim().to_ascii_lowercase();
            s.embedding_provider = s.embedding_provider.trim().to_ascii_lowercase();
            if let Err(why) = s.check() {
                return Err(self.invalid(
                    offset,
                    format!("rag_sources.{why} (source {})", s.source_id),
                ));
            }
            if !ids.insert(s.source_id) {
                return Err(self.invalid(
                    offset,
                    format!("rag_sources: duplicate source_id {}", s.source_id),
                ));
            }
            if !names.insert(s.name.clone()) {
                return Err(self.invalid(offset, format!("rag_sources: duplicate name {}", s.name)));
            }
            self.cfg.rag_sources.push(s);
        }
        self.cfg.rag_sources.sort_by_key(|s| s.source_id);
        Ok(())
    }
}
