//! `endotwin gui` (and no subcommand): the window, optionally opened on a tab and a polyp.

use endotwin::compute::BackendPref;
use std::path::PathBuf;

#[derive(clap::Args, Default)]
pub struct GuiArgs {
    /// Open on this tab: viewer, twins, tracklets, ... (any registered panel's id).
    #[arg(long)]
    tab: Option<String>,
    /// Select the polyp with this code (e.g. S7-E004-P1) at start.
    #[arg(long)]
    polyp: Option<String>,
    /// Select the video with this code (e.g. S7-V01) at start.
    #[arg(long)]
    video: Option<String>,
}

pub fn run(library: PathBuf, pref: BackendPref, args: GuiArgs) -> anyhow::Result<()> {
    let tab = match args.tab.as_deref() {
        None => endotwin::app::Tab::default(),
        Some(id) => endotwin::app::tab_by_id(id).ok_or_else(|| {
            anyhow::anyhow!(
                "unknown tab `{id}`: {}",
                endotwin::app::tab_ids().join(" or ")
            )
        })?,
    };
    let start = endotwin::app::StartView {
        tab,
        polyp: args.polyp,
        video: args.video,
    };
    Ok(endotwin::app::run_native(library, pref, start)?)
}
