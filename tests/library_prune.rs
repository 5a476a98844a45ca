//! `endotwin library prune --models DIR` (#47): the embeddings of model versions no card names
//! any more are listed, and deleted only with `--apply`; the current sets stay.

use crate::common::{endotwin, run};
use endotwin::store::{
    EmbeddingRow, EmbeddingTarget, OpenMode, Store, StoreError, ensure_model, put_embedding,
};
use std::path::Path;

/// (name, version, embeddings) of every set the library holds rows for.
pub(crate) fn sets(library: &Path) -> Vec<(String, String, usize)> {
    let store = Store::open_read_only(library).unwrap();
    let mut sets: Vec<_> = store
        .embedding_sets()
        .unwrap()
        .into_iter()
        .filter(|s| s.rows > 0)
        .map(|s| (s.name, s.version, s.rows))
        .collect();
    sets.sort();
    sets
}

pub(crate) fn add_set(store: &mut Store, name: &str, version: &str, media: &[i64]) {
    store
        .write(|tx| {
            let id = ensure_model(tx, name, version, "image-encoder", "{}", "")?;
            for (i, &m) in media.iter().enumerate() {
                let row = EmbeddingRow {
                    target_id: m,
                    source_hash: format!("h{i}"),
                    vector: vec![i as f32, 1.0],
                    code: None,
                };
                put_embedding(tx, id, EmbeddingTarget::Media, &row)?;
            }
            Ok::<_, StoreError>(())
        })
        .unwrap();
}

#[test]
fn stale_embedding_sets_are_listed_then_dropped_and_the_current_ones_stay() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("lib");
    let made = run({
        let mut c = endotwin(&lib);
        c.args(["demo", "--out"]).arg(&lib).args([
            "--polyps",
            "2",
            "--views",
            "4",
            "--videos",
            "0",
            "--capsule",
            "0",
            "--size",
            "64",
        ]);
        c
    });
    assert!(made.ok(), "{}", made.text());
    // A models folder with one card: its version and the sets made from it are current.
    let models = dir.path().join("models");
    std::fs::create_dir(&models).unwrap();
    let card = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/captions.json");
    std::fs::copy(&card, models.join("captions.json")).unwrap();
    std::fs::write(models.join("captions.bpk"), b"not read").unwrap();
    let current = endotwin::model::weights::read_card(&card).unwrap().version;
    {
        let mut store = Store::open(&lib, OpenMode::Existing).unwrap();
        let mut media: Vec<i64> = store
            .all_polyp_view_ids()
            .unwrap()
            .into_values()
            .flatten()
            .collect();
        media.sort();
        assert!(media.len() >= 6, "{media:?}");
        add_set(&mut store, "captions", &current, &media);
        add_set(
            &mut store,
            "captions-mean",
            &format!("{current}+mean"),
            &media[..2],
        );
        add_set(&mut store, "captions", "run-0-old", &media);
        // A version that only starts like the current one is another version.
        add_set(
            &mut store,
            "captions",
            &format!("{current}-ctx2"),
            &media[..3],
        );
    }
    let before = sets(&lib);
    assert_eq!(before.len(), 4, "{before:?}");

    // Sets the library first saw within the hour are kept and named: an index run with
    // another models folder may be writing them at this moment (#43, prune racing an index).
    let kept = run({
        let mut c = endotwin(&lib);
        c.args(["library", "prune", "--apply", "--models"])
            .arg(&models);
        c
    });
    assert!(kept.ok(), "{}", kept.text());
    assert!(
        kept.says("kept: captions run-0-old")
            && kept.says("within the last hour")
            && kept.says("--include-recent")
            && kept.says("nothing was changed"),
        "{}",
        kept.text()
    );
    assert_eq!(sets(&lib), before, "a recent set was pruned");

    let listed = run({
        let mut c = endotwin(&lib);
        c.args(["library", "prune", "--include-recent", "--models"])
            .arg(&models);
        c
    });
    assert!(listed.ok(), "{}", listed.text());
    assert!(
        listed.says("stale: captions run-0-old"),
        "{}",
        listed.text()
    );
    assert!(
        listed.says(&format!("{current}-ctx2 (3 embeddings)")),
        "{}",
        listed.text()
    );
    assert!(
        !listed.says(&format!("captions {current} (")),
        "{}",
        listed.text()
    );
    assert!(listed.says("nothing was changed"), "{}", listed.text());
    assert_eq!(sets(&lib), before, "a listing changed the library");

    let applied = run({
        let mut c = endotwin(&lib);
        c.args([
            "library",
            "prune",
            "--apply",
            "--include-recent",
            "--models",
        ])
        .arg(&models);
        c
    });
    assert!(applied.ok(), "{}", applied.text());
    let n = before[0].2;
    assert_eq!(
        sets(&lib),
        vec![
            ("captions".to_string(), current.clone(), n),
            ("captions-mean".to_string(), format!("{current}+mean"), 2),
        ]
    );
    let check = run({
        let mut c = endotwin(&lib);
        c.args(["library", "check"]);
        c
    });
    assert!(check.ok(), "{}", check.text());

    // A folder with no card is refused before anything is read or changed.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let refused = run({
        let mut c = endotwin(&lib);
        c.args(["library", "prune", "--apply", "--models"])
            .arg(&empty);
        c
    });
    assert!(
        !refused.ok() && refused.says("holds no model card"),
        "{}",
        refused.text()
    );
    assert_eq!(sets(&lib).len(), 2);
}
