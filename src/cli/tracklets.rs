//! `endotwin eval tracklets`: the tracklet encoder on held-out phantom videos.

use anyhow::{Context, Result};
use endotwin::compute::BackendPref;
use endotwin::data::phantom::Split;
use endotwin::eval::held_out::HeldOut;
use endotwin::eval::tracklets::{Candidate, TrackletEval};
use endotwin::model::tracklet::TrackletModelConfig;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct EvalArgs {
    /// A held-out library with videos; default: generate the test split of --seed.
    #[arg(long)]
    pub held_out: Option<PathBuf>,
    /// A validation library with videos: each method's grouping threshold for the polyp
    /// count is chosen there, and the probes are fitted there. Default: generate the
    /// validation split of --seed (--validation-videos of them; 0: none, then --threshold).
    #[arg(long)]
    pub validation: Option<PathBuf>,
    /// Seed of the generated splits and of the bootstrap.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Videos of the generated test split (at least 1: round 17, `0` generated an empty split
    /// and advised importing a video).
    #[arg(long, default_value_t = 40, value_parser = super::eval::count(1, u64::MAX))]
    pub videos: usize,
    /// Videos of the generated validation split.
    #[arg(long, default_value_t = 12)]
    pub validation_videos: usize,
    /// Frames of each generated video (at least 30, the shortest tracklet scored).
    #[arg(long, default_value_t = 800, value_parser = super::eval::count(30, u64::MAX))]
    pub frames_per_video: usize,
    /// A models folder holding a trained tracklet encoder (`tracklets.json`), scored first.
    /// Default: the shipped models folder when it holds one (it does not: the Tracklets tab
    /// compares by --twin-models' twin encoder with its scene encoder, which is then scored
    /// first, then the tracklet head there (`tracklet-head.json`), then the mean over frames).
    #[arg(long)]
    pub models: Option<PathBuf>,
    /// More tracklet encoders in the same table (ablations), each LABEL=FOLDER.
    #[arg(long = "compare", value_name = "LABEL=FOLDER")]
    pub compare: Vec<String>,
    /// Tracklet heads over the frozen twin encoder (`train tracklets --backbone twin`), each
    /// LABEL=FILE.json; they need --twin-models' encoder.
    #[arg(long = "head", value_name = "LABEL=CARD")]
    pub heads: Vec<String>,
    /// The digital-twin models whose image encoder, frozen, is compared too (with its scene
    /// encoder when the folder has one, and alone), with the tracklet head beside it when there
    /// is one (default: the shipped models folder; left out with a note when it holds none).
    #[arg(long)]
    pub twin_models: Option<PathBuf>,
    /// Similarity at which tracklets are grouped into one polyp, without --validation.
    #[arg(long, default_value_t = 0.5)]
    pub threshold: f32,
    /// Also write the figures as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

pub fn eval(pref: BackendPref, a: EvalArgs) -> Result<()> {
    // A threshold that means nothing, or one that will not be used, is said before any work
    // (round 12 N20: NaN scored as an exact count; a --threshold dropped for validation's).
    if !(-1.0..=1.0).contains(&a.threshold) {
        anyhow::bail!(
            "--threshold {}: a cosine similarity between -1 and 1; nothing was evaluated",
            a.threshold
        );
    }
    let threshold_given =
        std::env::args().any(|x| x == "--threshold" || x.starts_with("--threshold="));
    if threshold_given && (a.validation.is_some() || a.validation_videos > 0) {
        anyhow::bail!(
            "--threshold {} is not used: each method's threshold is chosen on the validation \
             split; give --validation-videos 0 (and no --validation) to score at --threshold; \
             nothing was evaluated",
            a.threshold
        );
    }
    let compute = super::compute(pref)?;
    let dir = a
        .models
        .clone()
        .unwrap_or_else(endotwin::default_models_dir);
    let trained = dir.join(format!("{}.json", endotwin::tracklets::MODEL_NAME));
    let main = if trained.is_file() {
        Some(
            endotwin::tracklets::load_model(&dir, &compute.device)
                .with_context(|| format!("the tracklet encoder in {}", dir.display()))?,
        )
    } else {
        // A folder without a trained frame-CNN encoder (the shipped one holds the tracklet
        // head and its frame encoder) is scored through its twin encoder and head below.
        if a.models.is_some() {
            eprintln!(
                "note: no tracklet encoder ({}) in {}; its twin encoder and tracklet head are scored",
                trained.display(),
                dir.display()
            );
        }
        None
    };
    let mut others = Vec::new();
    for c in &a.compare {
        let (label, folder) = super::compare_arg(c)?;
        let loaded = endotwin::tracklets::load_model(folder, &compute.device)
            .with_context(|| format!("--compare {c}"))?;
        others.push((label.to_string(), loaded));
    }
    let mut candidates: Vec<Candidate> = main
        .iter()
        .map(|m| Candidate {
            label: format!("tracklet encoder {}", m.card.version),
            model: &m.model,
        })
        .collect();
    candidates.extend(others.iter().map(|(label, m)| Candidate {
        label: label.clone(),
        model: &m.model,
    }));
    let twin_dir = a
        .twin_models
        .clone()
        .or_else(|| a.models.clone().filter(|_| main.is_none()))
        .unwrap_or_else(endotwin::default_models_dir);
    let twins = match endotwin::twins::TwinModels::load_frames(&twin_dir, &compute.device) {
        Ok(t) => Some(t),
        Err(e) if a.twin_models.is_some() => {
            return Err(e).with_context(|| format!("--twin-models {}", twin_dir.display()));
        }
        Err(e) => {
            eprintln!("(no twin image encoder row: {e})");
            None
        }
    };
    let mut heads = Vec::new();
    // The shipped tracklet head (what the Tracklets tab uses without a scene encoder).
    if let Some(twins) = &twins
        && let Some((head, card)) =
            endotwin::tracklets::shipped_head(&twin_dir, twins).map_err(|e| anyhow::anyhow!(e))?
    {
        heads.push((format!("tracklet head {} (shipped)", card.version), head));
    }
    for h in &a.heads {
        let (label, card) = super::compare_arg(h)?;
        let (head, _) = endotwin::tracklets::load_head(card, &compute.device)
            .with_context(|| format!("--head {h}"))?;
        heads.push((label.to_string(), head));
    }
    if candidates.is_empty() && twins.is_none() {
        anyhow::bail!(
            "nothing to evaluate: {} holds no tracklet encoder and {} no twin image encoder",
            dir.display(),
            twin_dir.display()
        );
    }
    if !heads.is_empty() && twins.is_none() {
        anyhow::bail!("--head needs the twin image encoder (--twin-models)");
    }
    let heads: Vec<(String, &endotwin::model::tracklet::TrackletEncoder)> =
        heads.iter().map(|(l, h)| (l.clone(), h)).collect();
    if a.held_out.is_none() {
        eprintln!(
            "generating the test split of seed {} ({} videos x {} frames)...",
            a.seed, a.videos, a.frames_per_video
        );
    }
    let held = HeldOut::open_videos(
        a.held_out.as_deref(),
        a.seed,
        Split::Test,
        a.videos,
        a.frames_per_video,
    )?;
    // A held-out library without a usable tracklet is refused before a validation split is
    // generated (round 7 N40: minutes of generation, then nothing to score).
    let scorable = || -> Result<()> {
        if endotwin::tracklets::dataset::TrackletSet::usable_tracklets(&held.store)? == 0 {
            anyhow::bail!(
                "{} holds no tracklet of 30 or more frames: nothing to evaluate (import a \
                 video with its boxes)",
                held.described
            );
        }
        Ok(())
    };
    let validation = match (&a.validation, a.validation_videos) {
        (None, 0) => None,
        (path, videos) => {
            if path.is_none() {
                scorable()?;
                eprintln!(
                    "generating the validation split of seed {} ({videos} videos x {} frames)...",
                    a.seed, a.frames_per_video
                );
            }
            Some(HeldOut::open_videos(
                path.as_deref(),
                a.seed,
                Split::Validation,
                videos,
                a.frames_per_video,
            )?)
        }
    };
    if let Some(v) = &validation {
        let shared = endotwin::eval::held_out::shared_images(&held.store, &v.store)?;
        if shared > 0 {
            anyhow::bail!(
                "{shared} of the held-out images ({}) are in the validation library ({}): thresholds and probes would be chosen on the frames they are scored on; nothing was evaluated",
                held.described,
                v.described
            );
        }
    }
    scorable()?;
    // The untrained baseline has the loaded encoder's geometry, else the recipe's default.
    let untrained = match &main {
        Some(m) => m.config.clone(),
        None => TrackletModelConfig::with_image_size(64),
    };
    let started = std::time::Instant::now();
    let e = endotwin::eval::tracklets::run(
        &held.store,
        validation.as_ref().map(|v| &v.store),
        endotwin::eval::tracklets::Methods {
            candidates: &candidates,
            heads: &heads,
            untrained: &untrained,
            twins: twins.as_ref(),
        },
        a.seed,
        a.threshold,
        &compute.device,
    )?;
    print(&e, &held.described);
    eprintln!("({:.0} s)", started.elapsed().as_secs_f64());
    if let Some(path) = a.json {
        super::write_output(&path, serde_json::to_string_pretty(&e)?.as_bytes())?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

fn print(e: &TrackletEval, described: &str) {
    let ci = |c: [f64; 2]| format!("[{:.3}, {:.3}]", c[0], c[1]);
    println!(
        "held-out: {described}: {} tracklets of 30+ frames in {} videos; intervals: {} resamples of videos, seed {}",
        e.tracklets, e.videos, e.bootstrap, e.seed
    );
    if !e.left_out.is_empty() {
        println!("left out: {}", e.left_out);
    }
    println!("\nretrieval (each tracklet queries all others)");
    println!("| method | queries | mAP [95% CI] | HR@1 [95% CI] | HR@5 [95% CI] |");
    println!("| --- | --- | --- | --- | --- |");
    for r in &e.retrieval {
        println!(
            "| {} | {} | {:.3} {} | {:.3} {} | {:.3} {} |",
            r.method,
            r.queries,
            r.map,
            ci(r.map_ci),
            r.hr1,
            ci(r.hr1_ci),
            r.hr5,
            ci(r.hr5_ci)
        );
    }
    println!("\nre-identification of tracklet pairs");
    println!("| method | pairs | same polyp | AUROC [95% CI] | AUPR [95% CI] |");
    println!("| --- | --- | --- | --- | --- |");
    for r in &e.reid {
        println!(
            "| {} ({}) | {} | {} | {:.3} {} | {:.3} {} |",
            r.method,
            r.scope.replace('_', " "),
            r.pairs,
            r.positives,
            r.auroc,
            ci(r.auroc_ci),
            r.aupr,
            ci(r.aupr_ci)
        );
    }
    println!(
        "\npolyp count per video (groups at similarity >= threshold; thresholds {})",
        if e.thresholds_from_validation {
            "chosen per method on the validation library"
        } else {
            "as given"
        }
    );
    println!("| method | threshold | exact | within one | videos |");
    println!("| --- | --- | --- | --- | --- |");
    for c in &e.counts {
        println!(
            "| {} | {:.2} | {:.2} | {:.2} | {} |",
            c.method, c.threshold, c.exact_share, c.within_one_share, c.videos
        );
    }
    if e.probes.is_empty() {
        println!("\n(size and histology probes need --validation: they are fitted there)");
        return;
    }
    println!(
        "\nlinear probes fitted on the validation tracklets, scored on the held-out ones \
         (size <= 5 mm vs larger; adenoma vs not)"
    );
    println!(
        "| method | size macro-F1 [95% CI] | tracklets | histology accuracy [95% CI] | tracklets |"
    );
    println!("| --- | --- | --- | --- | --- |");
    for p in &e.probes {
        println!(
            "| {} | {:.3} {} | {} | {:.3} {} | {} |",
            p.method,
            p.size_macro_f1,
            ci(p.size_ci),
            p.size_tracklets,
            p.histology_accuracy,
            ci(p.histology_ci),
            p.histology_tracklets
        );
    }
}
