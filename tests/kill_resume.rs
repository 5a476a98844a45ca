//! A training run killed with SIGKILL (kill -9) loses at most the epoch it was in: the library
//! marks the run interrupted when it is next opened, and `--resume` continues after the last
//! finished epoch's checkpoint to a saved model.

use crate::common;
use endotwin::store::{OpenMode, Store};
use std::process::Stdio;
use std::time::{Duration, Instant};

#[test]
fn a_training_run_killed_mid_epoch_resumes_after_its_last_checkpoint() {
    let _rng = crate::common::device_rng();
    let lib = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    crate::common::video_library(lib.path(), 4);
    let out_dir = out.path().display().to_string();
    let args = [
        "train",
        "tracklets",
        "--epochs",
        "6",
        "--anchors",
        "4",
        "--size",
        "16",
        "--out",
        &out_dir,
        "--name",
        "k",
    ];
    let mut child = common::endotwin(lib.path())
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kill it once the first epoch's checkpoint is written, while it trains the next.
    let state = out.path().join("k.checkpoints").join("state.json");
    let start = Instant::now();
    while !state.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "no checkpoint after 300 s"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before it could be killed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL on Unix: no chance to clean up
    child.wait().unwrap();
    assert!(
        !out.path().join("k.json").exists(),
        "a killed run saved no model"
    );

    // Resume: it continues after a finished epoch and saves the model.
    let resumed = common::endotwin(lib.path())
        .args(args)
        .arg("--resume")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert!(resumed.status.success(), "{stderr}");
    let after: usize = stderr
        .lines()
        .find_map(|l| l.strip_prefix("resuming after epoch "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no resume line in:\n{stderr}"));
    assert!((1..6).contains(&after), "resumed after epoch {after}");
    // Only the epochs after the checkpoint ran again.
    assert!(!stderr.contains(&format!("epoch {after}/6:")), "{stderr}");
    assert!(stderr.contains("epoch 6/6:"), "{stderr}");
    assert!(out.path().join("k.json").exists());

    // The library's records say what happened to each run.
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let statuses: Vec<String> = store
        .run_list()
        .unwrap()
        .into_iter()
        .map(|r| r.status)
        .collect();
    assert_eq!(statuses, ["finished", "interrupted"]);
}
