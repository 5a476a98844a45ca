//! `endotwin eval tracklets`: the tracklet encoder on held-out phantom videos.

use anyhow::{Context, Result};
use endotwin::compute::{self, BackendPref};
use endotwin::eval::held_out::HeldOut;
use endotwin::eval::tracklets::{Candidate, TrackletEval};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct EvalArgs {
    /// A held-out library with videos; default: generate the test split of --seed.
    #[arg(long)]
    pub held_out: Option<PathBuf>,
    /// A validation library with videos: each method's grouping threshold for the polyp
    /// count is chosen there (else --threshold for every method).
    #[arg(long)]
    pub validation: Option<PathBuf>,
    /// Seed of the held-out split and of the bootstrap.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    #[arg(long, default_value_t = 12)]
    pub videos: usize,
    #[arg(long, default_value_t = 600)]
    pub frames_per_video: usize,
    /// The models folder holding the tracklet encoder (`tracklets.json`).
    #[arg(long)]
    pub models: Option<PathBuf>,
    /// More tracklet encoders in the same table (ablations), each LABEL=FOLDER.
    #[arg(long = "compare", value_name = "LABEL=FOLDER")]
    pub compare: Vec<String>,
    /// Tracklet heads over the frozen twin encoder (`train tracklets --backbone twin`), each
    /// LABEL=FILE.json; they need --twin-models' encoder.
    #[arg(long = "head", value_name = "LABEL=CARD")]
    pub heads: Vec<String>,
    /// The digital-twin models whose image encoder, frozen, is compared too (default: the
    /// models folder; left out with a note when it holds none).
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
    let compute = compute::select(pref)?;
    let dir = a.models.unwrap_or_else(endotwin::default_models_dir);
    let main = endotwin::tracklets::load_model(&dir, &compute.device)
        .with_context(|| format!("the tracklet encoder in {}", dir.display()))?;
    let mut others = Vec::new();
    for c in &a.compare {
        let (label, folder) = super::eval::compare_arg(c)?;
        let loaded = endotwin::tracklets::load_model(folder, &compute.device)
            .with_context(|| format!("--compare {c}"))?;
        others.push((label.to_string(), loaded));
    }
    let mut candidates = vec![Candidate {
        label: format!("tracklet encoder {}", main.card.version),
        model: &main.model,
    }];
    candidates.extend(others.iter().map(|(label, m)| Candidate {
        label: label.clone(),
        model: &m.model,
    }));
    let twin_dir = a.twin_models.clone().unwrap_or_else(|| dir.clone());
    let twins = match endotwin::twins::TwinModels::load(&twin_dir, &compute.device) {
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
    for h in &a.heads {
        let (label, card) = super::eval::compare_arg(h)?;
        let (head, _) = endotwin::tracklets::load_head(card, &compute.device)
            .with_context(|| format!("--head {h}"))?;
        heads.push((label.to_string(), head));
    }
    if !heads.is_empty() && twins.is_none() {
        anyhow::bail!("--head needs the twin image encoder (--twin-models)");
    }
    let heads: Vec<(String, &endotwin::model::tracklet::TrackletEncoder)> =
        heads.iter().map(|(l, h)| (l.clone(), h)).collect();
    if a.held_out.is_none() {
        eprintln!(
            "generating the held-out split of seed {} ({} videos x {} frames)...",
            a.seed, a.videos, a.frames_per_video
        );
    }
    let held = HeldOut::open_videos(a.held_out.as_deref(), a.seed, a.videos, a.frames_per_video)?;
    let validation = match &a.validation {
        Some(p) => Some(endotwin::store::Store::open(
            p,
            endotwin::store::OpenMode::Existing,
        )?),
        None => None,
    };
    let started = std::time::Instant::now();
    let e = endotwin::eval::tracklets::run(
        &held.store,
        validation.as_ref(),
        endotwin::eval::tracklets::Methods {
            candidates: &candidates,
            heads: &heads,
            untrained: &main.config,
            twins: twins.as_ref(),
        },
        a.seed,
        a.threshold,
        &compute.device,
    )?;
    print(&e, &held.described);
    eprintln!("({:.0} s)", started.elapsed().as_secs_f64());
    if let Some(path) = a.json {
        std::fs::write(&path, serde_json::to_string_pretty(&e)?)
            .with_context(|| format!("{}: cannot write", path.display()))?;
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
