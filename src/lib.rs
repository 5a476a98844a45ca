//! EndoTwin: a desktop clinical review tool for colonoscopy. See README.md for the map.

pub mod app;
pub mod bench;
pub mod captions;
pub mod compute;
pub mod data;
pub mod engine;
pub mod eval;
pub mod labels;
pub mod model;
pub mod plumbing;
pub mod prompts;
pub mod retrieval;
pub mod store;
pub mod tracklets;
pub mod train;
pub mod trust;
pub mod twins;

/// Where a default folder (`sample_db/`, `models/`) was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// Named by an environment variable.
    Env,
    /// In the working directory.
    WorkingDir,
    /// Beside the executable (an unpacked release archive, `scripts/bundle.sh`).
    BesideExe,
    /// The source tree's (compiled in): read from, never written to by default.
    SourceTree,
}

/// The default folder `name`: $`var`, else `name` in the working directory, else beside the
/// executable, else in the source tree. `usable` says whether a candidate folder is one.
fn locate(
    var: &str,
    name: &str,
    usable: impl Fn(&std::path::Path) -> bool,
) -> (std::path::PathBuf, Found) {
    // An empty variable (`ENDOTWIN_MODELS=`) is as if unset: it names no folder (round 7 N21:
    // "no digital-twin image encoder in : train one").
    if let Some(p) = std::env::var_os(var).filter(|p| !p.is_empty()) {
        return (p.into(), Found::Env);
    }
    let local = std::path::PathBuf::from(name);
    if usable(&local) {
        return (local, Found::WorkingDir);
    }
    if let Some(beside) = beside_exe(name).filter(|p| usable(p)) {
        return (beside, Found::BesideExe);
    }
    (
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(name),
        Found::SourceTree,
    )
}

/// `name` in the folder of the running executable (symbolic links resolved), so that an
/// unpacked release archive finds its `sample_db/` and `models/` from any working directory.
fn beside_exe(name: &str) -> Option<std::path::PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let exe = exe.canonicalize().unwrap_or(exe);
    Some(exe.parent()?.join(name))
}

fn locate_library() -> (std::path::PathBuf, Found) {
    locate("ENDOTWIN_LIBRARY", "sample_db", |p| {
        p.join(store::DB_FILE).exists()
    })
}

fn locate_models() -> (std::path::PathBuf, Found) {
    locate("ENDOTWIN_MODELS", "models", |p| p.is_dir())
}

/// The sample library (`sample_db/`): $ENDOTWIN_LIBRARY, else the one in the working
/// directory, else the one beside the executable (a release archive's), else the source
/// tree's (so `cargo run` works from anywhere). The last is for reading only: see
/// [`library_is_source_tree_fallback`].
pub fn default_library() -> std::path::PathBuf {
    locate_library().0
}

/// The source tree's `sample_db/` (compiled in): a committed folder of a developer's
/// checkout, never written by a command that was not pointed at it.
pub fn source_tree_sample_db() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sample_db")
}

/// Whether [`default_library`] falls back to the source tree's `sample_db/` (no
/// $ENDOTWIN_LIBRARY, no `sample_db/` in the working directory or beside the executable).
/// Commands that write to the library refuse that fallback and ask for `--library`.
pub fn library_is_source_tree_fallback() -> bool {
    locate_library().1 == Found::SourceTree
}

/// Whether [`default_models_dir`] falls back to the source tree's `models/` (no
/// $ENDOTWIN_MODELS, no `models/` in the working directory or beside the executable): read
/// from, never written to unless a command is pointed at it.
pub fn models_is_source_tree_fallback() -> bool {
    locate_models().1 == Found::SourceTree
}

/// The shipped models folder (`models/`): $ENDOTWIN_MODELS, else `models/` in the working
/// directory, else beside the executable (a release archive's), else the source tree's.
pub fn default_models_dir() -> std::path::PathBuf {
    locate_models().0
}
