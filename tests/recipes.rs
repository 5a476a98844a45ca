//! Every recipe of the registry (what `endotwin train --list` prints and the Training tab
//! offers) runs end to end on tiny data and saves a model with its card. A recipe added to the
//! registry without tiny settings here fails this test, so none goes untried. Each run's model
//! can then be promoted to the library's active one for its capability, and demoted again.

use endotwin::engine::promote;
use endotwin::model::weights::read_card;
use endotwin::store::{OpenMode, Store};
use endotwin::train::recipe::{RecipeContext, Settings, TrainObserver};
use endotwin::train::{EpochReport, recipes};

struct Quiet(Vec<String>);

impl TrainObserver for Quiet {
    fn message(&mut self, line: &str) {
        self.0.push(line.to_string());
    }
    fn step(&mut self, _: usize, _: usize, _: usize, _: usize, loss: f64) {
        assert!(loss.is_finite(), "a step's loss is {loss}");
    }
    fn epoch(&mut self, _: &EpochReport, _: usize) {}
}

#[test]
fn every_recipe_of_the_registry_trains_on_tiny_data() {
    let lib = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    crate::common::video_library(lib.path(), 8);
    let out_dir = out.path().display().to_string();
    // In registry order: the scene encoder reads the image encoder trained just before.
    for recipe in recipes() {
        let tiny: &[(&str, &str)] = match recipe.name() {
            "image-encoder" => &[("epochs", "1"), ("batch", "4"), ("size", "32")],
            "scene-encoder" => &[("epochs", "1"), ("batch", "4"), ("models", &out_dir)],
            "tracklets" => &[("epochs", "1"), ("anchors", "4"), ("size", "16")],
            "captions" => &[("epochs", "1"), ("batch", "4")],
            "prompts" => &[("epochs", "1"), ("batch", "2")],
            other => panic!("recipe `{other}` has no tiny settings in tests/recipes.rs"),
        };
        let mut settings = Settings::default();
        if recipe.options().iter().any(|o| o.name == "out") {
            settings.set("out", out_dir.clone());
        }
        for (k, v) in tiny {
            settings.set(k, *v);
        }
        let mut observer = Quiet(Vec::new());
        let mut ctx = RecipeContext {
            library: lib.path().to_path_buf(),
            models: out.path().to_path_buf(),
            device: burn::tensor::Device::flex(),
            command_line: format!("tests/recipes.rs {}", recipe.name()),
            observer: &mut observer,
        };
        let trained = endotwin::train::recipe::run_recipe(recipe, &settings, &mut ctx)
            .unwrap_or_else(|e| panic!("recipe {}: {e}\n{:?}", recipe.name(), observer.0));
        assert!(trained.card.is_file(), "{}: no card", recipe.name());
        assert!(
            trained.card.starts_with(out.path()),
            "{} wrote outside the folder it was given: {}",
            recipe.name(),
            trained.card.display()
        );
        promotes_and_demotes(lib.path(), &trained.card, trained.run_id);
    }
}

/// The run recorded its card; promoting it makes it the library's model for its capability
/// (recording where it came from), and demote puts back the shipped one.
fn promotes_and_demotes(lib: &std::path::Path, card: &std::path::Path, run: i64) {
    let store = Store::open(lib, OpenMode::Existing).unwrap();
    let linked = store
        .run_card(run)
        .unwrap()
        .expect("the run records its card");
    assert_eq!(
        std::path::PathBuf::from(linked),
        std::fs::canonicalize(card).unwrap()
    );
    let trained = read_card(card).unwrap();
    let p = promote::promote(lib, card, Some(run)).unwrap();
    assert_eq!(
        promote::models_dir_for(lib),
        p.dir,
        "panels now read the library's models"
    );
    let active = read_card(&p.dir.join(format!("{}.json", p.name))).unwrap();
    assert_eq!(active.version, trained.version);
    assert_eq!(active.promoted_from.as_ref().and_then(|f| f.run), Some(run));
    let shipped = endotwin::default_models_dir().join(format!("{}.json", p.name));
    if shipped.is_file() {
        assert!(p.kept_previous, "{}: the shipped model is kept", p.name);
        promote::demote(lib, &p.name).unwrap();
        let back = read_card(&p.dir.join(format!("{}.json", p.name))).unwrap();
        assert_eq!(back.version, read_card(&shipped).unwrap().version);
        // Demote again is promote again.
        promote::demote(lib, &p.name).unwrap();
        let again = read_card(&p.dir.join(format!("{}.json", p.name))).unwrap();
        assert_eq!(again.version, trained.version);
    } else {
        assert!(!promote::can_demote(lib, &p.name));
        assert!(promote::demote(lib, &p.name).is_err());
    }
}

#[test]
fn a_run_forked_from_another_starts_from_its_weights_with_new_settings() {
    let lib = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    crate::common::video_library(lib.path(), 8);
    let run = |extra: &[(&str, &str)]| {
        let recipe = endotwin::train::recipe("tracklets").unwrap();
        let mut settings = Settings::default();
        settings.set("out", out.path().display().to_string());
        for (k, v) in [("anchors", "4"), ("size", "16")].iter().chain(extra) {
            settings.set(k, *v);
        }
        let mut observer = Quiet(Vec::new());
        let mut ctx = RecipeContext {
            library: lib.path().to_path_buf(),
            models: out.path().to_path_buf(),
            device: burn::tensor::Device::flex(),
            command_line: "tests/recipes.rs fork".into(),
            observer: &mut observer,
        };
        let result = endotwin::train::recipe::run_recipe(recipe, &settings, &mut ctx);
        (result, observer.0)
    };
    let (first, _) = run(&[("epochs", "1"), ("name", "first")]);
    let first = first.unwrap();
    // Forked with other settings (more anchors a step) and no epoch of its own: exactly the
    // first run's weights.
    let card = first.card.display().to_string();
    let (fork, said) = run(&[
        ("epochs", "0"),
        ("anchors", "6"),
        ("name", "forked"),
        ("fork", &card),
    ]);
    let fork = fork.unwrap();
    assert!(
        said.iter().any(|m| m.starts_with("forked from")),
        "{said:?}"
    );
    let bytes =
        |c: &std::path::Path| std::fs::read(endotwin::model::weights::record_path(c)).unwrap();
    assert_eq!(bytes(&fork.card), bytes(&first.card), "the forked weights");
    // Forked and trained on: its own epochs, counted from 1.
    let (more, _) = run(&[("epochs", "1"), ("name", "more"), ("fork", &card)]);
    assert_ne!(bytes(&more.unwrap().card), bytes(&first.card));
    // --resume and --fork together are refused before anything runs.
    let (both, _) = run(&[
        ("epochs", "1"),
        ("name", "x"),
        ("fork", &card),
        ("resume", "true"),
    ]);
    let why = both.unwrap_err().to_string();
    assert!(why.contains("one or the other"), "{why}");
    // A checkpoint of another architecture is refused by name.
    let image = endotwin::train::recipe("image-encoder").unwrap();
    let mut settings = Settings::default();
    for (k, v) in [
        ("out", out.path().display().to_string()),
        ("epochs", "1".into()),
        ("batch", "4".into()),
        ("size", "32".into()),
        ("name", "wrong".into()),
        ("fork", card.clone()),
    ] {
        settings.set(k, &v);
    }
    let mut observer = Quiet(Vec::new());
    let mut ctx = RecipeContext {
        library: lib.path().to_path_buf(),
        models: out.path().to_path_buf(),
        device: burn::tensor::Device::flex(),
        command_line: "tests/recipes.rs fork".into(),
        observer: &mut observer,
    };
    let why = endotwin::train::recipe::run_recipe(image, &settings, &mut ctx)
        .unwrap_err()
        .to_string();
    assert!(why.contains("first.checkpoints"), "{why}");
    assert!(!out.path().join("wrong.json").exists());
}
