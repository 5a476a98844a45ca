//! burn modules shared by inference, training and evaluation. Every `forward` states its
//! tensor shapes; every module has a `Config` with `init(&device)`.

pub mod block;
pub mod clip;
pub mod frame_cnn;
pub mod half;
pub mod hash;
pub mod hf_clip;
pub mod mobilenet;
pub mod preprocess;
pub mod reconstruction;
pub mod scene;
pub mod text;
pub mod tokenizer;
pub mod tracklet;
pub mod twin_encoder;
pub mod unifier;
pub mod vit;
pub mod weights;

pub use vit::{Vit, VitConfig};
