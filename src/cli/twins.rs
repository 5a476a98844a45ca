//! `endotwin index` and `endotwin twins`: the digital-twin capability from the command line.

use anyhow::{Context, Result};
use endotwin::compute::BackendPref;
use endotwin::data::images::decode_file;
use endotwin::model::preprocess::Focus;
use endotwin::plumbing::Progress;
use endotwin::store::{OpenMode, Store};
use endotwin::twins::{Search, TwinIndex, TwinModels, index_library, query_images};
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct IndexArgs {
    #[arg(long)]
    models: Option<PathBuf>,
}

/// The most views one twin query reads (EndoFinder's sets have 2 to 8 of a polyp).
const MAX_QUERY_VIEWS: usize = 16;

#[derive(clap::Args)]
pub struct TwinsArgs {
    #[arg(required = true)]
    images: Vec<PathBuf>,
    #[arg(long)]
    models: Option<PathBuf>,
    #[arg(long, default_value_t = 6)]
    k: usize,
    /// Exact cosine over every float embedding (default: the 100 nearest sign codes by
    /// Hamming distance, re-ranked by cosine).
    #[arg(long, conflicts_with_all = ["hamming", "asymmetric"])]
    cosine: bool,
    /// Search the sign codes by Hamming distance only.
    #[arg(long, conflicts_with = "asymmetric")]
    hamming: bool,
    /// Score the float query against the library's sign codes (asymmetric hashing).
    #[arg(long)]
    asymmetric: bool,
    /// Where the polyp is in every view: x,y,w,h in pixels (the crop centres on it);
    /// default: the centred field of view.
    // One value: `--box 10,10,20,20 IMAGE` leaves the image an image (round 8 N7: a list of
    // numbers took the image's path as its next number).
    #[arg(long = "box", value_name = "X,Y,W,H", allow_hyphen_values = true)]
    polyp_box: Option<String>,
    /// Also write the answer as JSON here: the twins, the votes, the winner's calibrated
    /// confidence and the familiarity of the views.
    #[arg(long)]
    json: Option<PathBuf>,
}

pub fn index(library: &Path, pref: BackendPref, args: IndexArgs) -> Result<()> {
    let compute = super::compute(pref)?;
    let mut store = Store::open(library, OpenMode::Existing)?;
    let dir = args
        .models
        .unwrap_or_else(|| endotwin::engine::promote::models_dir_for(library));
    let models = TwinModels::load(&dir, &compute.device)?;
    let started = std::time::Instant::now();
    let stats = index_library(&mut store, &models, &Progress::new())?;
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

/// The smallest polyp box (pixels a side) a twin query takes.
const MIN_BOX: f32 = 4.0;

pub fn query(library: &Path, pref: BackendPref, args: TwinsArgs) -> Result<()> {
    if args.k == 0 {
        anyhow::bail!("--k 0 retrieves nothing: ask for at least one twin");
    }
    // Views of one polyp: every view is held until the query is encoded, so their number is
    // bounded before any is read (round 8 N33: 300 views grew past 4.7 GB).
    if args.images.len() > MAX_QUERY_VIEWS {
        anyhow::bail!(
            "{} views given: a twin query takes at most {MAX_QUERY_VIEWS} views of one polyp; \
             nothing was queried",
            args.images.len()
        );
    }
    // One image given twice is one view (round 9 N5: `twins a.png a.png ./a.png` was three
    // views), as `import endofinder` refuses a view listed twice.
    for (i, path) in args.images.iter().enumerate() {
        if let Some(first) = args.images[..i].iter().find(|p| super::same_file(p, path)) {
            anyhow::bail!(
                "{} and {} are one image: a view counts once in a twin query; nothing was queried",
                first.display(),
                path.display()
            );
        }
    }
    let started = std::time::Instant::now();
    let numbers = args
        .polyp_box
        .as_deref()
        .map(|text| {
            text.split(',')
                .map(|v| {
                    v.trim().parse::<f32>().map_err(|_| {
                        anyhow::anyhow!(
                            "--box {text}: '{}' is not a number; give x,y,w,h in pixels",
                            v.trim()
                        )
                    })
                })
                .collect::<Result<Vec<f32>>>()
        })
        .transpose()?;
    let focus = match numbers.as_deref() {
        Some(&[x, y, w, h])
            if [x, y, w, h].iter().all(|v| v.is_finite()) && w >= MIN_BOX && h >= MIN_BOX =>
        {
            Focus::Box([x, y, w, h])
        }
        Some(b) if b.len() != 4 => anyhow::bail!(
            "--box takes one box, x,y,w,h (four numbers, used in every view); {} given",
            b.len()
        ),
        // Round 7 N16: NaN was answered with "a positive width and height".
        Some(b) if b.iter().any(|v| !v.is_finite()) => {
            anyhow::bail!("--box {b:?}: every number must be finite (no NaN or inf)")
        }
        // A box of a pixel or less holds no polyp to compare (round 10 N24: `0,0,1e-30,1e-30`
        // was answered).
        Some(b) => anyhow::bail!(
            "--box {b:?}: give x,y,w,h with a width and height of at least {MIN_BOX} pixels"
        ),
        None => Focus::FieldOfView,
    };
    let mut decoded = Vec::new();
    // The same picture under two names is one view too (round 14 N23: a copy counted as a
    // second view): compared by its pixels once decoded.
    let mut pictures: Vec<(String, &Path)> = Vec::new();
    for path in &args.images {
        let image = decode_file(path).with_context(|| path.display().to_string())?;
        // The whole image is the region compared when no --box is given: held to the box's
        // least size (round 15 N14: a 2x2 box was refused, a 2x2 image answered).
        let (w, h) = (image.image.width(), image.image.height());
        if (w as f32) < MIN_BOX || (h as f32) < MIN_BOX {
            anyhow::bail!(
                "{}: {w} x {h} pixels holds no polyp to compare (a view, as a --box, is at least {MIN_BOX} pixels a side); nothing was queried",
                path.display()
            );
        }
        let pixels = format!(
            "{}x{}:{}",
            image.image.width(),
            image.image.height(),
            endotwin::store::content_hash(image.image.as_bytes())
        );
        if let Some((_, first)) = pictures.iter().find(|(p, _)| *p == pixels) {
            anyhow::bail!(
                "{} and {} are one image (the same pixels): a view counts once in a twin query; nothing was queried",
                first.display(),
                path.display()
            );
        }
        pictures.push((pixels, path));
        if let Focus::Box([x, y, w, h]) = focus {
            let (iw, ih) = (image.image.width() as f32, image.image.height() as f32);
            if !(x >= 0.0 && y >= 0.0 && x + w <= iw + 0.5 && y + h <= ih + 0.5) {
                anyhow::bail!(
                    "--box {x},{y},{w},{h} is not inside {} ({iw} x {ih} pixels): nothing was queried",
                    path.display()
                );
            }
        }
        decoded.push(endotwin::model::preprocess::bounded(image.image, focus));
    }
    let compute = super::compute(pref)?;
    let store = Store::open(library, OpenMode::Existing)?;
    let dir = args
        .models
        .unwrap_or_else(|| endotwin::engine::promote::models_dir_for(library));
    let models = TwinModels::load(&dir, &compute.device)?;
    let index = TwinIndex::load(&store, &models)?;
    let search = match (args.cosine, args.hamming, args.asymmetric) {
        (true, _, _) => Search::Cosine,
        (_, true, _) => Search::Hamming,
        (_, _, true) => Search::Asymmetric,
        _ => Search::Shortlist,
    };
    let (result, _, scores) = query_images(&models, &index, &decoded, args.k, search, &[])?;
    let familiarity = endotwin::twins::trust::judge(&models, scores.as_deref());
    let confidence = endotwin::twins::trust::vote_confidence(&models, &result.vote);
    println!(
        "{} view(s), {} -> {} twins of {} indexed polyps ({} search, {:.0} ms end to end)",
        args.images.len(),
        match focus {
            Focus::Box(_) => "cropped around --box",
            Focus::FieldOfView => "centred field of view (no --box)",
        },
        result.twins.len(),
        index.len(),
        match search {
            Search::Hamming => "Hamming",
            Search::Asymmetric => "codes with a float query",
            Search::Cosine => "cosine",
            Search::Shortlist => "Hamming shortlist, cosine re-rank",
        },
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
    match (confidence, result.vote.winner()) {
        (Some(c), Some(w)) => println!(
            "confidence in {w} (calibrated on validation votes): {:.0}%",
            c * 100.0
        ),
        _ => println!(
            "confidence: not calibrated for {} (the vote shares are not probabilities)",
            models.image_card.name
        ),
    }
    print_familiarity(familiarity.as_ref(), &models.image_card.name);
    if let Some(path) = &args.json {
        let json = serde_json::json!({
            "views": args.images,
            "twins": result.twins.iter().map(|t| serde_json::json!({
                "polyp": t.polyp.code,
                "histology": t.polyp.histology,
                "vienna": t.polyp.vienna_class,
                "similarity": t.similarity,
                "hamming": t.hamming,
            })).collect::<Vec<_>>(),
            "vote": result.vote.shares,
            "weighted_vote": result.weighted_vote.shares,
            "confidence": confidence,
            "familiarity": familiarity,
            "model": models.version(),
        });
        super::write_output(path, serde_json::to_string_pretty(&json)?.as_bytes())?;
    }
    Ok(())
}

/// The `unfamiliar:` line when the input is beyond the model's threshold; a `familiar:` line
/// otherwise; a note when the model has no familiarity statistics.
pub fn print_familiarity(judgement: Option<&endotwin::trust::Judgement>, model: &str) {
    match judgement {
        Some(j) if j.unfamiliar => println!("{}", j.line()),
        Some(j) => println!(
            "familiar: {} scores {:.2} (threshold {:.2})",
            j.model, j.score, j.threshold
        ),
        None => println!(
            "familiarity: not fitted for {model}, or fitted on another representation (`endotwin model trust` refits it): nothing says whether this input is like its training data"
        ),
    }
}
