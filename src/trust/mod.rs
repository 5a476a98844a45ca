//! Answers a clinician can weigh: whether an input is like what a model learned from
//! ([`Familiarity`], stored in the model's card and checked with every answer from the
//! embedding the answer already made), and confidence that is right as often as it says
//! ([`Calibration`], fitted on validation and stored in the card).

pub mod calibration;
pub mod familiarity;

pub use calibration::{Calibration, CalibrationMap};
pub use familiarity::{Familiarity, Judgement};

/// What a marked answer means and what to do, in the CLI's `unfamiliar:` line and the GUI's
/// hover text.
pub const UNFAMILIAR_HINT: &str =
    "unlike the frames this model learned from: treat the answer as a guess";

/// The calibration names a card may hold.
pub const VOTE: &str = "vote";
pub const CATEGORY: &str = "category";
pub const DETECTOR: &str = "detector";

/// What a model's trust is fitted on, gathered from one library: held-out parts split off
/// and libraries joined the same way whatever the capability.
pub trait Gathered: Sized {
    /// Every `every`-th item held out: (kept, held out).
    fn split(self, every: usize) -> (Self, Self);
    /// Both in one.
    fn join(self, other: Self) -> Self;
}

/// `items` split by position: (kept, every `every`-th held out, `every` at least 2). Parallel
/// lists split alike.
pub fn split_every<T>(items: Vec<T>, every: usize) -> (Vec<T>, Vec<T>) {
    let every = every.max(2);
    let mut kept = Vec::new();
    let mut held = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        if i % every == every - 1 {
            held.push(item);
        } else {
            kept.push(item);
        }
    }
    (kept, held)
}
