//! CLI edge of the digital twins: `index`, `twins` (query with image files) and
//! `eval twins`.

use anyhow::Result;
use burn::tensor::Device;
use endotwin::data::images::decode_file;
use endotwin::engine::Progress;
use endotwin::eval::twins::TwinEval;
use endotwin::store::Store;
use endotwin::twins::{Search, TwinIndex, TwinModels, index_library};
use std::path::{Path, PathBuf};

pub fn index(store: &mut Store, models: &Path, device: &Device) -> Result<()> {
    let models = TwinModels::load(models, device)?;
    let started = std::time::Instant::now();
    let stats = index_library(store, &models, &Progress::new())?;
    println!(
        "indexed with {}: {} views encoded, {} current; {} polyps updated, {} current ({:.1} s)",
        models.version(),
        stats.views_encoded,
        stats.views_current,
        stats.polyps_updated,
        stats.polyps_current,
        started.elapsed().as_secs_f64()
    );
    for p in &stats.problems {
        eprintln!("skipped {p}");
    }
    Ok(())
}

pub fn query(
    store: &Store,
    models: &Path,
    device: &Device,
    images: &[PathBuf],
    k: usize,
    hamming: bool,
) -> Result<()> {
    let started = std::time::Instant::now();
    let models = TwinModels::load(models, device)?;
    let index = TwinIndex::load(store, &models)?;
    let mut decoded = Vec::new();
    for path in images {
        decoded.push(decode_file(path)?.image);
    }
    let views = models.encode_views(&decoded);
    let embedding = models.combine(&views);
    let search = if hamming {
        Search::Hamming
    } else {
        Search::Cosine
    };
    let result = index.query(&embedding, k, search, None);
    println!(
        "{} view(s) -> {} twins of {} indexed polyps ({} search, {:.0} ms end to end)",
        images.len(),
        result.twins.len(),
        index.len(),
        if hamming { "Hamming" } else { "cosine" },
        started.elapsed().as_secs_f64() * 1000.0
    );
    println!("| rank | polyp | pathology | Vienna | size mm | location | similarity | Hamming |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for (i, t) in result.twins.iter().enumerate() {
        let p = &t.polyp;
        println!(
            "| {} | {} | {} | {} | {} | {} | {:.3} | {}/{} |",
            i + 1,
            p.code,
            p.histology.as_deref().unwrap_or("-"),
            p.vienna_class.map_or("-".into(), |v| v.to_string()),
            p.size_mm.map_or("-".into(), |v| format!("{v:.0}")),
            p.location.as_deref().unwrap_or("-"),
            t.similarity,
            t.hamming,
            result.bits
        );
    }
    let shares = |v: &endotwin::retrieval::Vote| {
        v.shares
            .iter()
            .map(|(l, s)| format!("{l} {:.0}%", s * 100.0))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!("vote: {}", shares(&result.vote));
    println!(
        "similarity-weighted vote: {}",
        shares(&result.weighted_vote)
    );
    Ok(())
}

pub fn print_eval(e: &TwinEval, models: &TwinModels, library: &Path) {
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

/// Writes the figures into `twin-image.json`'s evaluation section.
pub fn record_eval(models: &Path, e: &TwinEval, data: &str) -> Result<()> {
    use endotwin::model::weights::{Evaluation, update_card};
    let mut metrics = Vec::new();
    for r in &e.reid {
        let name = format!("{} {}", r.views, r.method);
        metrics.push((format!("{name}: uAP"), r.uap));
        metrics.push((format!("{name}: accuracy@1"), r.accuracy_at_1));
        metrics.push((format!("{name}: recall@P90"), r.recall_at_p90));
    }
    for r in &e.pathology {
        metrics.push((format!("pathology {}: accuracy", r.method), r.accuracy));
        metrics.push((format!("pathology {}: macro-F1", r.method), r.macro_f1));
        metrics.push((format!("pathology {}: AUC", r.method), r.auc));
    }
    let card = models.join(format!("{}.json", endotwin::twins::IMAGE_MODEL));
    update_card(&card, |c| {
        c.evaluation = Some(Evaluation {
            command: std::env::args().collect::<Vec<_>>().join(" "),
            data: data.to_string(),
            metrics,
        })
    })?;
    println!("recorded in {}", card.display());
    Ok(())
}
