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

/// The sample library shipped with the repository (`sample_db/`), found relative to the
/// working directory first and to the source tree second (so `cargo run` works from anywhere).
/// The second is for reading only: see [`library_is_source_tree_fallback`].
pub fn default_library() -> std::path::PathBuf {
    if let Ok(p) = std::env::var("ENDOTWIN_LIBRARY") {
        return p.into();
    }
    let local = std::path::PathBuf::from("sample_db");
    if local.join(store::DB_FILE).exists() {
        return local;
    }
    source_tree_sample_db()
}

/// The source tree's `sample_db/` (compiled in): a committed folder of a developer's
/// checkout, never written by a command that was not pointed at it.
pub fn source_tree_sample_db() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sample_db")
}

/// Whether [`default_library`] falls back to the source tree's `sample_db/` (no
/// $ENDOTWIN_LIBRARY, no `sample_db/` in the working directory). Commands that write to the
/// library refuse that fallback and ask for `--library`.
pub fn library_is_source_tree_fallback() -> bool {
    std::env::var_os("ENDOTWIN_LIBRARY").is_none()
        && !std::path::Path::new("sample_db")
            .join(store::DB_FILE)
            .exists()
}

/// Whether [`default_models_dir`] falls back to the source tree's `models/` (no
/// $ENDOTWIN_MODELS, no `models/` in the working directory): read from, never written to
/// unless a command is pointed at it.
pub fn models_is_source_tree_fallback() -> bool {
    std::env::var_os("ENDOTWIN_MODELS").is_none() && !std::path::Path::new("models").is_dir()
}

/// The shipped models folder (`models/`): $ENDOTWIN_MODELS, else `models/` in the working
/// directory, else the one in the source tree.
pub fn default_models_dir() -> std::path::PathBuf {
    if let Ok(p) = std::env::var("ENDOTWIN_MODELS") {
        return p.into();
    }
    let local = std::path::PathBuf::from("models");
    if local.is_dir() {
        return local;
    }
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models")
}
