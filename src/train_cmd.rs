//! `endotwin train image-encoder`: the CLI edge of the training loop: progress bar, one line
//! per epoch, checkpoints, `--resume`, the run and its metrics recorded in the library, and
//! the final encoder saved with its model card.

use anyhow::{Context, Result};
use burn::module::Module;
use burn::optim::AdamWConfig;
use burn::store::ModuleSnapshot;
use burn::tensor::Device;
use endotwin::model::scene::SceneEncoderConfig;
use endotwin::model::vit::VitConfig;
use endotwin::model::weights::{self, ModelCard, ModelKind, Training};
use endotwin::store::{self, OpenMode, Store};
use endotwin::train::image_encoder::{self, ImageEncoderTrainingConfig};
use endotwin::train::scene_encoder::{self, SceneEncoderTrainingConfig, ViewFeatures};
use endotwin::train::{Checkpoint, EpochReport, TrainError, TrainEvents, data};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;
use std::time::Instant;

pub struct ImageEncoderArgs {
    pub library: PathBuf,
    pub out: PathBuf,
    pub name: String,
    pub epochs: usize,
    pub batch: usize,
    pub lr: f64,
    pub seed: u64,
    pub resume: bool,
    pub view_positives: bool,
    pub device: Device,
}

/// Progress bar, one line per epoch, checkpoints and the run's metrics in the library: the
/// same for every training loop.
struct CliEvents<'a, C> {
    bar: ProgressBar,
    checkpoints: PathBuf,
    /// The training config, saved with each checkpoint.
    config: &'a C,
    epochs: usize,
    store: &'a mut Store,
    run_id: i64,
}

impl<M, C> TrainEvents<M> for CliEvents<'_, C>
where
    M: Module + ModuleSnapshot,
    C: serde::Serialize,
{
    fn step(&mut self, epoch: usize, step: usize, steps: usize, loss: f64) {
        self.bar.set_length((self.epochs * steps) as u64);
        self.bar.set_position((epoch * steps + step + 1) as u64);
        self.bar
            .set_message(format!("epoch {} loss {loss:.3}", epoch + 1));
    }

    fn epoch(
        &mut self,
        report: &EpochReport,
        checkpoint: &Checkpoint<M>,
    ) -> Result<(), TrainError> {
        checkpoint.save(&self.checkpoints, self.config)?;
        let line = report
            .metrics
            .iter()
            .map(|(n, v)| format!("{n} {v:.4}"))
            .collect::<Vec<_>>()
            .join(", ");
        // Printed even when stderr is not a terminal (the bar then hides itself).
        self.bar.suspend(|| {
            eprintln!(
                "epoch {}/{}: {line} ({:.0} s)",
                report.epoch, self.epochs, report.seconds
            )
        });
        let run = self.run_id;
        self.store
            .write(|tx| {
                for (name, value) in &report.metrics {
                    store::log_metric(tx, run, report.epoch, 0, name, *value)?;
                }
                store::log_metric(tx, run, report.epoch, 0, "seconds", report.seconds)
            })
            .map_err(|e| TrainError::Checkpoint(format!("cannot record metrics: {e}")))
    }
}

pub fn image_encoder(args: ImageEncoderArgs, command_line: String) -> Result<()> {
    let config = ImageEncoderTrainingConfig::new(VitConfig::twin_small())
        .with_epochs(args.epochs)
        .with_batch(args.batch)
        .with_lr(args.lr)
        .with_seed(args.seed)
        .with_view_positives(args.view_positives);
    let mut store = Store::open(&args.library, OpenMode::Existing)?;
    // A little above the encoder's resolution, so random crops keep detail.
    let size = (config.encoder.image_size as f32 * 1.25) as u32;
    let (samples, polyps) = data::polyp_view_samples(&store, size)?;
    let distinct = {
        let mut p = polyps.clone();
        p.dedup();
        p.len()
    };
    eprintln!(
        "{} polyp views of {distinct} polyps from {}; backend {:?}",
        samples.len(),
        args.library.display(),
        args.device
    );
    let device = args.device.clone().autodiff();
    let checkpoints = args.out.join(format!("{}.checkpoints", args.name));
    std::fs::create_dir_all(&checkpoints)
        .with_context(|| format!("cannot create {}", checkpoints.display()))?;
    let start = if args.resume {
        let c = Checkpoint::load(
            &checkpoints,
            &config,
            config.init(&device),
            AdamWConfig::new()
                .with_weight_decay(config.weight_decay as f32)
                .init(),
        )?;
        eprintln!("resuming after epoch {}", c.epoch);
        Some(c)
    } else {
        None
    };
    let config_json = serde_json::to_string(&config)?;
    let run_id = store.write(|tx| store::start_run(tx, None, "image-encoder", &config_json))?;
    let started = Instant::now();
    let mut events = CliEvents {
        bar: progress_bar(),
        checkpoints: checkpoints.clone(),
        config: &config,
        epochs: config.epochs,
        store: &mut store,
        run_id,
    };
    let result = image_encoder::train(&config, &samples, &device, start, &mut events);
    events.bar.finish_and_clear();
    let status = match &result {
        Ok(_) => "finished",
        Err(TrainError::Cancelled { .. }) => "cancelled",
        Err(_) => "failed",
    };
    store.write(|tx| store::finish_run(tx, run_id, status))?;
    let model = result?;
    let wall = started.elapsed().as_secs_f64();
    let last = store
        .run_metrics(run_id)?
        .into_iter()
        .filter(|(e, _, _)| *e == config.epochs)
        .map(|(_, n, v)| (n, v))
        .collect();
    let encoder = image_encoder::encoder_of(&model);
    let mut card = ModelCard::new(
        &args.name,
        ModelKind::ImageEncoder,
        &format!("run-{run_id}"),
        "Polyp-aware ViT image encoder (EndoFinder): SSCD contrastive + entropy + polyp-aware \
         masked reconstruction. Input: ImageNet-normalised RGB at the config's image size. \
         Output: the projected CLS embedding; L2-normalise it, its signs are the binary code.",
        &config.encoder,
    );
    card.training = Some(Training {
        command: command_line,
        seed: args.seed,
        data: format!(
            "{} polyp views of {distinct} polyps in {}",
            samples.len(),
            args.library.display()
        ),
        epochs: config.epochs,
        wall: format!("{wall:.0} s on {}", endotwin::bench::machine()),
        metrics: last,
    });
    let path = weights::save(&encoder, &card, &args.out)?;
    println!("saved {} ({:.0} s)", path.display(), wall);
    Ok(())
}

pub struct SceneEncoderArgs {
    pub library: PathBuf,
    pub models: PathBuf,
    pub name: String,
    pub epochs: usize,
    pub batch: usize,
    pub seed: u64,
    pub resume: bool,
    pub device: Device,
}

fn progress_bar() -> ProgressBar {
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} steps {msg} [{elapsed} < {eta}]")
            .expect("template"),
    );
    bar
}

pub fn scene_encoder(args: SceneEncoderArgs, command_line: String) -> Result<()> {
    let plain = args.device.clone();
    let image_path = args
        .models
        .join(format!("{}.json", endotwin::twins::IMAGE_MODEL));
    let (encoder, image_card) =
        weights::load(&image_path, ModelKind::ImageEncoder, |c: &VitConfig| {
            c.init(&plain)
        })
        .with_context(|| "the scene encoder trains on a frozen image encoder: train that first")?;
    let image: VitConfig = image_card.config(&image_path)?;
    let config =
        SceneEncoderTrainingConfig::new(SceneEncoderConfig::new(image.output_dim()), image.clone())
            .with_epochs(args.epochs)
            .with_batch(args.batch)
            .with_seed(args.seed);
    let mut store = Store::open(&args.library, OpenMode::Existing)?;
    let size = (image.image_size as f32 * 1.25) as u32;
    let (samples, polyps) = data::polyp_view_samples(&store, size)?;
    eprintln!(
        "encoding {} views x {} copies with the frozen image encoder ({})...",
        samples.len(),
        config.copies,
        image_card.version
    );
    let features = ViewFeatures::compute(&encoder, &image, &samples, &polyps, &config, &plain);
    eprintln!("{} polyps with 2 or more views", features.polyps());
    let device = args.device.clone().autodiff();
    let checkpoints = args.models.join(format!("{}.checkpoints", args.name));
    std::fs::create_dir_all(&checkpoints)
        .with_context(|| format!("cannot create {}", checkpoints.display()))?;
    let start = if args.resume {
        let c = Checkpoint::load(
            &checkpoints,
            &config,
            config.init(&device),
            AdamWConfig::new()
                .with_weight_decay(config.weight_decay as f32)
                .init(),
        )?;
        eprintln!("resuming after epoch {}", c.epoch);
        Some(c)
    } else {
        None
    };
    let config_json = serde_json::to_string(&config)?;
    let run_id = store.write(|tx| store::start_run(tx, None, "scene-encoder", &config_json))?;
    let started = Instant::now();
    let mut events = CliEvents {
        bar: progress_bar(),
        checkpoints,
        config: &config,
        epochs: config.epochs,
        store: &mut store,
        run_id,
    };
    let result = scene_encoder::train(&config, &features, &device, start, &mut events);
    events.bar.finish_and_clear();
    let status = match &result {
        Ok(_) => "finished",
        Err(TrainError::Cancelled { .. }) => "cancelled",
        Err(_) => "failed",
    };
    store.write(|tx| store::finish_run(tx, run_id, status))?;
    let model = result?;
    let wall = started.elapsed().as_secs_f64();
    let last = store
        .run_metrics(run_id)?
        .into_iter()
        .filter(|(e, _, _)| *e == config.epochs)
        .map(|(_, n, v)| (n, v))
        .collect();
    let mut card = ModelCard::new(
        &args.name,
        ModelKind::SceneEncoder,
        &format!("run-{run_id}"),
        &format!(
            "Scene encoder (EndoFinder): fuses the unit view embeddings of {} {} into one unit \
             polyp embedding; trained with scene contrastive + entropy + cross-attention \
             reconstruction.",
            image_card.name, image_card.version
        ),
        &config.scene,
    );
    card.training = Some(Training {
        command: command_line,
        seed: args.seed,
        data: format!(
            "{} polyps ({} views) in {}",
            features.polyps(),
            samples.len(),
            args.library.display()
        ),
        epochs: config.epochs,
        wall: format!("{wall:.0} s on {}", endotwin::bench::machine()),
        metrics: last,
    });
    let path = weights::save(&model.scene.valid(), &card, &args.models)?;
    println!("saved {} ({:.0} s)", path.display(), wall);
    Ok(())
}
