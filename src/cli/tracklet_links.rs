//! `endotwin tracklets`: a video's tracklets compared as the Tracklets tab compares them, the
//! re-identification links at the link threshold, the polyp count, and how far the answer can
//! be trusted (each unfamiliar link's `unfamiliar:` line, the video's count).

use anyhow::{Context, Result};
use endotwin::compute::BackendPref;
use endotwin::plumbing::Progress;
use endotwin::store::{OpenMode, Store};
use endotwin::tracklets::timeline::{Comparison, Timeline, build};
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct LinksArgs {
    /// Video codes (default: every video of the library).
    videos: Vec<String>,
    /// Models folder (default: the shipped one).
    #[arg(long)]
    models: Option<PathBuf>,
    /// How tracklets are compared: best (what the Tracklets tab uses), scene, head, mean,
    /// histogram or encoder.
    #[arg(long, default_value = "best")]
    compare_by: String,
    /// Link threshold (default: the comparison's own).
    #[arg(long)]
    threshold: Option<f32>,
    /// Also write the answers as JSON here (tracklets, links, familiarity).
    #[arg(long)]
    json: Option<PathBuf>,
}

fn comparison(name: &str) -> Result<Comparison> {
    Ok(match name {
        "best" => Comparison::Best,
        "scene" => Comparison::TwinScene,
        "head" => Comparison::TrackletHead,
        "mean" => Comparison::TwinMean,
        "histogram" => Comparison::ColourHistogram,
        "encoder" => Comparison::TrackletEncoder,
        other => anyhow::bail!(
            "--compare-by {other}: one of best, scene, head, mean, histogram, encoder"
        ),
    })
}

pub fn run(library: &Path, pref: BackendPref, args: LinksArgs) -> Result<()> {
    let wanted = comparison(&args.compare_by)?;
    if let Some(t) = args.threshold
        && !(-1.0..=1.0).contains(&t)
    {
        anyhow::bail!("--threshold {t}: a cosine similarity between -1 and 1");
    }
    let compute = super::compute(pref)?;
    let store = Store::open(library, OpenMode::Existing)?;
    if let Some(dir) = &args.models {
        super::check_models_folder(dir)?;
    }
    let models = args
        .models
        .unwrap_or_else(|| endotwin::engine::promote::models_dir_for(library));
    // A video named twice is one video (round 9 N40: it was built and printed twice).
    for (i, code) in args.videos.iter().enumerate() {
        if args.videos[..i].contains(code) {
            anyhow::bail!("video {code} is named twice; name each video once (nothing was run)");
        }
    }
    let all = store.videos()?;
    let videos: Vec<_> = if args.videos.is_empty() {
        all
    } else {
        args.videos
            .iter()
            .map(|code| {
                all.iter()
                    .find(|v| &v.code == code)
                    .cloned()
                    .with_context(|| {
                        format!(
                            "no video '{code}' in {}",
                            endotwin::store::library_name(library)
                        )
                    })
            })
            .collect::<Result<_>>()?
    };
    if videos.is_empty() {
        anyhow::bail!("{} holds no video", endotwin::store::library_name(library));
    }
    let mut cache = Default::default();
    let mut answers = Vec::new();
    for v in &videos {
        let tl = build(
            &store,
            v.id,
            (&models, wanted),
            &compute.device,
            &Progress::new(),
            &mut cache,
        )?;
        let threshold = args.threshold.unwrap_or(tl.suggested_threshold);
        print(&tl, threshold);
        answers.push(json(&tl, threshold));
    }
    if let Some(path) = &args.json {
        let out = serde_json::json!({ "models": models, "videos": answers });
        super::write_output(path, serde_json::to_string_pretty(&out)?.as_bytes())?;
    }
    Ok(())
}

fn name(tl: &Timeline, i: usize) -> String {
    let t = &tl.tracklets[i];
    format!("T{} (frames {}-{})", t.id, t.first_frame, t.last_frame)
}

fn print(tl: &Timeline, threshold: f32) {
    println!(
        "video {}: {} tracklets; similarity: {}",
        tl.video_code,
        tl.tracklets.len(),
        tl.method
    );
    for note in &tl.notes {
        println!("note: {note}");
    }
    let links = tl.links(threshold);
    println!("links at similarity >= {threshold:.2}: {}", links.len());
    for l in &links {
        let score = l.score.map_or("-".into(), |s| format!("{s:.3}"));
        let decision = l
            .decision
            .map_or(String::new(), |d| format!(" ({})", d.as_str()));
        println!("  {} - {}: {score}{decision}", name(tl, l.a), name(tl, l.b));
        if let Some(j) = l.familiarity.as_ref().filter(|j| j.unfamiliar) {
            println!("  {}", j.line());
        }
    }
    println!(
        "polyps: {} by grouping at {threshold:.2}",
        tl.grouping(threshold).groups.len()
    );
    match (tl.familiarity_at(threshold), &tl.judged_by) {
        (Some(f), _) => {
            if f.unfamiliar() {
                println!("{}", f.worst.line());
            } else {
                println!(
                    "familiar: {} scores at most {:.2} (threshold {:.2})",
                    f.model, f.worst.score, f.worst.threshold
                );
            }
            println!("familiarity: {}", f.summary());
        }
        (None, Some(model)) if tl.judged_with_statistics => {
            println!("familiarity: no tracklet of this video was compared, so {model} judged none")
        }
        (None, Some(model)) => println!(
            "familiarity: not fitted for {model} (`endotwin model trust`): nothing says whether these tracklets are like its training data"
        ),
        (None, None) => println!(
            "familiarity: {} has no model to judge it",
            tl.comparison.title()
        ),
    }
}

fn json(tl: &Timeline, threshold: f32) -> serde_json::Value {
    let links: Vec<_> = tl
        .links(threshold)
        .into_iter()
        .map(|l| {
            serde_json::json!({
                "a": tl.tracklets[l.a].id,
                "b": tl.tracklets[l.b].id,
                "similarity": l.score,
                "decision": l.decision.map(|d| d.as_str()),
                "familiarity": l.familiarity,
            })
        })
        .collect();
    let tracklets: Vec<_> = tl
        .tracklets
        .iter()
        .enumerate()
        .map(|(i, t)| {
            serde_json::json!({
                "id": t.id,
                "first_frame": t.first_frame,
                "last_frame": t.last_frame,
                "polyp": t.polyp_code,
                "familiarity": tl.familiarity[i],
            })
        })
        .collect();
    serde_json::json!({
        "video": tl.video_code,
        "method": tl.method,
        "threshold": threshold,
        "polyps": tl.grouping(threshold).groups.len(),
        "tracklets": tracklets,
        "links": links,
        "familiarity": tl.familiarity_at(threshold),
        "judged_by": tl.judged_by,
        "notes": tl.notes,
    })
}
