//! `endotwin prompts score|search|index` and `endotwin eval prompts`: the text-prompt
//! capability (Endo-CLIP) from the command line.

use anyhow::{Context, Result};
use endotwin::compute::BackendPref;
use endotwin::eval::held_out::HeldOut;
use endotwin::eval::prompts::{Curves, HeldOutItems, Named, UntrainedDraws, draw_seeds};
use endotwin::model::twin_encoder::TwinEncoderConfig;
use endotwin::plumbing::Progress;
use endotwin::prompts::model::{self, LoadedPromptModel, PromptModelConfig};
use endotwin::prompts::trust;
use endotwin::prompts::{query, read_prompt_sets};
use endotwin::store::{OpenMode, Store};
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(clap::Subcommand)]
pub enum PromptsWhat {
    /// The score of every prompt for an image: softmax over the set and the raw cosine.
    Score {
        #[arg(long)]
        image: PathBuf,
        /// A prompt set file: TOML (`[[set]] name, prompts`) or one prompt per line.
        #[arg(long)]
        prompts: PathBuf,
        /// A prompt model card for every set; default: each set's own model (its `model`, a
        /// card in the models folder; the stage-3 `prompts` when it names none).
        #[arg(long)]
        model: Option<PathBuf>,
        /// Also write the scores as JSON here (per model: its sets' scores, the detector's
        /// calibrated polyp probability when it has one, the image's familiarity).
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// The library's polyps that best match a sentence, one per line with its score (encodes
    /// the library first when it is not encoded with this model yet).
    Search {
        text: String,
        /// How many polyps to list (1 to 10000).
        #[arg(long, default_value_t = 10, value_parser = super::eval::count(1, 10_000))]
        top: usize,
        #[arg(long)]
        model: Option<PathBuf>,
    },
    /// Encode the library's stills and video frames with a prompt model (cached per version).
    Index {
        #[arg(long)]
        model: Option<PathBuf>,
    },
}

/// `--model`: a card's path, or (as a prompt set's `model` names one) a card's name in the
/// models folder (MINOR 17: `--model prompts-plain` failed as "cannot read prompts-plain").
/// The models folder is the library's ([`endotwin::engine::promote::models_dir_for`]: its
/// own once a model was promoted in it, as the app reads it).
fn card_path(models: &Path, card: Option<PathBuf>) -> PathBuf {
    match card {
        None => model::shipped_path(models),
        Some(c) if c.exists() || c.components().count() != 1 => c,
        Some(name) => {
            let named = models.join(&name).with_extension("json");
            if named.is_file() { named } else { name }
        }
    }
}

fn load(
    models: &Path,
    card: Option<PathBuf>,
    device: &burn::tensor::Device,
) -> Result<LoadedPromptModel> {
    let path = card_path(models, card);
    // A card not there is a mistyped name as often as a model never trained (round 13
    // N12): said as such.
    if std::fs::symlink_metadata(&path).is_err() {
        anyhow::bail!(
            "prompt model {}: no such model card (name a card, NAME.json, or a model of the models \
             folder; `endotwin train prompts` makes one)",
            path.display()
        );
    }
    model::load(&path, device).with_context(|| format!("prompt model {}", path.display()))
}

pub fn run(library: &Path, pref: BackendPref, what: PromptsWhat) -> Result<()> {
    let compute = super::compute(pref)?;
    let device = compute.device.clone();
    let models_dir = endotwin::engine::promote::models_dir_for(library);
    match what {
        PromptsWhat::Score {
            image,
            prompts,
            model,
            json,
        } => {
            let sets = read_prompt_sets(&prompts)?;
            let decoded = endotwin::data::images::decode_file(&image)
                .with_context(|| format!("{}", image.display()))?;
            // Each set is scored by the model it is for (`model` in the set file; the stage-3
            // model when it names none), unless --model says otherwise for all of them.
            let mut groups: Vec<(PathBuf, Vec<endotwin::prompts::PromptSet>)> = Vec::new();
            for set in sets {
                let card = match &model {
                    Some(card) => {
                        let chosen = card.file_stem().map(|s| s.to_string_lossy().into_owned());
                        if set.model.is_some() && chosen.as_deref() != Some(set.model_name()) {
                            println!(
                                "note: set `{}` is for `{}`; scored with {} as asked (--model)",
                                set.name,
                                set.model_name(),
                                card.display()
                            );
                        }
                        card_path(&models_dir, Some(card.clone()))
                    }
                    None => models_dir.join(format!("{}.json", set.model_name())),
                };
                match groups.iter_mut().find(|(c, _)| *c == card) {
                    Some((_, sets)) => sets.push(set),
                    None => groups.push((card, vec![set])),
                }
            }
            let mut answers = Vec::new();
            let mut unread: Vec<String> = Vec::new();
            let sets_asked = groups.iter().map(|(_, s)| s.len()).sum::<usize>();
            for (card, sets) in groups {
                let loaded = load(&models_dir, Some(card), &device)?;
                let query::Encoded {
                    embeddings: emb,
                    features,
                } = query::encode(&loaded, std::slice::from_ref(&decoded.image), &device);
                let rows = endotwin::captions::query::rows(emb.clone());
                println!("model {}", loaded.named());
                let mut scored = Vec::new();
                for set in sets {
                    // A set in words this model never learned (the detector reads only its two
                    // sentences) is named and skipped; nothing scored at all is an error.
                    let scores = match query::scores(&loaded, emb.clone(), &set.prompts, &device) {
                        Ok(scores) => scores,
                        Err(
                            e @ (query::PromptError::NoKnownWord { .. }
                            | query::PromptError::NotADetectorSentence { .. }),
                        ) => {
                            println!(
                                "note: set `{}` not scored with {}: {e}",
                                set.name,
                                loaded.named()
                            );
                            unread.push(format!("prompt set `{}`: {e}", set.name));
                            continue;
                        }
                        Err(e) => {
                            return Err(e).with_context(|| format!("prompt set `{}`", set.name));
                        }
                    };
                    println!("set {}", set.name);
                    for s in &scores[0] {
                        println!("  {:.3}  cos {:+.3}  {}", s.probability, s.cosine, s.prompt);
                        unknown_note(&loaded, &s.prompt);
                    }
                    scored.push(serde_json::json!({
                        "set": set.name,
                        "scores": scores[0].iter().map(|s| serde_json::json!({
                            "prompt": s.prompt, "probability": s.probability, "cosine": s.cosine,
                        })).collect::<Vec<_>>(),
                    }));
                }
                let raw = query::polyp_probabilities(&loaded, &rows, &device)[0];
                let calibrated = trust::calibrated(&loaded.card, raw);
                if let Some(p) = calibrated {
                    println!(
                        "polyp probability (the detector's two sentences, calibrated on validation): {p:.3}"
                    );
                }
                let familiarity = trust::judge(&loaded.card, &features);
                super::twins::print_familiarity(familiarity.as_ref(), &loaded.card.name);
                answers.push(serde_json::json!({
                    "model": loaded.named(),
                    "sets": scored,
                    "polyp_probability_calibrated": calibrated,
                    "familiarity": familiarity,
                }));
            }
            if unread.len() == sets_asked {
                anyhow::bail!("{}", unread.join("; "));
            }
            if let Some(path) = &json {
                super::write_output(
                    path,
                    serde_json::to_string_pretty(&serde_json::json!({
                        "image": image,
                        "models": answers,
                    }))?
                    .as_bytes(),
                )?;
            }
            Ok(())
        }
        PromptsWhat::Search { text, top, model } => {
            let loaded = load(&models_dir, model, &device)?;
            query::check_prompt(&loaded, &text)?;
            unknown_note(&loaded, &text);
            let mut store = Store::open(library, OpenMode::Existing)?;
            // Nothing to search is said before a frame is encoded (round 10 N32).
            query::check_searchable(&store)?;
            let done = index(&loaded, &mut store, &device)?;
            // Frames the search could not read are named, never passed over.
            for line in &done.skipped {
                eprintln!("left out: {line}");
            }
            let hits = match query::search(&loaded, &store, &text, top, &device) {
                Ok(hits) => hits,
                Err(e) if !done.skipped.is_empty() => {
                    return Err(anyhow::Error::from(e).context(format!(
                        "{} frames could not be read (named above; `endotwin library check` \
                         lists every changed file)",
                        done.skipped.len()
                    )));
                }
                Err(e) => return Err(e.into()),
            };
            for h in hits {
                println!(
                    "{:.3}  {}  {}",
                    h.score,
                    h.code,
                    h.histology.as_deref().unwrap_or("histology unknown")
                );
            }
            Ok(())
        }
        PromptsWhat::Index { model } => {
            let loaded = load(&models_dir, model, &device)?;
            let mut store = Store::open(library, OpenMode::Existing)?;
            let done = index(&loaded, &mut store, &device)?;
            println!(
                "{} frames encoded, {} current with {}",
                done.encoded,
                done.current,
                loaded.named()
            );
            if !done.skipped.is_empty() {
                for line in &done.skipped {
                    println!("left out: {line}");
                }
                anyhow::bail!(
                    "{} frames left out (named above; `endotwin library check` lists every changed file)",
                    done.skipped.len()
                );
            }
            Ok(())
        }
    }
}

/// Encodes what `loaded` has not encoded yet, with a progress bar on stderr.
fn index(
    loaded: &LoadedPromptModel,
    store: &mut Store,
    device: &burn::tensor::Device,
) -> Result<query::Indexed> {
    let progress = Arc::new(Progress::new());
    let bar = super::stage_bar();
    let watcher = super::watch(progress.clone(), bar.clone());
    let result = query::index_library(loaded, store, device, &progress);
    bar.finish_and_clear();
    let _ = watcher.join();
    Ok(result?)
}

#[derive(clap::Args)]
pub struct EvalArgs {
    /// A held-out library of examination records; default: generate the test split of --seed.
    #[arg(long)]
    pub held_out: Option<PathBuf>,
    /// Seed of the generated test split, the bootstrap and the few-shot draws.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Polyps of the generated test split.
    #[arg(long, default_value_t = 420)]
    pub polyps: usize,
    /// Frames per examination of the generated test split.
    #[arg(long, default_value_t = 24)]
    pub frames: usize,
    /// Side of the generated frames, pixels.
    #[arg(long, default_value_t = 96)]
    pub size: u32,
    /// Models folder holding `<name>-round1`, `<name>-detect`, `<name>-stage2` and `<name>`;
    /// default: the shipped one.
    #[arg(long)]
    pub models: Option<PathBuf>,
    #[arg(long, default_value = "prompts")]
    pub name: String,
    /// The plain-CLIP comparison's card (`train prompts --stage plain`); default:
    /// `<name>-plain` in the models folder when it is there (the shipped one is).
    #[arg(long)]
    pub plain: Option<PathBuf>,
    /// The supervised ceiling's card (`train prompts --stage supervised`: frames paired by
    /// their ground truth): scored for detection as how far the architecture can go.
    #[arg(long)]
    pub supervised: Option<PathBuf>,
    /// Ablation models, LABEL=CARD (e.g. a stage-3 model trained with `--targets onehot` or
    /// `--pool mean`): their zero-shot benign-vs-neoplastic AUROC joins the ablation list.
    #[arg(long = "ablation", value_name = "LABEL=CARD")]
    pub ablations: Vec<String>,
    /// Also score the stage-3 and stage-2 architectures at this many random initialisations
    /// (draw i seeded `--seed * 1000 + i`) for pathology: the untrained mean, spread and how
    /// many draws reach the trained model's AUROC (one untrained row alone can rank well by
    /// chance).
    #[arg(long, default_value_t = 0, value_parser = super::eval::count(0, 1000))]
    pub untrained_draws: usize,
    /// Also write the figures as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

pub fn eval(pref: BackendPref, a: EvalArgs) -> Result<()> {
    // A generated split too small to score is refused before anything is generated (round
    // 16 N10: `--polyps 0` panicked; `--frames 0` scored frames it said it had not).
    if a.held_out.is_none() {
        if a.polyps < 12 {
            anyhow::bail!(
                "--polyps {}: a generated test split needs at least 12 polyps (a figure over fewer says nothing); nothing was generated",
                a.polyps
            );
        }
        if a.frames == 0 {
            anyhow::bail!(
                "--frames 0: an examination record needs at least 1 frame; nothing was generated"
            );
        }
    }
    let compute = super::compute(pref)?;
    let device = compute.device.clone();
    let models = a
        .models
        .clone()
        .unwrap_or_else(endotwin::default_models_dir);
    let card = |suffix: &str| models.join(format!("{}{suffix}.json", a.name));
    let get = |path: PathBuf| {
        model::load(&path, &device).with_context(|| {
            format!(
                "{} (train it with `endotwin train prompts`)",
                path.display()
            )
        })
    };
    let round1 = get(card("-round1"))?;
    let detector = get(card("-detect"))?;
    // Stage 3 may not be trained yet: detection is still scored.
    let stage3 = model::load(&card(""), &device).ok();
    let stage2 = model::load(&card("-stage2"), &device).ok();
    let plain = a
        .plain
        .clone()
        .or_else(|| Some(card("-plain")).filter(|p| p.exists()))
        .map(get)
        .transpose()?;
    let supervised = a.supervised.clone().map(get).transpose()?;
    let mut ablations = Vec::new();
    for c in &a.ablations {
        let (label, path) = super::compare_arg(c)?;
        ablations.push((label.to_string(), get(path.to_path_buf())?));
    }
    if a.held_out.is_none() {
        eprintln!(
            "generating the test split of seed {} ({} polyps, {} frames per examination)...",
            a.seed, a.polyps, a.frames
        );
    }
    let started = std::time::Instant::now();
    let lib = HeldOut::open_records(a.held_out.as_deref(), a.seed, a.polyps, a.frames, a.size)?;
    // Read at the largest input any of the models takes; each is fed its own size.
    let largest = [
        Some(&round1),
        Some(&detector),
        stage2.as_ref(),
        stage3.as_ref(),
    ]
    .into_iter()
    .flatten()
    .chain(plain.as_ref())
    .chain(supervised.as_ref())
    .chain(ablations.iter().map(|(_, m)| m))
    .map(|m| m.config.image_size())
    .max()
    .unwrap_or(64);
    let items = HeldOutItems::load(&lib.store, largest, a.seed).map_err(anyhow::Error::msg)?;
    device.seed(a.seed);
    // The untrained row: the detector's architecture (image input included) at random init.
    let untrained_config = match &detector.config.clip.vision {
        TwinEncoderConfig::Vit(v) => PromptModelConfig::small(std::iter::empty::<&str>())
            .with_image(v.image_size, v.patch_size),
        TwinEncoderConfig::Backbone(_) => detector.config.clone(),
    };
    let untrained = untrained_config.init(&device);
    let untrained = Named {
        label: "untrained".into(),
        model: &untrained,
        config: &untrained_config,
    };
    // Pathology's untrained row is stage 3's architecture at random init (the detector's
    // text tower knows no pathology word, so its row would be no architecture's at all).
    let untrained_pathology_model;
    let untrained_pathology = match &stage3 {
        Some(s3) => {
            untrained_pathology_model = s3.config.init(&device);
            Named {
                label: "untrained".into(),
                model: &untrained_pathology_model,
                config: &s3.config,
            }
        }
        None => Named {
            label: "untrained".into(),
            model: untrained.model,
            config: untrained.config,
        },
    };
    let (frames, polyp_frames) = items.frame_count();
    let (polyps, benign) = items.polyp_count();
    println!(
        "held-out: {} ({} examinations, {frames} frames of which {polyp_frames} show a polyp; {polyps} polyps, {benign} benign); bootstrap 200 resamples over examinations, seed {}",
        lib.described,
        items.examinations(),
        a.seed
    );
    let r1 = Named::of("round 1", &round1);
    let r2 = Named::of("round 2", &detector);
    let mut detection = vec![
        ("round1", items.detection(&r1, &device)),
        ("round2", items.detection(&r2, &device)),
        ("untrained", items.detection(&untrained, &device)),
        ("colour_histogram_lr", items.histogram(true, a.seed)),
        (
            "few_shot_5",
            items.few_shot(&r2, true, 0.05, a.seed, &device),
        ),
        (
            "few_shot_10",
            items.few_shot(&r2, true, 0.10, a.seed, &device),
        ),
    ];
    let mut pathology = Vec::new();
    if let Some(stage3) = &stage3 {
        let s3 = Named::of("stage 3", stage3);
        pathology.extend([
            ("zero_shot", items.pathology(&s3, &device)),
            ("untrained", items.pathology(&untrained_pathology, &device)),
            ("colour_histogram_lr", items.histogram(false, a.seed)),
            (
                "few_shot_10",
                items.few_shot(&s3, false, 0.10, a.seed, &device),
            ),
            (
                "few_shot_20",
                items.few_shot(&s3, false, 0.20, a.seed, &device),
            ),
        ]);
    } else {
        println!("(no {} yet: pathology is not scored)", card("").display());
    }
    if let Some(p) = &plain {
        let n = Named::of("plain CLIP", p);
        detection.push(("plain_clip", items.detection(&n, &device)));
        pathology.push(("plain_clip", items.pathology(&n, &device)));
    }
    if let Some(m) = &supervised {
        let n = Named::of("supervised ceiling", m);
        detection.push(("supervised_ceiling", items.detection(&n, &device)));
    }
    let mut ablation_rows: Vec<(String, Curves)> = vec![
        ("stage 1: round 1 (detection)".into(), detection[0].1),
        (
            "stage 1: last cleansing round, the detector (detection)".into(),
            detection[1].1,
        ),
    ];
    if let Some((_, c)) = pathology.first() {
        ablation_rows.push((
            "stage 3, cross-attention unification (pathology)".into(),
            *c,
        ));
    }
    let stage2_curves = stage2
        .as_ref()
        .map(|s2| items.pathology(&Named::of("stage 2", s2), &device));
    if let Some(c) = stage2_curves {
        ablation_rows.push((
            "after stage 2, soft attribute targets (pathology)".into(),
            c,
        ));
    }
    for (label, m) in &ablations {
        ablation_rows.push((
            format!("{label} (pathology)"),
            items.pathology(&Named::of(label, m), &device),
        ));
    }
    // Last, so that no row above depends on whether draws were asked for.
    let seeds = draw_seeds(a.seed, a.untrained_draws);
    let mut draws: Vec<(&str, UntrainedDraws)> = Vec::new();
    if !seeds.is_empty() {
        let trained = [
            ("stage3", stage3.as_ref(), pathology.first().map(|p| p.1)),
            ("stage2", stage2.as_ref(), stage2_curves),
        ];
        // Stage 2 and stage 3 share one architecture as shipped: the same seeds then give the
        // same untrained models, scored once.
        let mut scored: Vec<(serde_json::Value, Vec<f64>)> = Vec::new();
        for (name, m, curves) in trained {
            if let (Some(m), Some(c)) = (m, curves) {
                let arch = serde_json::to_value(&m.config)?;
                let d = match scored.iter().find(|(a, _)| *a == arch) {
                    Some((_, aurocs)) => UntrainedDraws::of(c.auroc, seeds.clone(), aurocs.clone()),
                    None => items.untrained_pathology_draws(&m.config, c.auroc, &seeds, &device),
                };
                scored.push((arch, d.aurocs.clone()));
                draws.push((name, d));
            }
        }
    }
    let row = |name: &str, c: &Curves| {
        println!(
            "  {name:<44} AUROC {:.3} [{:.3}, {:.3}]  AUPR {:.3} [{:.3}, {:.3}]  (n {}, {} positive)",
            c.auroc,
            c.auroc_ci[0],
            c.auroc_ci[1],
            c.aupr,
            c.aupr_ci[0],
            c.aupr_ci[1],
            c.n,
            c.positives
        )
    };
    println!(
        "zero-shot polyp detection per frame (prompts: assets/prompt_sets.toml, `polyp vs background`):"
    );
    for (name, c) in &detection {
        row(name, c);
    }
    println!("benign (Vienna 1) vs neoplastic (Vienna 3-5) per polyp (`benign vs neoplastic`):");
    for (name, c) in &pathology {
        row(name, c);
    }
    println!("ablations:");
    for (name, c) in &ablation_rows {
        row(name, c);
    }
    if !draws.is_empty() {
        println!(
            "untrained draws (pathology; each architecture at {} random initialisations, seeds {}..={}):",
            seeds.len(),
            seeds[0],
            seeds[seeds.len() - 1]
        );
    }
    for (name, d) in &draws {
        println!(
            "  {name:<8} trained AUROC {:.3}; untrained mean {:.3} (sd {:.3}), quartiles {:.3} {:.3} {:.3}, max {:.3}; {} of {} draws reach the trained",
            d.trained,
            d.mean,
            d.sd,
            d.quartiles[0],
            d.quartiles[1],
            d.quartiles[2],
            d.max,
            d.reaching_trained,
            d.aurocs.len()
        );
    }
    let stage3_name = stage3.as_ref().map_or("none".to_string(), |m| m.named());
    println!(
        "models: round 1 {}, round 2 {}, stage 3 {stage3_name} ({:.0} s)",
        round1.named(),
        detector.named(),
        started.elapsed().as_secs_f64()
    );
    if let Some(path) = &a.json {
        let curves = |rows: &[(&str, Curves)]| {
            serde_json::Value::Object(
                rows.iter()
                    .map(|(k, c)| (k.to_string(), serde_json::to_value(c).expect("curves")))
                    .collect(),
            )
        };
        let mut json = serde_json::json!({
            "held_out": {
                "described": lib.described,
                "seed": a.seed,
                "examinations": items.examinations(),
                "frames": frames,
                "polyp_frames": polyp_frames,
                "polyps": polyps,
                "benign": benign,
            },
            "models": {
                "round1": round1.named(),
                "round2": detector.named(),
                "stage3": stage3_name,
            },
            "detection": curves(&detection),
            "pathology": curves(&pathology),
            "ablations": ablation_rows.iter().map(|(name, c)| serde_json::json!({
                "name": name, "auroc": c.auroc, "auroc_ci": c.auroc_ci, "aupr": c.aupr,
            })).collect::<Vec<_>>(),
        });
        if !draws.is_empty() {
            json["untrained_draws"] = serde_json::Value::Object(
                draws
                    .iter()
                    .map(|(k, d)| (k.to_string(), serde_json::to_value(d).expect("draws")))
                    .collect(),
            );
        }
        super::write_output(path, serde_json::to_string_pretty(&json)?.as_bytes())?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// Says which words of `prompt` the model read as "unknown word" (the prompt was scored
/// without what they mean).
fn unknown_note(loaded: &LoadedPromptModel, prompt: &str) {
    let unknown = query::unknown_words(loaded, prompt);
    if !unknown.is_empty() {
        eprintln!(
            "note: `{prompt}`: {} unknown to {} (read as \"unknown word\"; rephrase in words it \
             knows)",
            unknown.join(", "),
            loaded.named()
        );
    }
}
