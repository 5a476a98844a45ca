//! Evaluation: metrics with hand-checked tests, and the no-learning baselines on the phantom.

pub mod baselines;
pub mod captions;
pub mod held_out;
pub mod metrics;
pub mod probes;
pub mod prompts;
pub mod real;
pub mod report;
pub mod strip;
pub mod tracklets;
pub mod trust;
pub mod twins;
