//! Tracklet re-identification (METHODS §3): a polyp seen in consecutive frames is a
//! tracklet; fragments of a tracklet are encoded by the tracklet encoder
//! (`model::tracklet`) and trained with time as the only supervision: fragments close in
//! time form a bag, and the noise-aware loss (`train::tracklet_losses`) asks that some bag
//! member be nearer its anchor than the bag is to any other anchor.
//!
//! - [`fragments`]: tracklets long enough to use, their 8-frame fragments, the crop around a
//!   box.
//! - [`bags`]: the temporal bag sampler with its exponential rank distribution and cosine
//!   temperature curriculum, and bag purity (from ground truth, for the log only).

pub mod bags;
pub mod fragments;
