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
    /// A large library for speed figures: after the phantom, index it with the shipped twin
    /// models and copy its polyps (same view files, their embeddings with a little noise) into
    /// new examinations until it holds this many polyps, and its videos until --scale-videos.
    #[arg(long)]
    scale: Option<usize>,
    #[arg(long, default_value_t = 1000, requires = "scale")]
    scale_videos: usize,
    /// Twin models for --scale (default: the shipped ones).
    #[arg(long, requires = "scale")]
    models: Option<PathBuf>,
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

/// The most a demo library may hold of each thing: far above any demo or test, far below
/// what would fill a disk or memory before a frame is written.
const DEMO_LIMITS: [(&str, usize); 10] = [
    ("--polyps", 100_000),
    ("--views", 32),
    ("--videos", 1_000),
    ("--frames-per-video", 20_000),
    ("--capsule", 100_000),
    ("--background", 1_000),
    ("--frames-per-exam", 1_000),
    ("--size", 2_048),
    ("--scale", 10_000_000),
    ("--scale-videos", 100_000),
];

/// Refuses sizes no demo library can have, before anything is made.
fn check_demo_size(args: &DemoArgs) -> Result<()> {
    let given = [
        args.polyps,
        args.views,
        args.videos,
        args.frames_per_video,
        args.capsule,
        args.background,
        args.frames_per_exam,
        args.size as usize,
        args.scale.unwrap_or(0),
        args.scale_videos,
    ];
    for ((flag, max), value) in DEMO_LIMITS.iter().zip(given) {
        if value > *max {
            anyhow::bail!(
                "{flag} {value}: a demo library takes at most {max}; nothing was written"
            );
        }
    }
    if args.size < 32 {
        anyhow::bail!(
            "--size {}: frames need at least 32 pixels a side; nothing was written",
            args.size
        );
    }
    // Every still frame and video frame at about half a byte a pixel (PNG of the phantom).
    let frames = args.polyps * args.views.max(1)
        + args.videos * args.frames_per_video
        + args.capsule
        + args.polyps * args.background;
    let bytes = frames as f64 * (args.size as f64).powi(2) * 0.5;
    if bytes > 200e9 {
        anyhow::bail!(
            "that demo library would take about {:.0} GB ({frames} frames of {}x{} pixels); nothing was written",
            bytes / 1e9,
            args.size,
            args.size
        );
    }
    Ok(())
}

pub fn run(args: DemoArgs) -> Result<()> {
    check_demo_size(&args)?;
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
    let new_folder = !out.exists();
    let mut store = Store::open(out, OpenMode::CreateIfMissing)?;
    let progress = Arc::new(Progress::new());
    let bar = super::stage_bar();
    let watcher = super::watch(progress.clone(), bar.clone());
    let started = std::time::Instant::now();
    let result = phantom::generate(&mut store, &cfg, &progress);
    bar.finish_and_clear();
    let _ = watcher.join();
    let report = match result {
        Ok(report) => report,
        Err(e) => {
            // A demo that made nothing leaves no empty library behind.
            let _ = store.discard_if_empty(new_folder);
            return Err(e.into());
        }
    };
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
    if let Some(polyps) = args.scale {
        scale(&mut store, &args, polyps)?;
    }
    Ok(())
}

/// `--scale`: index the phantom, then copy its polyps and videos up to the sizes asked.
fn scale(store: &mut Store, args: &DemoArgs, polyps: usize) -> Result<()> {
    use endotwin::twins::{TwinModels, index_library, scale::replicate};
    let started = std::time::Instant::now();
    let dir = args
        .models
        .clone()
        .unwrap_or_else(endotwin::default_models_dir);
    let device = endotwin::compute::Compute::cpu(None).device;
    let models = TwinModels::load(&dir, &device)?;
    let progress = Arc::new(Progress::new());
    let bar = super::stage_bar();
    let watcher = super::watch(progress.clone(), bar.clone());
    let result = index_library(store, &models, &progress).and_then(|_| {
        replicate(
            store,
            &models,
            polyps,
            args.scale_videos,
            args.seed,
            &progress,
        )
    });
    bar.finish_and_clear();
    let _ = watcher.join();
    let stats = result?;
    println!(
        "scaled with {}: {} polyps and {} videos copied into {} examinations, pointing at the same view files ({:.1}s)",
        models.version(),
        stats.polyps,
        stats.videos,
        stats.examinations,
        started.elapsed().as_secs_f32()
    );
    Ok(())
}

pub fn contact_sheet(library: &Path, args: ContactSheetArgs) -> Result<()> {
    let store = Store::open(library, OpenMode::Existing)?;
    let sheet = endotwin::data::contact_sheet::contact_sheet(&store, args.columns, args.tile)?;
    let mut png = std::io::Cursor::new(Vec::new());
    sheet
        .image
        .write_to(&mut png, image::ImageFormat::Png)
        .context("could not encode the PNG")?;
    super::write_output(&args.out, png.get_ref())?;
    if !sheet.unreadable.is_empty() {
        for line in &sheet.unreadable {
            eprintln!("unreadable {line}");
        }
        anyhow::bail!(
            "wrote {} with {} tile(s) crossed out in red: their files could not be read (listed above; `endotwin library check` lists every changed file)",
            args.out.display(),
            sheet.unreadable.len()
        );
    }
    println!("wrote {}", args.out.display());
    Ok(())
}
