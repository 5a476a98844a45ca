//! Opening the window on whatever driver the machine has: wgpu first (Vulkan, Metal, DX12,
//! or wgpu's own OpenGL ES through EGL), then eframe's glow renderer (OpenGL through EGL or
//! GLX), and when neither opens it one line that says what is missing and how to install it.
//! The choice is [`next_step`], a pure function of the attempts so far; [`open`] runs it.
//! Compute is chosen apart from this (`App::new`): on the wgpu renderer burn shares its
//! device, on glow burn picks its own adapter or the CPU, as the CLI does.

/// A way to draw the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renderer {
    /// egui-wgpu: Vulkan, Metal or DX12 (or wgpu's OpenGL ES through EGL).
    Wgpu,
    /// eframe's glow renderer: OpenGL through EGL or GLX.
    Glow,
}

impl Renderer {
    /// The name the final message and the status bar use.
    pub fn name(self) -> &'static str {
        match self {
            Renderer::Wgpu => "wgpu",
            Renderer::Glow => "OpenGL",
        }
    }
}

/// Which renderers to try: `ENDOTWIN_RENDERER` = auto (both, wgpu first), wgpu or gl.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RendererPref {
    #[default]
    Auto,
    Only(Renderer),
}

impl RendererPref {
    /// Environment variable that forces one renderer.
    pub const ENV: &'static str = "ENDOTWIN_RENDERER";

    /// The preference an `ENDOTWIN_RENDERER` value names (`None`: unset, so `Auto`).
    pub fn parse(value: Option<&str>) -> Result<RendererPref, WindowError> {
        match value.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
            None | Some("" | "auto") => Ok(RendererPref::Auto),
            Some("wgpu" | "vulkan") => Ok(RendererPref::Only(Renderer::Wgpu)),
            Some("gl" | "glow" | "opengl") => Ok(RendererPref::Only(Renderer::Glow)),
            Some(other) => Err(WindowError::BadPreference(other.to_string())),
        }
    }

    /// The renderers to try, in order.
    pub fn order(self) -> &'static [Renderer] {
        match self {
            RendererPref::Auto => &[Renderer::Wgpu, Renderer::Glow],
            RendererPref::Only(Renderer::Wgpu) => &[Renderer::Wgpu],
            RendererPref::Only(Renderer::Glow) => &[Renderer::Glow],
        }
    }
}

/// Why one attempt to open the window failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The renderer found no usable driver, adapter, surface or context: another may work.
    Driver(String),
    /// No display server to open a window on (no DISPLAY or WAYLAND_DISPLAY): none will.
    NoDisplay(String),
    /// The app itself failed to start: not the renderer's doing.
    App(String),
}

impl Failure {
    /// What the renderer or the window system said.
    pub fn detail(&self) -> String {
        match self {
            Failure::Driver(e) | Failure::NoDisplay(e) | Failure::App(e) => one_line(e),
        }
    }
}

/// What to do after the attempts so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    Try(Renderer),
    /// Give up with this one line.
    GiveUp(String),
}

/// What to install when no renderer opens the window.
pub const INSTALL_HINT: &str = if cfg!(target_os = "linux") {
    "install Vulkan (`sudo apt-get install mesa-vulkan-drivers`) or OpenGL \
     (`sudo apt-get install libgl1-mesa-dri libegl1`), or your GPU vendor's driver"
} else {
    "install or update your GPU's driver (Vulkan, Metal or DirectX 12, or OpenGL)"
};

/// The next renderer to try after `failed` (in the order tried), or the one line to end with.
pub fn next_step(pref: RendererPref, failed: &[(Renderer, Failure)]) -> Next {
    for (_, failure) in failed {
        match failure {
            Failure::NoDisplay(e) => {
                return Next::GiveUp(format!(
                    "no display to open the window on ({}): run it in a desktop session \
                     (DISPLAY or WAYLAND_DISPLAY set); the other commands need none \
                     (`endotwin --help`)",
                    one_line(e)
                ));
            }
            Failure::App(e) => {
                return Next::GiveUp(format!("the window failed: {}", one_line(e)));
            }
            Failure::Driver(_) => {}
        }
    }
    let tried = |r: Renderer| failed.iter().any(|(f, _)| *f == r);
    if let Some(next) = pref.order().iter().find(|r| !tried(**r)) {
        return Next::Try(*next);
    }
    let details: Vec<String> = failed
        .iter()
        .map(|(r, f)| format!("{}: {}", r.name(), f.detail()))
        .collect();
    let forced = match pref {
        RendererPref::Auto => String::new(),
        RendererPref::Only(r) => format!(
            " ({}={} tried {} only)",
            RendererPref::ENV,
            if r == Renderer::Wgpu { "wgpu" } else { "gl" },
            r.name()
        ),
    };
    Next::GiveUp(format!(
        "no GPU driver for the window{forced}: {INSTALL_HINT} [{}]",
        details.join("; ")
    ))
}

/// `text` on one line, runs of white space as one space.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// What an eframe error says about an attempt that never reached the app (once the app was
/// made, a failure is the app's: the window is not opened again on another renderer).
pub fn classify(error: &eframe::Error, app_made: bool) -> Failure {
    let text = error.to_string();
    match error {
        _ if app_made => Failure::App(text),
        eframe::Error::AppCreation(_) => Failure::App(text),
        // The event loop is made before any renderer: it fails without a display server.
        eframe::Error::WinitEventLoop(_) => Failure::NoDisplay(text),
        _ => Failure::Driver(text),
    }
}

/// The window could not be opened (or failed), in one line.
#[derive(Debug, thiserror::Error)]
pub enum WindowError {
    #[error("ENDOTWIN_RENDERER must be auto, wgpu or gl, not '{0}'")]
    BadPreference(String),
    #[error("{0}")]
    GaveUp(String),
}

/// Runs the chain: `attempt(renderer, failed so far)` opens the window with that renderer
/// and returns when it closes. Returns the renderer that drew it.
pub fn open(
    pref: RendererPref,
    mut attempt: impl FnMut(Renderer, &[(Renderer, Failure)]) -> Result<(), Failure>,
) -> Result<Renderer, WindowError> {
    let mut failed = Vec::new();
    loop {
        match next_step(pref, &failed) {
            Next::GiveUp(line) => return Err(WindowError::GaveUp(line)),
            Next::Try(renderer) => match attempt(renderer, &failed) {
                Ok(()) => return Ok(renderer),
                Err(failure) => failed.push((renderer, failure)),
            },
        }
    }
}

impl From<Renderer> for eframe::Renderer {
    fn from(r: Renderer) -> eframe::Renderer {
        match r {
            Renderer::Wgpu => eframe::Renderer::Wgpu,
            Renderer::Glow => eframe::Renderer::Glow,
        }
    }
}
