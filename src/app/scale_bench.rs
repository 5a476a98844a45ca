//! `endotwin bench frames --library DIR`: the GUI on a large library (e.g. one made by
//! `endotwin demo --scale 100000`): cold start to the first frame with the browser filled,
//! frames while the browser scrolls, a search typed into the browser, the twin models' and
//! the index's load by themselves, the Twins tab's first answer, a twin query on a selected polyp (encoding included), and frames
//! while the map shows every polyp. The CPU side of each frame (logic, layout, tessellation).

use super::frame_bench::{FramePhase, frame_with, paced_frames};
use super::state::{Selection, Tab};
use super::{App, Command};
use crate::compute::Compute;
use std::path::Path;
use std::time::{Duration, Instant};

pub fn large_library(
    library: &Path,
    seconds: f64,
    say: &mut dyn FnMut(&str),
) -> Result<Vec<FramePhase>, String> {
    // Opened once first, so a library that cannot open (missing, damaged) is refused by its
    // reason, not by the GUI's empty state.
    drop(
        crate::store::Store::open(library, crate::store::OpenMode::Existing)
            .map_err(|e| e.to_string())?,
    );
    let ctx = egui::Context::default();
    let mut phases = Vec::new();
    say("cold start...");
    let started = Instant::now();
    let mut app = App::with_compute(&ctx, Compute::cpu(None), Some(library.to_path_buf()));
    frame_with(&ctx, &mut app, Vec::new());
    let lib = app
        .state
        .library
        .as_ref()
        .ok_or("the library did not open")?;
    let (rows, polyps) = (lib.rows.len(), lib.stats.polyps);
    phases.push(once(
        &format!("cold start to first frame ({polyps} polyps, {rows} browser lines)"),
        started.elapsed(),
        2000.0,
    ));
    say("scrolling the browser...");
    let over_browser = egui::Event::PointerMoved(egui::pos2(150.0, 500.0));
    let times = paced_frames(&ctx, &mut app, seconds, |_| {
        vec![
            over_browser.clone(),
            egui::Event::MouseWheel {
                unit: egui::MouseWheelUnit::Point,
                delta: egui::vec2(0.0, -400.0),
                phase: egui::TouchPhase::Move,
                modifiers: egui::Modifiers::NONE,
                source: egui::MouseWheelSource::Wheel,
            },
        ]
    });
    phases.push(summary("browser scrolling (400 px a frame)", times, 16.0));
    say("searching...");
    let mut filter = app.state.filter.clone();
    let mut times = Vec::new();
    for text in ["S0", "S00", "S001", "S0012", "adenoma", "sigmoid", ""] {
        filter.text = text.into();
        let start = Instant::now();
        app.send(Command::SetFilter(filter.clone()));
        frame_with(&ctx, &mut app, Vec::new());
        times.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    phases.push(summary(
        "search typed (filter applied + frame)",
        times,
        50.0,
    ));
    say("loading the twin models and the index by themselves...");
    {
        use crate::twins::{TwinIndex, TwinModels};
        let device = Compute::cpu(None).device;
        let start = Instant::now();
        let models =
            TwinModels::load(&app.state.twins.models_dir, &device).map_err(|e| e.to_string())?;
        phases.push(once(
            "twin models load (cards, weights, coder)",
            start.elapsed(),
            1000.0,
        ));
        let store = crate::store::Store::open(library, crate::store::OpenMode::Existing)
            .map_err(|e| e.to_string())?;
        let start = Instant::now();
        let index = TwinIndex::load(&store, &models).map_err(|e| e.to_string())?;
        let took = start.elapsed();
        phases.push(once(
            &format!(
                "index load ({} polyps: embeddings, codes, polyps, views)",
                index.len()
            ),
            took,
            1000.0,
        ));
        let start = Instant::now();
        let _ = index.map();
        phases.push(once(
            "map of every polyp (PCA on a sample, all projected)",
            start.elapsed(),
            1000.0,
        ));
    }
    say("Twins tab: loading the index and the first answer...");
    let first = app
        .state
        .library
        .as_ref()
        .and_then(|l| l.tree.iter().find_map(|n| n.polyps.first().map(|p| p.id)))
        .ok_or("the library has no polyps (in any examination)")?;
    app.send(Command::Select(Selection::Polyp(first)));
    app.send(Command::ShowTab(Tab::TWINS));
    let start = Instant::now();
    let answer_ms = wait_for_answer(&ctx, &mut app, None)?;
    phases.push(once(
        &format!(
            "Twins tab opened: models, index, map and first answer (engine {answer_ms:.0} ms)"
        ),
        start.elapsed(),
        2000.0,
    ));
    say("twin queries on selected polyps...");
    let ids: Vec<i64> = app
        .state
        .library
        .as_ref()
        .map(|l| {
            let all: Vec<i64> = l
                .tree
                .iter()
                .flat_map(|n| n.polyps.iter().map(|p| p.id))
                .collect();
            let step = (all.len() / 10).max(1);
            all.into_iter().step_by(step).skip(1).take(9).collect()
        })
        .unwrap_or_default();
    let mut times = Vec::new();
    let mut engine = Vec::new();
    for id in ids {
        let before = app.state.twins.answer.as_ref().map(|a| a.millis);
        let start = Instant::now();
        app.send(Command::Select(Selection::Polyp(id)));
        engine.push(wait_for_answer(&ctx, &mut app, before)?);
        times.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    };
    let engine_median = median(&mut engine);
    phases.push(summary(
        &format!("twin query, selection to answer shown (engine median {engine_median:.0} ms)"),
        times,
        100.0,
    ));
    say("frames with the map of every polyp...");
    let times = paced_frames(&ctx, &mut app, seconds, |_| Vec::new());
    phases.push(summary("Twins tab, the map of every polyp", times, 16.0));
    Ok(phases)
}

/// Frames until a new twin answer (its engine time differs from `before`) is shown; returns
/// the engine's milliseconds for it.
fn wait_for_answer(ctx: &egui::Context, app: &mut App, before: Option<f64>) -> Result<f64, String> {
    let start = Instant::now();
    loop {
        frame_with(ctx, app, Vec::new());
        if let Some(a) = &app.state.twins.answer
            && app.state.twins.running.is_none()
            && Some(a.millis) != before
        {
            return Ok(a.millis);
        }
        if let Some(p) = &app.state.twins.problem {
            return Err(format!("no twins: {p}"));
        }
        if start.elapsed() > Duration::from_secs(600) {
            return Err("no twin answer in 10 minutes".into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn once(name: &str, took: Duration, target_ms: f64) -> FramePhase {
    summary(name, vec![took.as_secs_f64() * 1000.0], target_ms)
}

fn summary(name: &str, times: Vec<f64>, target_ms: f64) -> FramePhase {
    FramePhase::of_times(name, times, 0, target_ms)
}
