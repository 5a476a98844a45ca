//! `endotwin eval phantom` (no-learning baselines) and `endotwin eval twins` (the twin models
//! on held-out polyps).

use anyhow::{Context, Result};
use endotwin::compute::BackendPref;
use endotwin::eval::held_out::HeldOut;
use endotwin::eval::twins::{Candidate, TwinEval};
use endotwin::twins::TwinModels;
use std::path::{Path, PathBuf};

#[derive(clap::Subcommand)]
pub enum EvalWhat {
    /// Raw-pixel and colour-histogram baselines (re-identification, pathology) on the phantom.
    Phantom {
        /// A held-out library to evaluate; default: generate the test split of --seed.
        #[arg(long)]
        held_out: Option<PathBuf>,
        #[arg(long, default_value_t = 7)]
        seed: u64,
        /// Polyps of the generated split (a figure over fewer than 12 says nothing).
        #[arg(long, default_value_t = 60, value_parser = count(12, 100_000))]
        polyps: usize,
        #[arg(long, default_value_t = 4, value_parser = count(2, 32))]
        views: usize,
        /// Side of the generated frames in pixels.
        #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(32..=2048))]
        size: u32,
    },
    /// Digital twins on held-out phantom polyps: re-identification (1v1 .. 2v2 views, float vs
    /// hash, scene encoder vs mean, baselines) and pathology by k-NN vote.
    Twins {
        /// A held-out library to evaluate; default: generate the test split of --seed.
        #[arg(long)]
        held_out: Option<PathBuf>,
        /// Seed of the held-out split and of the bootstrap.
        #[arg(long, default_value_t = 7)]
        seed: u64,
        /// Polyps of the generated split (a figure over fewer than 12 says nothing).
        #[arg(long, default_value_t = 500, value_parser = count(12, 100_000))]
        polyps: usize,
        /// The models folder to evaluate (twin-image, and twin-scene when present).
        #[arg(long)]
        models: Option<PathBuf>,
        /// More image encoders to put in the same table (ablations, oracle), each
        /// LABEL=FOLDER with a twin-image card; trained beforehand by their own commands.
        #[arg(long = "compare", value_name = "LABEL=FOLDER")]
        compare: Vec<String>,
        #[arg(long, default_value_t = 6)]
        k: usize,
        /// Also write the figures as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Write the figures into the image encoder's model card (its `evaluation`).
        #[arg(long)]
        record: bool,
    },
    /// Tracklet re-identification on held-out phantom videos: retrieval (mAP, HR@1, HR@5),
    /// pair re-identification (AUROC, AUPR; all pairs and within one video), the polyp count
    /// per video, against an untrained encoder and a colour histogram.
    Tracklets(super::tracklets::EvalArgs),
    /// The shipped (or --models) models on real frames laid out as ../shared/realdata
    /// (cvc-clinicdb*/, kvasir-seg*/, captiv8*/ below --data): twins on CVC-ClinicDB
    /// sequences, zero-shot detection on Kvasir-SEG crops, capsule categories on CAPTIV8,
    /// each with its baselines and bootstrap intervals.
    Real(RealArgs),
    /// Capsule captions on held-out patients: caption retrieval (top-1, top-5) per model with
    /// its loss and shots, against the majority caption; categories (accuracy, multi-label
    /// macro-F1) against a colour histogram with the same linear classifier.
    Captions(super::captions::EvalArgs),
    /// Text prompts (Endo-CLIP) on held-out examination records: zero-shot polyp detection per
    /// frame (round 1 and the detector after its last cleansing round, JSON `round2`), zero-shot benign vs neoplastic per polyp, few-shot probes, the
    /// colour-histogram baseline, the untrained model, plain CLIP and the ablations.
    Prompts(super::prompts::EvalArgs),
    /// The unfamiliar mark and the calibrated confidences: per capability (twin vote, capsule
    /// category, polyp detection) on phantom test splits and on real frames (--real), the
    /// share marked, the accuracy among unmarked answers, the share of wrong answers marked
    /// and the expected calibration error before and after calibration, with intervals;
    /// whether a grey card, noise and a page of text are marked by every model.
    Trust(super::eval_trust::TrustArgs),
    /// The video polyp strip (the detector's per-frame polyp probability) against the frames
    /// where a polyp is in view, on held-out phantom videos: AUROC over all frames and within
    /// each video, the share of frames called a polyp, redness beside it.
    Strip(super::eval_strip::StripArgs),
}

/// A whole-number option between `min` and `max`: anything else is refused by name with
/// the range (`invalid value '0' for '--polyps <POLYPS>': 0 is not in 12..=100000`).
pub fn count(min: u64, max: u64) -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(min..=max)
}

/// `eval real`'s options.
#[derive(clap::Args, Debug)]
pub struct RealArgs {
    /// The folder holding the datasets' folders.
    #[arg(long)]
    pub data: PathBuf,
    /// The models folder (default: the shipped models).
    #[arg(long)]
    pub models: Option<PathBuf>,
    /// ImageNet MobileNetV2 weights (torchvision's feature layers, safetensors) for the
    /// twins' "not fine-tuned" row (default: `mobilenetv2_imagenet_features.safetensors` in
    /// a `pretrained/` folder beside `--data`, when there).
    #[arg(long)]
    pub backbone: Option<PathBuf>,
    /// Seed of the frames drawn per sequence, the background windows and the bootstrap.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Also score the twins over this many draws of frames (seeds SEED, SEED+1, ...): one
    /// draw of 4 frames a sequence moves a figure by 0.1-0.2.
    #[arg(long, default_value_t = 1, value_parser = count(1, 1_000))]
    pub draws: usize,
    /// More model sets in the twins' table (old and new side by side), each LABEL=FOLDER
    /// with a twin-image card (and twin-scene, when it has one).
    #[arg(long, value_name = "LABEL=FOLDER")]
    pub compare: Vec<String>,
    /// Also write the figures as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

pub fn run(pref: BackendPref, what: EvalWhat) -> Result<()> {
    match what {
        EvalWhat::Phantom {
            held_out,
            seed,
            polyps,
            views,
            size,
        } => phantom(held_out, seed, polyps, views, size),
        EvalWhat::Tracklets(args) => super::tracklets::eval(pref, args),
        EvalWhat::Real(args) => real(pref, args),
        EvalWhat::Captions(args) => super::captions::eval(pref, args),
        EvalWhat::Prompts(args) => super::prompts::eval(pref, args),
        EvalWhat::Trust(args) => super::eval_trust::run(pref, args),
        EvalWhat::Strip(args) => super::eval_strip::run(pref, args),
        EvalWhat::Twins {
            held_out,
            seed,
            polyps,
            models,
            compare,
            k,
            json,
            record,
        } => {
            if k == 0 {
                anyhow::bail!("--k 0 votes with no neighbours: give at least 1");
            }
            if record && models.is_none() && endotwin::models_is_source_tree_fallback() {
                anyhow::bail!(
                    "--record without --models, no $ENDOTWIN_MODELS and no models/ in this folder or beside the \
                     executable: the figures would go into the source tree's {} (nothing was evaluated): pass --models FOLDER",
                    endotwin::default_models_dir().display()
                );
            }
            let dir = models.unwrap_or_else(endotwin::default_models_dir);
            // --record rewrites the card in place: never one of a library's own (its promoted
            // models change only by promote and demote), checked before the evaluation.
            if record {
                let card = dir.join(format!("{}.json", endotwin::twins::IMAGE_MODEL));
                endotwin::plumbing::output::check_output(&card, super::output_rules().0, true)?;
            }
            let compute = super::compute(pref)?;
            let models = TwinModels::load(&dir, &compute.device)?;
            let mut others = Vec::new();
            for c in &compare {
                let (label, folder) = super::compare_arg(c)?;
                let loaded = TwinModels::load(folder, &compute.device)
                    .with_context(|| format!("--compare {c}"))?;
                others.push((label.to_string(), loaded));
            }
            let mut candidates = vec![Candidate {
                label: String::new(),
                models: &models,
            }];
            candidates.extend(others.iter().map(|(label, m)| Candidate {
                label: label.clone(),
                models: m,
            }));
            let held = open_held_out(held_out, seed, polyps, 4, 256)?;
            let started = std::time::Instant::now();
            let eval = endotwin::eval::twins::run(&held.store, &candidates, k, seed)?;
            print_twins(&eval, &models, held.store.db_path());
            eprintln!("({:.0} s)", started.elapsed().as_secs_f64());
            if let Some(path) = json {
                super::write_output(&path, serde_json::to_string_pretty(&eval)?.as_bytes())?;
                println!("wrote {}", path.display());
            }
            if record {
                let card = endotwin::eval::twins::record(
                    &dir,
                    &eval,
                    &super::command_line(),
                    &held.described,
                )?;
                println!("recorded in {}", card.display());
            }
            Ok(())
        }
    }
}

fn open_held_out(
    path: Option<PathBuf>,
    seed: u64,
    polyps: usize,
    views: usize,
    size: u32,
) -> Result<HeldOut> {
    if path.is_some() {
        return Ok(HeldOut::open(path.as_deref(), seed, polyps, views, size)?);
    }
    eprintln!("generating the held-out split of seed {seed} ({polyps} polyps x {views} views)...");
    // Its own bar: a large split takes long, and said nothing for it (round 7 N38).
    let progress = std::sync::Arc::new(endotwin::plumbing::Progress::new());
    let bar = super::stage_bar();
    let watcher = super::watch(progress.clone(), bar.clone());
    let held = HeldOut::open_split_with(
        None,
        seed,
        endotwin::data::phantom::Split::Test,
        polyps,
        views,
        size,
        &progress,
    );
    bar.finish_and_clear();
    let _ = watcher.join();
    Ok(held?)
}

fn phantom(
    held_out: Option<PathBuf>,
    seed: u64,
    polyps: usize,
    views: usize,
    size: u32,
) -> Result<()> {
    let held = open_held_out(held_out, seed, polyps, views, size)?;
    let (reids, path) = endotwin::eval::baselines::run(&held.store)?;
    println!("held-out library: {}", held.store.db_path().display());
    println!(
        "\nre-identification of a polyp's other views ({} queries, cosine nearest neighbour)",
        reids[0].queries
    );
    println!("| feature | accuracy@1 | mAP |\n| --- | --- | --- |");
    for r in &reids {
        println!("| {} | {:.3} | {:.3} |", r.feature, r.accuracy_at_1, r.map);
    }
    println!(
        "\npathology from appearance ({} polyps, {} classes, 5-fold cross-validation)",
        path.polyps, path.classes
    );
    println!("| feature | accuracy | macro-F1 |\n| --- | --- | --- |");
    println!(
        "| {} | {:.3} | {:.3} |",
        path.feature, path.accuracy, path.macro_f1
    );
    println!(
        "| majority class | {:.3} | - |",
        path.majority_class_accuracy
    );
    // A held-out library too small for its folds and vote is said, not scored as a figure
    // (round 18 N20: "5-fold cross-validation" and a 6-NN vote over 2 polyps, 0.000).
    if path.polyps < 12 {
        eprintln!(
            "note: {} polyps: 5 folds and a 6-NN vote need at least 12 (as `eval twins` asks of \
             a generated split); the pathology figures above say nothing",
            path.polyps
        );
    }
    Ok(())
}

fn print_twins(e: &TwinEval, models: &TwinModels, library: &Path) {
    println!(
        "held-out library: {} ({} polyps with 4+ views); models {}; bootstrap {} resamples, seed {}",
        endotwin::store::library_name(library),
        e.polyps,
        models.version(),
        e.bootstrap,
        e.seed
    );
    println!("\nre-identification, top-1 per query (views 1-2 query, views 3-4 reference)");
    println!("| method | views | uAP [95% CI] | accuracy@1 [95% CI] | recall@P90 |");
    println!("| --- | --- | --- | --- | --- |");
    let ci = |c: [f64; 2]| format!("[{:.3}, {:.3}]", c[0], c[1]);
    for r in &e.reid {
        println!(
            "| {} | {} | {:.3} {} | {:.3} {} | {:.3} |",
            r.method,
            r.views,
            r.uap,
            ci(r.uap_ci),
            r.accuracy_at_1,
            ci(r.accuracy_at_1_ci),
            r.recall_at_p90
        );
    }
    if !e.paired.is_empty() {
        println!("\npaired bootstrap on the same queries (a - b)");
        println!("| a | b | views | accuracy@1 diff [95% CI] | uAP diff [95% CI] | a wins |");
        println!("| --- | --- | --- | --- | --- | --- |");
        for p in &e.paired {
            println!(
                "| {} | {} | {} | {:+.3} {} | {:+.3} {} | {:.0}% |",
                p.a,
                p.b,
                p.views,
                p.acc1_diff,
                ci(p.acc1_diff_ci),
                p.uap_diff,
                ci(p.uap_diff_ci),
                p.acc1_a_wins * 100.0
            );
        }
    }
    if let Some(why) = &e.pathology_not_scored {
        println!("\n{why}");
        return;
    }
    println!(
        "\npathology by {}-NN vote over polyps, 5-fold cross-validation",
        e.k
    );
    if let Some(note) = &e.k_note {
        println!("note: {note}");
    }
    println!("| method | accuracy | macro-F1 | AUC (macro one-vs-rest) | neoplastic AUC |");
    println!("| --- | --- | --- | --- | --- |");
    for r in &e.pathology {
        println!(
            "| {} | {:.3} | {:.3} | {:.3} | {:.3} |",
            r.method, r.accuracy, r.macro_f1, r.auc, r.neoplastic_auc
        );
    }
    println!(
        "| majority class | {:.3} | - | - | - |",
        e.majority_class_accuracy
    );
}

fn real(pref: BackendPref, args: RealArgs) -> Result<()> {
    let RealArgs {
        data,
        models,
        backbone,
        seed,
        draws,
        compare,
        json,
    } = args;
    let data = data.as_path();
    if let Err(e) = std::fs::read_dir(data) {
        anyhow::bail!(
            "--data {}: {}; --data names a folder laid out as ../shared/realdata \
             (cvc-clinicdb*/, kvasir-seg*/, ...); nothing was evaluated",
            data.display(),
            match data.exists() && !data.is_dir() {
                true => "not a folder".to_string(),
                false => endotwin::plumbing::input::plain_io(&e),
            }
        );
    }
    let compute = super::compute(pref)?;
    if let Some(dir) = &models {
        super::check_models_folder(dir)?;
    }
    let models = models.unwrap_or_else(endotwin::default_models_dir);
    let backbone = backbone.or_else(|| {
        let beside = data
            .parent()
            .map(|p| p.join("pretrained/mobilenetv2_imagenet_features.safetensors"))?;
        beside.is_file().then_some(beside)
    });
    let started = std::time::Instant::now();
    let compare = compare
        .iter()
        .map(|c| match c.split_once('=') {
            Some((label, dir)) if !label.is_empty() && !dir.is_empty() => {
                Ok((label.to_string(), PathBuf::from(dir)))
            }
            _ => Err(anyhow::anyhow!("--compare {c}: give LABEL=FOLDER")),
        })
        .collect::<Result<Vec<_>>>()?;
    let rows = endotwin::eval::real::TwinRows {
        backbone,
        compare,
        draws: draws.max(1),
    };
    let e = endotwin::eval::real::run(data, &models, &rows, seed, &compute.device)?;
    println!(
        "real frames under {} (seed {seed}); brackets: bootstrap 95 %",
        data.display()
    );
    if !e.twins.is_empty() {
        println!(
            "\ntwins, {} CVC-ClinicDB polyps (4 frames each, cut around their masks):",
            e.twin_polyps
        );
        println!(
            "  {:<60} {:>7} {:>7} {:>7}  2v2 acc@1",
            "method", "uAP 1v1", "uAP 2v2", "mean"
        );
        for t in &e.twins {
            println!(
                "  {:<60} {:>7.3} {:>7.3} {:>7.3}  {:.3} [{:.3}, {:.3}]",
                t.method,
                t.uap_1v1,
                t.uap_2v2,
                t.uap_mean,
                t.acc1_2v2,
                t.acc1_2v2_ci[0],
                t.acc1_2v2_ci[1]
            );
        }
    }
    if e.twin_draws > 1 {
        print_figures(
            &format!(
                "twins over {} draws of 4 frames a sequence (seeds {seed}-{}), mean uAP of 1v1 and 2v2 [bootstrap over draws]:",
                e.twin_draws,
                seed + e.twin_draws as u64 - 1
            ),
            &e.twins_over_draws,
        );
    }
    print_figures(
        &format!(
            "zero-shot polyp detection, {} Kvasir-SEG images (a polyp square and a polyp-free window of each), AUROC:",
            e.detection_images
        ),
        &e.detection,
    );
    print_figures(
        &format!(
            "zero-shot polyp detection, {} CVC-ClinicDB frames (the same crops), AUROC:",
            e.cvc_detection_images
        ),
        &e.cvc_detection,
    );
    print_figures(
        &format!(
            "capsule categories, {} CAPTIV8 frames against their own refined finding, accuracy:",
            e.capsule_frames
        ),
        &e.capsule,
    );
    if !e.trust.is_empty() || e.twin_polyps_marked.is_some() {
        println!(
            "\nhow far the answers could be trusted (#45): inputs marked unfamiliar, accuracy among the unmarked, wrong answers marked, calibration error (15 bins):"
        );
        super::eval_trust::print_rows(&e.trust);
        if let Some(m) = &e.twin_polyps_marked {
            println!(
                "twins: {} of the CVC-ClinicDB polyps marked unfamiliar (no pathology to score a vote by)",
                super::eval_trust::value(m)
            );
        }
    }
    for n in &e.notes {
        println!("note: {n}");
    }
    eprintln!("({:.0} s)", started.elapsed().as_secs_f64());
    if let Some(path) = json {
        super::write_output(&path, serde_json::to_string_pretty(&e)?.as_bytes())?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// A heading and one line per figure with its interval (nothing when there are none).
fn print_figures(heading: &str, figures: &[endotwin::eval::real::Figure]) {
    if figures.is_empty() {
        return;
    }
    println!("\n{heading}");
    for f in figures {
        println!(
            "  {:<60} {:.3} [{:.3}, {:.3}]",
            f.method, f.value, f.ci[0], f.ci[1]
        );
    }
}
