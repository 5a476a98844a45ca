//! A training step's memory, estimated before a run starts: a batch too big for the machine
//! is refused with a clear message (and the largest batch that fits) before anything is
//! written, instead of the process dying mid-epoch. The estimate counts the f32 values a
//! step's forward pass makes (every layer's activations, attention maps included), times
//! what the backward pass keeps and makes beside them; it is meant to catch a batch that
//! cannot fit, not to predict the last megabyte.

use super::recipe::{OptionKind, RecipeError, RecipeOption, Settings};
use crate::model::text::TextEncoderConfig;
use crate::model::vit::VitConfig;

/// Bytes of one f32.
const F32: f64 = 4.0;
/// The backward pass keeps the forward's values and makes gradients and temporaries of
/// about their size.
const BACKWARD: f64 = 3.0;

/// Values a pre-norm transformer's forward makes over `tokens` tokens: per block the two
/// norms, q/k/v, the attention scores and their softmax, the attention output and its
/// projection, two residual sums and the MLP's hidden layer before and after its activation.
pub fn transformer(tokens: usize, width: usize, depth: usize, heads: usize, mlp: f64) -> f64 {
    let (t, w) = (tokens as f64, width as f64);
    depth as f64 * (t * w * 9.0 + 2.0 * heads as f64 * t * t + 2.0 * t * w * mlp)
}

/// A ViT's forward on `tokens` tokens (patches + class token), its patch embedding included.
pub fn vit(cfg: &VitConfig, tokens: usize) -> f64 {
    let pixels = 3.0 * (cfg.image_size * cfg.image_size) as f64;
    pixels + transformer(tokens, cfg.width, cfg.depth, cfg.heads, cfg.mlp_ratio)
}

/// A text encoder's forward over its whole context.
pub fn text(cfg: &TextEncoderConfig) -> f64 {
    transformer(cfg.context, cfg.width, cfg.depth, cfg.heads, cfg.mlp_ratio)
}

/// One (image, text) pair through a CLIP dual encoder.
pub fn dual(clip: &crate::model::clip::ClipConfig) -> f64 {
    let image = match &clip.vision {
        crate::model::twin_encoder::TwinEncoderConfig::Vit(v) => vit(v, v.patches() + 1),
        crate::model::twin_encoder::TwinEncoderConfig::Backbone(b) => {
            // Its activations, summed over the layers, are about 6x the input's at 224 px.
            7.0 * 3.0 * (b.image_size * b.image_size) as f64
        }
    };
    image + text(&clip.text)
}

/// A convolution stack's forward on one `size` px image: each stage's output (conv, norm,
/// activation) at half the previous resolution.
pub fn cnn(size: usize, channels: &[usize]) -> f64 {
    let mut side = size as f64;
    let mut values = 3.0 * side * side;
    for &c in channels {
        values += 3.0 * c as f64 * side * side;
        side = (side / 2.0).max(1.0);
    }
    values
}

/// Bytes of one step of `items` items of `values_per_item` forward values each.
pub fn step_bytes(values_per_item: f64, items: usize) -> u64 {
    (values_per_item * items as f64 * F32 * BACKWARD) as u64
}

/// The `memory-gb` option every recipe offers.
pub fn memory_option() -> RecipeOption {
    RecipeOption::new(
        "memory-gb",
        OptionKind::Number,
        None,
        "Refuse to start when one step would need more memory than this (GB; default: the \
         memory free now when training on the CPU, unchecked on a GPU)",
    )
}

/// The bytes a step may take: `--memory-gb` when given, else `machine` (the caller's: the free
/// memory when tensors live in main memory); `None`: not checked.
pub fn budget(
    settings: &Settings,
    options: &[RecipeOption],
    machine: Option<u64>,
) -> Result<Option<u64>, RecipeError> {
    match settings.path(options, "memory-gb") {
        Some(_) => {
            let gb = settings.number(options, "memory-gb")?;
            if !(gb > 0.0 && gb.is_finite()) {
                return Err(RecipeError::Setting(format!(
                    "--memory-gb {gb}: give a positive number of GB"
                )));
            }
            Ok(Some((gb * 1e9) as u64))
        }
        None => Ok(machine),
    }
}

/// Refuses a step of `items` items of `values_per_item` values each (what the `flag` option
/// sets) when it needs more than `budget` bytes; the message names the largest that fits.
pub fn check(
    recipe: &str,
    flag: &str,
    items: usize,
    values_per_item: f64,
    budget: Option<u64>,
) -> Result<(), RecipeError> {
    let Some(budget) = budget else {
        return Ok(());
    };
    let needed = step_bytes(values_per_item, items);
    if needed <= budget {
        return Ok(());
    }
    let per_item = step_bytes(values_per_item, 1).max(1);
    let fits = budget / per_item;
    let gb = |b: u64| b as f64 / 1e9;
    let advice = if fits >= 2 {
        format!("lower --{flag} to {fits} or less")
    } else {
        "even the smallest batch does not fit: use a smaller model or input size".to_string()
    };
    Err(RecipeError::Setting(format!(
        "--{flag} {items}: one step of {recipe} needs about {:.1} GB and {:.1} GB may be used \
         (--memory-gb to change it); {advice}. Nothing was started.",
        gb(needed),
        gb(budget)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_that_fits_passes_and_one_that_does_not_names_the_batch_that_fits() {
        // 1e6 values an item: 12 MB a step-item with the backward pass.
        assert!(check("r", "batch", 10, 1e6, Some(200_000_000)).is_ok());
        assert!(check("r", "batch", 1_000_000, 1e6, None).is_ok());
        let e = check("r", "batch", 100, 1e6, Some(120_000_000))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--batch 100") && e.contains("lower --batch to 10 or less"),
            "{e}"
        );
        let e = check("r", "batch", 2, 1e9, Some(1_000))
            .unwrap_err()
            .to_string();
        assert!(e.contains("even the smallest batch"), "{e}");
    }

    #[test]
    fn attention_grows_with_the_square_of_the_tokens() {
        let small = transformer(100, 64, 2, 4, 4.0);
        let large = transformer(1000, 64, 2, 4, 4.0);
        assert!(large > 10.0 * small);
    }
}
