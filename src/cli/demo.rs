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
    #[arg(long, value_parser = super::eval::count(1, 10_000_000))]
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
    /// Tiles a row (1 to 32).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=32))]
    columns: u32,
    /// Side of a tile in pixels (8 to 1024).
    #[arg(long, default_value_t = 160, value_parser = clap::value_parser!(u32).range(8..=1024))]
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
    if out.exists() && !out.is_dir() {
        anyhow::bail!(
            "{}: exists and is not a folder; a demo library is a new folder (nothing was written)",
            out.display()
        );
    }
    if endotwin::store::resolve_db_path(out).exists() {
        anyhow::bail!(
            "{}: already holds a library; choose a new folder",
            out.display()
        );
    }
    if let Some(library) = endotwin::store::library_around(out) {
        return Err(endotwin::store::StoreError::InsideAnotherLibrary {
            path: out.clone(),
            library,
        }
        .into());
    }
    if out.exists() && !out.is_dir() {
        anyhow::bail!(
            "{}: exists and is not a folder; nothing was written",
            out.display()
        );
    }
    for name in ["media", "media-pending.journal"] {
        if out.join(name).exists() {
            anyhow::bail!(
                "{}: already holds {name}; choose a new folder (nothing was written)",
                out.display()
            );
        }
    }
    // One demo (or copy) at a time into a folder; what another made meanwhile is refused.
    let _one_at_a_time = super::lock_folder(out, "demo")?;
    if endotwin::store::resolve_db_path(out).exists() || out.join("media").exists() {
        anyhow::bail!(
            "{}: another command made a library here meanwhile; choose a new folder (nothing \
             was written)",
            out.display()
        );
    }
    // The twin models of --scale are read before a frame is drawn.
    let models = match args.scale {
        Some(_) => {
            let dir = args
                .models
                .clone()
                .unwrap_or_else(endotwin::default_models_dir);
            let device = endotwin::compute::Compute::cpu(None).device;
            Some(endotwin::twins::TwinModels::load(&dir, &device)?)
        }
        None => None,
    };
    // The library is made in a hidden folder beside --out and moved into place when whole:
    // a failed or interrupted demo leaves --out as it was (the next run removes the rest).
    let partial = partial_folder(out)?;
    if partial.exists() {
        std::fs::remove_dir_all(&partial).with_context(|| {
            format!(
                "{}: a half-made demo library of an interrupted run; cannot remove it (remove it by hand)",
                partial.display()
            )
        })?;
        eprintln!(
            "removed {}: the half-made library of an interrupted demo",
            partial.display()
        );
    }
    let made =
        build(&partial, &cfg, &args, models.as_ref()).and_then(|()| move_into(&partial, out));
    if let Err(e) = made {
        let _ = std::fs::remove_dir_all(&partial);
        return Err(e.context(format!("{}: nothing was written", out.display())));
    }
    Ok(())
}

/// The hidden folder beside `out` a demo library is made in: `.<name>.demo-partial`.
fn partial_folder(out: &Path) -> Result<PathBuf> {
    let name = out
        .file_name()
        .filter(|n| *n != "." && *n != "..")
        .with_context(|| format!("{}: name a folder for the demo library", out.display()))?;
    let mut hidden = std::ffi::OsString::from(".");
    hidden.push(name);
    hidden.push(".demo-partial");
    Ok(out.with_file_name(hidden))
}

/// Makes the phantom (and `--scale`'s copies) as a library in `folder`.
fn build(
    folder: &Path,
    cfg: &PhantomConfig,
    args: &DemoArgs,
    models: Option<&endotwin::twins::TwinModels>,
) -> Result<()> {
    std::fs::create_dir_all(folder)
        .with_context(|| format!("{}: cannot create", folder.display()))?;
    let mut store = Store::open(folder, OpenMode::CreateIfMissing)?;
    let progress = Arc::new(Progress::new());
    let bar = super::stage_bar();
    let watcher = super::watch(progress.clone(), bar.clone());
    let started = std::time::Instant::now();
    let result = phantom::generate(&mut store, cfg, &progress);
    bar.finish_and_clear();
    let _ = watcher.join();
    let report = result?;
    println!(
        "phantom seed {} ({:?}) -> {}: {} examinations, {} polyps, {} views, {} videos ({} frames, {} boxes), {} capsule images in {:.1}s",
        cfg.seed,
        cfg.split,
        args.out.display(),
        report.examinations,
        report.polyps,
        report.views,
        report.videos,
        report.video_frames,
        report.boxes,
        report.capsule_images,
        started.elapsed().as_secs_f32()
    );
    if let (Some(polyps), Some(models)) = (args.scale, models) {
        scale(&mut store, args, polyps, models)?;
    }
    Ok(())
}

/// Moves the library made in `partial` to `out`: the folder itself when `out` does not exist,
/// else its files into `out` (which holds no library files, checked before).
fn move_into(partial: &Path, out: &Path) -> Result<()> {
    let moved = |from: &Path, to: &Path| {
        std::fs::rename(from, to)
            .with_context(|| format!("cannot move {} to {}", from.display(), to.display()))
    };
    if !out.exists() {
        if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("{}: cannot create", parent.display()))?;
        }
        return moved(partial, out);
    }
    let entries: Vec<PathBuf> = std::fs::read_dir(partial)
        .with_context(|| format!("{}: cannot read", partial.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()
        .with_context(|| format!("{}: cannot read", partial.display()))?;
    // The media first, the database last: a library appears only once its files are there.
    let mut entries = entries;
    entries.sort_by_key(|p| {
        p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("library.sqlite"))
    });
    for from in entries {
        let to = out.join(from.file_name().unwrap_or_default());
        moved(&from, &to)?;
    }
    std::fs::remove_dir(partial).with_context(|| format!("{}: cannot remove", partial.display()))
}

/// `--scale`: index the phantom, then copy its polyps and videos up to the sizes asked.
fn scale(
    store: &mut Store,
    args: &DemoArgs,
    polyps: usize,
    models: &endotwin::twins::TwinModels,
) -> Result<()> {
    use endotwin::twins::{index_library, scale::replicate};
    let started = std::time::Instant::now();
    let progress = Arc::new(Progress::new());
    let bar = super::stage_bar();
    let watcher = super::watch(progress.clone(), bar.clone());
    let result = index_library(store, models, &progress).and_then(|_| {
        replicate(
            store,
            models,
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
    // The output guard first (the library's own files are named as such), then the name:
    // a PNG under a .jpg name would be taken for what it is not (round 8 N23).
    super::check_output(&args.out)?;
    if !args
        .out
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("png"))
    {
        anyhow::bail!(
            "--out {}: a contact sheet is a PNG; name the file .png; nothing was written",
            args.out.display()
        );
    }
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
    println!(
        "wrote {}: {} tile{}, a sample (2 views of up to 8 polyps, a frame of up to 6 examinations, 4 frames of up to 2 videos)",
        args.out.display(),
        sheet.tiles,
        if sheet.tiles == 1 { "" } else { "s" }
    );
    Ok(())
}
