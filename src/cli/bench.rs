//! `endotwin bench encode | train | retrieve | frames`: speed figures printed as tables (never
//! tests); `--json FILE` writes the same rows, `{"machine": "...", "rows": [{...}]}`, keys as
//! printed. `--pytorch PYTHON` runs the PyTorch reference script in the same run and adds
//! each row's ratio to its time.

use anyhow::{Context, Result};
use endotwin::bench;
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};

#[derive(clap::Subcommand)]
pub enum BenchWhat {
    /// Image encoders (CLIP ViT-B/32, the shipped twin encoder's MobileNetV2 architecture
    /// `twin-backbone`, the earlier ViT twin-small) forward at batch 1 and 32 on burn-flex,
    /// burn-ndarray (with --features bench-ndarray) and burn-wgpu (with --gpu).
    Encode {
        #[command(flatten)]
        common: EncoderArgs,
        /// Also time the ops of one ViT-B/32 block at the largest batch (where the time goes).
        #[arg(long)]
        breakdown: bool,
    },
    /// One optimizer step (forward, backward, AdamW) of the image encoders at batch 32.
    Train {
        #[command(flatten)]
        common: EncoderArgs,
    },
    /// The shipped models (twin-image, tracklet-frames, captions, prompts, prompts-detect) on
    /// the library's polyp views on the CPU and on the GPU (wgpu, any adapter): the largest and
    /// mean absolute difference of their outputs, and each device's time for the same work.
    Parity {
        /// The models folder (default: the shipped models).
        #[arg(long)]
        models: Option<PathBuf>,
        /// Compare on at most this many views (1 to 100000).
        #[arg(long, default_value_t = 240, value_parser = count(1, 100_000))]
        views: usize,
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// GUI frame times (logic, layout, tessellation). Without --library: idle and while a
    /// training run goes on the same cores (Training tab, live curves). With --library: the
    /// large-library figures (cold start, browser scrolling, the map of every polyp, search,
    /// index load, a twin query). Target under 16 ms a frame.
    Frames {
        /// Seconds of frames in each phase (more than 0, at most 3600).
        #[arg(long, default_value_t = 20.0, value_parser = seconds_of(false))]
        seconds: f64,
        /// A library to measure on (e.g. one made by `endotwin demo --scale 100000`).
        #[arg(long)]
        library: Option<PathBuf>,
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Twin search on synthetic libraries: exact Hamming, multi-index hashing, exact cosine and
    /// the Hamming shortlist re-ranked by cosine (with its recall of cosine's top k); one thread.
    Retrieve {
        /// Library sizes (100 to 2000000 entries each).
        #[arg(long, value_delimiter = ',', default_value = "10000,100000,1000000", value_parser = count(100, MAX_ENTRIES))]
        sizes: Vec<usize>,
        /// Code lengths of the codes-only rows (multiples of 64, at most 4096).
        #[arg(long, value_delimiter = ',', default_value = "256,1024", value_parser = count(1, MAX_BITS))]
        bits: Vec<usize>,
        /// Dimension of the synthetic embeddings (and bits of their sign codes; a multiple
        /// of 64, at most 4096).
        #[arg(long, default_value_t = 256, value_parser = count(1, MAX_BITS))]
        dim: usize,
        #[arg(long, default_value_t = 6, value_parser = count(1, 1_000))]
        k: usize,
        #[arg(long, default_value_t = 200, value_parser = count(1, 100_000))]
        queries: usize,
        /// Queries per batch for the batched scan.
        #[arg(long, default_value_t = 32, value_parser = count(1, 4_096))]
        batch: usize,
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Several clients at once on the library (--library: a folder or a postgres:// URL):
    /// label edits against the version each read, imports and twin queries, then the audit
    /// trail checked against every client's log (lost, duplicated, silent overwrites). It
    /// changes labels and imports images into the library it is given: run it on a copy
    /// (`endotwin library copy LIB COPY`) and say so with --changes-this-library.
    Library {
        /// Confirms that the library given may be changed (its labels rewritten, images
        /// imported into it): a copy made for the benchmark, never a library in use.
        #[arg(long)]
        changes_this_library: bool,
        #[arg(long, default_value_t = 8, value_parser = count(1, 256))]
        clients: usize,
        #[arg(long, default_value_t = 10.0, value_parser = seconds_of(false))]
        seconds: f64,
        #[arg(long)]
        json: Option<PathBuf>,
    },
}

#[derive(clap::Args)]
pub struct EncoderArgs {
    /// Comma-separated batch sizes, 1 to 256 (default: 1,32 for encode, 32 for train).
    #[arg(long, value_delimiter = ',', value_parser = count(1, 256))]
    batches: Vec<usize>,
    /// Comma-separated models: vit-b32, twin-backbone (the shipped twin encoder's
    /// architecture), twin-small.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "vit-b32,twin-backbone,twin-small"
    )]
    models: Vec<String>,
    /// At least this many timed runs per row (1 to 1000)...
    #[arg(long, default_value_t = 3, value_parser = count(1, 1_000))]
    runs: usize,
    /// ...and at least this many seconds (0 to 3600).
    #[arg(long, default_value_t = 3.0, value_parser = seconds_of(true))]
    seconds: f64,
    /// Also time burn-wgpu on any adapter (software ones included).
    #[arg(long)]
    gpu: bool,
    /// With --gpu: the GPU rows alone (no burn-flex rows and, with --pytorch-cuda, no PyTorch
    /// CPU rows), for a machine whose many cores would take most of the run.
    #[arg(long, requires = "gpu")]
    gpu_only: bool,
    /// A Python with torch: runs tests/fixtures/bench_pytorch.py (bundled) with the same
    /// models and batches, as many threads as burn-flex uses (the machine's cores), after the
    /// burn rows, and adds `ratio_to_pytorch`.
    #[arg(long)]
    pytorch: Option<PathBuf>,
    /// With --pytorch: also run the reference on CUDA (TF32 off, as wgpu computes in f32);
    /// the burn-wgpu rows take their ratio from the CUDA rows, the CPU rows from the CPU ones.
    #[arg(long, requires = "pytorch")]
    pytorch_cuda: bool,
    #[arg(long)]
    json: Option<PathBuf>,
}

use super::eval::count;

/// The largest synthetic library `bench retrieve` builds (its float embeddings alone take
/// `entries x dim x 4` bytes).
const MAX_ENTRIES: u64 = 2_000_000;
/// The longest code `bench retrieve` times.
const MAX_BITS: u64 = 4_096;

/// A number of seconds: finite, at most an hour, and more than 0 unless `zero` is allowed.
fn seconds_of(zero: bool) -> impl Fn(&str) -> Result<f64, String> + Clone + Send + Sync + 'static {
    move |text: &str| {
        let s: f64 = text
            .trim()
            .parse()
            .map_err(|_| format!("`{text}` is not a number of seconds"))?;
        let low_ok = if zero { s >= 0.0 } else { s > 0.0 };
        if s.is_finite() && low_ok && s <= 3600.0 {
            Ok(s)
        } else {
            Err(format!(
                "{text} is not {} 0 and at most 3600 seconds",
                if zero { "at least" } else { "more than" }
            ))
        }
    }
}

/// A printed table whose rows are also kept for `--json`.
struct Table {
    keys: Vec<&'static str>,
    rows: Vec<Map<String, Value>>,
}

impl Table {
    fn new(keys: &[&'static str]) -> Table {
        println!("| {} |", keys.join(" | "));
        println!("|{}", " --- |".repeat(keys.len()));
        Table {
            keys: keys.to_vec(),
            rows: Vec::new(),
        }
    }

    /// One row: values in key order (numbers are printed with 3 significant decimals at most).
    fn row(&mut self, values: Vec<Value>) {
        let cells: Vec<String> = values.iter().map(cell).collect();
        println!("| {} |", cells.join(" | "));
        self.rows.push(
            self.keys
                .iter()
                .map(|k| k.to_string())
                .zip(values)
                .collect(),
        );
    }

    fn save(&self, path: Option<&Path>, extra: Value) -> Result<()> {
        let Some(path) = path else { return Ok(()) };
        let mut out = json!({"machine": endotwin::plumbing::machine(), "rows": self.rows});
        if let (Value::Object(o), Value::Object(e)) = (&mut out, extra) {
            o.extend(e);
        }
        super::write_output(path, serde_json::to_string_pretty(&out)?.as_bytes())
    }
}

fn cell(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        Value::Number(n) if n.is_f64() => {
            let x = n.as_f64().unwrap_or(f64::NAN);
            if x.abs() >= 100.0 {
                format!("{x:.1}")
            } else if x.abs() >= 1.0 {
                format!("{x:.2}")
            } else {
                format!("{x:.4}")
            }
        }
        other => other.to_string(),
    }
}

fn num(x: f64) -> Value {
    serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
}

fn opt(x: Option<f64>) -> Value {
    x.map_or(Value::Null, num)
}

pub fn run(library: &Path, what: BenchWhat) -> Result<()> {
    match what {
        BenchWhat::Library {
            changes_this_library,
            clients,
            seconds,
            json,
        } => {
            // Round 10 N22: the labels of the library given were scrambled without a word.
            if !changes_this_library {
                anyhow::bail!(
                    "bench library rewrites labels and imports images into {}: run it on a \
                     copy (`endotwin library copy {} COPY`, then `endotwin --library COPY \
                     bench library --changes-this-library`); nothing was changed",
                    endotwin::store::library_name(library),
                    endotwin::store::library_name(library)
                );
            }
            let report = bench::library::run(library, clients, seconds)?;
            let text = serde_json::to_string_pretty(&report)?;
            println!("{text}");
            // Said, not left to a null in the figures (round 17 N13).
            if report.twin_queries == 0 {
                eprintln!(
                    "note: no twin query ran: {} holds no polyp codes of an indexed model, so \
                     p95_twin_ms is null (`endotwin --library {} index` first to measure them)",
                    endotwin::store::library_name(library),
                    endotwin::store::library_name(library)
                );
            }
            match json {
                Some(path) => super::write_output(&path, text.as_bytes()),
                None => Ok(()),
            }
        }
        BenchWhat::Parity {
            models,
            views,
            json,
        } => parity(library, models, views, json),
        BenchWhat::Frames {
            seconds,
            library,
            json,
        } => frames(seconds, library, json),
        BenchWhat::Encode { common, breakdown } => {
            let largest = common.batches.iter().copied().max().unwrap_or(32);
            encoders(common, "forward")?;
            if breakdown {
                for (name, device) in bench::devices(true, false) {
                    println!("\n{name}: one ViT-B/32 block's ops at batch {largest}");
                    let mut t = Table::new(&["op", "ms"]);
                    for (op, ms) in bench::encode_breakdown(&device, largest, 3) {
                        t.row(vec![op.into(), num(ms)]);
                    }
                }
            }
            Ok(())
        }
        BenchWhat::Train { common } => encoders(common, "train"),
        BenchWhat::Retrieve {
            sizes,
            bits,
            dim,
            k,
            queries,
            batch,
            json,
        } => {
            if let Some(b) = bits
                .iter()
                .chain([&dim])
                .find(|b| **b == 0 || **b % 64 != 0)
            {
                anyhow::bail!(
                    "code length {b} (--bits, --dim) is not a positive multiple of 64; nothing was run"
                );
            }
            // Each size and length once, in the order given (round 18 N22: a repeated size was
            // run twice), and a k that reaches every entry said (every method then returns
            // exact cosine's whole top-k: recall 1.00 says nothing).
            let (mut sizes, mut bits) = (sizes, bits);
            for list in [&mut sizes, &mut bits] {
                let mut seen = std::collections::HashSet::new();
                list.retain(|x| seen.insert(*x));
            }
            if let Some(small) = sizes.iter().find(|n| **n <= k) {
                eprintln!(
                    "note: --k {k} reaches every entry of the {small}-entry library: each method \
                     returns all of them, so its recall there is 1.00 whatever it does"
                );
            }
            println!("machine: {}", endotwin::plumbing::machine());
            println!(
                "top-{k}, {queries} queries near library entries, one thread; recall: share of \
                 exact cosine's top-{k} returned"
            );
            let mut t = Table::new(&[
                "entries",
                "bits",
                "data",
                "method",
                "batch",
                "ms",
                "queries_per_s",
                "recall_at_k",
            ]);
            let options = bench::RetrieveOptions {
                sizes,
                bits,
                k,
                queries: queries.max(1),
                batch: batch.max(1),
                dim,
            };
            bench::retrieve(&options, |r| {
                t.row(vec![
                    r.entries.into(),
                    r.bits.into(),
                    r.data.into(),
                    r.method.clone().into(),
                    r.batch.into(),
                    num(r.ms),
                    num(r.queries_per_s.round()),
                    opt(r.recall),
                ])
            });
            t.save(json.as_deref(), json!({ "k": k }))
        }
    }
}

/// `bench encode` (mode "forward") and `bench train` (mode "train").
fn encoders(args: EncoderArgs, mode: &str) -> Result<()> {
    let mut chosen = Vec::new();
    for m in &args.models {
        match bench::MODELS.iter().find(|known| **known == m.as_str()) {
            Some(known) => chosen.push(*known),
            None => anyhow::bail!("unknown model `{m}`; known: {}", bench::MODELS.join(", ")),
        }
    }
    let batches = match (args.batches.is_empty(), mode) {
        (false, _) => args.batches.clone(),
        (true, "train") => vec![32],
        (true, _) => vec![1, 32],
    };
    if batches.contains(&0) {
        anyhow::bail!("a batch of 0 images measures nothing");
    }
    println!("machine: {}", endotwin::plumbing::machine());
    match mode {
        "train" => println!(
            "one training step: forward, mean squared error to random targets, backward, AdamW; \
             random weights and inputs, loss read back"
        ),
        _ => println!(
            "image encoder forward, random weights and inputs, end to end (result read back)"
        ),
    }
    let mut t = Table::new(&[
        "backend",
        "model",
        "mode",
        "batch",
        "runs",
        "ms",
        "images_per_s",
        "peak_rss_mib",
        "ratio_to_pytorch",
    ]);
    let options = bench::EncoderOptions {
        batches: batches.clone(),
        min_runs: args.runs.max(1),
        min_time: std::time::Duration::from_secs_f64(args.seconds.max(0.0)),
        gpu: args.gpu,
        cpu: !args.gpu_only,
        models: chosen.clone(),
    };
    // Each row is told as it is measured, so a run stopped early still says what it found.
    let progress = |r: &bench::EncoderRow| {
        eprintln!(
            "measured: {} {} batch {}: {:.2} ms",
            r.backend, r.model, r.batch, r.ms
        )
    };
    let ours = match mode {
        "train" => bench::train(&options, progress),
        _ => bench::encode(&options, progress),
    };
    let mut reference = match &args.pytorch {
        Some(python) if !args.gpu_only => pytorch(python, mode, &chosen, &batches, &args, "cpu")?,
        _ => Vec::new(),
    };
    if let (Some(python), true) = (&args.pytorch, args.pytorch_cuda) {
        reference.extend(pytorch(python, mode, &chosen, &batches, &args, "cuda")?);
    }
    // The fastest PyTorch row of the same model, batch and kind of device is the reference.
    let on_gpu = |backend: &str| backend.contains("wgpu") || backend.contains("cuda");
    let best = |r: &bench::EncoderRow| {
        reference
            .iter()
            .filter(|p| p.model == r.model && p.batch == r.batch)
            .filter(|p| on_gpu(&p.backend) == on_gpu(&r.backend))
            .map(|p| p.ms)
            .min_by(f64::total_cmp)
    };
    let add = |t: &mut Table, r: &bench::EncoderRow, ratio: Option<f64>| {
        t.row(vec![
            r.backend.clone().into(),
            r.model.clone().into(),
            mode.into(),
            json!(r.batch),
            json!(r.runs),
            num(r.ms),
            num(r.images_per_s()),
            opt(r.peak_rss_mib),
            opt(ratio),
        ])
    };
    for r in &ours {
        add(&mut t, r, best(r).map(|p| r.ms / p));
    }
    for r in &reference {
        add(&mut t, r, Some(1.0).filter(|_| best(r) == Some(r.ms)));
    }
    t.save(args.json.as_deref(), json!({ "threads": threads() }))
}

/// The threads burn-flex computes on (rayon's pool: one per core), which the reference gets too.
fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Runs the bundled PyTorch reference script with `python` and reads its JSON rows.
fn pytorch(
    python: &Path,
    mode: &str,
    models: &[&str],
    batches: &[usize],
    args: &EncoderArgs,
    device: &str,
) -> Result<Vec<bench::EncoderRow>> {
    let dir = std::env::temp_dir().join(format!("endotwin-bench-pytorch-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let script = dir.join("bench_pytorch.py");
    let out = dir.join("rows.json");
    std::fs::write(
        &script,
        include_str!("../../tests/fixtures/bench_pytorch.py"),
    )?;
    let join = |v: Vec<String>| v.join(",");
    eprintln!(
        "running the PyTorch reference on {device} ({})...",
        python.display()
    );
    let status = std::process::Command::new(python)
        .arg(&script)
        .args(["--mode", mode, "--threads", &threads().to_string()])
        .args(["--device", device])
        .args([
            "--models",
            &join(models.iter().map(|m| m.to_string()).collect()),
        ])
        .args([
            "--batches",
            &join(batches.iter().map(|b| b.to_string()).collect()),
        ])
        .args(["--runs", &args.runs.max(1).to_string()])
        .args(["--seconds", &args.seconds.to_string(), "--json"])
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .status()
        .with_context(|| format!("{}: cannot run", python.display()));
    let text = status.and_then(|s| {
        anyhow::ensure!(s.success(), "the PyTorch reference failed ({s})");
        Ok(std::fs::read_to_string(&out)?)
    });
    let _ = std::fs::remove_dir_all(&dir);
    let parsed: Value = serde_json::from_str(&text?)?;
    if let Some(m) = parsed["machine"].as_str() {
        println!("reference: {m}");
    }
    Ok(parsed["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| bench::EncoderRow {
            backend: r["backend"].as_str().unwrap_or("pytorch").to_string(),
            model: r["model"].as_str().unwrap_or("").to_string(),
            batch: r["batch"].as_u64().unwrap_or(0) as usize,
            runs: r["runs"].as_u64().unwrap_or(0) as usize,
            ms: r["ms"].as_f64().unwrap_or(f64::NAN),
            peak_rss_mib: r["peak_rss_mib"].as_f64(),
        })
        .collect())
}

fn parity(
    library: &Path,
    models: Option<PathBuf>,
    views: usize,
    json: Option<PathBuf>,
) -> Result<()> {
    use endotwin::compute::{self, BackendPref};
    println!("machine: {}", endotwin::plumbing::machine());
    let gpu = compute::select(BackendPref::Gpu)
        .context("bench parity compares the CPU with a GPU, and no wgpu adapter was found")?;
    println!("GPU: {}", gpu.adapter);
    let store = endotwin::store::Store::open_to_inspect(library)?;
    let models = models.unwrap_or_else(endotwin::default_models_dir);
    println!(
        "shipped models on {}'s polyp views, CPU (burn-flex) against the GPU; ms: the first \
         run (kernels compiled, weights uploaded) / a second",
        endotwin::store::library_name(library)
    );
    let mut t = Table::new(&[
        "model",
        "inputs",
        "values",
        "max_abs_diff",
        "mean_abs_diff",
        "cpu_ms",
        "gpu_ms",
    ]);
    let ms = |m: [f64; 2]| Value::from(format!("{:.0} / {:.0}", m[0], m[1]));
    let cpu = burn::tensor::Device::flex();
    bench::parity(&store, &models, &cpu, &gpu.device, views, |r| {
        t.row(vec![
            r.model.clone().into(),
            r.inputs.into(),
            r.values.into(),
            Value::from(format!("{:.2e}", r.max_abs)),
            Value::from(format!("{:.2e}", r.mean_abs)),
            ms(r.cpu_ms),
            ms(r.gpu_ms),
        ])
    })?;
    t.save(json.as_deref(), json!({ "gpu": gpu.adapter }))
}

fn frames(seconds: f64, library: Option<PathBuf>, json: Option<PathBuf>) -> Result<()> {
    println!("machine: {}", endotwin::plumbing::machine());
    if let Some(lib) = library {
        return large_library(&lib, seconds, json);
    }
    let phases = endotwin::app::frame_bench::frame_times(seconds, &mut |s| eprintln!("{s}"))
        .map_err(anyhow::Error::msg)?;
    println!(
        "GUI frames at up to 60 per second, 1400x860, CPU side (the GPU's drawing not included)"
    );
    let t = phase_table(&phases, "training_steps", |p| p.steps.into());
    t.save(json.as_deref(), json!({}))
}

/// The frame phases as a table; its last column is `last`.
fn phase_table(
    phases: &[endotwin::app::frame_bench::FramePhase],
    last: &'static str,
    value: impl Fn(&endotwin::app::frame_bench::FramePhase) -> Value,
) -> Table {
    let mut t = Table::new(&["phase", "frames", "median_ms", "p95_ms", "max_ms", last]);
    for p in phases {
        t.row(vec![
            p.name.clone().into(),
            p.frames.into(),
            num(p.median_ms),
            num(p.p95_ms),
            num(p.max_ms),
            value(p),
        ]);
    }
    t
}

fn large_library(library: &Path, seconds: f64, json: Option<PathBuf>) -> Result<()> {
    let phases =
        endotwin::app::scale_bench::large_library(library, seconds, &mut |s| eprintln!("{s}"))
            .map_err(anyhow::Error::msg)?;
    println!(
        "GUI on {}: CPU side of each frame (GPU drawing not included)",
        endotwin::store::library_name(library)
    );
    let t = phase_table(&phases, "target_ms", |p| opt(p.target_ms));
    t.save(
        json.as_deref(),
        json!({ "library": endotwin::store::library_name(library) }),
    )
}
