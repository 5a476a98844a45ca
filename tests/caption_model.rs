//! Capsule captions end to end: a tiny phantom capsule set, a few steps of the multi-positive
//! KL loss, caption retrieval above chance on other patients' frames; the towers agree on
//! wgpu and the CPU; `captions refine` prints two lines; the Captions tab shows a frame's top
//! captions, its predicted category and the refined ground truth.

use burn::tensor::Device;
use endotwin::captions::data::CaptionSet;
use endotwin::captions::model::{CaptionModel, CaptionModelConfig, caption_tokenizer};
use endotwin::captions::{CATEGORIES, Refiner};
use endotwin::data::phantom::{self, PhantomConfig, Split};
use endotwin::model::block::Activation;
use endotwin::model::clip::ClipConfig;
use endotwin::model::text::TextEncoderConfig;
use endotwin::model::vit::{Positions, VitConfig};
use endotwin::plumbing::Progress;
use endotwin::store::{OpenMode, Store};
use endotwin::train::captions::{CaptionTrainingConfig, train};
use endotwin::train::{Checkpoint, EpochReport, TrainError, TrainEvents};
use std::path::Path;

/// `frames` captioned capsule frames of `split` at 48 px (patients of 24 frames).
pub(crate) fn capsule_library(dir: &Path, split: Split, frames: usize) -> Store {
    let mut store = Store::open(dir, OpenMode::CreateIfMissing).unwrap();
    let cfg = PhantomConfig {
        seed: 4,
        split,
        polyps: 0,
        videos: 0,
        background_frames: 0,
        capsule_images: frames,
        image_size: 48,
        ..PhantomConfig::default()
    };
    phantom::generate(&mut store, &cfg, &Progress::new()).unwrap();
    store
}

/// The shipped geometry, smaller: a 32 px ViT of one block, a one-block text tower, 32-d.
pub(crate) fn tiny_config() -> CaptionModelConfig {
    let tokenizer = caption_tokenizer(Refiner::shipped());
    let vision = VitConfig::new(32, 8, 32, 1, 2)
        .with_positions(Positions::SinCos)
        .with_activation(Activation::Gelu)
        .with_norm_before_blocks(false)
        .with_projection(Some(32));
    let text = TextEncoderConfig::new(32, 1, 2)
        .with_vocab_size(tokenizer.vocab_size())
        .with_context(16)
        .with_activation(Activation::Gelu)
        .with_projection(Some(32));
    CaptionModelConfig::new(ClipConfig::new(vision.into(), text), tokenizer)
}

struct Quiet;

impl TrainEvents<CaptionModel> for Quiet {
    fn step(&mut self, _: usize, _: usize, _: usize, loss: f64) {
        assert!(loss.is_finite());
    }
    fn epoch(&mut self, _: &EpochReport, _: &Checkpoint<CaptionModel>) -> Result<(), TrainError> {
        Ok(())
    }
}

/// A tiny caption model trained with the KL loss on `set`.
pub(crate) fn tiny_model(set: &CaptionSet, epochs: usize) -> CaptionModel {
    let config = CaptionTrainingConfig::new(tiny_config())
        .with_epochs(epochs)
        .with_lr(1e-3)
        .with_head_steps(60)
        .with_seed(3);
    let device = Device::flex().autodiff();
    use burn::module::Module;
    train(&config, set, &device, None, &mut Quiet)
        .unwrap()
        .valid()
}

#[test]
fn a_few_kl_steps_rank_captions_above_chance_for_other_patients() {
    let _rng = crate::common::device_rng();
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let train_store = capsule_library(a.path(), Split::Train, 240);
    let test_store = capsule_library(b.path(), Split::Test, 96);
    let config = tiny_config();
    let train_set = CaptionSet::load(&train_store, &config, &Progress::new()).unwrap();
    let test_set = CaptionSet::load(&test_store, &config, &Progress::new()).unwrap();
    assert_eq!(train_set.patients(), 10);
    assert!(train_set.captions.len() >= 5, "{:?}", train_set.captions);
    let model = tiny_model(&train_set, 4);
    let candidate = endotwin::eval::captions::Candidate {
        label: "tiny".into(),
        model: &model,
        config: &config,
        loss: "kl".into(),
        shots: "full".into(),
        baseline: false,
    };
    let device = Device::flex();
    let e = endotwin::eval::captions::run(
        &test_set,
        &train_set,
        &[candidate],
        5,
        &device,
        &device.clone().autodiff(),
    );
    let chance = 1.0 / test_set.captions.len() as f64;
    let r = &e.retrieval[0];
    assert!(
        r.top1 > 2.0 * chance,
        "top-1 {:.3} with {} candidate captions (chance {chance:.3})",
        r.top1,
        test_set.captions.len()
    );
    assert!(r.top5 >= r.top1 && r.top1_ci[0] <= r.top1 && r.top1 <= r.top1_ci[1]);
    // The category head and the histogram baseline both report on the same frames.
    assert_eq!(
        e.categories.len(),
        3,
        "the head, its top caption's categories, the histogram"
    );
    assert!(e.category.accuracy.is_finite() && e.category.baseline_macro_f1.is_finite());
    assert_eq!(e.categories[0].confusion.len(), CATEGORIES.len());
    let counted: usize = e.categories[0].confusion.iter().flatten().sum();
    assert_eq!(counted, test_set.frames.len());
}

#[test]
fn the_caption_towers_agree_on_wgpu_and_the_cpu() {
    let _rng = crate::common::device_rng();
    use burn::module::Module;
    use endotwin::compute::{self, BackendPref};
    let gpu = match compute::select(BackendPref::Gpu) {
        Ok(c) => c.device,
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("skipping: {e}");
            return;
        }
        Err(e) => panic!("CI must have a wgpu adapter (mesa-vulkan-drivers): {e}"),
    };
    let cpu = Device::flex();
    cpu.seed(21);
    let config = tiny_config();
    let model = config.init(&cpu);
    let images = vec![image::DynamicImage::ImageRgb8(image::RgbImage::from_fn(
        40,
        40,
        |x, y| image::Rgb([(x * 6) as u8, (y * 5) as u8, 90]),
    ))];
    let captions = vec!["ulcer, fibrin".to_string(), "normal".to_string()];
    let run = |m: &CaptionModel, d: &Device| {
        let v = endotwin::captions::query::image_embeddings(m, &config, &images, d);
        let t = endotwin::captions::query::caption_embeddings(m, &config, &captions, d);
        let mut out: Vec<f32> = v.into_data().try_to_vec().unwrap();
        out.extend(t.into_data().try_to_vec::<f32>().unwrap());
        out
    };
    let expected = run(&model, &cpu);
    let got = run(&model.clone().to_device(&gpu), &gpu);
    assert_eq!(got.len(), 3 * 32);
    for (a, b) in got.iter().zip(&expected) {
        assert!((a - b).abs() < 1e-4, "{got:?} vs {expected:?}");
    }
}

#[test]
fn captions_refine_prints_the_caption_and_the_category_only() {
    let _rng = crate::common::device_rng();
    let dir = tempfile::tempdir().unwrap();
    let ran = crate::common::run({
        let mut c = crate::common::endotwin(dir.path());
        c.args([
            "captions",
            "refine",
            "Small erosions and fibrin in the terminal ileum, Mayo 1. No bleeding.",
        ]);
        c
    });
    assert!(ran.ok(), "{}", ran.text());
    assert_eq!(
        ran.stdout,
        "erosion, fibrin\ninflammation\n",
        "{}",
        ran.text()
    );
}

#[test]
fn the_captions_tab_shows_a_frames_top_captions_category_and_ground_truth() {
    let _rng = crate::common::device_rng();
    use egui_kittest::kittest::Queryable;
    use endotwin::app::Selection;
    use endotwin::model::weights::{self, ModelCard, ModelKind};
    let lib = tempfile::tempdir().unwrap();
    let models = tempfile::tempdir().unwrap();
    let store = capsule_library(lib.path(), Split::Train, 48);
    let config = tiny_config();
    let set = CaptionSet::load(&store, &config, &Progress::new()).unwrap();
    let model = tiny_model(&set, 1);
    let card = ModelCard::new(
        "captions",
        ModelKind::CaptionModel,
        "test",
        "a tiny caption model",
        &config,
    );
    weights::save(&model, &card, models.path()).unwrap();
    let exam = store
        .examinations()
        .unwrap()
        .into_iter()
        .find(|e| e.kind == "capsule")
        .unwrap();
    let frame = store.loose_frames(exam.id).unwrap().remove(0);
    let refined = Refiner::shipped().refine(&store.caption(frame.id).unwrap().unwrap());
    drop(store);
    let mut h = crate::gui::harness(lib.path());
    h.state_mut().state.captions.models_dir = models.path().to_path_buf();
    crate::gui::settle(&mut h);
    crate::gui_input::click_tab(&mut h, "Captions");
    crate::gui_input::click_case(&mut h, lib.path(), Selection::Examination(exam.id));
    crate::gui_input::open_view(&mut h, 0);
    for _ in 0..400 {
        crate::gui::settle(&mut h);
        if h.state().state.captions.running.is_none() && !h.state().state.captions.frames.is_empty()
        {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    crate::gui::settle(&mut h);
    let panel = &h.state().state.captions;
    assert_eq!(panel.problem, None);
    assert_eq!(
        panel.frames.len(),
        24,
        "every frame of the examination is captioned"
    );
    crate::gui::shows(&h, "Top captions");
    crate::gui::shows(&h, "Predicted category:");
    crate::gui::shows(&h, "Refined caption");
    crate::gui::shows(&h, &refined.caption);
    // A search by category, typed into the search box and sent with Enter, lists frames.
    h.get_by_label("Search frames by caption or category:")
        .focus();
    h.run_steps(2);
    h.get_by_label("Search frames by caption or category:")
        .type_text("inflammation");
    h.run_steps(2);
    h.key_press(egui::Key::Enter);
    for _ in 0..400 {
        crate::gui::settle(&mut h);
        if h.state().state.captions.search.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let search = h
        .state()
        .state
        .captions
        .search
        .clone()
        .expect("a search answer");
    assert_eq!(search.read_as, "category inflammation");
    assert_eq!(search.searched, 48);
    assert!(!search.hits.is_empty());
    // The answer arrived between frames: draw once more before reading the panel.
    crate::gui::settle(&mut h);
    crate::gui::shows_part(&h, "read as category inflammation");
}

#[test]
fn a_caption_model_can_start_from_the_shipped_text_prompt_model() {
    let _rng = crate::common::device_rng();
    let lib = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let store = capsule_library(lib.path(), Split::Train, 24);
    let frame = store.media_path(&endotwin::captions::data::capsule_frames(&store).unwrap()[0].1);
    drop(store);
    let prompts = endotwin::prompts::model::shipped_path(&endotwin::default_models_dir());
    let out_s = out.path().to_str().unwrap();
    // `train captions` into `out` for no epoch, as `name`, starting from `init`.
    let run = |name: &str, init: &std::path::Path| {
        let mut c = crate::common::endotwin(lib.path());
        c.args(["--backend", "cpu", "train", "captions", "--out", out_s])
            .args(["--name", name, "--epochs", "0", "--init"])
            .arg(init);
        crate::common::run(c)
    };
    // No epoch: the saved model is exactly where fine-tuning would start.
    let trained = run("from-prompts", &prompts);
    assert!(trained.ok(), "{}", trained.text());
    assert!(
        trained
            .stderr
            .contains("starting from the text-prompt model prompts")
            || trained
                .stdout
                .contains("starting from the text-prompt model prompts"),
        "{}",
        trained.text()
    );
    let device = Device::flex();
    let caption =
        endotwin::captions::model::load(&out.path().join("from-prompts.json"), &device).unwrap();
    assert!(
        caption
            .card
            .description
            .contains("starting from the text-prompt model")
    );
    let source = endotwin::prompts::model::load(&prompts, &device).unwrap();
    let image = endotwin::data::images::decode_file(&frame).unwrap().image;
    let input = endotwin::captions::model::input(&caption.config);
    let ours = caption
        .model
        .encode_images(input.batch(std::slice::from_ref(&image), &device));
    let theirs = source
        .model
        .encode_images(endotwin::prompts::model::input(64).batch(&[image], &device));
    let diff: f32 = (ours - theirs).abs().max().into_scalar();
    assert!(diff < 1e-5, "the image towers differ by {diff}");
    // Another kind of model is refused by name.
    let twin = endotwin::default_models_dir().join("twin-image.json");
    let refused = run("x", &twin);
    assert!(!refused.ok());
    assert!(
        refused.text().contains("not prompt-model"),
        "{}",
        refused.text()
    );
}
