//! The window's renderer chain (`app::window`): wgpu first, OpenGL when wgpu opens nothing,
//! and one line that says what to install when neither does.

use endotwin::app::window::{
    Failure, INSTALL_HINT, Next, Renderer, RendererPref, WindowError, next_step, open,
};

const NO_SURFACE: &str = "WGPU error: Failed to create surface for any enabled backend: {}";

#[test]
fn wgpu_is_tried_first_and_opengl_when_wgpu_fails() {
    assert_eq!(
        next_step(RendererPref::Auto, &[]),
        Next::Try(Renderer::Wgpu)
    );
    let failed = [(Renderer::Wgpu, Failure::Driver(NO_SURFACE.into()))];
    assert_eq!(
        next_step(RendererPref::Auto, &failed),
        Next::Try(Renderer::Glow)
    );
}

#[test]
fn when_no_renderer_opens_the_window_one_line_says_what_to_install() {
    let failed = [
        (Renderer::Wgpu, Failure::Driver(NO_SURFACE.into())),
        (
            Renderer::Glow,
            Failure::Driver("glutin error:\n  no EGL or GLX display".into()),
        ),
    ];
    let Next::GiveUp(line) = next_step(RendererPref::Auto, &failed) else {
        panic!("gave up expected");
    };
    assert!(!line.contains('\n'), "{line}");
    assert!(
        line.starts_with("no GPU driver for the window: install "),
        "{line}"
    );
    assert!(line.contains(INSTALL_HINT), "{line}");
    if cfg!(target_os = "linux") {
        assert!(
            line.contains("`sudo apt-get install mesa-vulkan-drivers`")
                && line.contains("OpenGL (`sudo apt-get install libgl1-mesa-dri libegl1`)"),
            "{line}"
        );
    }
    // What each renderer said comes after, for a bug report: never the bare wgpu error alone.
    assert!(
        line.ends_with(&format!(
            "[wgpu: {NO_SURFACE}; OpenGL: glutin error: no EGL or GLX display]"
        )),
        "{line}"
    );
}

#[test]
fn a_forced_renderer_is_the_only_one_tried_and_the_line_says_so() {
    let only_gl = RendererPref::parse(Some("gl")).unwrap();
    assert_eq!(only_gl, RendererPref::Only(Renderer::Glow));
    assert_eq!(next_step(only_gl, &[]), Next::Try(Renderer::Glow));
    let failed = [(Renderer::Glow, Failure::Driver("no GL".into()))];
    let Next::GiveUp(line) = next_step(only_gl, &failed) else {
        panic!("gave up expected");
    };
    assert!(
        line.starts_with("no GPU driver for the window (ENDOTWIN_RENDERER=gl tried OpenGL only): "),
        "{line}"
    );
    let only_wgpu = RendererPref::parse(Some(" WGPU ")).unwrap();
    let failed = [(Renderer::Wgpu, Failure::Driver(NO_SURFACE.into()))];
    assert!(matches!(next_step(only_wgpu, &failed), Next::GiveUp(_)));
    assert_eq!(RendererPref::parse(None).unwrap(), RendererPref::Auto);
    assert_eq!(RendererPref::parse(Some("")).unwrap(), RendererPref::Auto);
    let bad = RendererPref::parse(Some("dx9")).unwrap_err();
    assert!(matches!(bad, WindowError::BadPreference(_)));
    assert_eq!(
        bad.to_string(),
        "ENDOTWIN_RENDERER must be auto, wgpu or gl, not 'dx9'"
    );
}

#[test]
fn no_display_or_a_failing_app_ends_at_once_without_another_renderer() {
    let failed = [(
        Renderer::Wgpu,
        Failure::NoDisplay(
            "winit EventLoopError: neither WAYLAND_DISPLAY nor DISPLAY is set".into(),
        ),
    )];
    let Next::GiveUp(line) = next_step(RendererPref::Auto, &failed) else {
        panic!("gave up expected");
    };
    assert!(
        line.starts_with("no display to open the window on ("),
        "{line}"
    );
    assert!(line.contains("endotwin --help"), "{line}");
    let failed = [(Renderer::Wgpu, Failure::App("surface lost".into()))];
    assert_eq!(
        next_step(RendererPref::Auto, &failed),
        Next::GiveUp("the window failed: surface lost".into())
    );
}

#[test]
fn open_runs_the_chain_and_tells_each_attempt_what_failed_before() {
    let mut seen = Vec::new();
    let drawn = open(RendererPref::Auto, |renderer, before| {
        seen.push((renderer, before.len()));
        match renderer {
            Renderer::Wgpu => Err(Failure::Driver(NO_SURFACE.into())),
            Renderer::Glow => Ok(()),
        }
    })
    .unwrap();
    assert_eq!(drawn, Renderer::Glow);
    assert_eq!(seen, [(Renderer::Wgpu, 0), (Renderer::Glow, 1)]);
    let err = open(RendererPref::Auto, |_, _| {
        Err(Failure::Driver("nothing".into()))
    })
    .unwrap_err();
    assert!(matches!(err, WindowError::GaveUp(_)));
    assert!(
        err.to_string()
            .starts_with("no GPU driver for the window: ")
    );
}
