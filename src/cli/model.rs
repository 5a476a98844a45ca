//! `endotwin model import-hf-clip|promote|demote`: a Hugging Face CLIP checkpoint to a model card + record; the library's active models.

use anyhow::Result;
use endotwin::compute::BackendPref;
use std::path::PathBuf;

#[derive(clap::Subcommand)]
pub enum ModelWhat {
    /// Read a `CLIPModel` model.safetensors (config.json beside it is used when present) and
    /// write `<out>/<name>.json` (model card) and `<out>/<name>.bpk` (burn record).
    ImportHfClip {
        weights: PathBuf,
        #[arg(long, default_value = "models")]
        out: PathBuf,
        #[arg(long, default_value = "clip-vit-b32")]
        name: String,
    },
    /// Make a finished training run's model the library's active one for its capability (as
    /// the Training tab's Promote does); the twin index is rebuilt when the twin encoder changed.
    Promote {
        /// The run's number (`#N` in the Training tab).
        run: i64,
    },
    /// Put back the model NAME (twin-image, tracklet-head, captions, prompts, ...) had before
    /// its last promotion.
    Demote { name: String },
}

pub fn run(library: &std::path::Path, pref: BackendPref, what: ModelWhat) -> Result<()> {
    use endotwin::engine::promote;
    let reindex = |name: &str| -> Result<()> {
        let compute = endotwin::compute::select(pref)?;
        let progress = endotwin::plumbing::Progress::new();
        if let Some((stats, version)) =
            promote::reindex_after(library, name, &compute.device, &progress)
                .map_err(anyhow::Error::msg)?
        {
            println!(
                "twin index rebuilt with {version}: {} views encoded, {} polyps updated",
                stats.views_encoded, stats.polyps_updated
            );
        }
        Ok(())
    };
    match what {
        ModelWhat::Promote { run } => {
            let store = endotwin::store::Store::open(library, endotwin::store::OpenMode::Existing)?;
            let Some(card) = store.run_card(run)? else {
                anyhow::bail!("run #{run} saved no model (only finished runs can be promoted)");
            };
            drop(store);
            let p = promote::promote(library, std::path::Path::new(&card), Some(run))?;
            println!(
                "{} in {} is now run #{run}'s model ({card}){}",
                p.name,
                p.dir.display(),
                if p.kept_previous {
                    "; the previous one is kept for demote"
                } else {
                    ""
                }
            );
            reindex(&p.name)
        }
        ModelWhat::Demote { name } => {
            promote::demote(library, &name)?;
            println!("{name}: the model before the last promotion is back");
            reindex(&name)
        }
        ModelWhat::ImportHfClip { weights, out, name } => {
            let (path, config) = endotwin::model::hf_clip::import_to_card(&weights, &out, &name)?;
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
    }
}
