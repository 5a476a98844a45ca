//! `endotwin train image-encoder`: the CLI edge of the training loop: progress bar, one line
//! per epoch, checkpoints, `--resume`, the run and its metrics recorded in the library, and
//! the final encoder saved with its model card.

use anyhow::{Context, Result};
use burn::optim::AdamWConfig;
use burn::tensor::Device;
use endotwin::model::vit::VitConfig;
use endotwin::model::weights::{self, ModelCard, ModelKind, Training};
use endotwin::store::{self, OpenMode, Store};
use endotwin::train::image_encoder::{self, ImageEncoderTrainingConfig, TwinImageModel};
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
    pub device: Device,
}

struct CliEvents<'a> {
    bar: ProgressBar,
    checkpoints: PathBuf,
    config: &'a ImageEncoderTrainingConfig,
    store: &'a mut Store,
    run_id: i64,
}

impl TrainEvents<TwinImageModel> for CliEvents<'_> {
    fn step(&mut self, epoch: usize, step: usize, steps: usize, loss: f64) {
        self.bar.set_length((self.config.epochs * steps) as u64);
        self.bar.set_position((epoch * steps + step + 1) as u64);
        self.bar
            .set_message(format!("epoch {} loss {loss:.3}", epoch + 1));
    }

    fn epoch(
        &mut self,
        report: &EpochReport,
        checkpoint: &Checkpoint<TwinImageModel>,
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
                report.epoch, self.config.epochs, report.seconds
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
        .with_seed(args.seed);
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
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} steps {msg} [{elapsed} < {eta}]")
            .expect("template"),
    );
    let started = Instant::now();
    let mut events = CliEvents {
        bar,
        checkpoints: checkpoints.clone(),
        config: &config,
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
