//! `endotwin bench frames`: how long the GUI takes to make a frame (its logic, layout and
//! tessellation; the GPU's drawing is not included) while nothing runs and while a training
//! run goes on the same cores, on the Training tab that draws the run's live curves. The
//! training run is a tracklet run on a small phantom library made in a temporary folder.

use super::{App, Command, Tab, TrainingCommand};
use crate::compute::Compute;
use std::time::{Duration, Instant};

/// The frame times of one phase.
#[derive(Debug, Clone)]
pub struct FramePhase {
    pub name: String,
    pub frames: usize,
    pub median_ms: f64,
    pub p95_ms: f64,
    pub max_ms: f64,
    /// Training steps finished during the phase.
    pub steps: usize,
    /// What a frame (or, for one-off phases, the operation) should take at most.
    pub target_ms: Option<f64>,
}

/// Frames at up to 60 per second for `seconds` idle, then for `seconds` while training.
pub fn frame_times(seconds: f64, say: &mut dyn FnMut(&str)) -> Result<Vec<FramePhase>, String> {
    let dir = tempfile_dir()?;
    let library = dir.0.join("library");
    say("making a small phantom library with videos...");
    {
        use crate::data::phantom::{self, PhantomConfig};
        let mut store =
            crate::store::Store::open(&library, crate::store::OpenMode::CreateIfMissing)
                .map_err(|e| e.to_string())?;
        let cfg = PhantomConfig {
            seed: 5,
            polyps: 4,
            views_per_polyp: 4,
            videos: 2,
            frames_per_video: 400,
            background_frames: 0,
            capsule_images: 0,
            image_size: 48,
            video_size: 64,
            ..PhantomConfig::default()
        };
        phantom::generate(&mut store, &cfg, &crate::plumbing::Progress::new())
            .map_err(|e| e.to_string())?;
    }
    let ctx = egui::Context::default();
    let mut app = App::with_compute(&ctx, Compute::cpu(None), Some(library));
    app.send(Command::ShowTab(Tab("training")));
    let set = |name: &str, value: String| {
        Command::Training(TrainingCommand::SetOption {
            name: name.into(),
            value: Some(value),
        })
    };
    app.send(Command::Training(TrainingCommand::Recipe(
        "tracklets".into(),
    )));
    for (name, value) in [("epochs", "1000"), ("anchors", "4"), ("size", "32")] {
        app.send(set(name, value.into()));
    }
    app.send(set("out", dir.0.join("models").display().to_string()));
    let mut phases = Vec::new();
    say("idle frames...");
    phases.push(phase("idle (Training tab)", &ctx, &mut app, seconds));
    app.send(Command::Training(TrainingCommand::Start));
    say("frames while training...");
    // The run's first steps: its data loads before the curve starts.
    let started = Instant::now();
    while app.training_run().is_none_or(|r| r.log().losses.is_empty()) {
        if started.elapsed() > Duration::from_secs(300) {
            return Err("the training run made no step in 5 minutes".into());
        }
        if app.training_run().is_some_and(|r| r.finished()) {
            return Err(format!(
                "the training run ended: {:?}",
                app.training_run().and_then(|r| r.log().outcome.clone())
            ));
        }
        frame(&ctx, &mut app);
        std::thread::sleep(Duration::from_millis(16));
    }
    phases.push(phase(
        "training (live curves drawn)",
        &ctx,
        &mut app,
        seconds,
    ));
    app.send(Command::Training(TrainingCommand::Stop));
    while app.training_run().is_some_and(|r| !r.finished()) {
        frame(&ctx, &mut app);
        std::thread::sleep(Duration::from_millis(16));
    }
    drop(app);
    Ok(phases)
}

/// The bench's temporary folder, removed however the bench ends.
struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tempfile_dir() -> Result<TempDir, String> {
    let dir = std::env::temp_dir().join(format!("endotwin-bench-frames-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(TempDir(dir))
}

/// One frame: logic, layout, tessellation. Returns its milliseconds.
fn frame(ctx: &egui::Context, app: &mut App) -> f64 {
    frame_with(ctx, app, Vec::new())
}

/// One frame with these input events (a scroll, typed text).
pub(super) fn frame_with(ctx: &egui::Context, app: &mut App, events: Vec<egui::Event>) -> f64 {
    let start = Instant::now();
    let input = egui::RawInput {
        screen_rect: Some(egui::Rect::from_min_size(
            egui::Pos2::ZERO,
            egui::vec2(1400.0, 860.0),
        )),
        events,
        ..Default::default()
    };
    app.tick(ctx);
    let mut output = ctx.run_ui(input, |ui| app.draw_frame(ui));
    let _ = ctx.tessellate(output.shapes, output.pixels_per_point);
    // No renderer takes the textures here.
    output.textures_delta.clear();
    start.elapsed().as_secs_f64() * 1000.0
}

fn phase(name: &str, ctx: &egui::Context, app: &mut App, seconds: f64) -> FramePhase {
    let steps_before = app.training_run().map_or(0, |r| r.log().losses.len());
    let times = paced_frames(ctx, app, seconds, |_| Vec::new());
    let steps = app.training_run().map_or(0, |r| r.log().losses.len()) - steps_before;
    FramePhase::of_times(name, times, steps, 16.0)
}

/// Frames for `seconds` at up to 60 a second (as on a display), each with the events `input`
/// gives for its number; their milliseconds.
pub(super) fn paced_frames(
    ctx: &egui::Context,
    app: &mut App,
    seconds: f64,
    mut input: impl FnMut(usize) -> Vec<egui::Event>,
) -> Vec<f64> {
    let mut times = Vec::new();
    let start = Instant::now();
    while start.elapsed().as_secs_f64() < seconds {
        let ms = frame_with(ctx, app, input(times.len()));
        times.push(ms);
        let left = 1000.0 / 60.0 - ms;
        if left > 0.0 {
            std::thread::sleep(Duration::from_secs_f64(left / 1000.0));
        }
    }
    times
}

impl FramePhase {
    /// The median, 95th percentile and worst of `times` (ms).
    pub(super) fn of_times(name: &str, mut times: Vec<f64>, steps: usize, target_ms: f64) -> Self {
        times.sort_by(f64::total_cmp);
        let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
        FramePhase {
            name: name.into(),
            frames: times.len(),
            median_ms: at(0.5),
            p95_ms: at(0.95),
            max_ms: *times.last().unwrap_or(&f64::NAN),
            steps,
            target_ms: Some(target_ms),
        }
    }
}
