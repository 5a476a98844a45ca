//! `endotwin model import-hf-clip|promote|demote|report|code-center|half`: a Hugging Face CLIP checkpoint to a model card + record; the library's active models; a card's record in half precision.

use anyhow::{Context, Result};
use endotwin::compute::BackendPref;
use std::path::PathBuf;

#[derive(clap::Subcommand)]
pub enum ModelWhat {
    /// Read a `CLIPModel` model.safetensors (config.json beside it is used when present) and
    /// write `<out>/<name>.json` (model card) and `<out>/<name>.bpk` (burn record).
    ImportHfClip {
        weights: PathBuf,
        #[arg(long, default_value = "models")]
        out: PathBuf,
        #[arg(long, default_value = "clip-vit-b32")]
        name: String,
    },
    /// Make a finished training run's model the library's active one for its capability (as
    /// the Training tab's Promote does); the twin index is rebuilt when the twin encoder changed.
    Promote {
        /// The run's number (`#N` in the Training tab; `7` or `#7`).
        #[arg(value_parser = run_number)]
        run: i64,
    },
    /// Put back the model NAME (twin-image, tracklet-head, captions, prompts, ...) had before
    /// its last promotion.
    Demote { name: String },
    /// Evaluation report of a run's model (or any model card) beside the library's active
    /// model of its capability, on held-out data (never the library the run trained on):
    /// metrics with intervals, ROC and precision-recall curves, a confusion matrix, and the
    /// expected calibration error of the confidence a calibrated model shows (raw and
    /// calibrated, with a reliability diagram). Saved beside the card as
    /// `<card>.report.json` + `.png` (+ `.reliability.png`; what the Training tab shows).
    Report(ReportArgs),
    /// Give a twin image encoder its code centre: the mean embedding of the polyp views of
    /// --library, which must be its TRAINING data (never a test split). The binary codes are
    /// then the signs of each embedding less the centre; the card gets a new version, so
    /// libraries indexed before are re-indexed. (Measured on the shipped encoder: no clear
    /// gain on held-out phantom polyps, so the shipped card has none; see the README.)
    CodeCenter {
        /// The image encoder's card (rewritten in place).
        card: PathBuf,
        /// Also fit a code rotation by iterative quantisation (ITQ) on the same views: the
        /// codes become the signs of the centred embedding turned by it.
        #[arg(long)]
        itq: bool,
        /// ITQ rounds (signs, then the best rotation for them).
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=10_000))]
        itq_iterations: u64,
        /// Seed of ITQ's starting rotation.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Give a twin image encoder another crop: the polyp's box enlarged CONTEXT times (its
    /// card's `input.context`) at indexing and query time. Choose it on validation polyps
    /// (`eval twins --held-out <validation split>`); the card gets a new version, so libraries
    /// indexed before are re-indexed. Tracklet comparisons keep their own crop.
    CropContext {
        /// The image encoder's card (rewritten in place).
        card: PathBuf,
        #[arg(long)]
        context: f32,
    },
    /// Encode a twin image encoder's crops at TURNS quarter turns (1, 2 or 4; its card's
    /// `input.turns`) and average their embeddings, so a view's twins do not depend on how the
    /// endoscope was rolled. Choose it on validation polyps (`eval twins --held-out <validation
    /// split>`); the card gets a new version, so libraries indexed before are re-indexed.
    /// Tracklet comparisons keep their own input.
    Turns {
        /// The image encoder's card (rewritten in place).
        card: PathBuf,
        #[arg(long)]
        turns: u32,
    },
    /// Fit a model's familiarity (how far an input lies from the data it learned from, with
    /// the threshold that marks an answer "unfamiliar") and its confidence calibration, and
    /// store them in its card. Twin image encoders: views and the vote; caption models: frames
    /// and the category head; text-prompt models: frames and the detector's probability.
    Trust(super::trust::TrustArgs),
    /// Give a twin image encoder longer binary codes: BITS (a multiple of its embedding's
    /// d) instead of d, the further bits the signs of the embedding turned by seeded random
    /// rotations. No data needed; the card gets a new version, so libraries indexed before
    /// are re-indexed. `--bits` equal to d goes back to d-bit codes.
    CodeBits {
        /// The image encoder's card (rewritten in place).
        card: PathBuf,
        #[arg(long)]
        bits: usize,
        /// Seed of the random rotations.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Store a model's weights in half precision (f16): its record is rewritten with its f32
    /// weights rounded to f16 (vectors, weights of fewer than 16384 values and weights with a
    /// value beyond 16 stay f32; about half the bytes; the model still computes in f32) and its
    /// card
    /// gets the record's checksum and a new version (`-f16`), so libraries indexed with it are
    /// re-indexed. A record already in f16 is refused. Cards beside it that read its weights
    /// (a tracklet head's `reads`) are refused by name unless --force re-points them.
    Half {
        /// The model's card (it and its record are rewritten in place).
        card: PathBuf,
    },
}

#[derive(clap::Args)]
pub struct ReportArgs {
    /// The run's number (`#N` in the Training tab); its model was trained on this library.
    #[arg(long, conflicts_with = "card", required_unless_present = "card", value_parser = run_number)]
    pub run: Option<i64>,
    /// Any model card instead of a run's.
    #[arg(long)]
    pub card: Option<PathBuf>,
    /// A held-out library; default: generate the phantom's validation split of --seed.
    #[arg(long)]
    pub held_out: Option<PathBuf>,
    #[arg(long, default_value_t = 29)]
    pub seed: u64,
    // Each generated split at least what a figure needs (round 17 N8: one capsule frame gave a
    // saved report of perfect figures with intervals of zero width, without a word).
    /// Polyps of a generated split (twin reports; at least 12, as `eval twins`).
    #[arg(long, default_value_t = 200, value_parser = super::eval::count(12, u64::MAX))]
    pub polyps: usize,
    /// Videos of a generated split (tracklet reports).
    #[arg(long, default_value_t = 12, value_parser = super::eval::count(1, u64::MAX))]
    pub videos: usize,
    /// Frames per generated video (at least 30, the shortest tracklet scored).
    #[arg(long, default_value_t = 800, value_parser = super::eval::count(30, u64::MAX))]
    pub frames: usize,
    /// Captioned capsule frames of a generated split (caption reports; at least 24, one
    /// patient's).
    #[arg(long, default_value_t = 480, value_parser = super::eval::count(24, u64::MAX))]
    pub capsule_frames: usize,
    /// Also write the report's JSON here (its PNG beside it, and a calibrated model's
    /// reliability diagram as `<stem>.reliability.png`).
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// The largest checkpoint `import-hf-clip` reads (CLIP ViT-L/14 in f32 is 1.7 GB).
const MAX_CHECKPOINT: u64 = 8 << 30;

pub fn run(library: &std::path::Path, pref: BackendPref, what: ModelWhat) -> Result<()> {
    use endotwin::engine::promote;
    let reindex = |name: &str| -> Result<()> {
        let compute = super::compute(pref)?;
        let progress = endotwin::plumbing::Progress::new();
        if let Some((stats, version)) =
            promote::reindex_after(library, name, &compute.device, &progress)
                .map_err(anyhow::Error::msg)?
        {
            println!(
                "twin index rebuilt with {version}: {} views encoded, {} polyps updated",
                stats.views_encoded, stats.polyps_updated
            );
        }
        Ok(())
    };
    // A card rewritten in place is never one of a library's own files (its media/ folder, its
    // database): the output guard, with replacing allowed since rewriting is the point.
    let in_place = match &what {
        ModelWhat::CodeCenter { card, .. }
        | ModelWhat::CodeBits { card, .. }
        | ModelWhat::Half { card }
        | ModelWhat::CropContext { card, .. }
        | ModelWhat::Turns { card, .. } => Some(card.clone()),
        ModelWhat::Trust(args) => Some(args.card.clone()),
        _ => None,
    };
    // The twin encoder's input and code settings are an image encoder's: another card is
    // named by its kind, not by a config that fails to parse.
    let image_only = match &what {
        ModelWhat::CodeCenter { card, .. } => Some((card, "code-center")),
        ModelWhat::CodeBits { card, .. } => Some((card, "code-bits")),
        ModelWhat::CropContext { card, .. } => Some((card, "crop-context")),
        ModelWhat::Turns { card, .. } => Some((card, "turns")),
        _ => None,
    };
    if let Some((card, command)) = image_only {
        let kind = endotwin::model::weights::read_card(card)?.kind;
        if kind != endotwin::model::weights::ModelKind::ImageEncoder {
            anyhow::bail!(
                "{}: a {kind} card; `model {command}` takes a twin image encoder's card (e.g. \
                 models/twin-image.json); nothing was changed",
                card.display()
            );
        }
    }
    if let Some(card) = in_place {
        let named = super::output_rules().0;
        endotwin::plumbing::output::check_output(&card, named.or(Some(library)), true)?;
        let record = endotwin::model::weights::record_path(&card);
        endotwin::plumbing::output::check_output(&record, named.or(Some(library)), true)?;
    }
    match what {
        ModelWhat::Report(args) => report(library, pref, args),
        ModelWhat::Trust(args) => super::trust::run(library, pref, args),
        ModelWhat::Promote { run } => {
            let store = endotwin::store::Store::open(library, endotwin::store::OpenMode::Existing)?;
            let Some(card) = store.run_card(run)? else {
                // No such run is not a run that saved nothing (round 8 N35).
                let Some((_, recipe, status)) = store.runs()?.into_iter().find(|r| r.0 == run)
                else {
                    anyhow::bail!("the library has no run #{run} (`endotwin info` lists its runs)");
                };
                anyhow::bail!(
                    "{}",
                    endotwin::engine::promote::no_model_to_promote(run, &recipe, &status)
                );
            };
            drop(store);
            let p = match promote::promote(library, std::path::Path::new(&card), Some(run)) {
                Ok(p) => p,
                // Already the library's twin model: a promotion interrupted in its index
                // rebuild is finished here (round 7 N30: the rerun said only "already", and
                // twins "index it first"). The rebuild encodes only what is not yet indexed.
                Err(promote::PromoteError::AlreadyActive { name, version, .. })
                    if name == endotwin::twins::IMAGE_MODEL
                        || name == endotwin::twins::SCENE_MODEL =>
                {
                    println!(
                        "run #{run}'s model ({version}) is already the library's {name}; the \
                         twin index is brought up to date with it"
                    );
                    return reindex(&name);
                }
                Err(e) => return Err(e.into()),
            };
            println!(
                "{} in {} is now run #{run}'s model ({card}){}{}",
                p.name,
                p.dir.display(),
                match &p.detector {
                    Some(d) => format!(", and {d} its polyp detector (the run's stage 1)"),
                    None => String::new(),
                },
                match (p.kept_previous, p.detector.is_some()) {
                    (true, true) => "; the previous ones are kept for demote",
                    (true, false) => "; the previous one is kept for demote",
                    _ => "",
                }
            );
            reindex(&p.name)
        }
        ModelWhat::CodeCenter {
            card,
            itq,
            itq_iterations,
            seed,
        } => code_center(
            library,
            pref,
            &card,
            itq.then_some((itq_iterations as usize, seed)),
        ),
        ModelWhat::CodeBits { card, bits, seed } => code_bits(pref, &card, bits, seed),
        ModelWhat::Half { card } => half(&card, super::output_rules().1),
        ModelWhat::CropContext { card, context } => crop_context(pref, &card, context),
        ModelWhat::Turns { card, turns } => set_turns(pref, &card, turns),
        ModelWhat::Demote { name } => {
            let demoted = promote::demote(library, &name)?;
            println!(
                "{name}: the model before the last promotion is back{}; the demoted one is kept \
                 as {} (promote its run again to use it)",
                match &demoted.detector {
                    Some(d) => format!(", and {d} with it (promoted together)"),
                    None => String::new(),
                },
                demoted.kept_as.display()
            );
            reindex(&name)
        }
        ModelWhat::ImportHfClip { weights, out, name } => {
            endotwin::model::weights::check_name(&name)?;
            // A FIFO would block the read for ever and /dev/zero never end: refused at once.
            endotwin::plumbing::input::check_file(&weights, MAX_CHECKPOINT, "a CLIP checkpoint")?;
            for ext in ["json", "bpk"] {
                super::check_output(&out.join(format!("{name}.{ext}")))?;
            }
            let (path, config) = endotwin::model::hf_clip::import_to_card(&weights, &out, &name)?;
            let vision = config
                .vision
                .vit()
                .context("a Hugging Face CLIP's image tower is a ViT")?;
            println!(
                "{}: CLIP {}px/{} image tower ({} blocks), text tower ({} blocks, vocab {}), {}-d joint space",
                path.display(),
                vision.image_size,
                vision.patch_size,
                vision.depth,
                config.text.depth,
                config.text.vocab_size,
                vision.output_dim()
            );
            if config.text.vocab_size == endotwin::prompts::model::CLIP_BPE_IDS {
                println!(
                    "it reads text with CLIP's tokenizer: choose it in the Text prompts tab, or \
                     `endotwin prompts score|search --model {}`",
                    path.display()
                );
            }
            Ok(())
        }
    }
}

fn code_center(
    library: &std::path::Path,
    pref: BackendPref,
    card: &std::path::Path,
    itq: Option<(usize, u64)>,
) -> Result<()> {
    use anyhow::Context;
    use endotwin::twins::codes;
    let compute = super::compute(pref)?;
    let models = endotwin::twins::TwinModels::load_cards(card, None, &compute.device)
        .with_context(|| format!("{}", card.display()))?;
    let store = endotwin::store::Store::open(library, endotwin::store::OpenMode::Existing)?;
    let progress = endotwin::plumbing::Progress::new();
    let embeddings = codes::training_embeddings(
        &store,
        &models.image,
        models.input(),
        &compute.device,
        &progress,
    )?;
    // A centre (and a rotation) from a handful of views describes those views, not the
    // encoder's data.
    const NEED: usize = 8;
    if embeddings.len() < NEED {
        anyhow::bail!(
            "{}: {} polyp views; a code centre needs at least {NEED} views of the encoder's \
             training library. Nothing was changed",
            endotwin::store::library_name(library),
            embeddings.len()
        );
    }
    let center = codes::code_center(&embeddings);
    let rotation = itq.map(|(iterations, seed)| {
        let (r, before, after) = codes::itq_rotation(
            &embeddings,
            Some(&center),
            iterations,
            seed,
            &compute.device,
        );
        println!(
            "ITQ, {iterations} rounds: quantisation error {before:.4} at a random rotation -> {after:.4}"
        );
        r
    });
    let mut after = models.image_card.clone();
    after.code_center = Some(center.clone());
    after.code_rotation = rotation.clone();
    let version = codes::code_version(&after);
    endotwin::model::weights::set_code_center(card, center.clone(), rotation.clone(), &version)?;
    let norm = center.iter().map(|x| x * x).sum::<f32>().sqrt();
    println!(
        "{}: code centre of {} views of {} (norm {norm:.3}){}; version {version}",
        card.display(),
        embeddings.len(),
        endotwin::store::library_name(library),
        if rotation.is_some() {
            ", and an ITQ rotation"
        } else {
            ""
        }
    );
    Ok(())
}

fn code_bits(pref: BackendPref, card: &std::path::Path, bits: usize, seed: u64) -> Result<()> {
    use anyhow::Context;
    use endotwin::model::weights::CodeBits;
    let compute = super::compute(pref)?;
    let models = endotwin::twins::TwinModels::load_cards(card, None, &compute.device)
        .with_context(|| format!("{}", card.display()))?;
    let dim = models.dim();
    let most = endotwin::twins::MAX_CODE_BLOCKS * dim;
    if bits < dim || !bits.is_multiple_of(dim) || bits > most {
        anyhow::bail!(
            "--bits {bits}: the codes of {} need a multiple of its {dim} dimensions, from {dim} \
             to {most}",
            card.display()
        );
    }
    let mut after = models.image_card.clone();
    after.code_bits = (bits > dim).then_some(CodeBits { bits, seed });
    let version = endotwin::twins::codes::code_version(&after);
    endotwin::model::weights::set_code_bits(card, after.code_bits, &version)?;
    println!(
        "{}: {bits}-bit codes ({} bytes a polyp); version {version}",
        card.display(),
        bits / 8
    );
    Ok(())
}

fn half(card: &std::path::Path, force: bool) -> Result<()> {
    // Every error of `halve` names the card or its record.
    let h = endotwin::model::half::halve(card, endotwin::twins::codes::half_version, force)?;
    let mb = |b: usize| b as f64 / 1e6;
    println!(
        "{}: {} tensors ({} values) in f16{}, record {:.1} MB -> {:.1} MB, largest change of a \
         weight {:.2e} ({:.2e} of its size); version {} -> {}",
        card.display(),
        h.tensors,
        h.values,
        match h.kept {
            0 => String::new(),
            n => format!(
                " ({n} kept in f32: fewer than {} values or a value beyond {})",
                endotwin::model::half::HALF_MIN_VALUES,
                endotwin::model::half::HALF_LIMIT
            ),
        },
        mb(h.bytes_before),
        mb(h.bytes_after),
        h.max_change,
        h.max_relative,
        h.was,
        h.card.version
    );
    for reader in &h.repointed {
        println!("{}: now reads the half weights", reader.display());
    }
    Ok(())
}

fn crop_context(pref: BackendPref, card: &std::path::Path, context: f32) -> Result<()> {
    use anyhow::Context;
    if !endotwin::model::preprocess::TwinInput::valid_context(context) {
        anyhow::bail!(
            "--context {context}: the box is enlarged by a positive number of times between 0.5 and 16; nothing was changed"
        );
    }
    let compute = super::compute(pref)?;
    let models = endotwin::twins::TwinModels::load_cards(card, None, &compute.device)
        .with_context(|| format!("{}", card.display()))?;
    let before = models.input().context;
    let version = endotwin::twins::codes::context_version(&models.image_card, context);
    endotwin::model::weights::set_input(card, "crop", |i| i.context = context, &version)?;
    println!(
        "{}: polyp crops of {context} x the box (were {before}); version {version}",
        card.display()
    );
    Ok(())
}

fn set_turns(pref: BackendPref, card: &std::path::Path, turns: u32) -> Result<()> {
    use anyhow::Context;
    if !endotwin::model::preprocess::TwinInput::valid_turns(turns) {
        anyhow::bail!("--turns {turns}: a crop is encoded at 1, 2 or 4 quarter turns");
    }
    let compute = super::compute(pref)?;
    let models = endotwin::twins::TwinModels::load_cards(card, None, &compute.device)
        .with_context(|| format!("{}", card.display()))?;
    let before = models.input().turns;
    let version = endotwin::twins::codes::turns_version(&models.image_card, turns);
    endotwin::model::weights::set_input(card, "turn", |i| i.turns = turns, &version)?;
    println!(
        "{}: crops encoded at {turns} quarter turn(s), embeddings averaged (were {before}); version {version}",
        card.display()
    );
    Ok(())
}

/// Whether one of `library`'s training runs saved the model of `card` (its card file).
fn saved_by_a_run_of(library: &std::path::Path, card: &std::path::Path) -> bool {
    let Ok(store) = endotwin::store::Store::open_read_only(library) else {
        return false;
    };
    let Ok(card) = card.canonicalize() else {
        return false;
    };
    store
        .runs()
        .unwrap_or_default()
        .into_iter()
        .any(|(run, ..)| {
            store
                .run_card(run)
                .ok()
                .flatten()
                .and_then(|c| std::path::Path::new(&c).canonicalize().ok())
                .is_some_and(|c| c == card)
        })
}

fn report(library: &std::path::Path, pref: BackendPref, a: ReportArgs) -> Result<()> {
    use anyhow::Context;
    use endotwin::eval::report::{self, ReportData};
    let (card, trained_on) = match (a.run, a.card) {
        (Some(run), _) => {
            let store = endotwin::store::Store::open(library, endotwin::store::OpenMode::Existing)?;
            let Some(card) = store.run_card(run)? else {
                // No such run is not a run that saved nothing (round 8 N35).
                if !store.runs()?.iter().any(|r| r.0 == run) {
                    anyhow::bail!("the library has no run #{run} (`endotwin info` lists its runs)");
                }
                anyhow::bail!("run #{run} saved no model (only finished runs have a report)");
            };
            (PathBuf::from(card), Some(library.to_path_buf()))
        }
        // A run's card given by its file: the library whose run saved it (this one, or the
        // held-out one) is its training data all the same (round 7 N58: the report scored a
        // run on the polyps it trained on).
        (None, Some(card)) => {
            let trained_on = [Some(library), a.held_out.as_deref()]
                .into_iter()
                .flatten()
                .find(|lib| saved_by_a_run_of(lib, &card))
                .map(std::path::Path::to_path_buf);
            (card, trained_on)
        }
        (None, None) => anyhow::bail!("give --run N or --card FILE"),
    };
    // Every file the report writes is checked before it is made (minutes of evaluation):
    // an earlier report beside the card, like a --json file, is replaced only with --force;
    // the library's own files and anything but a regular file never.
    let shipped = card
        .canonicalize()
        .ok()
        .zip(endotwin::default_models_dir().canonicalize().ok())
        .is_some_and(|(c, m)| c.starts_with(m));
    let beside = (!shipped).then(|| report::json_path(&card));
    // The reliability diagram only for a card that stores a calibration (no other is drawn).
    let calibrated =
        endotwin::model::weights::read_card(&card).is_ok_and(|c| !c.calibration.is_empty());
    let written = |json: &PathBuf| {
        let mut paths = vec![json.clone(), report::Report::png_path(json)];
        if calibrated {
            paths.push(report::Report::reliability_path(json));
        }
        paths
    };
    for json in beside.iter().chain(a.json.iter()) {
        let paths = written(json);
        if paths[1..].contains(&paths[0]) {
            anyhow::bail!(
                "--json {}: the report's picture is written under that name beside it; name the \
                 JSON file another way (e.g. report.json); nothing was written",
                json.display()
            );
        }
        for path in paths {
            super::check_output(&path)?;
        }
    }
    let compute = super::compute(pref)?;
    let data = ReportData {
        held_out: a.held_out,
        trained_on,
        seed: a.seed,
        polyps: a.polyps,
        videos: a.videos,
        frames: a.frames,
        capsule_frames: a.capsule_frames,
    };
    let active = endotwin::engine::promote::models_dir_for(library);
    let progress = endotwin::plumbing::Progress::new();
    let made = report::build(&card, Some(&active), &data, &compute.device, &progress)
        .with_context(|| format!("report of {}", card.display()))?;
    print!("{}", made.text());
    // Beside the card, except the shipped models' (never written to); --json wherever asked.
    for json in beside.into_iter().chain(a.json) {
        let pictures = made.save(&json)?;
        let pictures: Vec<String> = pictures.iter().map(|p| p.display().to_string()).collect();
        println!("wrote {} and {}", json.display(), pictures.join(" and "));
    }
    Ok(())
}

/// A run's number as the Training tab and `info` show it (`#7`) or bare (`7`).
fn run_number(text: &str) -> Result<i64, String> {
    let digits = text.trim().trim_start_matches('#');
    digits.parse::<i64>().map_err(|_| {
        format!("'{text}' is not a run number (`7` or `#7`, as `endotwin info` lists runs)")
    })
}
