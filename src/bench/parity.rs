//! `endotwin bench parity`: the shipped models run on the library's polyp views on the CPU
//! and on a wgpu adapter, and how far apart their outputs are (largest and mean absolute
//! difference per value) with each device's time for the same work. The GPU answer is the
//! CPU answer when the difference is far below what a decision reads (cosines, votes).

use crate::captions::model as caption_model;
use crate::model::preprocess::Focus;
use crate::model::weights::WeightsError;
use crate::prompts::{model as prompt_model, query as prompt_query};
use crate::store::{Store, StoreError};
use crate::twins::{self, TwinError, TwinModels};
use burn::tensor::{Device, Tensor};
use image::DynamicImage;
use std::path::Path;
use std::time::Instant;

#[derive(Debug, thiserror::Error)]
pub enum ParityError {
    #[error(transparent)]
    Twin(#[from] TwinError),
    #[error(transparent)]
    Weights(#[from] WeightsError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Prompt(#[from] prompt_query::PromptError),
    #[error("the library has no polyp views to compare on")]
    NoViews,
}

/// One model's outputs on both devices.
#[derive(Debug, Clone)]
pub struct ParityRow {
    /// The card's name and what was compared ("twin-image: view embeddings").
    pub model: String,
    pub inputs: usize,
    /// Values compared (inputs x output width).
    pub values: usize,
    pub max_abs: f32,
    pub mean_abs: f32,
    /// Wall time of the same work on each device, the first run (kernels compiled, weights
    /// uploaded) and a second, ms.
    pub cpu_ms: [f64; 2],
    pub gpu_ms: [f64; 2],
}

/// The first `limit` polyp views of `store` (each with where its polyp is).
fn views(store: &Store, limit: usize) -> Result<Vec<(DynamicImage, Focus)>, ParityError> {
    let mut out = Vec::new();
    for polyp in store.polyps()? {
        for view in store.polyp_views(polyp.id)? {
            if out.len() == limit {
                return Ok(out);
            }
            out.push(twins::load_view(store, &view)?);
        }
    }
    if out.is_empty() {
        return Err(ParityError::NoViews);
    }
    Ok(out)
}

fn flat(t: Tensor<2>) -> Vec<f32> {
    t.into_data().try_to_vec::<f32>().expect("f32 outputs")
}

/// Runs `work` twice on each device and compares the second outputs.
fn compare(
    model: String,
    inputs: usize,
    cpu: &Device,
    gpu: &Device,
    work: impl Fn(&Device, bool) -> Result<Vec<f32>, ParityError>,
) -> Result<ParityRow, ParityError> {
    let timed = |device: &Device, on_gpu: bool| -> Result<([f64; 2], Vec<f32>), ParityError> {
        let start = Instant::now();
        work(device, on_gpu)?;
        let first = start.elapsed().as_secs_f64() * 1000.0;
        let start = Instant::now();
        let out = work(device, on_gpu)?;
        Ok(([first, start.elapsed().as_secs_f64() * 1000.0], out))
    };
    let (cpu_ms, a) = timed(cpu, false)?;
    let (gpu_ms, b) = timed(gpu, true)?;
    assert_eq!(a.len(), b.len(), "the same model gives the same shapes");
    let diffs = a.iter().zip(&b).map(|(x, y)| (x - y).abs());
    let max_abs = diffs.clone().fold(0.0f32, f32::max);
    let mean_abs = diffs.sum::<f32>() / a.len().max(1) as f32;
    Ok(ParityRow {
        model,
        inputs,
        values: a.len(),
        max_abs,
        mean_abs,
        cpu_ms,
        gpu_ms,
    })
}

/// Every shipped model found in `models` on the first `limit` views of `store`, CPU against
/// `gpu`. Models absent from the folder are skipped; `report` runs after each row.
pub fn parity(
    store: &Store,
    models: &Path,
    cpu: &Device,
    gpu: &Device,
    limit: usize,
    mut report: impl FnMut(&ParityRow),
) -> Result<Vec<ParityRow>, ParityError> {
    let views = views(store, limit)?;
    let images: Vec<DynamicImage> = views.iter().map(|(i, _)| i.clone()).collect();
    let n = views.len();
    let mut rows = Vec::new();
    let mut push = |row: ParityRow| {
        report(&row);
        rows.push(row);
    };
    for (card, what, frames) in [
        ("twin-image", "view embeddings", false),
        ("tracklet-frames", "view embeddings", true),
    ] {
        if !models.join(format!("{card}.json")).is_file() {
            continue;
        }
        let load = |device: &Device| match frames {
            true => TwinModels::load_frames(models, device),
            false => TwinModels::load(models, device),
        };
        let (on_cpu, on_gpu) = (load(cpu)?, load(gpu)?);
        push(compare(format!("{card}: {what}"), n, cpu, gpu, |_, g| {
            let m = if g { &on_gpu } else { &on_cpu };
            let (z, scores) = m.encode_views_judged(&views);
            let mut out: Vec<f32> = z.into_iter().flatten().collect();
            // The familiarity scores come from the same pass: compare them too, scaled to
            // their threshold so "1" is the line between familiar and not.
            if let (Some(s), Some(f)) = (scores, &m.image_card.familiarity) {
                out.extend(s.iter().map(|x| x / f.threshold));
            }
            Ok(out)
        })?);
    }
    let caption_path = caption_model::shipped_path(models);
    if caption_path.is_file() {
        let (on_cpu, on_gpu) = (
            caption_model::load(&caption_path, cpu)?,
            caption_model::load(&caption_path, gpu)?,
        );
        push(compare(
            "captions: image embeddings".into(),
            n,
            cpu,
            gpu,
            |d, g| {
                let m = if g { &on_gpu } else { &on_cpu };
                Ok(flat(crate::captions::query::image_embeddings(
                    &m.model, &m.config, &images, d,
                )))
            },
        )?);
    }
    let texts: Vec<String> = crate::prompts::default_prompt_sets()
        .into_iter()
        .flat_map(|s| s.prompts)
        .collect();
    for name in ["prompts", "prompts-detect"] {
        let path = models.join(format!("{name}.json"));
        if !path.is_file() {
            continue;
        }
        let (on_cpu, on_gpu) = (
            prompt_model::load(&path, cpu)?,
            prompt_model::load(&path, gpu)?,
        );
        // A detector reads its two sentences alone (the others are refused).
        let texts: Vec<String> = if prompt_model::is_detector_only(&on_cpu.config) {
            vec![
                prompt_model::POLYP_SENTENCE.to_string(),
                prompt_model::BACKGROUND_SENTENCE.to_string(),
            ]
        } else {
            texts.clone()
        };
        push(compare(
            format!("{name}: image and prompt embeddings"),
            n + texts.len(),
            cpu,
            gpu,
            |d, g| {
                let m = if g { &on_gpu } else { &on_cpu };
                let mut out = flat(prompt_query::image_embeddings(m, &images, d));
                out.extend(flat(prompt_query::text_embeddings(m, &texts, d)?));
                Ok(out)
            },
        )?);
    }
    Ok(rows)
}
