//! `endotwin model import-hf-clip`: a Hugging Face CLIP checkpoint to a model card + record.

use anyhow::Result;
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
}

pub fn run(what: ModelWhat) -> Result<()> {
    match what {
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
