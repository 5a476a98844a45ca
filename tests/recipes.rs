//! Every recipe of the registry (what `endotwin train --list` prints and the Training tab
//! offers) runs end to end on tiny data and saves a model with its card. A recipe added to the
//! registry without tiny settings here fails this test, so none goes untried.

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
        let trained = recipe
            .run(&settings, &mut ctx)
            .unwrap_or_else(|e| panic!("recipe {}: {e}\n{:?}", recipe.name(), observer.0));
        assert!(trained.card.is_file(), "{}: no card", recipe.name());
        assert!(
            trained.card.starts_with(out.path()),
            "{} wrote outside the folder it was given: {}",
            recipe.name(),
            trained.card.display()
        );
    }
}
