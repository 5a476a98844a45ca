//! `endotwin captions refine|describe` and `endotwin eval captions`: the capsule caption
//! capability from the command line.

use anyhow::{Context, Result};
use endotwin::captions::data::CaptionSet;
use endotwin::captions::model::{self, CaptionModelConfig, LoadedCaptionModel};
use endotwin::captions::{Refiner, query};
use endotwin::compute::BackendPref;
use endotwin::data::phantom::Split;
use endotwin::eval::captions::{Candidate, CaptionEval};
use endotwin::eval::held_out::HeldOut;
use endotwin::plumbing::Progress;
use std::path::{Path, PathBuf};

#[derive(clap::Subcommand)]
pub enum CaptionsWhat {
    /// Refine a raw finding: prints exactly two lines, the refined caption and its category.
    Refine { text: String },
    /// The top captions and the category of capsule images (files), by the caption model.
    Describe {
        images: Vec<PathBuf>,
        /// A caption model card; default: the library's (the one promoted in it, else the
        /// shipped models/captions.json).
        #[arg(long)]
        model: Option<PathBuf>,
        /// Captions to print per image.
        #[arg(long, default_value_t = 5)]
        top: usize,
        /// Also write the answers as JSON here (category, confidence, captions, familiarity).
        #[arg(long)]
        json: Option<PathBuf>,
    },
}

pub fn run(library: &Path, pref: BackendPref, what: CaptionsWhat) -> Result<()> {
    match what {
        CaptionsWhat::Refine { text } => {
            let refiner = Refiner::shipped();
            let r = refiner.refine(&text);
            println!("{}", r.caption);
            println!("{}", r.category);
            if !refiner.recognises(&text) {
                eprintln!(
                    "nothing recognised: no finding of the entity list in {text:?}; \"normal\" above is a default, not a reading"
                );
            }
            Ok(())
        }
        CaptionsWhat::Describe {
            images,
            model,
            top,
            json,
        } => {
            if images.is_empty() {
                anyhow::bail!("name at least one image file");
            }
            let compute = super::compute(pref)?;
            // The library's caption model once one was promoted in it (round 7 N61: the
            // shipped one answered after `model promote` said the run's model was in use).
            let model = model.or_else(|| {
                Some(model::shipped_path(
                    &endotwin::engine::promote::models_dir_for(library),
                ))
            });
            let loaded = load(model, &compute.device)?;
            let mut decoded = Vec::new();
            for p in &images {
                let d = endotwin::data::images::decode_file(p)
                    .with_context(|| format!("{}", p.display()))?;
                let (image, _) = endotwin::model::preprocess::bounded(
                    d.image,
                    endotwin::model::preprocess::Focus::FieldOfView,
                );
                decoded.push(image);
            }
            // Candidates: the library's refined captions when it has any, and every entity.
            let seen = endotwin::store::Store::open(library, endotwin::store::OpenMode::Existing)
                .ok()
                .and_then(|s| CaptionSet::load(&s, &loaded.config, &Progress::new()).ok())
                .map(|s| s.captions)
                .unwrap_or_default();
            let candidates = query::candidates(&seen);
            let out = query::describe(&loaded, &decoded, &candidates, top, &compute.device);
            let mut answers = Vec::new();
            for (p, d) in images.iter().zip(out) {
                match d.confidence {
                    Some(c) => println!(
                        "{}: category {} (confidence {:.0}%, calibrated)",
                        p.display(),
                        d.category,
                        c * 100.0
                    ),
                    None => println!("{}: category {}", p.display(), d.category),
                }
                for (caption, share) in &d.captions {
                    println!("  {share:.3}  {caption}");
                }
                super::twins::print_familiarity(d.familiarity.as_ref(), &loaded.card.name);
                answers.push(serde_json::json!({
                    "image": p,
                    "category": d.category,
                    "confidence": d.confidence,
                    "category_probabilities": d.category_probabilities,
                    "captions": d.captions,
                    "familiarity": d.familiarity,
                }));
            }
            if let Some(path) = &json {
                super::write_output(
                    path,
                    serde_json::to_string_pretty(&serde_json::json!({
                        "model": loaded.card.name,
                        "frames": answers,
                    }))?
                    .as_bytes(),
                )?;
            }
            Ok(())
        }
    }
}

fn load(card: Option<PathBuf>, device: &burn::tensor::Device) -> Result<LoadedCaptionModel> {
    let path = card.unwrap_or_else(|| model::shipped_path(&endotwin::default_models_dir()));
    // A card not there is a mistyped name as often as a model never trained (round 13
    // N12): said as such.
    if std::fs::symlink_metadata(&path).is_err() {
        anyhow::bail!(
            "caption model {}: no such model card (name a card, NAME.json, or a model of the models \
             folder; `endotwin train captions` makes one)",
            path.display()
        );
    }
    model::load(&path, device).with_context(|| format!("caption model {}", path.display()))
}

#[derive(clap::Args)]
pub struct EvalArgs {
    /// A held-out library with captioned capsule frames; default: generate the test split
    /// of --seed.
    #[arg(long)]
    pub held_out: Option<PathBuf>,
    /// The library whose frames give the majority caption and fit the colour-histogram
    /// classifier; default: generate the train split of --seed (--train-frames).
    #[arg(long)]
    pub baseline_train: Option<PathBuf>,
    /// Seed of the generated splits and of the bootstrap.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Frames of the generated test split (24 per patient; at least 1: round 17 N1, `0`
    /// generated an empty split and advised importing data).
    #[arg(long, default_value_t = 1200, value_parser = super::eval::count(1, u64::MAX))]
    pub frames: usize,
    /// Frames of the generated train split for the baselines (at least 1: round 16 N11, `0`
    /// blamed the held-out library for having no captioned frames).
    #[arg(long, default_value_t = 2400, value_parser = super::eval::count(1, u64::MAX))]
    pub train_frames: usize,
    /// The caption model scored first; default: the shipped one (models/captions.json).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// More caption models in the same table (other losses, shots, seeds), each
    /// LABEL=CARD.json; trained beforehand by their own commands.
    #[arg(long = "compare", value_name = "LABEL=CARD")]
    pub compare: Vec<String>,
    /// Leave out the zero-shot rows (the text-prompt model before capsule fine-tuning, and
    /// the untrained dual encoder).
    #[arg(long)]
    pub no_zero_shot: bool,
    /// The model before capsule fine-tuning scored zero-shot: a text-prompt model card
    /// (Endo-CLIP) whose towers a caption model takes over (`train captions --init`);
    /// default: the shipped one (models/prompts.json).
    #[arg(long)]
    pub zero_shot_from: Option<PathBuf>,
    /// Also write the figures as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the first model's category confusion matrix as a PNG to this file.
    #[arg(long)]
    pub confusion: Option<PathBuf>,
}

/// The zero-shot model: the caption model that takes over the text-prompt model's towers
/// (none when the default card is not there; an error when a named one does not load).
fn zero_shot_model(
    card: Option<PathBuf>,
    config: &CaptionModelConfig,
    device: &burn::tensor::Device,
) -> Result<Option<(String, endotwin::captions::model::CaptionModel)>> {
    let named = card.is_some();
    let path = card
        .unwrap_or_else(|| endotwin::prompts::model::shipped_path(&endotwin::default_models_dir()));
    if !named && !path.exists() {
        return Ok(None);
    }
    let prompts = endotwin::prompts::model::load(&path, device)
        .with_context(|| format!("--zero-shot-from {}", path.display()))?;
    let (model, words) = config
        .init_from(
            &prompts.model.clip,
            &prompts.config.clip,
            prompts.config.tokenizer.words().ok_or_else(|| {
                anyhow::anyhow!(
                    "--zero-shot-from {}: it reads text with CLIP's BPE, not words",
                    path.display()
                )
            })?,
            device,
        )
        .map_err(|e| anyhow::anyhow!("--zero-shot-from {}: {e}", path.display()))?;
    let label = format!(
        "zero-shot: the text-prompt model {} before capsule fine-tuning ({words} of the {} caption \
         words in its vocabulary)",
        prompts.named(),
        config.tokenizer.words.len()
    );
    Ok(Some((label, model)))
}

pub fn eval(pref: BackendPref, a: EvalArgs) -> Result<()> {
    let compute = super::compute(pref)?;
    let device = compute.device.clone();
    let first = load(a.model.clone(), &device)?;
    let mut loaded: Vec<(String, LoadedCaptionModel)> = vec![("shipped".into(), first)];
    for c in &a.compare {
        let (label, card) = super::compare_arg(c)?;
        let m = model::load(card, &device).with_context(|| format!("--compare {c}"))?;
        loaded.push((label.to_string(), m));
    }
    if a.held_out.is_none() {
        eprintln!(
            "generating the test split of seed {} ({} capsule frames)...",
            a.seed, a.frames
        );
    }
    let test_lib = HeldOut::open_capsule(a.held_out.as_deref(), a.seed, Split::Test, a.frames)?;
    // A held-out library without a captioned capsule frame, said of that library before the
    // baselines' split is made (round 8 N37: "the library" after 50 s).
    if endotwin::captions::data::capsule_frames(&test_lib.store)?.is_empty() {
        anyhow::bail!(
            "{}: the held-out library has no captioned capsule frames: nothing to evaluate \
             (import CAPTIV8 data or `endotwin demo --capsule N`)",
            test_lib.described
        );
    }
    let train_lib = HeldOut::open_capsule(
        a.baseline_train.as_deref(),
        a.seed,
        Split::Train,
        a.train_frames,
    )?;
    // Baselines fitted on the frames they are scored on would look better than they are.
    let capsule_hashes =
        |store: &endotwin::store::Store| -> Result<std::collections::HashSet<String>> {
            Ok(endotwin::captions::data::capsule_frames(store)?
                .into_iter()
                .map(|(_, m)| m.hash)
                .collect())
        };
    let shared = capsule_hashes(&test_lib.store)?
        .intersection(&capsule_hashes(&train_lib.store)?)
        .count();
    if shared > 0 {
        anyhow::bail!(
            "{} of the held-out capsule frames ({}) are in the baselines' training frames ({}): the baselines would be scored on frames they were fitted on; nothing was evaluated",
            shared,
            test_lib.described,
            train_lib.described
        );
    }
    // Loaded at the largest side any model reads (a ViT's 64 px, a backbone's 224 px): each
    // model is given the frames at its own side.
    let config = (loaded.iter().map(|(_, l)| &l.config))
        .max_by_key(|c| c.image_size())
        .unwrap_or(&loaded[0].1.config);
    let test = CaptionSet::load(&test_lib.store, config, &Progress::new())?;
    let train = CaptionSet::load(&train_lib.store, config, &Progress::new())?;
    for (set, what) in [(&test, &test_lib.described), (&train, &train_lib.described)] {
        if let Some(first) = set.skipped.first() {
            eprintln!(
                "note: {what}: left out {} capsule frame(s) whose file could not be read: {first}{}",
                set.skipped.len(),
                match set.skipped.len() {
                    1 => String::new(),
                    n => format!(" (and {} more)", n - 1),
                }
            );
        }
    }
    device.seed(a.seed);
    let untrained = CaptionModelConfig::small();
    let zero = untrained.init(&device);
    let pretrained = if a.no_zero_shot {
        None
    } else {
        zero_shot_model(a.zero_shot_from.clone(), &untrained, &device)?
    };
    let mut candidates: Vec<Candidate<'_>> = loaded
        .iter()
        .map(|(label, m)| {
            let (loss, shots) = trained_with(m);
            Candidate {
                label: format!("{label} ({}, {})", m.card.name, m.card.version),
                model: &m.model,
                config: &m.config,
                loss,
                shots,
                baseline: false,
            }
        })
        .collect();
    if let Some((label, model)) = &pretrained {
        for loss in ["kl", "clip"] {
            candidates.push(Candidate {
                label: label.clone(),
                model,
                config: &untrained,
                loss: loss.into(),
                shots: "0".into(),
                baseline: false,
            });
        }
    }
    if !a.no_zero_shot {
        candidates.push(Candidate {
            label: "the dual encoder at random initialisation (chance)".into(),
            model: &zero,
            config: &untrained,
            loss: "untrained".into(),
            shots: "0".into(),
            baseline: true,
        });
    }
    let started = std::time::Instant::now();
    let e = endotwin::eval::captions::run(
        &test,
        &train,
        &candidates,
        a.seed,
        &device,
        &device.clone().autodiff(),
    );
    print(&e, &test_lib.described, &train_lib.described);
    eprintln!("({:.0} s)", started.elapsed().as_secs_f64());
    if let Some(path) = &a.json {
        super::write_output(path, serde_json::to_string_pretty(&e)?.as_bytes())?;
        println!("wrote {}", path.display());
    }
    if let Some(path) = &a.confusion {
        super::write_png(
            path,
            &endotwin::eval::report::captions::confusion_png(&e.categories[0]),
        )?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// The loss and shots a model's card says it was trained with.
fn trained_with(m: &LoadedCaptionModel) -> (String, String) {
    let data = m
        .card
        .training
        .as_ref()
        .map(|t| t.data.clone())
        .unwrap_or_default();
    let field = |key: &str| {
        data.split(&format!("{key} "))
            .nth(1)
            .and_then(|rest| rest.split([',', ';', ' ']).next())
            .map(str::to_string)
    };
    let loss = field("loss").unwrap_or_else(|| "?".into());
    let shots = match field("shots").as_deref() {
        Some("0") | None => "full".to_string(),
        Some(k) => k.to_string(),
    };
    (loss, shots)
}

fn print(e: &CaptionEval, test: &str, train: &str) {
    let ci = |c: [f64; 2]| format!("[{:.3}, {:.3}]", c[0], c[1]);
    println!(
        "held-out: {test} ({} frames, {} patients, {} distinct captions ranked per frame); \
         baselines fitted on: {train}; bootstrap {} resamples of patients, seed {}",
        e.frames, e.patients, e.candidates, e.bootstrap, e.seed
    );
    println!("\ncaption retrieval");
    println!("| method | loss | shots | top-1 [95% CI] | top-5 [95% CI] |");
    println!("| --- | --- | --- | --- | --- |");
    for r in e.retrieval.iter().chain(&e.baselines) {
        println!(
            "| {} | {} | {} | {:.3} {} | {:.3} {} |",
            r.method,
            r.loss,
            r.shots,
            r.top1,
            ci(r.top1_ci),
            r.top5,
            ci(r.top5_ci)
        );
    }
    println!("\nby loss and shots (mean ± sd over models)");
    println!("| loss | shots | models | top-1 | top-5 |\n| --- | --- | --- | --- | --- |");
    for s in &e.retrieval_summary {
        println!(
            "| {} | {} | {} | {:.3} ± {:.3} | {:.3} ± {:.3} |",
            s.loss, s.shots, s.models, s.top1_mean, s.top1_sd, s.top5_mean, s.top5_sd
        );
    }
    if !e.paired.is_empty() {
        println!(
            "\nKL minus CLIP on the same frames (mean over each loss's models; paired bootstrap of patients)"
        );
        println!(
            "| shots | models (kl / clip) | top-1 diff [95% CI] | KL ahead | top-5 diff [95% CI] |"
        );
        println!("| --- | --- | --- | --- | --- |");
        for p in &e.paired {
            println!(
                "| {} | {} / {} | {:+.3} {} | {:.0}% | {:+.3} {} |",
                p.shots,
                p.kl_models,
                p.clip_models,
                p.top1_diff,
                ci(p.top1_diff_ci),
                p.top1_kl_ahead * 100.0,
                p.top5_diff,
                ci(p.top5_diff_ci)
            );
        }
    }
    println!(
        "\ncategories: accuracy of the top category (truth: the refined caption's category under \
         the entity list's precedence; predicted: the most probable); multi-label macro-F1, one \
         vs rest"
    );
    println!("| method | accuracy [95% CI] | macro-F1 [95% CI] |\n| --- | --- | --- |");
    for r in &e.categories {
        println!(
            "| {} | {:.3} {} | {:.3} {} |",
            r.method,
            r.accuracy,
            ci(r.accuracy_ci),
            r.macro_f1,
            ci(r.macro_f1_ci)
        );
    }
    if let Some(first) = e.categories.first() {
        println!("\nF1 per category ({})", first.method);
        for (c, f) in &first.f1 {
            println!("  {c}: {f:.3}");
        }
    }
}
