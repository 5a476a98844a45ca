//! `endotwin info`: version, compute backend and adapter, device check, library contents, the
//! default models folder.

use anyhow::Result;
use endotwin::compute::{self, BackendPref};
use endotwin::store::Store;
use std::path::Path;

pub fn run(library: &Path, pref: BackendPref) -> Result<()> {
    println!("endotwin {}", env!("CARGO_PKG_VERSION"));
    let compute = compute::select(pref)?;
    println!("backend: {}", compute.backend);
    println!("adapter: {}", compute.adapter);
    if let Some(note) = &compute.note {
        println!("note:    {note}");
    }
    let check = endotwin::engine::device_check(&compute);
    println!("device check (2x2 matmul): {check:?}");
    let store = Store::open_to_inspect(library)?;
    let stats = store.stats()?;
    println!("library: {}", store.db_path().display());
    if store.engine() == endotwin::store::EngineKind::Postgres {
        match store.server_tls()? {
            Some(version) => println!(
                "server:  connected over {version} (sslmode in the URL sets how the server is checked)"
            ),
            None => println!(
                "server:  connected without encryption (add ?sslmode=verify-full&sslrootcert=CA.pem to the URL)"
            ),
        }
    }
    // The models the library's commands answer with: its own once one was promoted in it.
    let models = endotwin::engine::promote::models_dir_for(library);
    println!(
        "models:  {}{}",
        models.display(),
        if endotwin::engine::promote::is_library_models(&models) {
            " (the library's own: a model was promoted in it)"
        } else if !models.is_dir() {
            // Round 14 N13: a folder that is not there was printed as if fine.
            match (
                models.exists(),
                std::env::var_os("ENDOTWIN_MODELS").is_some(),
            ) {
                (false, true) => " (no such folder: $ENDOTWIN_MODELS names it)",
                (false, false) => " (no such folder)",
                (true, true) => " (not a folder: $ENDOTWIN_MODELS names it)",
                (true, false) => " (not a folder)",
            }
        } else {
            ""
        }
    );
    if let Some(problem) = endotwin::engine::promote::models_marker_problem(&models) {
        println!("note:    {problem}");
    }
    println!(
        "schema:  v{}{}",
        store.schema_version()?,
        if store.is_read_only() {
            " (read-only)"
        } else {
            ""
        }
    );
    let damage = store.integrity_problems(None)?;
    if damage.is_empty() {
        println!("integrity: ok");
    } else {
        println!(
            "integrity: DAMAGED ({}); writes are refused: restore library.sqlite from a backup, `endotwin library check` lists the problems",
            damage.join("; ")
        );
    }
    println!(
        "content: {} examinations, {} polyps, {} videos, {} media ({:.1} MB)",
        stats.examinations,
        stats.polyps,
        stats.videos,
        stats.media,
        stats.media_bytes as f64 / 1e6
    );
    if stats.capsule_frames > 0 {
        println!(
            "capsule: {} frames, {} with a finding (caption)",
            stats.capsule_frames, stats.captioned
        );
    }
    // The run numbers `model report --run N` and `model promote N` take (round 9 N3: the
    // advice pointed here and no command listed them).
    let runs = store.runs()?;
    if !runs.is_empty() {
        let latest: Vec<String> = runs
            .iter()
            .take(RUNS_SHOWN)
            .map(|(id, recipe, status)| format!("#{id} {recipe} {status}"))
            .collect();
        println!(
            "runs:    {} training runs; latest: {}{}",
            runs.len(),
            latest.join(", "),
            if runs.len() > RUNS_SHOWN { ", ..." } else { "" }
        );
    }
    Ok(())
}

/// How many of the latest training runs `info` names.
const RUNS_SHOWN: usize = 8;
