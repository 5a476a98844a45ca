//! Twin search near the data (issue #46): on a PostgreSQL library the server ranks the stored
//! codes by Hamming distance; its answer must be the in-process search's, ties included.

use crate::library_engines::{Engine, Place};
use endotwin::retrieval::{Codes, hamming_knn};
use endotwin::store::{
    EmbeddingRow, EmbeddingTarget, OpenMode, StoreError, ensure_model, put_embedding,
};

/// A small deterministic generator (xorshift), so the codes are the same on every run.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn twin_search_in_the_database_equals_the_in_process_search() {
    let Some(place) = Place::fresh(Engine::Postgres) else {
        return;
    };
    let mut store = place.open(OpenMode::CreateIfMissing).unwrap();
    let words = 4;
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let base: Vec<u64> = (0..words).map(|_| next(&mut state)).collect();
    // 1500 codes near one base (a few bits flipped each): many equal distances, so the order
    // of ties is tested too. Target ids are not positions.
    let rows: Vec<EmbeddingRow> = (0..1500i64)
        .map(|i| {
            let mut code = base.clone();
            for _ in 0..(next(&mut state) % 9) {
                let bit = next(&mut state) % (64 * words as u64);
                code[(bit / 64) as usize] ^= 1 << (bit % 64);
            }
            EmbeddingRow {
                target_id: 3 * i + 7,
                source_hash: format!("h{i}"),
                vector: vec![i as f32, 1.0],
                code: Some(code),
            }
        })
        .collect();
    let model = store
        .write(|tx| -> Result<i64, StoreError> {
            let model = ensure_model(tx, "twin", "1", "image", "{}", "")?;
            for row in &rows {
                put_embedding(tx, model, EmbeddingTarget::Polyp, row)?;
            }
            Ok(model)
        })
        .unwrap();

    let stored = store.embeddings(model, EmbeddingTarget::Polyp).unwrap();
    let codes = Codes::from_rows(
        words,
        &stored
            .iter()
            .map(|r| r.code.clone().unwrap())
            .collect::<Vec<_>>(),
    );
    let mut queries = vec![base.clone(), rows[17].code.clone().unwrap()];
    queries.push((0..words).map(|_| next(&mut state)).collect());
    for query in &queries {
        for k in [1, 10, 100, 2000] {
            let in_process: Vec<(i64, u32)> = hamming_knn(&codes, query, k)
                .iter()
                .map(|h| (stored[h.index as usize].target_id, h.distance))
                .collect();
            let in_database = store
                .nearest_codes(model, EmbeddingTarget::Polyp, query, k)
                .unwrap()
                .expect("PostgreSQL searches in the database");
            assert_eq!(in_database, in_process, "k = {k}");
            assert_eq!(in_database.len(), k.min(rows.len()));
        }
    }
    // An SQLite library says it has no such search (it is searched in process).
    let dir = tempfile::tempdir().unwrap();
    let local = endotwin::store::Store::open(dir.path(), OpenMode::CreateIfMissing).unwrap();
    assert_eq!(
        local
            .nearest_codes(model, EmbeddingTarget::Polyp, &base, 5)
            .unwrap(),
        None
    );
}

/// A station whose connection the server drops mid-write (a restart, a cut cable): the
/// write is refused by name and nothing of it is in the library; a reopened store goes on.
#[test]
fn a_connection_lost_mid_write_leaves_nothing_half_written_and_says_so() {
    use endotwin::store::{NewExamination, NewPolyp, upsert_examination, upsert_polyp};
    let Some(place) = Place::fresh(Engine::Postgres) else {
        return;
    };
    drop(place.open(OpenMode::CreateIfMissing).unwrap());
    let name = format!("victim{}", std::process::id());
    let url = format!("{}&application_name={name}", place.location.display());
    let mut store =
        endotwin::store::Store::open(std::path::Path::new(&url), OpenMode::Existing).unwrap();
    let server = std::env::var("ENDOTWIN_TEST_POSTGRES").unwrap();
    let err = store
        .write(|tx| -> Result<(), StoreError> {
            let exam = upsert_examination(
                tx,
                &NewExamination {
                    code: "E-cut".into(),
                    ..Default::default()
                },
            )?;
            // The server ends this station's session half-way through the write.
            let mut admin = ::postgres::Client::connect(&server, ::postgres::NoTls).unwrap();
            admin
                .execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                     WHERE application_name = $1",
                    &[&name],
                )
                .unwrap();
            upsert_polyp(
                tx,
                &NewPolyp {
                    examination_id: exam,
                    code: "E-cut-P1".into(),
                    ..Default::default()
                },
            )?;
            Ok(())
        })
        .unwrap_err();
    assert!(matches!(err, StoreError::ConnectionLost(_)), "{err}");
    assert!(
        err.to_string()
            .contains("connection to the library's database server was lost")
    );
    let mut again = place.open(OpenMode::Existing).unwrap();
    assert_eq!(
        again.stats().unwrap().examinations,
        0,
        "nothing half-written"
    );
    again
        .write(|tx| {
            upsert_examination(
                tx,
                &NewExamination {
                    code: "E-after".into(),
                    ..Default::default()
                },
            )
        })
        .unwrap();
    assert_eq!(again.stats().unwrap().examinations, 1);
}
