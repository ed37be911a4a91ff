//! The index on its own (in memory, sqlite-vec compiled in): writes, both searches, filters,
//! a changed model, the sweep.

use sluice_rag::{ChunkRow, DocRow, Index, SearchFilter};

fn unit(i: usize, dim: usize) -> Vec<f32> {
    let mut v = vec![0.0; dim];
    v[i % dim] = 1.0;
    v
}

fn doc(id: u32, title: &str, body: &str, lang: &str, axis: usize) -> DocRow {
    let doc_id = format!("1:{id}");
    DocRow {
        chunks: vec![ChunkRow {
            chunk_id: format!("{doc_id}#0"),
            index: 0,
            content_hash: format!("h{id}"),
            body: body.into(),
            vector: Some(unit(axis, 4)),
        }],
        doc_id,
        pk_json: id.to_string(),
        title: title.into(),
        body: body.into(),
        metadata_json: format!("{{\"lang\":\"{lang}\"}}"),
        content_hash: format!("d{id}"),
        change_value: Some(id.to_string()),
    }
}

#[tokio::test]
async fn writes_then_searches_by_text_and_vector_with_filters() {
    let index = Index::open(None).await.expect("open");
    assert!(index.vec_version().await.expect("vec").starts_with('v'));
    assert!(!index.prepare_source(1, 4, "m").await.expect("prepare"));
    let docs = [
        doc(
            1,
            "Vacuum",
            "VACUUM reclaims storage held by dead tuples",
            "en",
            0,
        ),
        doc(2, "Indexes", "B-tree indexes speed up lookups", "en", 1),
        doc(3, "Nettoyage", "VACUUM récupère l'espace", "fr", 2),
    ];
    let cursor = ("3".to_string(), "3".to_string());
    index
        .apply_batch(1, &docs, Some(&cursor))
        .await
        .expect("write");
    assert_eq!(index.counts(1).await.expect("counts"), (3, 3));
    assert_eq!(
        index.sync_state(1).await.expect("state").cursor,
        Some(cursor)
    );

    let all = SearchFilter::default();
    let hits = index
        .search_fts("vacuum storage", &all, 10)
        .await
        .expect("fts");
    assert_eq!(hits[0].chunk_id, "1:1#0");
    assert_eq!(hits.len(), 2);
    let fr = SearchFilter {
        metadata: vec![("lang".into(), "fr".into())],
        ..SearchFilter::default()
    };
    let hits = index.search_fts("vacuum", &fr, 10).await.expect("fts fr");
    assert_eq!(
        hits.iter().map(|h| h.chunk_id.as_str()).collect::<Vec<_>>(),
        ["1:3#0"]
    );
    // Operators in the text are words, not syntax.
    assert!(index.search_fts("\" OR NEAR(", &all, 10).await.is_ok());

    let hits = index
        .search_vector(1, &unit(1, 4), &all, 2, 10)
        .await
        .expect("knn");
    assert_eq!(hits[0].chunk_id, "1:2#0");
    assert!((hits[0].score - 1.0).abs() < 1e-6, "{}", hits[0].score);
    assert!(hits[1].score.abs() < 1e-6);
    let hits = index
        .search_vector(1, &unit(1, 4), &fr, 2, 10)
        .await
        .expect("knn fr");
    assert_eq!(hits[0].chunk_id, "1:3#0");

    a_changed_chunk_replaces_its_rows(&index, &all).await;
    a_sweep_removes_the_documents_it_did_not_see(&index, &all).await;
    a_new_model_empties_the_source(&index, &all).await;
}

/// A changed chunk text replaces its FTS row and vector; a dropped chunk goes.
async fn a_changed_chunk_replaces_its_rows(index: &Index, all: &SearchFilter) {
    let mut changed = doc(2, "Indexes", "GiST indexes for geometry", "en", 3);
    changed.chunks[0].content_hash = "h2b".into();
    index
        .apply_batch(1, &[changed], None)
        .await
        .expect("update");
    assert!(
        index
            .search_fts("tree", all, 10)
            .await
            .expect("fts")
            .is_empty()
    );
    let hits = index
        .search_vector(1, &unit(3, 4), all, 1, 10)
        .await
        .expect("knn");
    assert_eq!(hits[0].chunk_id, "1:2#0");
}

/// A sweep that saw docs 1 and 3 removes doc 2 with its chunk and vector.
async fn a_sweep_removes_the_documents_it_did_not_see(index: &Index, all: &SearchFilter) {
    let g = index.sweep_begin(1).await.expect("sweep");
    index
        .sweep_mark(g, &["1:1".into(), "1:3".into()])
        .await
        .expect("mark");
    assert_eq!(index.sweep_finish(1, g).await.expect("finish"), 1);
    assert_eq!(index.counts(1).await.expect("counts"), (2, 2));
    let hits = index
        .search_vector(1, &unit(3, 4), all, 3, 10)
        .await
        .expect("knn");
    assert!(hits.iter().all(|h| h.chunk_id != "1:2#0"));
}

/// A new model empties the source.
async fn a_new_model_empties_the_source(index: &Index, all: &SearchFilter) {
    assert!(index.prepare_source(1, 8, "other").await.expect("rebuild"));
    assert_eq!(index.counts(1).await.expect("counts"), (0, 0));
    assert!(
        index
            .search_fts("vacuum", all, 10)
            .await
            .expect("fts")
            .is_empty()
    );
    assert_eq!(index.sync_state(1).await.expect("state").cursor, None);
}
