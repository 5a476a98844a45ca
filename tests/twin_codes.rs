//! What a twin image encoder's card says about its codes and crops (code centre, ITQ rotation,
//! longer codes, crop context, quarter turns): each rides in the card as a new version, the index follows,
//! and a hand edit is refused by name.

use burn::tensor::Device;
use endotwin::engine::Progress;
use endotwin::model::preprocess::TwinInput;
use endotwin::model::vit::VitConfig;
use endotwin::model::weights::{self, ModelCard, ModelKind};
use endotwin::store::{OpenMode, Store};
use endotwin::twins::{Search, TwinError, TwinIndex, TwinModels, index_library};

/// A tiny library and, in its own folder, a seeded tiny twin image encoder (32 px, 64-d,
/// version "v1") saved as `twin-image`: the library, the models folder and the card's path.
fn tiny_library_and_encoder(
    device: &Device,
) -> (tempfile::TempDir, tempfile::TempDir, std::path::PathBuf) {
    let lib = tempfile::tempdir().unwrap();
    crate::gui::tiny_library(lib.path());
    let models = tempfile::tempdir().unwrap();
    let config = VitConfig::new(32, 16, 32, 1, 2).with_projection(Some(64));
    let mut card = ModelCard::new("twin-image", ModelKind::ImageEncoder, "v1", "t", &config);
    card.input = Some(TwinInput::new(32));
    device.seed(3);
    let path = weights::save(&config.init(device), &card, models.path()).unwrap();
    (lib, models, path)
}

/// The card at `path` with `key` set by hand to what `edit` makes of it: loading the models
/// folder is refused, naming the card.
fn hand_edit_is_refused(
    models: &std::path::Path,
    path: &std::path::Path,
    key: &str,
    edit: impl FnOnce(&serde_json::Value) -> serde_json::Value,
) {
    let mut text: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    text[key] = edit(&text[key]);
    std::fs::write(path, text.to_string()).unwrap();
    let err = TwinModels::load(models, &Device::flex())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("twin-image.json"), "{err}");
}

/// [`tiny_library_and_encoder`] with the library indexed by the encoder as saved: (library,
/// models folder, card, the models loaded).
fn indexed_tiny_library(
    device: &Device,
) -> (
    tempfile::TempDir,
    tempfile::TempDir,
    std::path::PathBuf,
    TwinModels,
) {
    let (lib, models, path) = tiny_library_and_encoder(device);
    let before = TwinModels::load(models.path(), device).unwrap();
    let mut store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    index_library(&mut store, &before, &Progress::new()).unwrap();
    (lib, models, path, before)
}

/// The library in `store`, indexed before the card's codes changed, is stale for `after`; it
/// is indexed again: (the library, its index).
fn stale_then_reindexed(
    store: Store,
    lib: &std::path::Path,
    after: &TwinModels,
) -> (Store, TwinIndex) {
    assert!(matches!(
        TwinIndex::load(&store, after),
        Err(TwinError::StaleIndex { .. })
    ));
    drop(store);
    let mut store = Store::open(lib, OpenMode::Existing).unwrap();
    index_library(&mut store, after, &Progress::new()).unwrap();
    let index = TwinIndex::load(&store, after).unwrap();
    (store, index)
}

#[test]
fn a_code_centre_from_training_views_gives_the_card_a_new_version_and_the_index_follows() {
    let _rng = crate::common::device_rng();
    let device = Device::flex();
    let (lib, models, path, _) = indexed_tiny_library(&device);
    let mut c = crate::common::endotwin(lib.path());
    c.args(["model", "code-center"]).arg(&path);
    let ran = crate::common::run(c);
    assert!(ran.ok(), "{}", ran.text());
    assert!(ran.says("code centre of 12 views"), "{}", ran.text());
    let after = TwinModels::load(models.path(), &device).unwrap();
    let center = after.image_card.code_center.clone().unwrap();
    assert_eq!(center.len(), 64);
    assert!(after.image_card.version.starts_with("v1-c"));
    // The centre is the views' mean embedding: centred codes split them about evenly.
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let views: Vec<_> = store
        .polyps()
        .unwrap()
        .iter()
        .flat_map(|p| store.polyp_views(p.id).unwrap())
        .map(|m| endotwin::twins::load_view(&store, &m).unwrap())
        .collect();
    let embeddings = after.encode_views(&views);
    for d in 0..64 {
        let mean = embeddings.iter().map(|e| e[d]).sum::<f32>() / embeddings.len() as f32;
        assert!((mean - center[d]).abs() < 1e-5);
    }
    let (_store, index) = stale_then_reindexed(store, lib.path(), &after);
    let result = index.query(index.vector(0), 2, Search::Hamming, &[]);
    assert_eq!(
        result.twins[0].hamming, 0,
        "a polyp's own code is at distance 0"
    );
    // A centre of the wrong length (a hand edit) is refused by name.
    hand_edit_is_refused(models.path(), &path, "code_center", |_| {
        serde_json::json!([0.0, 1.0])
    });
}

#[test]
fn an_itq_rotation_rides_in_the_card_turns_the_codes_and_a_bad_one_is_refused() {
    let _rng = crate::common::device_rng();
    let device = Device::flex();
    let (lib, models, path) = tiny_library_and_encoder(&device);
    let mut c = crate::common::endotwin(lib.path());
    c.args(["model", "code-center", "--itq", "--itq-iterations", "20"])
        .arg(&path);
    let ran = crate::common::run(c);
    assert!(ran.ok(), "{}", ran.text());
    assert!(ran.says("and an ITQ rotation"), "{}", ran.text());
    let models_after = TwinModels::load(models.path(), &device).unwrap();
    let card = &models_after.image_card;
    let (center, rotation) = (
        card.code_center.clone().unwrap(),
        card.code_rotation.clone().unwrap(),
    );
    assert_eq!(rotation.len(), 64 * 64);
    // Orthogonal: its rows are unit and orthogonal to each other.
    for (i, j) in [(0, 0), (0, 1), (5, 9), (63, 63)] {
        let dot: f32 = (0..64)
            .map(|k| rotation[i * 64 + k] * rotation[j * 64 + k])
            .sum();
        let want = if i == j { 1.0 } else { 0.0 };
        assert!((dot - want).abs() < 1e-3, "row {i} . row {j} = {dot}");
    }
    // A view's code is the signs of its centred embedding turned by the rotation.
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let polyp = store.polyps().unwrap()[0].id;
    let view = store.polyp_views(polyp).unwrap().remove(0);
    let e = models_after.encode_views(&[endotwin::twins::load_view(&store, &view).unwrap()]);
    let centred: Vec<f32> = e[0].iter().zip(&center).map(|(x, m)| x - m).collect();
    let turned: Vec<f32> = (0..64)
        .map(|j| (0..64).map(|i| centred[i] * rotation[i * 64 + j]).sum())
        .collect();
    assert_eq!(
        models_after.coder.code(&e[0]),
        endotwin::model::hash::pack_signs(&turned)
    );
    drop(store);
    // A rotation cut short (a hand edit) is refused by name.
    hand_edit_is_refused(models.path(), &path, "code_rotation", |hex| {
        let hex = hex.as_str().unwrap();
        serde_json::json!(hex[..hex.len() - 8].to_string())
    });
}

#[test]
fn longer_codes_ride_in_the_card_keep_a_polyps_own_code_and_a_bad_length_is_refused() {
    let _rng = crate::common::device_rng();
    let device = Device::flex();
    let (lib, models, path, before) = indexed_tiny_library(&device);
    // Not a multiple of the encoder's 64 dimensions: refused, the card untouched.
    let card_before = std::fs::read(&path).unwrap();
    let mut c = crate::common::endotwin(lib.path());
    c.args(["model", "code-bits", "--bits", "100"]).arg(&path);
    let ran = crate::common::run(c);
    assert!(!ran.ok());
    assert!(ran.says("multiple of its 64 dimensions"), "{}", ran.text());
    assert_eq!(std::fs::read(&path).unwrap(), card_before);

    let mut c = crate::common::endotwin(lib.path());
    c.args(["model", "code-bits", "--bits", "256"]).arg(&path);
    let ran = crate::common::run(c);
    assert!(ran.ok(), "{}", ran.text());
    assert!(
        ran.says("256-bit codes (32 bytes a polyp)"),
        "{}",
        ran.text()
    );
    let after = TwinModels::load(models.path(), &device).unwrap();
    assert_eq!(after.code_bits(), 256);
    assert_ne!(after.image_card.version, before.image_card.version);
    // The first 64 bits are the plain signs: the codes grow, the old ones stay their prefix.
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let polyp = store.polyps().unwrap()[0].id;
    let view = store.polyp_views(polyp).unwrap().remove(0);
    let e = after.encode_views(&[endotwin::twins::load_view(&store, &view).unwrap()]);
    let (long, short) = (after.coder.code(&e[0]), before.coder.code(&e[0]));
    assert_eq!(long.len(), 4);
    assert_eq!(long[0], short[0]);
    // Re-indexed, every search mode finds each polyp itself first, over 256-bit codes.
    let (store, index) = stale_then_reindexed(store, lib.path(), &after);
    for search in [
        Search::Hamming,
        Search::Asymmetric,
        Search::Cosine,
        Search::Shortlist,
    ] {
        for i in 0..index.len() {
            let result = index.query(index.vector(i), 1, search, &[]);
            assert_eq!(result.bits, 256);
            assert_eq!(
                result.twins[0].polyp.id,
                index.polyps()[i].id,
                "{search:?}: polyp {i} is its own nearest twin"
            );
        }
    }
    // Back to 64 bits: the card's version is the one before.
    drop(store);
    let mut c = crate::common::endotwin(lib.path());
    c.args(["model", "code-bits", "--bits", "64"]).arg(&path);
    assert!(crate::common::run(c).ok());
    let again = TwinModels::load(models.path(), &device).unwrap();
    assert_eq!(again.image_card.version, before.image_card.version);
    assert_eq!(again.code_bits(), 64);
    // A length edited by hand is refused by name.
    hand_edit_is_refused(
        models.path(),
        &path,
        "code_bits",
        |_| serde_json::json!({"bits": 96, "seed": 1}),
    );
}

#[test]
fn a_tighter_crop_rides_in_the_card_as_a_new_version_and_the_index_follows() {
    let _rng = crate::common::device_rng();
    let device = Device::flex();
    let (lib, models, path, before) = indexed_tiny_library(&device);
    // Not a positive number of times: refused, the card untouched.
    // Nor sub-pixel or whole-world crops (hostile round 4, W5).
    let card_before = std::fs::read(&path).unwrap();
    for context in ["0", "1e-30", "1e30", "NaN"] {
        let mut c = crate::common::endotwin(lib.path());
        c.args(["model", "crop-context", "--context", context])
            .arg(&path);
        let ran = crate::common::run(c);
        assert!(!ran.ok(), "{context}: {}", ran.text());
        assert!(ran.says("between 0.5 and 16"), "{}", ran.text());
        assert_eq!(std::fs::read(&path).unwrap(), card_before);
    }

    let mut c = crate::common::endotwin(lib.path());
    c.args(["model", "crop-context", "--context", "1.25"])
        .arg(&path);
    let ran = crate::common::run(c);
    assert!(ran.ok(), "{}", ran.text());
    assert!(ran.says("polyp crops of 1.25 x the box"), "{}", ran.text());
    let after = TwinModels::load(models.path(), &device).unwrap();
    assert_eq!(after.input().context, 1.25);
    assert_eq!(after.image_card.version, "v1-ctx1.25");
    // The same view, cut tighter, is another embedding; the tracklet crops keep theirs.
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let polyp = store.polyps().unwrap()[0].id;
    let view = store.polyp_views(polyp).unwrap().remove(0);
    let image = [endotwin::twins::load_view(&store, &view).unwrap()];
    assert_ne!(after.encode_views(&image), before.encode_views(&image));
    assert_eq!(
        after.encode_views_at(before.input().context, 1, &image),
        before.encode_views(&image)
    );
    // Indexed with the old crops: stale, then re-indexed; each polyp finds itself first.
    let (_store, index) = stale_then_reindexed(store, lib.path(), &after);
    for i in 0..index.len() {
        let result = index.query(index.vector(i), 1, Search::Cosine, &[]);
        assert_eq!(result.twins[0].polyp.id, index.polyps()[i].id);
    }
    // Twice in a row: one context mark, not two.
    let mut c = crate::common::endotwin(lib.path());
    c.args(["model", "crop-context", "--context", "2"])
        .arg(&path);
    assert!(crate::common::run(c).ok());
    let again = TwinModels::load(models.path(), &device).unwrap();
    assert_eq!(again.image_card.version, "v1-ctx2");
}

#[test]
fn turned_crops_ride_in_the_card_and_a_rolled_view_keeps_its_embedding() {
    let _rng = crate::common::device_rng();
    let device = Device::flex();
    let (lib, models, path, before) = indexed_tiny_library(&device);
    // Not 1, 2 or 4 quarter turns: refused, the card untouched.
    let card_before = std::fs::read(&path).unwrap();
    let mut c = crate::common::endotwin(lib.path());
    c.args(["model", "turns", "--turns", "3"]).arg(&path);
    let ran = crate::common::run(c);
    assert!(!ran.ok());
    assert!(ran.says("1, 2 or 4 quarter turns"), "{}", ran.text());
    assert_eq!(std::fs::read(&path).unwrap(), card_before);

    let mut c = crate::common::endotwin(lib.path());
    c.args(["model", "turns", "--turns", "4"]).arg(&path);
    let ran = crate::common::run(c);
    assert!(ran.ok(), "{}", ran.text());
    assert!(ran.says("4 quarter turn(s)"), "{}", ran.text());
    let after = TwinModels::load(models.path(), &device).unwrap();
    assert_eq!(after.input().turns, 4);
    assert_eq!(after.image_card.version, "v1-rot4");

    // A view and the same view with the endoscope rolled a quarter turn (image and mask
    // turned): one embedding once crops are turned, two before.
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let polyp = store.polyps().unwrap()[0].id;
    let view = store.polyp_views(polyp).unwrap().remove(0);
    let (image, focus) = endotwin::twins::load_view(&store, &view).unwrap();
    let endotwin::model::preprocess::Focus::Box([bx, by, bw, bh]) = focus else {
        panic!("the phantom view has a mask");
    };
    let rolled = (
        image::DynamicImage::ImageRgb8(image::imageops::rotate90(&image.to_rgb8())),
        endotwin::model::preprocess::Focus::Box([image.height() as f32 - by - bh, bx, bh, bw]),
    );
    let cosine = |m: &TwinModels| {
        let e = m.encode_views(&[(image.clone(), focus), rolled.clone()]);
        e[0].iter().zip(&e[1]).map(|(a, b)| a * b).sum::<f32>()
    };
    assert!(cosine(&after) > 0.999, "{}", cosine(&after));
    assert!(cosine(&before) < cosine(&after), "{}", cosine(&before));

    // Indexed as it was: stale, then re-indexed; each polyp finds itself first.
    let (_store, index) = stale_then_reindexed(store, lib.path(), &after);
    for i in 0..index.len() {
        let result = index.query(index.vector(i), 1, Search::Cosine, &[]);
        assert_eq!(result.twins[0].polyp.id, index.polyps()[i].id);
    }
    // A new crop keeps the turns' mark; one turn takes it off again.
    for (args, version) in [
        (["crop-context", "--context", "2"], "v1-ctx2-rot4"),
        (["turns", "--turns", "1"], "v1-ctx2"),
    ] {
        let mut c = crate::common::endotwin(lib.path());
        c.arg("model").args(args).arg(&path);
        assert!(crate::common::run(c).ok());
        let again = TwinModels::load(models.path(), &device).unwrap();
        assert_eq!(again.image_card.version, version);
    }
    // Turns edited by hand (3 is not a whole symmetry of the square crop): refused by name.
    hand_edit_is_refused(models.path(), &path, "input", |input| {
        let mut input = input.clone();
        input["turns"] = serde_json::json!(3);
        input
    });
}
