//! Text prompts (Endo-CLIP) end to end: phantom examination records, the three stages on a
//! tiny model (the polyp prompt then scores polyp frames above background frames of the same
//! examinations), the towers on wgpu and the CPU, prompt sets and bad prompts refused clearly,
//! `prompts score` / `prompts search` on the command line, and the Text prompts tab.

use burn::module::Module;
use burn::tensor::Device;
use endotwin::data::phantom::{self, PhantomConfig, Split};
use endotwin::model::block::Activation;
use endotwin::model::clip::ClipConfig;
use endotwin::model::text::TextEncoderConfig;
use endotwin::model::unifier::UnifierConfig;
use endotwin::model::vit::{Positions, VitConfig};
use endotwin::model::weights::{self, ModelCard, ModelKind};
use endotwin::plumbing::Progress;
use endotwin::prompts::model::{PromptModel, PromptModelConfig, prompt_tokenizer};
use endotwin::prompts::records::{Records, frame_truth};
use endotwin::store::{OpenMode, Store};
use endotwin::train::prompts::{
    PromptStage, PromptTrainingConfig, detection_texts, keep_frames, polyp_probability, train,
};
use endotwin::train::{Checkpoint, EpochReport, TrainError, TrainEvents};
use std::path::Path;

/// Examination records: `polyps` polyps in examinations of 12 frames at 48 px.
pub(crate) fn records_library(dir: &Path, polyps: usize) -> Store {
    let mut store = Store::open(dir, OpenMode::CreateIfMissing).unwrap();
    let cfg = PhantomConfig {
        seed: 5,
        split: Split::Train,
        polyps,
        videos: 0,
        capsule_images: 0,
        background_frames: 2,
        frames_per_exam: 12,
        image_size: 48,
        ..PhantomConfig::default()
    };
    phantom::generate(&mut store, &cfg, &Progress::new()).unwrap();
    store
}

/// The shipped geometry, smaller: a 32 px ViT of one block, a one-block text tower, 32-d.
pub(crate) fn tiny_config(records: &Records) -> PromptModelConfig {
    let tokenizer = prompt_tokenizer(records.corpus());
    let vision = VitConfig::new(32, 8, 32, 1, 2)
        .with_positions(Positions::SinCos)
        .with_activation(Activation::Gelu)
        .with_norm_before_blocks(false)
        .with_projection(Some(32));
    let text = TextEncoderConfig::new(32, 1, 2)
        .with_vocab_size(tokenizer.vocab_size())
        .with_context(40)
        .with_activation(Activation::Gelu)
        .with_projection(Some(32));
    PromptModelConfig::new(
        ClipConfig::new(vision.into(), text),
        endotwin::prompts::model::PromptTokenizer::Words(tokenizer),
        UnifierConfig::new(32),
    )
}

struct Quiet;

impl TrainEvents<PromptModel> for Quiet {
    fn step(&mut self, _: usize, _: usize, _: usize, loss: f64) {
        assert!(loss.is_finite());
    }
    fn epoch(&mut self, _: &EpochReport, _: &Checkpoint<PromptModel>) -> Result<(), TrainError> {
        Ok(())
    }
}

/// Runs `stage` for `epochs` from `start` (fresh when `None`); the model stays on the
/// autodiff device so the next stage can continue it (`.valid()` for inference).
fn stage(
    config: &PromptModelConfig,
    records: &Records,
    stage: PromptStage,
    epochs: usize,
    kept: Option<&[Vec<usize>]>,
    start: Option<PromptModel>,
) -> PromptModel {
    let device = Device::flex().autodiff();
    let tc = PromptTrainingConfig::new(config.clone(), stage)
        .with_epochs(epochs)
        .with_batch(8)
        .with_unify_batch(4)
        .with_lr(1e-3)
        .with_seed(3);
    train(
        &tc,
        records,
        kept,
        &device,
        None,
        |d| start.unwrap_or_else(|| config.init(d)),
        &mut Quiet,
    )
    .unwrap()
}

/// Within each examination, the share of (polyp frame, background frame) pairs, by
/// `is_polyp(examination, frame)`, in which `model`'s polyp prompt scores the polyp frame
/// higher; and the number of pairs.
fn polyp_above_background(
    model: &PromptModel,
    config: &PromptModelConfig,
    records: &Records,
    is_polyp: impl Fn(usize, usize) -> bool,
) -> (f64, usize) {
    let cpu = Device::flex();
    let texts = detection_texts(model, config, &cpu);
    let (mut above, mut pairs) = (0usize, 0usize);
    for (e, exam) in records.exams.iter().enumerate() {
        let which: Vec<(usize, usize)> = (0..exam.frames.len()).map(|f| (e, f)).collect();
        let v = model.encode_images(records.batch(&which, &[], &cpu));
        let p = polyp_probability(model, v, texts.clone());
        for i in (0..p.len()).filter(|&i| is_polyp(e, i)) {
            for j in (0..p.len()).filter(|&j| !is_polyp(e, j)) {
                pairs += 1;
                above += usize::from(p[i] > p[j]);
            }
        }
    }
    (above as f64 / pairs as f64, pairs)
}

#[test]
fn phantom_records_have_their_frames_and_a_report_that_says_whether_polyps_were_found() {
    let _rng = crate::common::device_rng();
    let dir = tempfile::tempdir().unwrap();
    let store = records_library(dir.path(), 12);
    let records = Records::load(&store, 32, &Progress::new()).unwrap();
    let truth = frame_truth(&store).unwrap();
    assert!(
        records.exams.len() >= 6,
        "{} examinations",
        records.exams.len()
    );
    for exam in &records.exams {
        let views = exam.described_polyps * 4;
        assert_eq!(
            exam.frames.len(),
            (views + 2).max(12),
            "{}: 12 frames, more where its polyps' views and two lumen frames need them",
            exam.code
        );
        let shown = exam
            .frames
            .iter()
            .filter(|f| truth.contains_key(&f.media_id))
            .count();
        // The report alone says whether a polyp was found, and how many.
        assert_eq!(
            exam.positive,
            shown > 0,
            "{}: {:?}",
            exam.code,
            exam.sentences
        );
        assert_eq!(
            exam.described_polyps * 4,
            shown,
            "{}: {:?}",
            exam.code,
            exam.sentences
        );
    }
    assert!(records.exams.iter().any(|e| !e.positive));
    assert!(records.exams.iter().any(|e| e.described_polyps >= 2));
}

#[test]
fn three_stages_on_tiny_records_score_polyp_frames_above_background_frames() {
    let _rng = crate::common::device_rng();
    let dir = tempfile::tempdir().unwrap();
    let store = records_library(dir.path(), 40);
    let records = Records::load(&store, 32, &Progress::new()).unwrap();
    let truth = frame_truth(&store).unwrap();
    let config = tiny_config(&records);
    let round1 = stage(&config, &records, PromptStage::Round1, 40, None, None);
    let cpu = Device::flex();
    let kept = keep_frames(&round1.valid(), &config, &records, 0.3, &cpu);
    let round2 = stage(
        &config,
        &records,
        PromptStage::Round2,
        10,
        Some(&kept),
        Some(round1),
    );
    let kept = keep_frames(&round2.valid(), &config, &records, 0.3, &cpu);
    let attuned = stage(
        &config,
        &records,
        PromptStage::Attune,
        2,
        Some(&kept),
        Some(round2.clone()),
    );
    let _unified = stage(
        &config,
        &records,
        PromptStage::Unify,
        2,
        Some(&kept),
        Some(attuned),
    );
    let (share, pairs) = polyp_above_background(&round2.valid(), &config, &records, |e, f| {
        truth.contains_key(&records.exams[e].frames[f].media_id)
    });
    assert!(
        share > 0.6,
        "the polyp prompt ranks a polyp frame above a background frame of its examination in {share:.2} of {pairs} pairs"
    );
}

/// The supervised ceiling pairs each frame with what its ground truth says: on the frames it
/// learned from, the polyp prompt ranks polyp frames above the background frames of their
/// examination (a swapped or ignored label would leave it at chance).
#[test]
fn the_supervised_ceiling_learns_polyp_frames_from_their_labels() {
    let _rng = crate::common::device_rng();
    let dir = tempfile::tempdir().unwrap();
    let store = records_library(dir.path(), 30);
    let records = Records::load(&store, 32, &Progress::new()).unwrap();
    let truth = frame_truth(&store).unwrap();
    let labelled: Vec<Vec<usize>> = records
        .exams
        .iter()
        .map(|x| {
            (0..x.frames.len())
                .filter(|&f| truth.contains_key(&x.frames[f].media_id))
                .collect()
        })
        .collect();
    let config = tiny_config(&records);
    let model = stage(
        &config,
        &records,
        PromptStage::Supervised,
        25,
        Some(&labelled),
        None,
    )
    .valid();
    let (share, pairs) =
        polyp_above_background(&model, &config, &records, |e, f| labelled[e].contains(&f));
    assert!(
        share > 0.7,
        "polyp frame above a background frame of its examination in {share:.2} of {pairs} pairs"
    );
}

#[test]
fn the_prompt_towers_agree_on_wgpu_and_the_cpu() {
    let _rng = crate::common::device_rng();
    use endotwin::compute::{self, BackendPref};
    let gpu = match compute::select(BackendPref::Gpu) {
        Ok(c) => c.device,
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("skipping: {e}");
            return;
        }
        Err(e) => panic!("CI must have a wgpu adapter (mesa-vulkan-drivers): {e}"),
    };
    // The shipped model when it is there, else the shipped geometry untrained.
    let cpu = Device::flex();
    cpu.seed(21);
    let shipped = endotwin::prompts::model::shipped_path(&endotwin::default_models_dir());
    let (model, config) = match endotwin::prompts::model::load(&shipped, &cpu) {
        Ok(l) => (l.model, l.config),
        Err(_) => {
            let c = PromptModelConfig::small(["a sessile polyp"]);
            (c.init(&cpu), c)
        }
    };
    let image = image::RgbImage::from_fn(40, 40, |x, y| {
        image::Rgb([(x * 6) as u8, (y * 5) as u8, 90])
    });
    let run = |m: &PromptModel, d: &Device| {
        let v = endotwin::prompts::records::pixels_batch(
            &[&image::imageops::resize(
                &image,
                config.image_size(),
                config.image_size(),
                image::imageops::FilterType::Triangle,
            )],
            config.image_size(),
            &[],
            d,
        );
        let v = m.encode_images(v);
        let t = m.encode_texts(config.tokens(
            &["A sessile polyp (Paris 0-Is).", "words it never saw zyx"],
            d,
        ));
        let mut out: Vec<f32> = v.into_data().try_to_vec().unwrap();
        out.extend(t.into_data().try_to_vec::<f32>().unwrap());
        out
    };
    let expected = run(&model, &cpu);
    let got = run(&model.clone().to_device(&gpu), &gpu);
    assert_eq!(got.len(), expected.len());
    for (a, b) in got.iter().zip(&expected) {
        assert!((a - b).abs() < 1e-3, "{a} vs {b}");
    }
}

/// A tiny stage-3 model trained a little on `store`'s records, saved as `prompts` (and as
/// `prompts-detect` and `prompts-round1`, the names `eval prompts` reads) in `models`.
pub(crate) fn tiny_models(store: &Store, models: &Path) {
    let records = Records::load(store, 32, &Progress::new()).unwrap();
    let config = tiny_config(&records);
    let model = stage(&config, &records, PromptStage::Round1, 3, None, None).valid();
    for name in ["prompts", "prompts-detect", "prompts-round1"] {
        let card = ModelCard::new(
            name,
            ModelKind::PromptModel,
            "test",
            "a tiny prompt model",
            &config,
        );
        weights::save(&model, &card, models).unwrap();
    }
}

/// `eval prompts` puts models of different input sizes in one table: tiny 32 px stages beside
/// the shipped 64 px model as the plain-CLIP row, each fed frames at its own size.
#[test]
fn eval_prompts_scores_models_of_different_input_sizes_in_one_table() {
    let _rng = crate::common::device_rng();
    let lib = tempfile::tempdir().unwrap();
    let models = tempfile::tempdir().unwrap();
    let store = records_library(lib.path(), 16);
    tiny_models(&store, models.path());
    drop(store);
    // The supervised ceiling through the CLI: it reads frame labels and its card says so.
    let mut c = crate::common::endotwin(lib.path());
    c.args([
        "train",
        "prompts",
        "--stage",
        "supervised",
        "--name",
        "ceiling",
    ])
    .args(["--epochs", "1", "--batch", "4", "--size", "32", "--out"])
    .arg(models.path());
    let ran = crate::common::run(c);
    assert_eq!(ran.code, Some(0), "{}\n{}", ran.stdout, ran.stderr);
    let ceiling = models.path().join("ceiling-supervised.json");
    let card: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&ceiling).unwrap()).unwrap();
    let data = card["training"]["data"].as_str().unwrap();
    assert!(data.contains("frame labels read"), "{data}");
    let json = lib.path().join("eval.json");
    // The shipped 64 px model beside the tiny ones as `prompts-plain`: read as the plain-CLIP
    // row without being named, as the shipped plain model is.
    let shipped = endotwin::default_models_dir();
    for ext in ["json", "bpk"] {
        std::fs::copy(
            shipped.join(format!("prompts.{ext}")),
            models.path().join(format!("prompts-plain.{ext}")),
        )
        .unwrap();
    }
    let mut c = crate::common::endotwin(lib.path());
    c.args(["eval", "prompts", "--held-out"])
        .arg(lib.path())
        .arg("--models")
        .arg(models.path())
        .arg("--supervised")
        .arg(&ceiling)
        .args(["--seed", "3", "--json"])
        .arg(&json);
    let ran = crate::common::run(c);
    assert_eq!(ran.code, Some(0), "{}\n{}", ran.stdout, ran.stderr);
    let figures: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for auroc in [
        &figures["detection"]["round2"]["auroc"],
        &figures["detection"]["supervised_ceiling"]["auroc"],
        &figures["pathology"]["zero_shot"]["auroc"],
        &figures["pathology"]["plain_clip"]["auroc"],
    ] {
        let a = auroc.as_f64().unwrap_or(f64::NAN);
        assert!((0.0..=1.0).contains(&a), "{auroc} in {figures}");
    }
}

/// `endotwin prompts score` of `image` against the prompt file `sets` with the model `card`:
/// it succeeds, prints a cosine per prompt, and the set's probabilities sum to 1 (a softmax
/// over the set). Returns what it printed.
fn scores_sum_to_one(lib: &Path, image: &Path, sets: &Path, card: &str) -> String {
    let mut c = crate::common::endotwin(lib);
    c.args(["prompts", "score", "--image"])
        .arg(image)
        .arg("--prompts")
        .arg(sets)
        .args(["--model", card]);
    let scored = crate::common::run(c);
    assert!(scored.ok(), "{}", scored.text());
    assert!(scored.stdout.contains("cos "), "{}", scored.text());
    let shares: f64 = scored
        .stdout
        .lines()
        .filter(|l| l.contains("cos "))
        .map(|l| l.split_whitespace().next().unwrap().parse::<f64>().unwrap())
        .sum();
    assert!(
        (shares - 1.0).abs() < 0.01,
        "softmax over the set: {}",
        scored.text()
    );
    scored.stdout
}

#[test]
fn prompts_score_and_search_answer_on_the_command_line_and_refuse_bad_input_clearly() {
    let _rng = crate::common::device_rng();
    let lib = tempfile::tempdir().unwrap();
    let models = tempfile::tempdir().unwrap();
    let store = records_library(lib.path(), 16);
    tiny_models(&store, models.path());
    let view = store
        .polyp_views(store.polyps().unwrap()[0].id)
        .unwrap()
        .remove(0);
    let image = store.media_path(&view);
    drop(store);
    let card = models.path().join("prompts.json");
    let sets = lib.path().join("mine.txt");
    std::fs::write(&sets, "a sessile polyp\na normal background with folds\n").unwrap();
    let run = |args: &[&str]| {
        let mut c = crate::common::endotwin(lib.path());
        c.args(args);
        crate::common::run(c)
    };
    let card_s = card.to_str().unwrap();
    let scored = scores_sum_to_one(lib.path(), &image, &sets, card_s);
    assert!(scored.contains("a sessile polyp"), "{scored}");
    // Search: words outside the vocabulary are tolerated; one line per polyp.
    let found = run(&[
        "prompts",
        "search",
        "a sessile polyp with a zyxwv surface",
        "--top",
        "3",
        "--model",
        card_s,
    ]);
    assert!(found.ok(), "{}", found.text());
    assert_eq!(found.stdout.lines().count(), 3, "{}", found.text());
    // Bad input: clear messages, nothing changed.
    let bad = lib.path().join("bad.toml");
    std::fs::write(&bad, "[[set]\nname = ").unwrap();
    let refused = run(&[
        "prompts",
        "score",
        "--image",
        image.to_str().unwrap(),
        "--prompts",
        bad.to_str().unwrap(),
        "--model",
        card_s,
    ]);
    assert!(!refused.ok());
    assert!(
        refused.stderr.contains("not a prompt set file"),
        "{}",
        refused.text()
    );
    let empty = run(&["prompts", "search", "   ", "--model", card_s]);
    assert!(!empty.ok());
    assert!(
        empty.stderr.contains("the prompt is empty"),
        "{}",
        empty.text()
    );
    let long = "polyp ".repeat(80);
    let too_long = run(&["prompts", "search", &long, "--model", card_s]);
    assert!(!too_long.ok());
    assert!(
        too_long.stderr.contains("this model reads at most 38"),
        "{}",
        too_long.text()
    );
    let wrong_kind = run(&[
        "prompts",
        "search",
        "a polyp",
        "--model",
        endotwin::default_models_dir()
            .join("captions.json")
            .to_str()
            .unwrap(),
    ]);
    assert!(!wrong_kind.ok());
    assert!(
        wrong_kind.stderr.contains("prompt model"),
        "{}",
        wrong_kind.text()
    );
}

#[test]
fn the_text_prompts_tab_scores_an_edited_prompt_and_its_search_opens_a_polyp() {
    let _rng = crate::common::device_rng();
    use egui_kittest::kittest::Queryable;
    use endotwin::app::{Command, Selection};
    let lib = tempfile::tempdir().unwrap();
    let models = tempfile::tempdir().unwrap();
    let store = records_library(lib.path(), 16);
    tiny_models(&store, models.path());
    let polyp = store.polyps().unwrap()[0].id;
    drop(store);
    let mut h = crate::gui::harness(lib.path());
    {
        let panel = &mut h.state_mut().state.prompts;
        panel.models_dir = models.path().to_path_buf();
        panel.models = endotwin::engine::prompt_jobs::available(models.path());
    }
    crate::gui::settle(&mut h);
    crate::gui_input::click_tab(&mut h, "Text prompts");
    crate::gui_input::click_case(&mut h, lib.path(), Selection::Polyp(polyp));
    let wait = |h: &mut egui_kittest::Harness<'static, endotwin::app::App>,
                done: &dyn Fn(&endotwin::app::App) -> bool| {
        for _ in 0..400 {
            crate::gui::settle(h);
            if done(h.state()) {
                // One more pass so the panel draws what just arrived.
                crate::gui::settle(h);
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!(
            "the panel never answered: {:?}",
            h.state().state.prompts.problem
        );
    };
    wait(&mut h, &|a| a.state.prompts.scores.is_some());
    crate::gui::shows_part(&h, "This image:");
    crate::gui::shows_part(&h, "All 4 shown images together");
    // Edit the first prompt: the scores follow, and the edit is saved with the library.
    // Typed into the first prompt's field; leaving the field (Tab) sends the edit.
    h.get_by_label("1 (polyp)").focus();
    h.run_steps(2);
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::A);
    h.key_press(egui::Key::Backspace);
    h.get_by_label("1 (polyp)")
        .type_text("a reddish polyp with an irregular surface");
    h.run_steps(2);
    h.key_press(egui::Key::Tab);
    wait(&mut h, &|a| {
        a.state
            .prompts
            .scores
            .as_ref()
            .is_some_and(|s| s.frames[0].1[0].prompt == "a reddish polyp with an irregular surface")
    });
    crate::gui::shows_part(&h, "a reddish polyp with an irregular surface");
    let saved = std::fs::read_to_string(lib.path().join("prompt_sets.toml")).unwrap();
    assert!(saved.contains("a reddish polyp with an irregular surface"));
    // Text search lists polyps; opening one selects it.
    h.state_mut().send(Command::Select(Selection::Nothing));
    crate::gui::settle(&mut h);
    h.get_by_label("Search polyps by text:").focus();
    h.run_steps(2);
    h.get_by_label("Search polyps by text:")
        .type_text("a sessile polyp");
    h.run_steps(2);
    h.key_press(egui::Key::Enter);
    wait(&mut h, &|a| a.state.prompts.search.is_some());
    let hit = h.state().state.prompts.search.clone().unwrap().hits[0].clone();
    // Clicking the hit (its score and code) opens the polyp.
    h.get_by_label(&format!("{:.2} {}", hit.score, hit.code))
        .click();
    crate::gui::settle(&mut h);
    assert_eq!(h.state().state.selection, Selection::Polyp(hit.polyp_id));
}

/// The committed tiny CLIP (tests/fixtures/clip_parity) with a text tower of CLIP's full 49408
/// ids, as a real CLIP has, written to `dir` in the Hugging Face layout.
fn full_vocabulary_clip(dir: &Path) -> std::path::PathBuf {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/clip_parity");
    let bytes = std::fs::read(fixture.join("model.safetensors")).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let embedding = "text_model.embeddings.token_embedding.weight";
    let width = file.tensor(embedding).unwrap().shape()[1];
    let table: Vec<u8> = (0..49408 * width)
        .flat_map(|i| (0.02 * ((i as f32) * 0.7311).sin()).to_le_bytes())
        .collect();
    let mut tensors: Vec<(String, safetensors::tensor::TensorView<'_>)> = Vec::new();
    for (name, view) in file.tensors() {
        if name == embedding {
            let big = safetensors::tensor::TensorView::new(
                safetensors::Dtype::F32,
                vec![49408, width],
                &table,
            )
            .unwrap();
            tensors.push((name, big));
        } else {
            tensors.push((name, view));
        }
    }
    let weights = dir.join("model.safetensors");
    safetensors::serialize_to_file(tensors, None, &weights).unwrap();
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture.join("config.json")).unwrap())
            .unwrap();
    config["text_config"]["vocab_size"] = 49408.into();
    config["text_config"]["bos_token_id"] = 49406.into();
    config["text_config"]["eos_token_id"] = 49407.into();
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    weights
}

#[test]
fn an_imported_hugging_face_clip_scores_prompts_searches_and_shows_in_the_tab() {
    let _rng = crate::common::device_rng();
    use endotwin::prompts::model::{NamedTokenizer, PromptTokenizer};
    // Prompts go through CLIP's own byte-pair encoding (ids as openai/clip's tokenizer gives).
    let bpe = PromptTokenizer::Named(NamedTokenizer::ClipBpe);
    assert_eq!(
        bpe.encode("a photo of a cat", 9),
        vec![49406, 320, 1125, 539, 320, 2368, 49407, 0, 0]
    );
    let lib = tempfile::tempdir().unwrap();
    let hf = tempfile::tempdir().unwrap();
    let models = tempfile::tempdir().unwrap();
    let store = records_library(lib.path(), 16);
    let polyp = store.polyps().unwrap()[0].id;
    let view = store.polyp_views(polyp).unwrap().remove(0);
    let image = store.media_path(&view);
    drop(store);
    let run = |args: &[&str]| {
        let mut c = crate::common::endotwin(lib.path());
        c.args(args);
        crate::common::run(c)
    };
    let weights = full_vocabulary_clip(hf.path());
    let imported = run(&[
        "model",
        "import-hf-clip",
        weights.to_str().unwrap(),
        "--out",
        models.path().to_str().unwrap(),
        "--name",
        "tiny-clip",
    ]);
    assert!(imported.ok(), "{}", imported.text());
    assert!(
        imported.stdout.contains("Text prompts tab"),
        "{}",
        imported.text()
    );
    let card = models.path().join("tiny-clip.json");
    let card_s = card.to_str().unwrap();
    let sets = lib.path().join("mine.txt");
    std::fs::write(&sets, "a sessile polyp\na normal background with folds\n").unwrap();
    let scored = scores_sum_to_one(lib.path(), &image, &sets, card_s);
    assert!(scored.contains("model tiny-clip"), "{scored}");
    let found = run(&[
        "prompts",
        "search",
        "a sessile polyp, zyxwv!",
        "--top",
        "3",
        "--model",
        card_s,
    ]);
    assert!(found.ok(), "{}", found.text());
    assert_eq!(found.stdout.lines().count(), 3, "{}", found.text());
    // The tiny tower's context is 16: 14 BPE pieces at most, counted as pieces.
    let too_long = run(&["prompts", "search", &"polyp ".repeat(15), "--model", card_s]);
    assert!(!too_long.ok());
    assert!(
        too_long.stderr.contains("this model reads at most 14"),
        "{}",
        too_long.text()
    );
    // A CLIP whose text tower has fewer ids than CLIP's tokenizer gives is refused by name.
    let small = run(&[
        "model",
        "import-hf-clip",
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/clip_parity/model.safetensors")
            .to_str()
            .unwrap(),
        "--out",
        models.path().to_str().unwrap(),
        "--name",
        "small-vocab",
    ]);
    assert!(small.ok(), "{}", small.text());
    let refused = run(&[
        "prompts",
        "search",
        "a polyp",
        "--model",
        models.path().join("small-vocab.json").to_str().unwrap(),
    ]);
    assert!(!refused.ok());
    assert!(
        refused
            .stderr
            .contains("reads 99 token ids, not CLIP's 49408"),
        "{}",
        refused.text()
    );
    std::fs::remove_file(models.path().join("small-vocab.json")).unwrap();
    // The Text prompts tab lists the imported CLIP; chosen, it scores the selected polyp.
    use egui_kittest::kittest::Queryable;
    use endotwin::app::Selection;
    let mut h = crate::gui::harness(lib.path());
    {
        let panel = &mut h.state_mut().state.prompts;
        panel.models_dir = models.path().to_path_buf();
        panel.models = endotwin::engine::prompt_jobs::available(models.path());
        assert_eq!(panel.models, vec!["tiny-clip".to_string()]);
    }
    crate::gui::settle(&mut h);
    crate::gui_input::click_tab(&mut h, "Text prompts");
    // The model picked in the tab's Model box.
    h.get_by_role_and_label(egui::accesskit::Role::ComboBox, "Model:")
        .click();
    h.run_steps(2);
    h.get_all_by_label("tiny-clip").last().unwrap().click();
    crate::gui::settle(&mut h);
    assert_eq!(h.state().state.prompts.model, "tiny-clip");
    crate::gui_input::click_case(&mut h, lib.path(), Selection::Polyp(polyp));
    for _ in 0..400 {
        crate::gui::settle(&mut h);
        if h.state().state.prompts.scores.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    crate::gui::settle(&mut h);
    let scores = h.state().state.prompts.scores.clone();
    assert!(
        scores.is_some(),
        "no scores: {:?}",
        h.state().state.prompts.problem
    );
    crate::gui::shows_part(&h, "tiny-clip");
    crate::gui::shows_part(&h, "This image:");
}

#[test]
fn each_shipped_prompt_set_is_scored_by_the_model_it_is_for() {
    let lib = tempfile::tempdir().unwrap();
    let image = lib.path().join("frame.png");
    crate::common::png(&image, 64, 64, 9);
    let sets = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/prompt_sets.toml");
    let mut c = crate::common::endotwin(lib.path());
    c.args(["prompts", "score", "--image"])
        .arg(&image)
        .arg("--prompts")
        .arg(&sets);
    let r = crate::common::run(c);
    assert!(r.ok(), "{}", r.text());
    // A `model` line above the sets it scores: the detector for polyp vs background, the
    // stage-3 model for the pathology and attribute sets.
    let lines: Vec<&str> = r.stdout.lines().collect();
    let model_of = |set: &str| {
        let at = lines
            .iter()
            .position(|l| *l == format!("set {set}"))
            .unwrap();
        lines[..at]
            .iter()
            .rev()
            .find(|l| l.starts_with("model "))
            .unwrap()
            .to_string()
    };
    assert!(
        model_of("polyp vs background").starts_with("model prompts-detect ("),
        "{}",
        r.stdout
    );
    assert!(
        model_of("benign vs neoplastic").starts_with("model prompts ("),
        "{}",
        r.stdout
    );
    // --model scores every set with it, and says so for a set made for another.
    let mut c = crate::common::endotwin(lib.path());
    c.args(["prompts", "score", "--image"])
        .arg(&image)
        .arg("--prompts")
        .arg(&sets)
        .arg("--model")
        .arg(endotwin::default_models_dir().join("prompts.json"));
    let r = crate::common::run(c);
    assert!(r.ok(), "{}", r.text());
    assert!(
        r.says("note: set `polyp vs background` is for `prompts-detect`"),
        "{}",
        r.text()
    );
    assert_eq!(
        r.stdout.lines().filter(|l| l.starts_with("model ")).count(),
        1
    );
}

#[test]
fn eval_strip_scores_the_shipped_detector_on_generated_videos_beside_redness() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("strip.json");
    let ran = crate::common::run({
        let mut c = crate::common::endotwin(&dir.path().join("unused"));
        c.args(["eval", "strip", "--seed", "5", "--videos", "2"])
            .args(["--frames-per-video", "12", "--json"])
            .arg(&json);
        c
    });
    assert!(ran.ok(), "{}", ran.text());
    assert!(ran.says("2 videos, 24 frames"), "{}", ran.text());
    assert!(
        ran.says("prompts-detect (") && ran.says("redness (baseline)"),
        "{}",
        ran.text()
    );
    let e: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let rows = e["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    // The detector's row has shares of frames called (probabilities); redness has none.
    let share = rows[0]["called_on_background"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&share), "{e}");
    assert!(rows[1]["called_on_background"].is_null(), "{e}");
    let polyp = e["polyp_frames"].as_u64().unwrap();
    assert!(
        polyp > 0 && polyp < 24,
        "a video of only polyp or only background frames: {e}"
    );
}
