//! The cross-attention unifier of Endo-CLIP stage 3 (METHODS §1): within one examination,
//! each polyp image attends over the report's sentences and each sentence over the images,
//! with learned W_Q, W_K, W_V; the examination vectors are the means of the attended features.

use burn::config::Config;
use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::Device;
use burn::tensor::Tensor;
use burn::tensor::activation::softmax;

#[derive(Config, Debug)]
pub struct UnifierConfig {
    pub dim: usize,
}

impl UnifierConfig {
    pub fn init(&self, device: &Device) -> Unifier {
        let lin = || {
            LinearConfig::new(self.dim, self.dim)
                .with_bias(false)
                .init(device)
        };
        Unifier {
            query: lin(),
            key: lin(),
            value: lin(),
        }
    }
}

#[derive(Module, Debug)]
pub struct Unifier {
    pub query: Linear,
    pub key: Linear,
    pub value: Linear,
}

impl Unifier {
    /// `o_k = sum_l softmax_l((W_Q a_k)^T (W_K b_l) / sqrt(d)) W_V b_l`:
    /// `a`: [K, d] attends over `b`: [L, d] -> [K, d].
    pub fn attend(&self, a: Tensor<2>, b: Tensor<2>) -> Tensor<2> {
        let [_, d] = a.dims();
        let q = self.query.forward(a); // [K, d]
        let k = self.key.forward(b.clone()); // [L, d]
        let v = self.value.forward(b); // [L, d]
        let scores = q.matmul(k.transpose()) / (d as f64).sqrt(); // [K, L]
        softmax(scores, 1).matmul(v)
    }

    /// `images`: [K, d], `sentences`: [L, d] -> examination-level (image, text) vectors, [d]
    /// each: the means of the images attended over the sentences and vice versa.
    pub fn forward(&self, images: Tensor<2>, sentences: Tensor<2>) -> (Tensor<1>, Tensor<1>) {
        let img = self.attend(images.clone(), sentences.clone()).mean_dim(0);
        let txt = self.attend(sentences, images).mean_dim(0);
        let [_, d] = img.dims();
        (img.reshape([d]), txt.reshape([d]))
    }
}

impl crate::model::weights::CheckConfig for UnifierConfig {
    fn check(&self) -> Result<(), String> {
        crate::model::weights::check_size("dim", self.dim, 8192)
    }
}
