//! `endotwin eval strip`: the video polyp strip (the detector's per-frame polyp probability)
//! against the frames where a polyp is in view, on held-out phantom videos.

use anyhow::{Context, Result};
use endotwin::compute::BackendPref;
use endotwin::data::phantom::Split;
use endotwin::eval::held_out::HeldOut;
use endotwin::eval::strip::{StripEval, evaluate, score_videos};
use endotwin::plumbing::Progress;
use endotwin::prompts::model;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct StripArgs {
    /// A library with videos and their polyp boxes; default: generate the test split of --seed.
    #[arg(long)]
    pub held_out: Option<PathBuf>,
    /// Seed of the generated test split and of the bootstrap.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Videos of the generated test split.
    #[arg(long, default_value_t = 12, value_parser = super::eval::count(2, 1_000))]
    pub videos: usize,
    /// Frames of each generated video.
    #[arg(long, default_value_t = 160, value_parser = super::eval::count(8, 10_000))]
    pub frames_per_video: usize,
    /// The detector's card (default: the shipped `prompts-detect`).
    #[arg(long)]
    pub detector: Option<PathBuf>,
    /// Also write the figures as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

pub fn run(pref: BackendPref, a: StripArgs) -> Result<()> {
    let compute = super::compute(pref)?;
    let card = a
        .detector
        .clone()
        .unwrap_or_else(|| endotwin::default_models_dir().join("prompts-detect.json"));
    let detector = model::load(&card, &compute.device)
        .with_context(|| format!("the detector {}", card.display()))?;
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
    let started = std::time::Instant::now();
    let videos = score_videos(&held.store, &detector, &compute.device, &Progress::new())
        .map_err(anyhow::Error::msg)?;
    if videos.len() < 2 {
        anyhow::bail!(
            "{} holds {} video(s): the strip is scored over at least 2",
            held.described,
            videos.len()
        );
    }
    // AUROC needs frames with a polyp in view and frames without (round 8 N36: videos of no
    // frame gave a table of NaN and exit 0).
    let frames: Vec<bool> = videos
        .iter()
        .flat_map(|v| v.polyp.iter().copied())
        .collect();
    let with = frames.iter().filter(|&&p| p).count();
    if with == 0 || with == frames.len() {
        anyhow::bail!(
            "{}: {} frame(s), {with} with a polyp in view: the strip's AUROC needs frames with \
             and without one; nothing was scored",
            held.described,
            frames.len()
        );
    }
    let label = format!("{} (the strip)", detector.named());
    let eval = evaluate(
        &videos,
        &[label.as_str(), "redness (baseline)"],
        &[true, false],
        a.seed,
    );
    print(&eval, &held.described);
    eprintln!("({:.0} s)", started.elapsed().as_secs_f64());
    if let Some(path) = &a.json {
        super::write_output(path, serde_json::to_string_pretty(&eval)?.as_bytes())?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

fn print(e: &StripEval, described: &str) {
    println!(
        "{described}: {} videos, {} frames, {} with a polyp in view (a polyp box); brackets: bootstrap 95 % over videos",
        e.videos, e.frames, e.polyp_frames
    );
    println!(
        "  {:<48} {:>22} {:>22} {:>9} {:>9}",
        "method", "AUROC, all frames", "AUROC within a video", "p>0.5 +", "p>0.5 -"
    );
    let share = |v: f64| match v.is_nan() {
        true => "-".to_string(),
        false => format!("{v:.3}"),
    };
    for r in &e.rows {
        println!(
            "  {:<48} {:.3} [{:.3}, {:.3}]   {:.3} [{:.3}, {:.3}] {:>9} {:>9}",
            r.method,
            r.auroc,
            r.auroc_ci[0],
            r.auroc_ci[1],
            r.within_video,
            r.within_video_ci[0],
            r.within_video_ci[1],
            share(r.called_on_polyp),
            share(r.called_on_background),
        );
    }
    println!(
        "  (p>0.5 +: share of frames with a polyp the detector calls a polyp; -: of frames without one)"
    );
}
