//! The integration suite as one test binary.
//!
//! Every file beside this one is a module of it. One binary links the burn/wgpu/egui stack
//! once instead of once per file: a fresh-clone `cargo test` writes about 0.5 GB of test
//! executables instead of about 12 GB, and links in a fraction of the time.

mod common;

mod backbone;
mod backend;
mod bundle;
mod caption_model;
mod captions;
mod cli;
mod clip_import;
mod cvc_clinicdb;
mod detector;
mod docs;
mod dual_losses;
mod guards;
mod gui;
mod gui_input;
mod gui_labelling;
mod gui_promises;
mod gui_scale;
mod gui_tracklets;
mod gui_training;
mod gui_trust;
mod half_precision;
mod hostile;
mod import;
mod importers;
mod kill_resume;
mod label_props;
mod labels;
mod library_concurrency;
mod library_copy;
mod library_engines;
mod library_gui;
mod library_kill;
mod library_live;
mod library_prune;
mod library_search;
mod losses;
mod manifest_props;
mod models;
mod phantom;
mod preprocess;
mod prompt_rounds;
mod prompts;
mod recipes;
mod retrieval;
mod round4;
mod round5;
mod round5b;
mod round6;
mod round6b;
mod round7;
mod round7b;
mod round8;
mod shipped_models;
mod shipped_prompts;
mod silent_wrongs;
mod store;
mod store_safety;
mod tracklet_conflicts;
mod tracklet_head_floor;
mod tracklet_pipeline;
mod tracklets;
mod train;
mod trust;
mod trust_tracklets;
mod twin_codes;
mod twins;
mod video;
mod vocabulary;
mod weights;
mod window;
