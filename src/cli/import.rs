//! `endotwin import <layout> <path>`: an engine import job with a progress bar.

use anyhow::{Context, Result};
use endotwin::compute::BackendPref;
use endotwin::data::import::{ImportLayout, ImportOptions};
use endotwin::engine::{Engine, Job, JobOutput};
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct ImportArgs {
    /// The layout of the source.
    #[arg(value_enum)]
    layout: ImportLayout,
    /// The folder (or manifest) to import.
    path: PathBuf,
    /// Abort the whole import, writing nothing, when any item is bad (default: skip it).
    #[arg(long)]
    strict: bool,
    /// Apply labels (histology, Vienna class, size, captions, boxes, ...) that differ from
    /// the library's, writing one audit row each; by default the library's are kept and the
    /// differences listed.
    #[arg(long)]
    update_labels: bool,
    /// Lay the boxes of a COCO sidecar (`coco` layout) onto this video, already in the
    /// library (e.g. a recording imported with `import video`); its `images[]` need only
    /// `id` and `frame_id`.
    #[arg(long, value_name = "VIDEO_CODE")]
    onto_video: Option<String>,
    /// Follow symbolic links that lead outside the folder (data kept on another disk); by
    /// default they are refused, each named. A link back to a folder above it (a loop) is
    /// refused either way.
    #[arg(long)]
    follow_links: bool,
}

pub fn run(library: &Path, pref: BackendPref, args: ImportArgs) -> Result<()> {
    let ImportArgs {
        layout,
        path,
        strict,
        update_labels,
        onto_video,
        follow_links,
    } = args;
    if !path.exists() {
        anyhow::bail!("{}: no such file or folder", path.display());
    }
    let compute = super::compute(pref)?;
    let mut engine = Engine::start(compute, None);
    let options = ImportOptions {
        strict,
        update_labels,
        follow_links,
    };
    let job = match onto_video {
        Some(video) if layout == ImportLayout::Coco => Job::ImportBoxes {
            path: path.clone(),
            video,
            options,
        },
        Some(_) => anyhow::bail!("--onto-video takes boxes in the coco layout only"),
        None => Job::Import {
            layout,
            path: path.clone(),
            options,
        },
    };
    let handle = engine.submit(
        format!("import {}", path.display()),
        library.to_path_buf(),
        job,
    )?;
    let bar = super::stage_bar();
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
            for c in &report.label_changes {
                eprintln!("{} {c}", if c.applied { "updated" } else { "conflict" });
            }
            if report.nothing_imported() {
                anyhow::bail!(
                    "nothing imported from {}: {}",
                    endotwin::plumbing::input::shown_path(&path),
                    report.summary()
                );
            }
            println!(
                "imported {}: {}",
                endotwin::plumbing::input::shown_path(&path),
                report.summary()
            );
            Ok(())
        }
        other => Err(anyhow::anyhow!("unexpected job output {other:?}")).context("import"),
    }
}
