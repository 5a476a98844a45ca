//! `endotwin eval phantom` (no-learning baselines) and `endotwin eval twins` (the twin models
//! on held-out polyps).

use anyhow::Result;
use endotwin::compute::{self, BackendPref};
use endotwin::eval::held_out::HeldOut;
use endotwin::eval::twins::TwinEval;
use endotwin::twins::TwinModels;
use std::path::{Path, PathBuf};

#[derive(clap::Subcommand)]
pub enum EvalWhat {
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

pub fn run(pref: BackendPref, what: EvalWhat) -> Result<()> {
    match what {
        EvalWhat::Phantom {
            held_out,
            seed,
            polyps,
            views,
            size,
        } => phantom(held_out, seed, polyps, views, size),
        EvalWhat::Twins {
            held_out,
            seed,
            polyps,
            models,
            k,
            record,
        } => {
            let compute = compute::select(pref)?;
            let dir = models.unwrap_or_else(endotwin::default_models_dir);
            let models = TwinModels::load(&dir, &compute.device)?;
            let held = open_held_out(held_out, seed, polyps, 4, 256)?;
            let started = std::time::Instant::now();
            let eval = endotwin::eval::twins::run(&held.store, &models, k)?;
            print_twins(&eval, &models, held.store.db_path());
            eprintln!("({:.0} s)", started.elapsed().as_secs_f64());
            if record {
                let card = endotwin::eval::twins::record(
                    &dir,
                    &eval,
                    &super::command_line(),
                    &held.described,
                )?;
                println!("recorded in {}", card.display());
            }
            Ok(())
        }
    }
}

fn open_held_out(
    path: Option<PathBuf>,
    seed: u64,
    polyps: usize,
    views: usize,
    size: u32,
) -> Result<HeldOut> {
    if path.is_none() {
        eprintln!(
            "generating the held-out split of seed {seed} ({polyps} polyps x {views} views)..."
        );
    }
    Ok(HeldOut::open(path.as_deref(), seed, polyps, views, size)?)
}

fn phantom(
    held_out: Option<PathBuf>,
    seed: u64,
    polyps: usize,
    views: usize,
    size: u32,
) -> Result<()> {
    let held = open_held_out(held_out, seed, polyps, views, size)?;
    let (reids, path) = endotwin::eval::baselines::run(&held.store)?;
    println!("held-out library: {}", held.store.db_path().display());
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

fn print_twins(e: &TwinEval, models: &TwinModels, library: &Path) {
    println!(
        "held-out library: {} ({} polyps with 4+ views); models {}",
        library.display(),
        e.polyps,
        models.version()
    );
    println!("\nre-identification, top-1 per query (views 1-2 query, views 3-4 reference)");
    println!("| method | views | uAP | accuracy@1 | recall@P90 |");
    println!("| --- | --- | --- | --- | --- |");
    for r in &e.reid {
        println!(
            "| {} | {} | {:.3} | {:.3} | {:.3} |",
            r.method, r.views, r.uap, r.accuracy_at_1, r.recall_at_p90
        );
    }
    println!("\npathology by 6-NN vote over polyps, 5-fold cross-validation");
    println!("| method | accuracy | macro-F1 | AUC (macro one-vs-rest) |");
    println!("| --- | --- | --- | --- |");
    for r in &e.pathology {
        println!(
            "| {} | {:.3} | {:.3} | {:.3} |",
            r.method, r.accuracy, r.macro_f1, r.auc
        );
    }
    println!(
        "| majority class | {:.3} | - | - |",
        e.majority_class_accuracy
    );
}
