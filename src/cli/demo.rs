//! `endotwin demo` (the synthetic phantom into a new library) and `endotwin contact-sheet`.

use anyhow::{Context, Result};
use endotwin::data::phantom::{self, PhantomConfig, Split};
use endotwin::plumbing::Progress;
use endotwin::store::{OpenMode, Store};
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(clap::Args)]
pub struct DemoArgs {
    /// Seed: the same seed gives byte-identical media and identical rows.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Output library folder (must not hold a library yet).
    #[arg(long)]
    out: PathBuf,
    /// Train data, or held-out test data drawn from a disjoint stream.
    #[arg(long, value_enum, default_value_t = Split::Train)]
    split: Split,
    #[arg(long, default_value_t = 60)]
    polyps: usize,
    #[arg(long, default_value_t = 4)]
    views: usize,
    #[arg(long, default_value_t = 2)]
    videos: usize,
    #[arg(long, default_value_t = 160)]
    frames_per_video: usize,
    #[arg(long, default_value_t = 40)]
    capsule: usize,
    /// Frames without a polyp per examination.
    #[arg(long, default_value_t = 2)]
    background: usize,
    /// Examination records for Endo-CLIP: every examination gets this many frames in all (its
    /// polyps' views plus withdrawal frames without a polyp); 0: only `--background` frames.
    #[arg(long, default_value_t = 0)]
    frames_per_exam: usize,
    /// Side of still frames in pixels.
    #[arg(long, default_value_t = 256)]
    size: u32,
}

#[derive(clap::Args)]
pub struct ContactSheetArgs {
    /// Output PNG path.
    #[arg(long)]
    out: PathBuf,
    #[arg(long, default_value_t = 8)]
    columns: u32,
    #[arg(long, default_value_t = 160)]
    tile: u32,
}

pub fn run(args: DemoArgs) -> Result<()> {
    let out = &args.out;
    let cfg = PhantomConfig {
        seed: args.seed,
        split: args.split,
        polyps: args.polyps,
        views_per_polyp: args.views,
        videos: args.videos,
        frames_per_video: args.frames_per_video,
        capsule_images: args.capsule,
        background_frames: args.background,
        frames_per_exam: args.frames_per_exam,
        image_size: args.size,
        ..PhantomConfig::default()
    };
    if endotwin::store::resolve_db_path(out).exists() {
        anyhow::bail!(
            "{}: already holds a library; choose a new folder",
            out.display()
        );
    }
    let mut store = Store::open(out, OpenMode::CreateIfMissing)?;
    let progress = Arc::new(Progress::new());
    let bar = super::stage_bar();
    let watcher = super::watch(progress.clone(), bar.clone());
    let started = std::time::Instant::now();
    let result = phantom::generate(&mut store, &cfg, &progress);
    bar.finish_and_clear();
    let _ = watcher.join();
    let report = result?;
    println!(
        "phantom seed {} ({:?}) -> {}: {} examinations, {} polyps, {} views, {} videos ({} frames, {} boxes), {} capsule images in {:.1}s",
        cfg.seed,
        cfg.split,
        out.display(),
        report.examinations,
        report.polyps,
        report.views,
        report.videos,
        report.video_frames,
        report.boxes,
        report.capsule_images,
        started.elapsed().as_secs_f32()
    );
    Ok(())
}

pub fn contact_sheet(library: &Path, args: ContactSheetArgs) -> Result<()> {
    let store = Store::open(library, OpenMode::Existing)?;
    let sheet = endotwin::data::contact_sheet::contact_sheet(&store, args.columns, args.tile)?;
    sheet
        .save(&args.out)
        .with_context(|| format!("{}: could not write PNG", args.out.display()))?;
    println!("wrote {}", args.out.display());
    Ok(())
}
