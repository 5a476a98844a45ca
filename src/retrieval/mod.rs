//! Finding digital twins: exact Hamming and cosine k-NN, the sublinear multi-index, a Hamming
//! shortlist re-ranked by cosine, and the pathology vote of the neighbours (METHODS §4).

pub mod exact;
pub mod multi_index;
pub mod rerank;
pub mod synthetic;
pub mod vote;

pub use exact::{Codes, Hit, Scored, cosine_knn, hamming_knn, hamming_knn_batch};
pub use multi_index::MultiIndex;
pub use rerank::{SHORTLIST, shortlist_cosine, shortlist_len};
pub use vote::{Vote, majority, weighted};
