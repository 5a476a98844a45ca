//! Shared progress and cancellation of one job: written by the worker, read by the UI or CLI.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

#[derive(Default, Debug)]
pub struct Progress {
    done: AtomicU64,
    total: AtomicU64,
    cancelled: AtomicBool,
    stage: Mutex<String>,
    /// Set by [`Progress::cancel_at`]: the stage and step count at which to cancel.
    cancel_at: Mutex<Option<(String, u64)>>,
    cancel_armed: AtomicBool,
}

impl Progress {
    pub fn new() -> Progress {
        Progress::default()
    }

    /// Starts a stage of `total` steps ("hashing", "writing", ...).
    pub fn stage(&self, name: &str, total: u64) {
        *self.stage.lock().expect("progress lock") = name.to_string();
        self.total.store(total, Ordering::Relaxed);
        self.done.store(0, Ordering::Relaxed);
    }

    pub fn inc(&self) {
        self.add(1);
    }

    pub fn add(&self, steps: u64) {
        let done = self.done.fetch_add(steps, Ordering::Relaxed) + steps;
        if self.cancel_armed.load(Ordering::Relaxed) {
            let at = self.cancel_at.lock().expect("progress lock");
            if let Some((stage, steps)) = at.as_ref()
                && done >= *steps
                && *self.stage.lock().expect("progress lock") == *stage
            {
                self.cancel();
            }
        }
    }

    pub fn set_done(&self, done: u64) {
        self.done.store(done, Ordering::Relaxed);
    }

    pub fn done(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }

    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    pub fn stage_name(&self) -> String {
        self.stage.lock().expect("progress lock").clone()
    }

    /// 0..=1, or `None` while the total is unknown.
    pub fn fraction(&self) -> Option<f32> {
        let total = self.total();
        (total > 0).then(|| (self.done() as f32 / total as f32).min(1.0))
    }

    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::Relaxed);
    }

    /// Cancels the job at a known point: once the stage named `stage` has done `steps`
    /// steps (the step that reaches it is the last one taken). A cancel from another thread
    /// lands wherever the job happens to be; this one lands in the same place every run.
    pub fn cancel_at(&self, stage: &str, steps: u64) {
        *self.cancel_at.lock().expect("progress lock") = Some((stage.to_string(), steps));
        self.cancel_armed.store(true, Ordering::Relaxed);
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed)
    }
}
