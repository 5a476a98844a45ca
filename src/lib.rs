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
pub fn default_library() -> std::path::PathBuf {
    if let Ok(p) = std::env::var("ENDOTWIN_LIBRARY") {
        return p.into();
    }
    let local = std::path::PathBuf::from("sample_db");
    if local.join(store::DB_FILE).exists() {
        return local;
    }
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sample_db")
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
