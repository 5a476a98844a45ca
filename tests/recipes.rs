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

/// A run's context on the CPU: the library, the models folder, the command line it records.
fn context<'a>(
    library: &std::path::Path,
    models: &std::path::Path,
    command_line: &str,
    observer: &'a mut dyn TrainObserver,
) -> RecipeContext<'a> {
    RecipeContext {
        library: library.to_path_buf(),
        models: models.to_path_buf(),
        device: burn::tensor::Device::flex(),
        command_line: command_line.to_string(),
        memory: None,
        replace: true,
        observer,
    }
}

#[test]
fn every_recipe_of_the_registry_trains_on_tiny_data() {
    let _rng = crate::common::device_rng();
    let lib = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    crate::common::video_library(lib.path(), 8);
    // The detector needs frames with room for a polyp-free window as large as the polyp.
    let framed = tempfile::tempdir().unwrap();
    crate::common::phantom_library(
        framed.path(),
        &endotwin::data::phantom::PhantomConfig {
            seed: 5,
            polyps: 6,
            views_per_polyp: 4,
            videos: 0,
            background_frames: 0,
            capsule_images: 0,
            image_size: 160,
            ..Default::default()
        },
    );
    let out_dir = out.path().display().to_string();
    let lib_dir = lib.path().display().to_string();
    // In registry order: the scene encoder reads the image encoder trained just before.
    for recipe in recipes() {
        let tiny: &[(&str, &str)] = match recipe.name() {
            // A tighter polyp crop than the default: indexing must cut images the same way.
            "image-encoder" => &[
                ("epochs", "1"),
                ("batch", "4"),
                ("size", "32"),
                ("context", "1.5"),
            ],
            "scene-encoder" => &[("epochs", "1"), ("batch", "4"), ("models", &out_dir)],
            "tracklets" => &[("epochs", "1"), ("anchors", "4"), ("size", "16")],
            "captions" => &[("epochs", "1"), ("batch", "4")],
            // A 32 px image tower in 8 px patches (not the default 64 px): every stage keeps it.
            "prompts" => &[("epochs", "1"), ("batch", "2"), ("size", "32")],
            "twin-backbone" => &[("epochs", "1"), ("batch", "4"), ("copies", "1")],
            "detector-backbone" => &[("epochs", "1"), ("batch", "4"), ("copies", "1")],
            // The library's frames twice over (`--also`): the set joins a second library's.
            "caption-backbone" => &[
                ("epochs", "1"),
                ("batch", "4"),
                ("copies", "2"),
                ("also", &lib_dir),
            ],
            other => panic!("recipe `{other}` has no tiny settings in tests/recipes.rs"),
        };
        let mut settings = Settings::default();
        if recipe.options().iter().any(|o| o.name == "out") {
            settings.set("out", out_dir.clone());
        }
        if ["twin-backbone", "detector-backbone", "caption-backbone"].contains(&recipe.name()) {
            // ImageNet's weights live beside the repository (skipped without them unless
            // ENDOTWIN_REQUIRE_REALDATA is set).
            match crate::common::pretrained("mobilenetv2_imagenet_features.safetensors") {
                Some(path) => settings.set("backbone", path.display().to_string()),
                None => continue,
            }
        }
        for (k, v) in tiny {
            settings.set(k, *v);
        }
        let library = if recipe.name() == "detector-backbone" {
            framed.path()
        } else {
            lib.path()
        };
        let mut observer = Quiet(Vec::new());
        let mut ctx = context(
            library,
            out.path(),
            &format!("tests/recipes.rs {}", recipe.name()),
            &mut observer,
        );
        let trained = endotwin::train::recipe::run_recipe(recipe, &settings, &mut ctx)
            .unwrap_or_else(|e| panic!("recipe {}: {e}\n{:?}", recipe.name(), observer.0));
        assert!(trained.card.is_file(), "{}: no card", recipe.name());
        assert!(
            trained.card.starts_with(out.path()),
            "{} wrote outside the folder it was given: {}",
            recipe.name(),
            trained.card.display()
        );
        if recipe.name() == "image-encoder" {
            let card: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&trained.card).unwrap()).unwrap();
            assert_eq!(card["input"]["context"], 1.5, "the crop it trained on");
        }
        if recipe.name() == "prompts" {
            let card: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&trained.card).unwrap()).unwrap();
            assert_eq!(card["config"]["clip"]["vision"]["image_size"], 32);
            assert_eq!(card["config"]["clip"]["vision"]["patch_size"], 8);
            settings.set("size", "36");
            let mut quiet = Quiet(Vec::new());
            let mut ctx = context(
                lib.path(),
                out.path(),
                "tests/recipes.rs prompts --size 36",
                &mut quiet,
            );
            let refused = endotwin::train::recipe::run_recipe(recipe, &settings, &mut ctx)
                .expect_err("a size that is not a multiple of the patch is refused")
                .to_string();
            assert!(refused.contains("multiple of the patch"), "{refused}");
        }
        if recipe.name() == "caption-backbone" {
            let card = read_card(&trained.card).unwrap();
            let data = card.training.unwrap().data;
            assert!(data.contains(&format!(" and {lib_dir}")), "{data}");
        }
        if recipe.name() == "detector-backbone" {
            let card = read_card(&trained.card).unwrap();
            let config: endotwin::prompts::model::PromptModelConfig =
                card.config(&trained.card).unwrap();
            assert!(
                endotwin::prompts::model::is_detector_only(&config),
                "reads the two stage-1 sentences only"
            );
        }
        promotes_and_demotes(library, &trained.card, trained.run_id);
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
    // What was active for this capability before: the library's own (an earlier recipe of the
    // same kind promoted it) or the shipped one.
    let name = promote::active_name_of(&trained, card).expect("a panel uses it");
    let before = [promote::models_dir_for(lib), endotwin::default_models_dir()]
        .into_iter()
        .map(|d| d.join(format!("{name}.json")))
        .find(|p| p.is_file())
        .map(|p| read_card(&p).unwrap().version);
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
        let demoted = promote::demote(lib, &p.name).unwrap();
        let back = read_card(&p.dir.join(format!("{}.json", p.name))).unwrap();
        assert_eq!(
            Some(back.version),
            before,
            "{}: demote puts back the one before",
            p.name
        );
        // Demote again finds nothing earlier: refused, the model put back stays; the demoted
        // one is kept aside, not deleted.
        assert!(!promote::can_demote(lib, &p.name));
        assert!(promote::demote(lib, &p.name).is_err());
        let still = read_card(&p.dir.join(format!("{}.json", p.name))).unwrap();
        assert_eq!(Some(still.version), before);
        assert!(
            demoted.kept_as.starts_with(p.dir.join("demoted")),
            "{demoted:?}"
        );
        let kept = read_card(&demoted.kept_as).unwrap();
        assert_eq!(kept.version, trained.version);
    } else {
        assert!(!promote::can_demote(lib, &p.name));
        assert!(promote::demote(lib, &p.name).is_err());
    }
}

#[test]
fn a_run_forked_from_another_starts_from_its_weights_with_new_settings() {
    let _rng = crate::common::device_rng();
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
        let mut ctx = context(
            lib.path(),
            out.path(),
            "tests/recipes.rs fork",
            &mut observer,
        );
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
    let mut ctx = context(
        lib.path(),
        out.path(),
        "tests/recipes.rs fork",
        &mut observer,
    );
    let why = endotwin::train::recipe::run_recipe(image, &settings, &mut ctx)
        .unwrap_err()
        .to_string();
    assert!(why.contains("first.checkpoints"), "{why}");
    // In a line, with the kind its card names (round 10 N29: every missing tensor's name,
    // some 15,000 characters); nothing of the refused run is left.
    assert!(
        why.len() < 700
            && !why.contains("Struct:")
            && why.contains("holds another model than this run trains")
            && why.contains("tracklet"),
        "{why}"
    );
    assert!(!out.path().join("wrong.json").exists());
    assert!(!out.path().join("wrong.checkpoints").exists());
}

#[test]
fn a_batch_too_big_for_memory_is_refused_before_anything_starts() {
    let _rng = crate::common::device_rng();
    let lib = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    crate::common::video_library(lib.path(), 8);
    let runs_before = Store::open(lib.path(), OpenMode::Existing)
        .unwrap()
        .runs()
        .unwrap()
        .len();
    for recipe in recipes() {
        let (flag, tiny): (&str, &[(&str, &str)]) = match recipe.name() {
            "image-encoder" => ("batch", &[("batch", "4"), ("size", "32")]),
            // The scene encoder trains over a ViT: the shipped one is `tracklet-frames`.
            "scene-encoder" => (
                "batch",
                &[("batch", "4"), ("image-model", "tracklet-frames")],
            ),
            "tracklets" => ("anchors", &[("anchors", "4"), ("size", "16")]),
            "captions" => ("batch", &[("batch", "4")]),
            "prompts" => ("batch", &[("batch", "2")]),
            "twin-backbone" => ("batch", &[("batch", "4")]),
            "detector-backbone" => ("batch", &[("batch", "4")]),
            "caption-backbone" => ("batch", &[("batch", "4")]),
            other => panic!("recipe `{other}` has no tiny settings in tests/recipes.rs"),
        };
        let mut settings = Settings::default();
        if recipe.options().iter().any(|o| o.name == "out") {
            settings.set("out", out.path().display().to_string());
        }
        for (k, v) in tiny {
            settings.set(k, *v);
        }
        // A machine with a kilobyte to spare: no step fits.
        settings.set("memory-gb", "0.000001");
        let mut observer = Quiet(Vec::new());
        let mut ctx = context(
            lib.path(),
            &endotwin::default_models_dir(),
            &format!("tests/recipes.rs {}", recipe.name()),
            &mut observer,
        );
        let e = endotwin::train::recipe::run_recipe(recipe, &settings, &mut ctx)
            .err()
            .unwrap_or_else(|| panic!("{} started with 1 kB", recipe.name()))
            .to_string();
        assert!(
            e.contains(&format!("--{flag} "))
                && e.contains("needs about")
                && e.contains("Nothing was started"),
            "{}: {e}",
            recipe.name()
        );
        // The machine's own figure is used when --memory-gb is not given.
        settings.set("memory-gb", "0");
        let e = endotwin::train::recipe::run_recipe(recipe, &settings, &mut ctx)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("--memory-gb 0"), "{}: {e}", recipe.name());
    }
    // Nothing was written: no run recorded, no checkpoint folder, no card.
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    assert_eq!(store.runs().unwrap().len(), runs_before);
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0);
}

/// Deletes a folder when the first epoch ends (a user cleaning up a run's folder mid-run).
struct Deleter {
    folder: std::path::PathBuf,
    done: bool,
}

impl TrainObserver for Deleter {
    fn message(&mut self, _: &str) {}
    fn step(&mut self, _: usize, _: usize, _: usize, _: usize, _: f64) {}
    fn epoch(&mut self, _: &EpochReport, _: usize) {
        if !self.done {
            std::fs::remove_dir_all(&self.folder).unwrap();
            self.done = true;
        }
    }
}

#[test]
fn a_run_whose_folder_is_deleted_under_it_writes_it_again_and_loses_nothing() {
    let _rng = crate::common::device_rng();
    let lib = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    crate::common::video_library(lib.path(), 8);
    let runs = out.path().join("runs");
    let recipe = endotwin::train::recipe("captions").unwrap();
    let mut settings = Settings::default();
    for (k, v) in [("epochs", "2"), ("batch", "4"), ("name", "c")] {
        settings.set(k, v);
    }
    settings.set("out", runs.display().to_string());
    let mut observer = Deleter {
        folder: runs.clone(),
        done: false,
    };
    let mut ctx = context(
        lib.path(),
        out.path(),
        "tests/recipes.rs deleted folder",
        &mut observer,
    );
    let trained = endotwin::train::recipe::run_recipe(recipe, &settings, &mut ctx).unwrap();
    assert!(observer.done, "the folder was deleted after epoch 1");
    assert!(trained.card.is_file(), "the model is saved all the same");
    assert!(runs.join("c.checkpoints/epoch-002/model.bpk").is_file());
    let state = std::fs::read_to_string(runs.join("c.checkpoints/state.json")).unwrap();
    assert!(state.contains("\"epoch\": 2"), "{state}");
}

#[test]
fn an_image_encoder_fine_tunes_from_a_card_and_can_learn_to_survive_its_signs() {
    let _rng = crate::common::device_rng();
    use burn::tensor::{Device, Distribution, Tensor};
    let lib = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    crate::common::video_library(lib.path(), 8);
    let image = endotwin::train::recipe("image-encoder").unwrap();
    let run = |extra: &[(&str, String)]| {
        let mut settings = Settings::default();
        settings.set("out", out.path().display().to_string());
        settings.set("batch", "4");
        settings.set("size", "32");
        for (k, v) in extra {
            settings.set(k, v);
        }
        let mut observer = Quiet(Vec::new());
        let mut ctx = RecipeContext {
            library: lib.path().to_path_buf(),
            models: out.path().to_path_buf(),
            device: Device::flex(),
            command_line: "tests/recipes.rs init".into(),
            memory: None,
            replace: true,
            observer: &mut observer,
        };
        endotwin::train::recipe::run_recipe(image, &settings, &mut ctx)
            .map(|t| (t.card, observer.0.clone()))
    };
    let (first, _) = run(&[("name", "first".into()), ("epochs", "1".into())]).unwrap();
    let first_s = first.display().to_string();
    // No epoch: the saved encoder is the card's, exactly.
    let (same, said) = run(&[
        ("name", "same".into()),
        ("epochs", "0".into()),
        ("init", first_s.clone()),
    ])
    .unwrap();
    assert!(
        said.iter().any(|l| l.contains("starts from first")),
        "{said:?}"
    );
    let device = Device::flex();
    let load = |card: &std::path::Path| {
        endotwin::model::weights::load(
            card,
            endotwin::model::weights::ModelKind::ImageEncoder,
            |c: &endotwin::model::vit::VitConfig| c.init(&device),
        )
        .unwrap()
        .0
    };
    let x = Tensor::<4>::random([2, 3, 32, 32], Distribution::Normal(0.0, 1.0), &device);
    let diff: f32 = (load(&first).forward(x.clone()) - load(&same).forward(x))
        .abs()
        .max()
        .into_scalar();
    assert!(diff < 1e-6, "{diff}");
    // With the quantisation term, its figure is in the card's last epoch.
    let (quantised, _) = run(&[
        ("name", "quantised".into()),
        ("epochs", "1".into()),
        ("init", first_s.clone()),
        ("quantization", "1".into()),
    ])
    .unwrap();
    let card = read_card(&quantised).unwrap();
    let metrics = card.training.unwrap().metrics;
    assert!(
        metrics
            .iter()
            .any(|(k, v)| k == "quantisation" && v.is_finite()),
        "{metrics:?}"
    );
    // Another input size is refused by name, and nothing is saved.
    let why = run(&[
        ("name", "other".into()),
        ("epochs", "1".into()),
        ("size", "48".into()),
        ("init", first_s),
    ])
    .unwrap_err()
    .to_string();
    assert!(why.contains("pass --size 32"), "{why}");
    assert!(!out.path().join("other.json").exists());
}
