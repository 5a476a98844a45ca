//! The background engine: a worker thread that owns the burn device and runs jobs off the UI
//! thread. Jobs arrive over a bounded channel; each has a named [`JobHandle`] whose shared
//! [`Progress`] the UI (or the CLI's progress bar) reads and can cancel. Results come back over
//! a second bounded channel, and `notify` wakes the UI so it repaints when one lands.

mod jobs;
pub mod promote;
pub use jobs::device_check;
pub mod loader;
pub mod model_moves;
pub mod prompt_jobs;
pub mod training;
pub mod trust;

pub use crate::plumbing::Progress;
pub use jobs::{Job, JobOutput, TwinAnswer, TwinQuery};

use crate::compute::Compute;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};

/// How many jobs may wait in the queue before `submit` says the engine is busy.
const QUEUE_DEPTH: usize = 16;

/// A named, running or queued job.
#[derive(Debug, Clone)]
pub struct JobHandle {
    pub id: u64,
    pub name: String,
    pub progress: Arc<Progress>,
}

/// A finished job: its output, or the error to show the user.
#[derive(Debug)]
pub struct JobDone {
    pub id: u64,
    pub name: String,
    pub result: Result<JobOutput, String>,
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("the engine is busy ({QUEUE_DEPTH} jobs waiting); try again when one finishes")]
    Busy,
    #[error("the engine has stopped")]
    Stopped,
}

struct Request {
    handle: JobHandle,
    library: PathBuf,
    job: Job,
}

type Notify = Arc<dyn Fn() + Send + Sync>;

pub struct Engine {
    requests: SyncSender<Request>,
    done: Receiver<JobDone>,
    active: Vec<JobHandle>,
    next_id: u64,
    compute: Compute,
}

impl Engine {
    /// Starts the worker. `notify` is called after each finished job (the GUI passes
    /// `ctx.request_repaint`).
    pub fn start(compute: Compute, notify: Option<Notify>) -> Engine {
        let (req_tx, req_rx) = sync_channel::<Request>(QUEUE_DEPTH);
        let (done_tx, done_rx) = sync_channel::<JobDone>(QUEUE_DEPTH * 4);
        let worker_compute = compute.clone();
        std::thread::Builder::new()
            .name("endotwin-engine".into())
            .spawn(move || {
                for req in req_rx {
                    let result =
                        jobs::run(&worker_compute, &req.library, req.job, &req.handle.progress);
                    let done = JobDone {
                        id: req.handle.id,
                        name: req.handle.name.clone(),
                        result,
                    };
                    if done_tx.send(done).is_err() {
                        break;
                    }
                    if let Some(n) = &notify {
                        n();
                    }
                }
            })
            .expect("spawning the engine thread");
        Engine {
            requests: req_tx,
            done: done_rx,
            active: Vec::new(),
            next_id: 1,
            compute,
        }
    }

    pub fn compute(&self) -> &Compute {
        &self.compute
    }

    /// Queues a job on the library at `library`; returns its handle at once.
    pub fn submit(
        &mut self,
        name: impl Into<String>,
        library: PathBuf,
        job: Job,
    ) -> Result<JobHandle, EngineError> {
        let handle = JobHandle {
            id: self.next_id,
            name: name.into(),
            progress: Arc::new(Progress::new()),
        };
        self.next_id += 1;
        match self.requests.try_send(Request {
            handle: handle.clone(),
            library,
            job,
        }) {
            Ok(()) => {
                self.active.push(handle.clone());
                Ok(handle)
            }
            Err(TrySendError::Full(_)) => Err(EngineError::Busy),
            Err(TrySendError::Disconnected(_)) => Err(EngineError::Stopped),
        }
    }

    /// Finished jobs since the last call; they leave the active list.
    pub fn poll(&mut self) -> Vec<JobDone> {
        let done: Vec<JobDone> = self.done.try_iter().collect();
        self.active.retain(|h| !done.iter().any(|d| d.id == h.id));
        done
    }

    /// Blocks until the job with `id` finishes (CLI and tests), calling `tick` about ten
    /// times a second meanwhile (the CLI redraws its progress bar there).
    pub fn wait(&mut self, id: u64, mut tick: impl FnMut()) -> Result<JobDone, EngineError> {
        use std::sync::mpsc::RecvTimeoutError;
        loop {
            match self
                .done
                .recv_timeout(std::time::Duration::from_millis(100))
            {
                Ok(done) => {
                    self.active.retain(|h| h.id != done.id);
                    if done.id == id {
                        return Ok(done);
                    }
                }
                Err(RecvTimeoutError::Timeout) => tick(),
                Err(RecvTimeoutError::Disconnected) => return Err(EngineError::Stopped),
            }
        }
    }

    /// Jobs queued or running, oldest first.
    pub fn active(&self) -> &[JobHandle] {
        &self.active
    }

    /// Asks the job with `id` to stop (it stops at its next check).
    pub fn cancel(&self, id: u64) {
        if let Some(h) = self.active.iter().find(|h| h.id == id) {
            h.progress.cancel();
        }
    }

    pub fn cancel_all(&self) {
        for h in &self.active {
            h.progress.cancel();
        }
    }
}
