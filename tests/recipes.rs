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
