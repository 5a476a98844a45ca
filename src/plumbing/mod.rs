//! The low layer every other module may use and that uses none of them: job progress and
//! cancellation, the seeded random source, and a description of the machine for records.
//! Data, retrieval, models and training take their plumbing from here, never from the
//! engine or the app above them.

pub mod children;
pub mod f32_hex;
pub mod input;
mod machine;
pub mod output;
mod progress;
mod rng;

pub use machine::{available_memory, machine, process_gone};
pub use progress::Progress;
pub use rng::Rng;
