//! The release archive (`scripts/bundle.sh`): made with this build's binary, unpacked in a
//! temporary folder and run from a third one, it answers `--help`, `info` and a `twins` query
//! on its own sample library and models; the repository's sample_db is not written.
#![cfg(target_os = "linux")]

use crate::common::{Ran, run};
use endotwin::store::{OpenMode, Store};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every file under `dir` with its length and modification time: a write changes it.
fn listing(dir: &Path) -> Vec<(PathBuf, u64, SystemTime)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let m = e.metadata().unwrap();
            if m.is_dir() {
                stack.push(e.path());
            } else {
                out.push((e.path(), m.len(), m.modified().unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// The files HEAD holds under `parts` (what the archive must hold of them, nothing more).
fn tracked(parts: &[&str]) -> Vec<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root())
        .args(["ls-tree", "-r", "--name-only", "HEAD", "--"])
        .args(parts)
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut files: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    files.sort();
    files
}

#[test]
fn the_release_archive_unpacked_elsewhere_runs_help_info_and_a_twins_query() {
    let started = std::time::Instant::now();
    let sample_before = listing(&root().join("sample_db"));
    let (out, unpacked, elsewhere) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let binary = env!("CARGO_BIN_EXE_endotwin");
    let original = std::fs::metadata(binary).unwrap();

    let mut c = Command::new("bash");
    c.arg(root().join("scripts/bundle.sh"))
        .arg(out.path())
        .arg(binary)
        // The fastest compression: the debug binary is large, and the size is not tested.
        .env("BUNDLE_GZIP_LEVEL", "1");
    let made = run(c);
    assert!(made.ok(), "{}", made.text());
    let name = format!(
        "endotwin-{}-linux-{}",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::ARCH
    );
    let archive = out.path().join(format!("{name}.tar.gz"));
    assert!(archive.is_file(), "{}", made.text());
    let megabytes = std::fs::metadata(&archive).unwrap().len() as f64 / 1e6;
    // Nothing else is left in OUTDIR (the staging folder is gone), and the binary the archive
    // was made from is untouched (a stripped copy went in).
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 1);
    assert_eq!(std::fs::metadata(binary).unwrap().len(), original.len());

    let untar = run({
        let mut c = Command::new("tar");
        c.arg("-xzf").arg(&archive).arg("-C").arg(unpacked.path());
        c
    });
    assert!(untar.ok(), "{}", untar.text());
    let dir = unpacked.path().join(&name);
    let exe = dir.join("endotwin");
    assert!(exe.is_file() && dir.join("README.txt").is_file());
    assert!(
        std::fs::metadata(&exe).unwrap().len() < original.len(),
        "not stripped"
    );
    // models/ and sample_db/ exactly as tracked: no checkpoint, WAL or untracked file.
    let mut shipped: Vec<String> = listing(&dir)
        .into_iter()
        .map(|(p, _, _)| p.strip_prefix(&dir).unwrap().to_string_lossy().into_owned())
        .filter(|p| p.starts_with("models/") || p.starts_with("sample_db/"))
        .collect();
    shipped.sort();
    assert_eq!(shipped, tracked(&["models", "sample_db"]));

    // From a third folder, with no variable pointing anywhere: the archive's own folders.
    let et = |args: &[&str]| -> Ran {
        let mut c = Command::new(&exe);
        c.current_dir(elsewhere.path())
            .env("ENDOTWIN_BACKEND", "cpu")
            .env_remove("ENDOTWIN_LIBRARY")
            .env_remove("ENDOTWIN_MODELS")
            .args(args);
        run(c)
    };
    let help = et(&["--help"]);
    assert!(
        help.ok() && help.says("Usage: endotwin") && help.says("twins"),
        "{}",
        help.text()
    );
    let info = et(&["info"]);
    let library = dir.join("sample_db");
    assert!(info.ok(), "{}", info.text());
    assert!(
        info.says(&format!(
            "library: {}",
            library.join("library.sqlite").display()
        )) && info.says(&format!("models:  {}", dir.join("models").display()))
            && info.says("integrity: ok")
            && info.says("60 polyps"),
        "{}",
        info.text()
    );
    let view = {
        let store = Store::open(&library, OpenMode::Existing).unwrap();
        let polyp = store
            .polyps()
            .unwrap()
            .into_iter()
            .find(|p| p.code == "S7-E004-P1")
            .unwrap();
        let views = store.polyp_views(polyp.id).unwrap();
        store.media_path(&views[0])
    };
    let twins = et(&["twins", view.to_str().unwrap(), "--k", "3"]);
    assert!(twins.ok(), "{}", twins.text());
    assert!(
        twins.says("-> 3 twins of 60 indexed polyps")
            && twins.says("| 1 | S7-E004-P1 |")
            && twins.says("vote: "),
        "{}",
        twins.text()
    );

    assert_eq!(
        listing(&root().join("sample_db")),
        sample_before,
        "the repository's sample_db was written"
    );
    eprintln!(
        "archive {megabytes:.1} MB with this build's binary; made, unpacked and run in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
