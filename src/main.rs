//! The `endotwin` command: no subcommand starts the GUI.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use endotwin::compute::{self, BackendPref};
use endotwin::data::import::{ImportLayout, ImportOptions};
use endotwin::data::phantom::{self, PhantomConfig, Split};
use endotwin::engine::{Engine, Job, JobOutput};
use endotwin::store::{OpenMode, Store};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;

mod train_cmd;
mod twins_cmd;

#[derive(Parser)]
#[command(
    name = "endotwin",
    version,
    about = "Colonoscopy case review: digital twins, prompts, tracklets, fine-tuning."
)]
struct Cli {
    /// Library folder (or its library.sqlite). Default: $ENDOTWIN_LIBRARY, else sample_db/.
    #[arg(long, global = true)]
    library: Option<PathBuf>,
    /// Where tensors run: auto (GPU when a hardware adapter exists), gpu, or cpu.
    /// Also ENDOTWIN_BACKEND.
    #[arg(long, global = true, value_enum)]
    backend: Option<BackendPref>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Open the GUI (the default when no subcommand is given).
    Gui {
        /// Open on this tab: viewer or twins.
        #[arg(long)]
        tab: Option<String>,
        /// Select the polyp with this code (e.g. S7-E004-P1) at start.
        #[arg(long)]
        polyp: Option<String>,
    },
    /// Print the version, the compute backend and adapter, and the library's contents.
    Info,
    /// Import a data layout into the library (created when missing).
    Import {
        /// The layout of the source.
        #[arg(value_enum)]
        layout: ImportLayout,
        /// The folder (or manifest) to import.
        path: PathBuf,
        /// Abort the whole import, writing nothing, when any item is bad (default: skip it).
        #[arg(long)]
        strict: bool,
    },
    /// Generate the synthetic colonoscopy phantom into a new library folder.
    Demo {
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
        /// Side of still frames in pixels.
        #[arg(long, default_value_t = 256)]
        size: u32,
    },
    /// Evaluate: `phantom` runs the no-learning baselines on held-out phantom data.
    Eval {
        #[command(subcommand)]
        what: EvalWhat,
    },
    /// Benchmarks (figures, not tests): `encode` times the image encoders on each backend.
    Bench {
        #[command(subcommand)]
        what: BenchWhat,
    },
    /// Train a model on the library's data (checkpoints every epoch; --resume continues).
    Train {
        #[command(subcommand)]
        what: TrainWhat,
    },
    /// Index the library's polyps for twin retrieval with the models in --models (only what
    /// changed since the last run is encoded).
    Index {
        #[arg(long)]
        models: Option<PathBuf>,
    },
    /// Retrieve the digital twins of a polyp from one or more views (image files).
    Twins {
        #[arg(required = true)]
        images: Vec<PathBuf>,
        #[arg(long)]
        models: Option<PathBuf>,
        #[arg(long, default_value_t = 6)]
        k: usize,
        /// Search the sign codes by Hamming distance instead of cosine over floats.
        #[arg(long)]
        hamming: bool,
    },
    /// Models: `import-hf-clip` converts a Hugging Face CLIP checkpoint to a card + record.
    Model {
        #[command(subcommand)]
        what: ModelWhat,
    },
    /// Write a contact sheet (one PNG) of the library's views, frames and video frames.
    ContactSheet {
        /// Output PNG path.
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value_t = 8)]
        columns: u32,
        #[arg(long, default_value_t = 160)]
        tile: u32,
    },
}

#[derive(Subcommand)]
enum BenchWhat {
    /// Image encoders (CLIP ViT-B/32, our twin-small) forward at batch 1 and 32 on burn-flex,
    /// burn-ndarray (with --features bench-ndarray) and burn-wgpu (with --gpu).
    Encode {
        /// Comma-separated batch sizes.
        #[arg(long, value_delimiter = ',', default_value = "1,32")]
        batches: Vec<usize>,
        /// Comma-separated models: vit-b32, twin-small.
        #[arg(long, value_delimiter = ',', default_value = "vit-b32,twin-small")]
        models: Vec<String>,
        /// At least this many timed runs per row...
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// ...and at least this many seconds.
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
        /// Also time burn-wgpu on any adapter (software ones included).
        #[arg(long)]
        gpu: bool,
        /// Also time the ops of one ViT-B/32 block at the largest batch (where the time goes).
        #[arg(long)]
        breakdown: bool,
    },
    /// Twin search on synthetic libraries: exact Hamming, multi-index hashing, exact cosine;
    /// one thread, top-k.
    Retrieve {
        #[arg(long, value_delimiter = ',', default_value = "10000,100000,1000000")]
        sizes: Vec<usize>,
        /// Code lengths (multiples of 64).
        #[arg(long, value_delimiter = ',', default_value = "256,1024")]
        bits: Vec<usize>,
        #[arg(long, default_value_t = 6)]
        k: usize,
        #[arg(long, default_value_t = 200)]
        queries: usize,
        /// Queries per batch for the batched scan.
        #[arg(long, default_value_t = 32)]
        batch: usize,
    },
}

#[derive(Subcommand)]
enum TrainWhat {
    /// The polyp-aware image encoder (twin-small ViT) on the library's polyp views + masks.
    ImageEncoder {
        /// Where the model card + record go (and `<name>.checkpoints/`).
        #[arg(long, default_value = "models")]
        out: PathBuf,
        #[arg(long, default_value = "twin-image")]
        name: String,
        #[arg(long, default_value_t = 20)]
        epochs: usize,
        /// Images per step (two augmented views each).
        #[arg(long, default_value_t = 32)]
        batch: usize,
        #[arg(long, default_value_t = 5e-4)]
        lr: f64,
        #[arg(long, default_value_t = 11)]
        seed: u64,
        /// Continue from the last checkpoint in `<out>/<name>.checkpoints/`.
        #[arg(long)]
        resume: bool,
        /// Pair each view with another view of its polyp (not only with an augmentation of
        /// itself): positives across viewpoints.
        #[arg(long)]
        view_positives: bool,
    },
    /// The scene encoder on the library's multi-view polyps, with the image encoder in
    /// --models frozen.
    SceneEncoder {
        #[arg(long)]
        models: Option<PathBuf>,
        #[arg(long, default_value = "twin-scene")]
        name: String,
        #[arg(long, default_value_t = 30)]
        epochs: usize,
        /// Polyps per step.
        #[arg(long, default_value_t = 32)]
        batch: usize,
        #[arg(long, default_value_t = 13)]
        seed: u64,
        #[arg(long)]
        resume: bool,
    },
}

#[derive(Subcommand)]
enum ModelWhat {
    /// Read a `CLIPModel` model.safetensors (config.json beside it is used when present) and
    /// write `<out>/<name>.json` (model card) and `<out>/<name>.bpk` (burn record).
    ImportHfClip {
        weights: PathBuf,
        #[arg(long, default_value = "models")]
        out: PathBuf,
        #[arg(long, default_value = "clip-vit-b32")]
        name: String,
    },
}

#[derive(Subcommand)]
enum EvalWhat {
    /// Raw-pixel and colour-histogram baselines (re-identification, pathology) on the phantom.
    Phantom {
        /// A held-out library to evaluate; default: generate the test split of --seed.
        #[arg(long)]
        held_out: Option<PathBuf>,
        #[arg(long, default_value_t = 7)]
        seed: u64,
        #[arg(long, default_value_t = 60)]
        polyps: usize,
        #[arg(long, default_value_t = 4)]
        views: usize,
        #[arg(long, default_value_t = 256)]
        size: u32,
    },
    /// Digital twins on held-out phantom polyps: re-identification (1v1 .. 2v2 views, float vs
    /// hash, scene encoder vs mean, baselines) and pathology by k-NN vote.
    Twins {
        /// A held-out library to evaluate; default: generate the test split of --seed.
        #[arg(long)]
        held_out: Option<PathBuf>,
        #[arg(long, default_value_t = 7)]
        seed: u64,
        #[arg(long, default_value_t = 80)]
        polyps: usize,
        #[arg(long)]
        models: Option<PathBuf>,
        #[arg(long, default_value_t = 6)]
        k: usize,
        /// Write the figures into the image encoder's model card (its `evaluation`).
        #[arg(long)]
        record: bool,
    },
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = run(cli) {
        // One line: the file and the reason. The chain is joined, not listed.
        let chain: Vec<String> = e.chain().map(|c| c.to_string()).collect();
        eprintln!("error: {}", dedup_chain(&chain));
        std::process::exit(1);
    }
}

/// Joins an error chain into one line, dropping links already contained in the previous one.
fn dedup_chain(chain: &[String]) -> String {
    let mut out: Vec<&str> = Vec::new();
    for c in chain {
        if out.last().is_none_or(|last| !last.contains(c.as_str())) {
            out.push(c);
        }
    }
    out.join(": ")
}

fn run(cli: Cli) -> Result<()> {
    let pref = BackendPref::resolve(cli.backend)?;
    let library = cli.library.unwrap_or_else(endotwin::default_library);
    match cli.command.unwrap_or(Command::Gui {
        tab: None,
        polyp: None,
    }) {
        Command::Gui { tab, polyp } => {
            let tab = match tab.as_deref() {
                None | Some("viewer") => endotwin::app::Tab::Viewer,
                Some("twins") => endotwin::app::Tab::Twins,
                Some(other) => anyhow::bail!("unknown tab `{other}`: viewer or twins"),
            };
            endotwin::app::run_native(library, pref, endotwin::app::StartView { tab, polyp })
        }
        Command::Info => info(&library, pref),
        Command::Import {
            layout,
            path,
            strict,
        } => import(&library, pref, layout, path, strict),
        Command::Demo {
            seed,
            out,
            split,
            polyps,
            views,
            videos,
            frames_per_video,
            capsule,
            size,
        } => demo(
            &out,
            &PhantomConfig {
                seed,
                split,
                polyps,
                views_per_polyp: views,
                videos,
                frames_per_video,
                capsule_images: capsule,
                image_size: size,
                ..PhantomConfig::default()
            },
        ),
        Command::Eval {
            what:
                EvalWhat::Phantom {
                    held_out,
                    seed,
                    polyps,
                    views,
                    size,
                },
        } => eval_phantom(held_out, seed, polyps, views, size),
        Command::Bench {
            what:
                BenchWhat::Encode {
                    batches,
                    models,
                    runs,
                    seconds,
                    gpu,
                    breakdown,
                },
        } => {
            let largest = batches.iter().copied().max().unwrap_or(1);
            bench_encode(batches, models, runs, seconds, gpu)?;
            if breakdown {
                for (name, device) in endotwin::bench::devices(gpu) {
                    println!("\n{name}: one ViT-B/32 block's ops at batch {largest}");
                    println!("| op | ms |\n| --- | --- |");
                    for (op, ms) in endotwin::bench::encode_breakdown(&device, largest, runs.max(1))
                    {
                        println!("| {op} | {ms:.1} |");
                    }
                }
            }
            Ok(())
        }
        Command::Bench {
            what:
                BenchWhat::Retrieve {
                    sizes,
                    bits,
                    k,
                    queries,
                    batch,
                },
        } => {
            if let Some(b) = bits.iter().find(|b| **b == 0 || **b % 64 != 0) {
                anyhow::bail!("code length {b} is not a positive multiple of 64");
            }
            println!("machine: {}", endotwin::bench::machine());
            println!("top-{k}, {queries} queries near library entries, one thread");
            println!("| entries | bits | method | batch | ms / query | queries/s |");
            println!("| --- | --- | --- | --- | --- | --- |");
            let options = endotwin::bench::RetrieveOptions {
                sizes,
                bits,
                k,
                queries: queries.max(1),
                batch: batch.max(1),
            };
            endotwin::bench::retrieve(&options, |r| {
                println!(
                    "| {} | {} | {} | {} | {:.4} | {:.0} |",
                    r.entries, r.bits, r.method, r.batch, r.ms_per_query, r.queries_per_s
                )
            });
            Ok(())
        }
        Command::Train {
            what:
                TrainWhat::ImageEncoder {
                    out,
                    name,
                    epochs,
                    batch,
                    lr,
                    seed,
                    resume,
                    view_positives,
                },
        } => {
            let compute = endotwin::compute::select(pref)?;
            train_cmd::image_encoder(
                train_cmd::ImageEncoderArgs {
                    library: library.clone(),
                    out,
                    name,
                    epochs,
                    batch,
                    lr,
                    seed,
                    resume,
                    view_positives,
                    device: compute.device,
                },
                std::env::args().collect::<Vec<_>>().join(" "),
            )
        }
        Command::Train {
            what:
                TrainWhat::SceneEncoder {
                    models,
                    name,
                    epochs,
                    batch,
                    seed,
                    resume,
                },
        } => {
            let compute = endotwin::compute::select(pref)?;
            train_cmd::scene_encoder(
                train_cmd::SceneEncoderArgs {
                    library: library.clone(),
                    models: models.unwrap_or_else(endotwin::default_models_dir),
                    name,
                    epochs,
                    batch,
                    seed,
                    resume,
                    device: compute.device,
                },
                std::env::args().collect::<Vec<_>>().join(" "),
            )
        }
        Command::Index { models } => {
            let compute = endotwin::compute::select(pref)?;
            let mut store = Store::open(&library, OpenMode::Existing)?;
            let models = models.unwrap_or_else(endotwin::default_models_dir);
            twins_cmd::index(&mut store, &models, &compute.device)
        }
        Command::Twins {
            images,
            models,
            k,
            hamming,
        } => {
            let compute = endotwin::compute::select(pref)?;
            let store = Store::open(&library, OpenMode::Existing)?;
            let models = models.unwrap_or_else(endotwin::default_models_dir);
            twins_cmd::query(&store, &models, &compute.device, &images, k, hamming)
        }
        Command::Eval {
            what:
                EvalWhat::Twins {
                    held_out,
                    seed,
                    polyps,
                    models,
                    k,
                    record,
                },
        } => {
            let compute = endotwin::compute::select(pref)?;
            let dir = models.unwrap_or_else(endotwin::default_models_dir);
            let models = endotwin::twins::TwinModels::load(&dir, &compute.device)?;
            let described = match &held_out {
                Some(p) => p.display().to_string(),
                None => {
                    format!("phantom test split of seed {seed}, {polyps} polyps x 4 views, 256 px")
                }
            };
            let (store, _tmp) = held_out_library(held_out, seed, polyps, 4, 256)?;
            let started = std::time::Instant::now();
            let eval = endotwin::eval::twins::run(&store, &models, k)?;
            twins_cmd::print_eval(&eval, &models, store.db_path());
            eprintln!("({:.0} s)", started.elapsed().as_secs_f64());
            if record {
                twins_cmd::record_eval(&dir, &eval, &described)?;
            }
            Ok(())
        }
        Command::Model {
            what: ModelWhat::ImportHfClip { weights, out, name },
        } => import_hf_clip(&weights, &out, &name),
        Command::ContactSheet { out, columns, tile } => {
            let store = Store::open(&library, OpenMode::Existing)?;
            let sheet = phantom::contact_sheet(&store, columns, tile)?;
            sheet
                .save(&out)
                .with_context(|| format!("{}: could not write PNG", out.display()))?;
            println!("wrote {}", out.display());
            Ok(())
        }
    }
}

/// The library to evaluate on: `held_out` when given, else the test split of `seed`
/// generated into a temporary folder (removed when the returned guard drops).
fn held_out_library(
    held_out: Option<PathBuf>,
    seed: u64,
    polyps: usize,
    views: usize,
    size: u32,
) -> Result<(Store, Option<TempDir>)> {
    Ok(match held_out {
        Some(path) => (Store::open(&path, OpenMode::Existing)?, None),
        None => {
            let dir = std::env::temp_dir()
                .join(format!("endotwin-heldout-{seed}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            let cfg = PhantomConfig {
                seed,
                split: Split::Test,
                polyps,
                views_per_polyp: views,
                videos: 0,
                capsule_images: 0,
                background_frames: 0,
                image_size: size,
                ..PhantomConfig::default()
            };
            eprintln!(
                "generating the held-out split of seed {seed} ({polyps} polyps x {views} views)..."
            );
            let mut store = Store::open(&dir, OpenMode::CreateIfMissing)?;
            phantom::generate(&mut store, &cfg, &endotwin::engine::Progress::new())?;
            (store, Some(TempDir(dir)))
        }
    })
}

fn eval_phantom(
    held_out: Option<PathBuf>,
    seed: u64,
    polyps: usize,
    views: usize,
    size: u32,
) -> Result<()> {
    let (store, _tmp) = held_out_library(held_out, seed, polyps, views, size)?;
    let (reids, path) = endotwin::eval::baselines::run(&store)?;
    println!("held-out library: {}", store.db_path().display());
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
    Ok(())
}

/// Removes a generated held-out library when the evaluation is done.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn demo(out: &std::path::Path, cfg: &PhantomConfig) -> Result<()> {
    if endotwin::store::resolve_db_path(out).exists() {
        anyhow::bail!(
            "{}: already holds a library; choose a new folder",
            out.display()
        );
    }
    let mut store = Store::open(out, OpenMode::CreateIfMissing)?;
    let progress = std::sync::Arc::new(endotwin::engine::Progress::new());
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{msg:>16} [{bar:40}] {pos}/{len} {eta}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    let watcher = {
        let progress = progress.clone();
        let bar = bar.clone();
        std::thread::spawn(move || {
            while !bar.is_finished() {
                bar.set_message(progress.stage_name());
                bar.set_length(progress.total());
                bar.set_position(progress.done());
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        })
    };
    let started = std::time::Instant::now();
    let result = phantom::generate(&mut store, cfg, &progress);
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

fn info(library: &std::path::Path, pref: BackendPref) -> Result<()> {
    println!("endotwin {}", env!("CARGO_PKG_VERSION"));
    let compute = compute::select(pref)?;
    println!("backend: {}", compute.backend);
    println!("adapter: {}", compute.adapter);
    if let Some(note) = &compute.note {
        println!("note:    {note}");
    }
    let check = endotwin::engine::device_check(&compute);
    println!("device check (2x2 matmul): {check:?}");
    let store = Store::open(library, OpenMode::Existing)?;
    let stats = store.stats()?;
    println!("library: {}", store.db_path().display());
    println!(
        "schema:  v{}{}",
        store.schema_version()?,
        if store.is_read_only() {
            " (read-only)"
        } else {
            ""
        }
    );
    println!(
        "content: {} examinations, {} polyps, {} videos, {} media ({:.1} MB)",
        stats.examinations,
        stats.polyps,
        stats.videos,
        stats.media,
        stats.media_bytes as f64 / 1e6
    );
    Ok(())
}

fn import(
    library: &std::path::Path,
    pref: BackendPref,
    layout: ImportLayout,
    path: PathBuf,
    strict: bool,
) -> Result<()> {
    if !path.exists() {
        anyhow::bail!("{}: no such file or folder", path.display());
    }
    let compute = compute::select(pref)?;
    let mut engine = Engine::start(compute, None);
    let handle = engine.submit(
        format!("import {}", path.display()),
        library.to_path_buf(),
        Job::Import {
            layout,
            path: path.clone(),
            options: ImportOptions { strict },
        },
    )?;
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{msg:>16} [{bar:40}] {pos}/{len} {eta}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    let progress = handle.progress.clone();
    let done = engine.wait(handle.id, || {
        bar.set_message(progress.stage_name());
        bar.set_length(progress.total());
        bar.set_position(progress.done());
    })?;
    bar.finish_and_clear();
    match done.result.map_err(anyhow::Error::msg)? {
        JobOutput::Imported(report) => {
            for p in &report.skipped {
                eprintln!("skipped {p}");
            }
            println!("imported {}: {}", path.display(), report.summary());
            Ok(())
        }
        other => Err(anyhow::anyhow!("unexpected job output {other:?}")).context("import"),
    }
}

fn bench_encode(
    batches: Vec<usize>,
    models: Vec<String>,
    runs: usize,
    seconds: f64,
    gpu: bool,
) -> anyhow::Result<()> {
    use endotwin::bench;
    let mut chosen = Vec::new();
    for m in &models {
        match bench::MODELS.iter().find(|known| **known == m.as_str()) {
            Some(known) => chosen.push(*known),
            None => anyhow::bail!("unknown model `{m}`; known: {}", bench::MODELS.join(", ")),
        }
    }
    println!("machine: {}", bench::machine());
    println!("image encoder forward, random weights and inputs, end to end (result read back)");
    println!("| backend | model | batch | runs | ms / batch | images/s | peak RSS MiB |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    let options = bench::EncodeOptions {
        batches,
        min_runs: runs.max(1),
        min_time: std::time::Duration::from_secs_f64(seconds.max(0.0)),
        gpu,
        models: chosen,
    };
    bench::encode(&options, |r| {
        println!(
            "| {} | {} | {} | {} | {:.1} | {:.1} | {} |",
            r.backend,
            r.model,
            r.batch,
            r.runs,
            r.ms_per_batch,
            r.images_per_s,
            r.peak_rss_mib.map_or("-".into(), |m| format!("{m:.0}"))
        )
    });
    Ok(())
}

fn import_hf_clip(
    weights: &std::path::Path,
    out: &std::path::Path,
    name: &str,
) -> anyhow::Result<()> {
    use endotwin::model::{hf_clip, weights as w};
    let device = burn::tensor::Device::flex();
    let (clip, config) = hf_clip::load_hf_clip(weights, None, &device)?;
    std::fs::create_dir_all(out)?;
    let card = w::ModelCard::new(
        name,
        w::ModelKind::Clip,
        "1",
        &format!("CLIP dual encoder imported from {}", weights.display()),
        &config,
    );
    let path = w::save(&clip, &card, out)?;
    println!(
        "{}: CLIP {}px/{} image tower ({} blocks), text tower ({} blocks, vocab {}), {}-d joint space",
        path.display(),
        config.vision.image_size,
        config.vision.patch_size,
        config.vision.depth,
        config.text.depth,
        config.text.vocab_size,
        config.vision.output_dim()
    );
    Ok(())
}
