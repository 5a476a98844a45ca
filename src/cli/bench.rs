//! `endotwin bench encode | retrieve`: speed figures printed as tables (never tests).

use anyhow::Result;
use endotwin::bench;

#[derive(clap::Subcommand)]
pub enum BenchWhat {
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
    /// GUI frame times (logic, layout, tessellation) idle and while a training run goes on the
    /// same cores, on the Training tab with its live curves; target under 16 ms.
    Frames {
        /// Seconds of frames in each phase.
        #[arg(long, default_value_t = 20.0)]
        seconds: f64,
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

pub fn run(what: BenchWhat) -> Result<()> {
    match what {
        BenchWhat::Frames { seconds } => {
            println!("machine: {}", endotwin::plumbing::machine());
            let phases =
                endotwin::app::frame_bench::frame_times(seconds, &mut |s| eprintln!("{s}"))
                    .map_err(anyhow::Error::msg)?;
            println!(
                "GUI frames at up to 60 per second, 1400x860, CPU side (the GPU's drawing not included)"
            );
            println!("| phase | frames | median ms | p95 ms | max ms | training steps |");
            println!("| --- | --- | --- | --- | --- | --- |");
            for p in &phases {
                println!(
                    "| {} | {} | {:.2} | {:.2} | {:.2} | {} |",
                    p.name, p.frames, p.median_ms, p.p95_ms, p.max_ms, p.steps
                );
            }
            Ok(())
        }
        BenchWhat::Encode {
            batches,
            models,
            runs,
            seconds,
            gpu,
            breakdown,
        } => {
            let largest = batches.iter().copied().max().unwrap_or(1);
            encode(batches, models, runs, seconds, gpu)?;
            if breakdown {
                for (name, device) in bench::devices(gpu) {
                    println!("\n{name}: one ViT-B/32 block's ops at batch {largest}");
                    println!("| op | ms |\n| --- | --- |");
                    for (op, ms) in bench::encode_breakdown(&device, largest, runs.max(1)) {
                        println!("| {op} | {ms:.1} |");
                    }
                }
            }
            Ok(())
        }
        BenchWhat::Retrieve {
            sizes,
            bits,
            k,
            queries,
            batch,
        } => {
            if let Some(b) = bits.iter().find(|b| **b == 0 || **b % 64 != 0) {
                anyhow::bail!("code length {b} is not a positive multiple of 64");
            }
            println!("machine: {}", endotwin::plumbing::machine());
            println!("top-{k}, {queries} queries near library entries, one thread");
            println!("| entries | bits | method | batch | ms / query | queries/s |");
            println!("| --- | --- | --- | --- | --- | --- |");
            let options = bench::RetrieveOptions {
                sizes,
                bits,
                k,
                queries: queries.max(1),
                batch: batch.max(1),
            };
            bench::retrieve(&options, |r| {
                println!(
                    "| {} | {} | {} | {} | {:.4} | {:.0} |",
                    r.entries, r.bits, r.method, r.batch, r.ms_per_query, r.queries_per_s
                )
            });
            Ok(())
        }
    }
}

fn encode(
    batches: Vec<usize>,
    models: Vec<String>,
    runs: usize,
    seconds: f64,
    gpu: bool,
) -> Result<()> {
    let mut chosen = Vec::new();
    for m in &models {
        match bench::MODELS.iter().find(|known| **known == m.as_str()) {
            Some(known) => chosen.push(*known),
            None => anyhow::bail!("unknown model `{m}`; known: {}", bench::MODELS.join(", ")),
        }
    }
    println!("machine: {}", endotwin::plumbing::machine());
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
