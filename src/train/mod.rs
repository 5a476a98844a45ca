//! Training: the losses and loops that fine-tune the very graphs inference uses.

pub mod losses;
