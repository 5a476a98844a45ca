//! `endotwin model trust`: fit a model's familiarity (and its confidence calibration) on the
//! data it learned from and in-domain validation data, and store them in its card.

use anyhow::Result;
use endotwin::compute::BackendPref;
use endotwin::engine::trust::{Libraries, refit};
use endotwin::plumbing::Progress;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct TrustArgs {
    /// The model's card (rewritten in place: its `familiarity` and `calibration`).
    pub card: PathBuf,
    /// Libraries holding the data the model learned from (default: --library).
    #[arg(long = "fit", num_args = 1..)]
    pub fit: Vec<PathBuf>,
    /// In-domain libraries the model never trained on: the threshold and the calibration are
    /// chosen on them together with the held-out share of --fit. Never a test split.
    #[arg(long = "validation", num_args = 1..)]
    pub validation: Vec<PathBuf>,
    /// Every N-th item of the --fit libraries is held out of the fit and joins the validation
    /// data (0: none held out; then --validation is required).
    #[arg(long, default_value_t = 5)]
    pub hold_out_every: usize,
    /// Text-prompt models: frames read per library at most (spread over its examinations).
    #[arg(long, default_value_t = 4000)]
    pub frames: usize,
    /// An image encoder card is the tracklet comparisons' frame encoder (`tracklet-frames`):
    /// fit its familiarity on the frames of the libraries' tracklets, cut as the tracklet
    /// comparisons cut them, instead of on polyp views. Tracklet heads always are.
    #[arg(long)]
    pub tracklets: bool,
}

pub fn run(library: &std::path::Path, pref: BackendPref, args: TrustArgs) -> Result<()> {
    let libraries = Libraries {
        fit: if args.fit.is_empty() {
            vec![library.to_path_buf()]
        } else {
            args.fit.clone()
        },
        validation: args.validation.clone(),
        every: args.hold_out_every,
        frames: args.frames,
        tracklets: args.tracklets,
        models: Vec::new(),
    };
    let compute = super::compute(pref)?;
    let started = std::time::Instant::now();
    let done = refit(&args.card, &libraries, &compute.device, &Progress::new())
        .map_err(anyhow::Error::msg)?;
    for line in done.lines {
        println!("{line}");
    }
    println!(
        "{} updated ({:.0} s)",
        args.card.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
