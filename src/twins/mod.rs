//! Digital twins end to end (METHODS §4): the image (and scene) encoder turn a polyp's views
//! into one unit embedding and its sign code; the library's polyps are indexed the same way;
//! a query retrieves its nearest polyps and their pathology votes for a diagnosis.

pub mod codes;
mod index;
pub mod map;
pub mod review;
pub mod scale;
pub mod trust;

pub use codes::Coder;
pub use index::{
    IndexStats, Search, Twin, TwinIndex, TwinResult, familiarity_version, index_library,
    stored_view_embedding, stored_view_score,
};

use crate::model::preprocess::{Focus, TwinInput};
use crate::model::scene::{SceneEncoder, SceneEncoderConfig};
use crate::model::twin_encoder::{self, TwinEncoder, TwinEncoderConfig};
use crate::model::weights::{self, ModelCard, ModelKind, WeightsError};
use burn::tensor::{Bool, Device, Tensor, TensorData};
use image::DynamicImage;
use std::path::Path;

pub const IMAGE_MODEL: &str = "twin-image";
pub const SCENE_MODEL: &str = "twin-scene";
/// The frozen per-frame encoders of the tracklet comparisons (the phantom-trained ViT pair
/// the tracklet head learned over); a models folder without them lends its twin encoders.
pub const FRAME_IMAGE_MODEL: &str = "tracklet-frames";
pub const FRAME_SCENE_MODEL: &str = "tracklet-frames-scene";

#[derive(Debug, thiserror::Error)]
pub enum TwinError {
    #[error(transparent)]
    Weights(#[from] WeightsError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(
        "no digital-twin image encoder in {0}: train one with `endotwin train twin-backbone` (or `train image-encoder`)"
    )]
    NoModel(String),
    #[error(
        "{dir} holds no {IMAGE_MODEL}.json, the name --models reads; it holds {others}, an image \
         encoder under another name: `endotwin model promote` its run, or train with --name \
         {IMAGE_MODEL} (or rename the card and its record)"
    )]
    OtherName { dir: String, others: String },
    #[error(
        "the library is indexed with {indexed}, the loaded model is {loaded}: re-index it with that model (Twins > Re-index, or `endotwin index` with the same models: `--models FOLDER` when the query named one)"
    )]
    StaleIndex { indexed: String, loaded: String },
    #[error(
        "the library has no polyps indexed with this model ({0}) yet: index it first (Twins > Re-index, or `endotwin index` with the same models)"
    )]
    EmptyIndex(String),
    #[error("the library has no polyps with views to retrieve")]
    NoPolyps,
    #[error("{0}")]
    Image(String),
    #[error("cancelled")]
    Cancelled,
    #[error("{card}: its input recipe does not fit the encoder: {reason}")]
    BadInput { card: String, reason: String },
}

/// The cards in `dir` (file names, sorted) whose kind is an image encoder.
fn image_encoder_cards(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        // A card is small; anything large is no card (never read whole).
        .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.len() < 1 << 24))
        .filter(|p| {
            std::fs::read(p)
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                .is_some_and(|v| v["kind"] == "image-encoder")
        })
        .filter_map(|p| Some(p.file_name()?.to_string_lossy().into_owned()))
        .collect();
    out.sort();
    out
}

/// The longest codes a card may ask for, in embedding widths (16 x 256 = 4096 bits).
pub const MAX_CODE_BLOCKS: usize = 16;

/// The loaded encoders and their cards.
pub struct TwinModels {
    pub image: TwinEncoder,
    pub image_card: ModelCard,
    pub image_config: TwinEncoderConfig,
    pub scene: Option<(SceneEncoder, ModelCard)>,
    /// Embeddings to codes (the image encoder card's code centre).
    pub coder: Coder,
    pub device: Device,
}

impl TwinModels {
    /// `<dir>/twin-image.json` (required) and `<dir>/twin-scene.json` (optional).
    pub fn load(dir: &Path, device: &Device) -> Result<TwinModels, TwinError> {
        TwinModels::load_named(dir, IMAGE_MODEL, SCENE_MODEL, device)
    }

    /// The tracklet comparisons' frame encoders: `<dir>/tracklet-frames.json` (and its scene
    /// encoder) when there, else the folder's twin encoders ([`TwinModels::load`]).
    pub fn load_frames(dir: &Path, device: &Device) -> Result<TwinModels, TwinError> {
        if dir.join(format!("{FRAME_IMAGE_MODEL}.json")).is_file() {
            TwinModels::load_named(dir, FRAME_IMAGE_MODEL, FRAME_SCENE_MODEL, device)
        } else {
            TwinModels::load(dir, device)
        }
    }

    /// `<dir>/<image>.json` (required) and `<dir>/<scene>.json` (optional).
    pub fn load_named(
        dir: &Path,
        image: &str,
        scene: &str,
        device: &Device,
    ) -> Result<TwinModels, TwinError> {
        let image_path = dir.join(format!("{image}.json"));
        // A models folder that is not there, or not a folder, is said as such (round 8 N35:
        // "no digital-twin image encoder in nonexist: train one").
        if !dir.is_dir() {
            // A $ENDOTWIN_MODELS naming no folder is refused before any command runs (main's
            // `refuse_models_env_not_a_folder`): what is left here is a --models.
            return Err(TwinError::Image(format!(
                "{}: {}; --models names a folder of model cards",
                dir.display(),
                match dir.exists() {
                    true => "not a folder",
                    false => "no such folder",
                }
            )));
        }
        if !image_path.is_file() {
            // An encoder there under another name is named (round 17 N19: "train one" for the
            // folder `train twin-backbone --name t` had just made).
            let others = image_encoder_cards(dir);
            if !others.is_empty() {
                return Err(TwinError::OtherName {
                    dir: dir.display().to_string(),
                    others: others.join(", "),
                });
            }
            return Err(TwinError::NoModel(dir.display().to_string()));
        }
        let scene_path = dir.join(format!("{scene}.json"));
        TwinModels::load_cards(
            &image_path,
            Some(scene_path.as_path()).filter(|p| p.is_file()),
            device,
        )
    }

    /// An image encoder from its card (a run's, say), with a scene encoder's card or none.
    pub fn load_cards(
        image_path: &Path,
        scene_path: Option<&Path>,
        device: &Device,
    ) -> Result<TwinModels, TwinError> {
        let image_path = image_path.to_path_buf();
        let (image, image_config, image_card) = twin_encoder::load(&image_path, device)?;
        if let Some(input) = &image_card.input {
            let reason = if input.size as usize != image_config.image_size() {
                Some(format!(
                    "size {} but the encoder takes {} px",
                    input.size,
                    image_config.image_size()
                ))
            } else if !crate::model::preprocess::TwinInput::valid_context(input.context) {
                Some(format!(
                    "context {} is not a positive number between 0.5 and 16",
                    input.context
                ))
            } else if !crate::model::preprocess::TwinInput::valid_turns(input.turns) {
                Some(format!(
                    "turns {} is not 1, 2 or 4 quarter turns",
                    input.turns
                ))
            } else if !(input.min_fraction.is_finite() && input.min_fraction > 0.0) {
                Some(format!(
                    "min_fraction {} is not a positive number",
                    input.min_fraction
                ))
            } else {
                None
            };
            let reason = reason.or_else(|| {
                let r = image_card.code_rotation.as_ref()?;
                let dim = image_config.output_dim();
                (r.len() != dim * dim || !r.iter().all(|x| x.is_finite())).then(|| {
                    format!(
                        "its code rotation has {} values (not all finite?), the encoder needs {dim} x {dim}",
                        r.len()
                    )
                })
            });
            let reason = reason.or_else(|| {
                let b = image_card.code_bits?;
                let dim = image_config.output_dim();
                (!b.bits.is_multiple_of(dim) || b.bits < dim || b.bits > MAX_CODE_BLOCKS * dim)
                    .then(|| {
                        format!(
                            "its codes have {} bits; they need a multiple of the encoder's {dim} \
                         dimensions, at most {}",
                            b.bits,
                            MAX_CODE_BLOCKS * dim
                        )
                    })
            });
            let reason = reason.or_else(|| {
                let c = image_card.code_center.as_ref()?;
                let dim = image_config.output_dim();
                (c.len() != dim || !c.iter().all(|x| x.is_finite())).then(|| {
                    format!(
                        "its code centre has {} values (not all finite?), the encoder gives {dim}",
                        c.len()
                    )
                })
            });
            if let Some(reason) = reason {
                return Err(TwinError::BadInput {
                    card: image_path.display().to_string(),
                    reason,
                });
            }
        }
        let scene = match scene_path {
            Some(path) => Some(weights::load(
                path,
                ModelKind::SceneEncoder,
                |c: &SceneEncoderConfig| c.init(device),
            )?),
            None => None,
        };
        Ok(TwinModels {
            image,
            coder: Coder::for_encoder(
                image_config.output_dim(),
                image_card.code_center.clone(),
                image_card.code_rotation.clone(),
                image_card.code_bits,
            ),
            image_card,
            image_config,
            scene,
            device: device.clone(),
        })
    }

    /// ImageNet's MobileNetV2 off the shelf (`weights`: torchvision's feature layers as
    /// safetensors), its tapped layers pooled with no projection and no training, cutting its
    /// input as `input` says (at the backbone's 224 px): the "backbone without fine-tuning"
    /// row of every comparison.
    pub fn off_the_shelf(
        weights: &Path,
        input: TwinInput,
        device: &Device,
    ) -> Result<TwinModels, TwinError> {
        use crate::model::mobilenet::{MobileNetV2Config, load_mobilenet_v2};
        use crate::model::twin_encoder::{BackboneTwin, BackboneTwinConfig};
        let config = BackboneTwinConfig::new(MobileNetV2Config::new());
        let backbone = load_mobilenet_v2(weights, &config.backbone, device)
            .map_err(|e| TwinError::Image(e.to_string()))?;
        let mut card = ModelCard::new(
            "mobilenet-v2-imagenet",
            ModelKind::ImageEncoder,
            "imagenet",
            "torchvision's ImageNet MobileNetV2, pooled tapped layers, not fine-tuned",
            &config,
        );
        // One turn: a quarter-turn average cost the off-the-shelf features 0.04 uAP on the
        // CVC-ClinicDB validation sequences (0.72 against 0.76).
        card.input = Some(TwinInput {
            size: config.image_size as u32,
            turns: 1,
            ..input
        });
        Ok(TwinModels {
            image: TwinEncoder::Backbone(BackboneTwin {
                backbone,
                projection: None,
                taps: config.backbone.taps.len(),
            }),
            image_card: card,
            image_config: TwinEncoderConfig::Backbone(config),
            scene: None,
            coder: Coder::default(),
            device: device.clone(),
        })
    }

    /// The same image encoder architecture and input recipe at random initialisation (seeded),
    /// no scene encoder: the "untrained" baseline of anything built on these models.
    pub fn untrained(&self, seed: u64) -> TwinModels {
        self.device.seed(seed);
        let mut image_card = self.image_card.clone();
        image_card.version = format!("{}-untrained", image_card.version);
        image_card.code_center = None;
        image_card.code_rotation = None;
        image_card.code_bits = None;
        TwinModels {
            image: self.image_config.init(&self.device),
            image_card,
            image_config: self.image_config.clone(),
            scene: None,
            coder: Coder::default(),
            device: self.device.clone(),
        }
    }

    /// Names the embeddings these models produce: image version, plus scene version or
    /// "mean" when views are averaged.
    pub fn version(&self) -> String {
        match &self.scene {
            Some((_, card)) => format!("{}+scene-{}", self.image_card.version, card.version),
            None => format!("{}+mean", self.image_card.version),
        }
    }

    /// The embedding's dimensions.
    pub fn dim(&self) -> usize {
        self.image_config.output_dim()
    }

    /// Bits of a polyp's binary code.
    pub fn code_bits(&self) -> usize {
        self.coder.bits(self.dim())
    }

    /// How these models cut their input: the card's recipe, or the whole frame for cards
    /// older than polyp-centred crops.
    pub fn input(&self) -> TwinInput {
        self.image_card
            .input
            .unwrap_or_else(|| TwinInput::whole_frame(self.image_config.image_size() as u32))
    }

    /// Unit embeddings of `images` (each with where its polyp is), one per image, in batches
    /// of 32.
    pub fn encode_views(&self, images: &[(DynamicImage, Focus)]) -> Vec<Vec<f32>> {
        encode(&self.image, self.input(), &self.device, images)
    }

    /// [`TwinModels::encode_views`] and each view's familiarity score from the same pass
    /// (None when the image encoder's card has no familiarity statistics).
    pub fn encode_views_judged(
        &self,
        images: &[(DynamicImage, Focus)],
    ) -> (Vec<Vec<f32>>, Option<Vec<f32>>) {
        match &self.image_card.familiarity {
            Some(f) => {
                let (z, features) =
                    encode_with_features(&self.image, self.input(), &self.device, images);
                (z, Some(features.iter().map(|x| f.score(x)).collect()))
            }
            None => (self.encode_views(images), None),
        }
    }

    /// [`TwinModels::encode_views`] with the polyp's box enlarged `context` times and encoded
    /// at `turns` quarter turns instead of the card's (the tracklet comparisons keep the input
    /// they were measured with).
    pub fn encode_views_at(
        &self,
        context: f32,
        turns: u32,
        images: &[(DynamicImage, Focus)],
    ) -> Vec<Vec<f32>> {
        let input = TwinInput {
            context,
            turns,
            ..self.input()
        };
        encode(&self.image, input, &self.device, images)
    }

    /// [`TwinModels::encode_views_at`] and, from the same pass, each view's familiarity
    /// features ([`encode_with_features`]).
    pub fn encode_views_at_features(
        &self,
        context: f32,
        turns: u32,
        images: &[(DynamicImage, Focus)],
    ) -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
        let input = TwinInput {
            context,
            turns,
            ..self.input()
        };
        encode_with_features(&self.image, input, &self.device, images)
    }

    /// One unit embedding for a set of views: the scene encoder's when loaded, else the
    /// normalised mean of the view embeddings.
    pub fn combine(&self, views: &[Vec<f32>]) -> Vec<f32> {
        combine(self.scene.as_ref().map(|(s, _)| s), views, &self.device)
    }
}

/// Unit embeddings of `images` by `encoder` with its input recipe, in batches of 32.
pub fn encode(
    encoder: &TwinEncoder,
    input: TwinInput,
    device: &Device,
    images: &[(DynamicImage, Focus)],
) -> Vec<Vec<f32>> {
    let mut out = Vec::with_capacity(images.len());
    for chunk in images.chunks(32) {
        let x = input.batch(chunk, device);
        let z = encoder.forward_turned(x, input.turns);
        let dim = z.dims()[1];
        let values = z.into_data().try_to_vec::<f32>().expect("f32 embeddings");
        out.extend(values.chunks_exact(dim).map(|c| c.to_vec()));
    }
    out
}

/// [`encode`] and, from the same forward pass, each image's familiarity features
/// ([`TwinEncoder::forward_turned_features`]).
pub fn encode_with_features(
    encoder: &TwinEncoder,
    input: TwinInput,
    device: &Device,
    images: &[(DynamicImage, Focus)],
) -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
    let mut embeddings = Vec::with_capacity(images.len());
    let mut features = Vec::with_capacity(images.len());
    let rows = |t: Tensor<2>| -> Vec<Vec<f32>> {
        let width = t.dims()[1];
        let values = t.into_data().try_to_vec::<f32>().expect("f32 values");
        values.chunks_exact(width).map(|c| c.to_vec()).collect()
    };
    for chunk in images.chunks(32) {
        let x = input.batch(chunk, device);
        let (z, f) = encoder.forward_turned_features(x, input.turns);
        embeddings.extend(rows(z));
        features.extend(rows(f));
    }
    (embeddings, features)
}

/// See [`TwinModels::combine`]; public so evaluation can compare both with one encoder.
pub fn combine(scene: Option<&SceneEncoder>, views: &[Vec<f32>], device: &Device) -> Vec<f32> {
    assert!(!views.is_empty(), "at least one view");
    let dim = views[0].len();
    match scene {
        Some(encoder) => {
            let flat: Vec<f32> = views.iter().flatten().copied().collect();
            let x = Tensor::<3>::from_data(TensorData::new(flat, [1, views.len(), dim]), device);
            let none = Tensor::<2, Bool>::from_data(
                TensorData::new(vec![false; views.len()], [1, views.len()]),
                device,
            );
            encoder
                .forward(x, Some(none))
                .into_data()
                .try_to_vec::<f32>()
                .expect("f32")
        }
        None => {
            let mut mean = vec![0.0f32; dim];
            for v in views {
                mean.iter_mut().zip(v).for_each(|(m, x)| *m += x);
            }
            let norm = mean.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
            mean.iter().map(|x| x / norm).collect()
        }
    }
}

/// [`query_images`]' answer: the twins, the combined embedding, and the views' familiarity
/// scores (None when the card has no familiarity statistics).
pub type ImageAnswer = (TwinResult, Vec<f32>, Option<Vec<f32>>);

/// The twins of one polyp seen in `images` (its views): encoded, combined, searched. The one
/// query path of the CLI and the engine. Returns the answer, the combined embedding and the
/// views' familiarity scores (None when the card has no familiarity statistics).
pub fn query_images(
    models: &TwinModels,
    index: &TwinIndex,
    images: &[(DynamicImage, Focus)],
    k: usize,
    search: Search,
    exclude: &[i64],
) -> Result<ImageAnswer, TwinError> {
    if images.is_empty() {
        return Err(TwinError::Image("no views to query with".into()));
    }
    let (views, scores) = models.encode_views_judged(images);
    let (result, embedding) = query_views(models, index, &views, k, search, exclude);
    Ok((result, embedding, scores))
}

/// [`query_images`] from view embeddings already at hand (a library polyp's stored ones).
pub fn query_views(
    models: &TwinModels,
    index: &TwinIndex,
    views: &[Vec<f32>],
    k: usize,
    search: Search,
    exclude: &[i64],
) -> (TwinResult, Vec<f32>) {
    let embedding = models.combine(views);
    (index.query(&embedding, k, search, exclude), embedding)
}

/// A library view decoded, with where its polyp is: the box a reviewer drew on it (the
/// audited `polyp_box` label), else its mask's box, else the field of view. The error names
/// the file.
pub fn load_view(
    store: &crate::store::Store,
    view: &crate::store::MediaRow,
) -> Result<(DynamicImage, Focus), TwinError> {
    let image = crate::data::images::decode_media(store, view)
        .map_err(|e| TwinError::Image(format!("{}: {e}", view.source_path)))?
        .image;
    if let Some(drawn) = store.view_box(view.id)? {
        return Ok((image, Focus::Box(drawn)));
    }
    let mask = match view.mask_media_id.map(|id| store.media(id)).transpose()? {
        Some(Some(m)) => crate::data::images::decode_media(store, &m)
            .map(|d| d.image.to_luma8())
            .ok(),
        _ => None,
    };
    Ok((image, Focus::of_mask(mask.as_ref())))
}

/// What a view's embedding was made from: its file, and the box drawn on it when there is
/// one (a new or changed box makes the view stale, so it is encoded again).
pub fn view_source(view: &crate::store::MediaRow, drawn: Option<&[f32; 4]>) -> String {
    match drawn {
        Some(&b) => format!("{}+box:{}", view.hash, crate::store::format_view_box(b)),
        None => view.hash.clone(),
    }
}
