//! The eframe GUI. `ui/` draws [`AppState`] and pushes [`Command`]s; `logic` drains the
//! engine's channels and applies the commands. The UI thread never runs burn; panels never
//! read the library (they draw state that the engine and the loader thread filled).

mod captions;
mod choices;
mod command;
mod edits;
pub mod frame_bench;
mod guide;
mod imports;
mod labelling;
mod listing;
mod loading;
mod logic;
mod prompts;
pub mod scale_bench;
mod state;
mod sync;
mod textures;
mod tracklets;
mod training;
mod twins;
mod ui;
pub mod window;
pub use ui::trust::{FAMILIAR_BADGE, UNFAMILIAR_BADGE};

pub use captions::CaptionCommand;
pub use command::Command;
pub use prompts::PromptCommand;
pub use state::{AppState, Edit, LabelField, Selection, Tab, ToastLevel};
pub use sync::{LibrarySync, SYNC_EVERY};
pub use training::TrainingCommand;
pub use ui::panels::{PanelSpec, registry as panels, tab_by_id, tab_ids};

use crate::compute::{self, BackendPref, Compute};
use crate::engine::Engine;
use crate::engine::loader::ImageLoader;
use std::cell::Cell;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use textures::Textures;

pub struct App {
    pub state: AppState,
    engine: Engine,
    loader: ImageLoader,
    textures: Textures,
    commands: Vec<Command>,
    /// Wakes the UI (a repaint) from background threads.
    notify: Arc<dyn Fn() + Send + Sync>,
}

impl App {
    /// Builds the app inside eframe: burn shares egui's wgpu device when one is used; beside
    /// the OpenGL renderer it picks its own adapter, or the CPU. `fallback` says why the
    /// window is not drawn with wgpu, when it was tried first.
    pub fn new(
        cc: &eframe::CreationContext<'_>,
        library: PathBuf,
        pref: BackendPref,
        fallback: Option<String>,
    ) -> App {
        let chosen = match &cc.wgpu_render_state {
            Some(rs) => compute::select_shared(
                pref,
                rs.instance.clone(),
                rs.adapter.clone(),
                rs.device.clone(),
                rs.queue.clone(),
            ),
            None => compute::select_beside_gl(pref),
        };
        let (compute, warning) = match chosen {
            Ok(c) => (c, None),
            Err(e) => (
                Compute::cpu(Some(e.to_string())),
                Some(format!("{e}; running on the CPU")),
            ),
        };
        let mut app = App::with_compute(&cc.egui_ctx, compute, Some(library));
        if cc.wgpu_render_state.is_none() {
            app.state.backend_summary.push_str(" · window: OpenGL");
        }
        if let Some(w) = warning {
            app.state.toast(ToastLevel::Warning, w);
        }
        if let Some(why) = fallback {
            // A warning (also printed): it stays long enough to be read after a slow start.
            app.state.toast(ToastLevel::Warning, why);
        }
        app
    }

    /// Builds the app on a given backend (tests, and `new`).
    pub fn with_compute(ctx: &egui::Context, compute: Compute, library: Option<PathBuf>) -> App {
        let repaint_ctx = ctx.clone();
        let notify: Arc<dyn Fn() + Send + Sync> = Arc::new(move || repaint_ctx.request_repaint());
        let mut state = AppState::new(compute.summary());
        if let Some(note) = &compute.note {
            state.backend_summary = format!("{} ({note})", compute.summary());
        }
        let mut app = App {
            state,
            engine: Engine::start(compute, Some(notify.clone())),
            loader: ImageLoader::start(Some(notify.clone())),
            textures: Textures::default(),
            commands: Vec::new(),
            notify,
        };
        if let Some(path) = library {
            app.apply(Command::OpenLibrary(path));
        }
        app
    }

    /// Queues a command as if the UI had emitted it (tests drive the app this way too).
    pub fn send(&mut self, command: Command) {
        self.commands.push(command);
    }

    /// Runs one round of logic: finished jobs, loaded images, queued commands.
    pub fn tick(&mut self, ctx: &egui::Context) {
        self.poll(ctx);
        for command in std::mem::take(&mut self.commands) {
            self.apply(command);
        }
    }

    /// Whether background jobs are still running (tests wait on this).
    pub fn busy(&self) -> bool {
        !self.engine.active().is_empty()
    }

    /// The Training tab's run, if one was started (tests read its log).
    pub fn training_run(&self) -> Option<&crate::engine::training::TrainingRun> {
        self.state.training.run.as_ref()
    }
}

impl eframe::App for App {
    fn logic(&mut self, ctx: &egui::Context, _frame: &mut eframe::Frame) {
        self.tick(ctx);
    }

    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.draw_frame(ui);
    }
}

impl App {
    /// Draws the whole window into `ui` (the UI reads the state and emits commands).
    pub fn draw_frame(&mut self, ui: &mut egui::Ui) {
        ui::draw(
            ui,
            &self.state,
            self.engine.active(),
            &mut self.textures,
            &mut self.commands,
        );
        if !self.commands.is_empty() || !self.textures.wanted.is_empty() {
            ui.ctx().request_repaint();
        }
    }
}

/// What the window shows first (the README screenshots use it).
#[derive(Debug, Clone, Default)]
pub struct StartView {
    pub tab: Tab,
    /// A polyp code to select.
    pub polyp: Option<String>,
    /// A video code to select (after the polyp, so it wins when both are given).
    pub video: Option<String>,
}

impl App {
    /// Selects the start view's polyp (by code) and tab.
    pub fn start_at(&mut self, start: &StartView) {
        if let Some(code) = &start.polyp {
            let id = self.state.library.as_ref().and_then(|lib| {
                lib.store
                    .polyps()
                    .ok()?
                    .into_iter()
                    .find(|p| &p.code == code)
                    .map(|p| p.id)
            });
            match id {
                Some(id) => self.send(Command::Select(Selection::Polyp(id))),
                None => self.state.toast(
                    ToastLevel::Warning,
                    format!("no polyp {code} in the library"),
                ),
            }
        }
        if let Some(code) = &start.video {
            let id = self.state.library.as_ref().and_then(|lib| {
                let videos = lib.store.videos().ok()?;
                videos.into_iter().find(|v| &v.code == code).map(|v| v.id)
            });
            match id {
                Some(id) => self.send(Command::Select(Selection::Video(id))),
                None => self.state.toast(
                    ToastLevel::Warning,
                    format!("no video {code} in the library"),
                ),
            }
        }
        self.send(Command::ShowTab(start.tab));
    }
}

/// Opens the window on `library`: wgpu first, then OpenGL ([`window::open`]), unless
/// `ENDOTWIN_RENDERER` names one. Returns when the window closes.
pub fn run_native(
    library: PathBuf,
    pref: BackendPref,
    start: StartView,
) -> Result<(), window::WindowError> {
    let renderers =
        window::RendererPref::parse(std::env::var(window::RendererPref::ENV).ok().as_deref())?;
    window::open(renderers, |renderer, failed| {
        let fallback = failed.first().map(|(r, f)| {
            format!(
                "{} could not open the window ({}); it is drawn with {}",
                r.name(),
                f.detail(),
                renderer.name()
            )
        });
        let app_made = Rc::new(Cell::new(false));
        let made = app_made.clone();
        let (library, start) = (library.clone(), start.clone());
        eframe::run_native(
            "EndoTwin",
            native_options(renderer),
            Box::new(move |cc| {
                made.set(true);
                let mut app = App::new(cc, library, pref, fallback);
                app.start_at(&start);
                Ok(Box::new(app))
            }),
        )
        .map_err(|e| window::classify(&e, app_made.get()))
    })
    .map(|_| ())
}

fn native_options(renderer: window::Renderer) -> eframe::NativeOptions {
    let mut wgpu_options = eframe::egui_wgpu::WgpuConfiguration::default();
    if let eframe::egui_wgpu::WgpuSetup::CreateNew(create) = &mut wgpu_options.wgpu_setup {
        create.device_descriptor = Arc::new(compute::shared_device_descriptor);
    }
    eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_title("EndoTwin")
            .with_inner_size([1400.0, 860.0])
            .with_min_inner_size([900.0, 560.0])
            .with_drag_and_drop(true),
        renderer: renderer.into(),
        wgpu_options,
        ..Default::default()
    }
}
