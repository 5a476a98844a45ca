//! `endotwin eval tracklets`: the tracklet encoder on held-out phantom videos.

use anyhow::{Context, Result};
use endotwin::compute::{self, BackendPref};
use endotwin::eval::held_out::HeldOut;
use endotwin::eval::tracklets::{Candidate, TrackletEval};
use std::path::{Path, PathBuf};

pub struct EvalArgs {
    pub held_out: Option<PathBuf>,
    pub seed: u64,
    pub videos: usize,
    pub frames_per_video: usize,
    pub models: Option<PathBuf>,
    pub compare: Vec<String>,
    pub threshold: f32,
    pub json: Option<PathBuf>,
}

pub fn eval(pref: BackendPref, a: EvalArgs) -> Result<()> {
    let compute = compute::select(pref)?;
    let dir = a.models.unwrap_or_else(endotwin::default_models_dir);
    let main = endotwin::tracklets::load_model(&dir, &compute.device)
        .with_context(|| format!("the tracklet encoder in {}", dir.display()))?;
    let mut others = Vec::new();
    for c in &a.compare {
        let Some((label, folder)) = c.split_once('=') else {
            anyhow::bail!("--compare {c}: write LABEL=FOLDER");
        };
        let loaded = endotwin::tracklets::load_model(Path::new(folder), &compute.device)
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
    if a.held_out.is_none() {
        eprintln!(
            "generating the held-out split of seed {} ({} videos x {} frames)...",
            a.seed, a.videos, a.frames_per_video
        );
    }
    let held = HeldOut::open_videos(a.held_out.as_deref(), a.seed, a.videos, a.frames_per_video)?;
    let started = std::time::Instant::now();
    let e = endotwin::eval::tracklets::run(
        &held.store,
        &candidates,
        &main.config,
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
    println!("\npolyp count per video (groups at similarity >= threshold)");
    println!("| method | threshold | exact | within one | videos |");
    println!("| --- | --- | --- | --- | --- |");
    for c in &e.counts {
        println!(
            "| {} | {:.2} | {:.2} | {:.2} | {} |",
            c.method, c.threshold, c.exact_share, c.within_one_share, c.videos
        );
    }
}
