//! The jobs the engine runs. Each opens its own connection to the library (SQLite in WAL mode
//! lets the GUI keep reading meanwhile) and reports through the job's [`Progress`].

use super::Progress;
use crate::compute::Compute;
use crate::data::images;
use crate::data::import::{self, ImportLayout, ImportOptions, ImportReport};
use crate::model::preprocess::Focus;
use crate::store::{OpenMode, Store, set_thumbnail};
use crate::twins::{
    IndexStats, Search, TwinError, TwinIndex, TwinModels, TwinResult, index_library,
};
use burn::tensor::{Tensor, TensorData};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub enum Job {
    /// Import a data layout from `path` into the library.
    Import {
        layout: ImportLayout,
        path: PathBuf,
        options: ImportOptions,
    },
    /// Lay a COCO sidecar's boxes onto a video already in the library.
    ImportBoxes {
        path: PathBuf,
        video: String,
        options: ImportOptions,
    },
    /// Import single image files (opened or dropped in the GUI) as frames.
    ImportFiles {
        files: Vec<PathBuf>,
        options: ImportOptions,
    },
    /// Compute the thumbnails the library lacks (media added by other tools).
    Thumbnails,
    /// A small matrix product on the engine's device: proves the backend works end to end.
    DeviceCheck,
    /// Index the library's polyps for twin retrieval with the models in `models`.
    IndexTwins { models: PathBuf },
    /// Retrieve the digital twins of a query.
    Twins {
        models: PathBuf,
        query: TwinQuery,
        k: usize,
        search: Search,
    },
    /// A video's tracklet timeline, its tracklets compared as `comparison` asks when the
    /// models in `models` allow it (else the best they allow).
    TrackletTimeline {
        video_id: i64,
        models: PathBuf,
        comparison: crate::tracklets::timeline::Comparison,
    },
    /// Follow a box drawn on a video frame both ways until the polyp is lost.
    TrackBox {
        video_id: i64,
        frame: i64,
        xywh: [f32; 4],
    },
    /// Top captions and categories of library media by the caption model in `models`.
    DescribeCaptions {
        models: PathBuf,
        keys: Vec<crate::captions::query::CaptionKey>,
    },
    /// The library's capsule frames that best match a caption or a category.
    SearchCaptions { models: PathBuf, query: String },
    /// Text prompts: scores, search, a video's polyp strip.
    Prompts(super::prompt_jobs::PromptJob),
    /// Make a run's model (its card) the library's active one, then rebuild what depends on it.
    Promote { card: PathBuf, run: Option<i64> },
    /// Put back the model `name` had before the last promotion, then rebuild.
    Demote { name: String },
    /// The review queue over the library's indexed polyps (the twin models in `models`).
    ReviewQueue {
        models: PathBuf,
        order: crate::twins::review::QueueOrder,
        limit: usize,
        /// The prompt model whose benign-vs-neoplastic entropy joins the uncertainty.
        prompts: Option<PathBuf>,
    },
    /// The evaluation report of the model of `card` beside the library's active one, on
    /// held-out data; saved beside the card.
    Report {
        card: PathBuf,
        data: crate::eval::report::ReportData,
    },
}

/// Where a twin query's views come from.
#[derive(Debug, Clone, PartialEq)]
pub enum TwinQuery {
    /// Library media (views of a polyp, or of several picked polyps); those polyps are left
    /// out of the results.
    Media {
        ids: Vec<i64>,
        exclude_polyps: Vec<i64>,
    },
    /// Image files opened from disk or dropped in, each with the polyp box the user drew on
    /// it (x, y, w, h in pixels), if any.
    Files {
        paths: Vec<PathBuf>,
        boxes: Vec<Option<[f32; 4]>>,
    },
}

/// What the twin panel shows for one query.
#[derive(Debug, Clone, PartialEq)]
pub struct TwinAnswer {
    pub query: TwinQuery,
    pub result: TwinResult,
    pub version: String,
    pub indexed: usize,
    /// Quarter turns each view was read at (the image encoder card's `input.turns`).
    pub turns: u32,
    /// Every indexed polyp on the 2-D map, shared between answers of one index.
    pub map: std::sync::Arc<crate::twins::map::LibraryMap>,
    /// The query on the same map.
    pub query_point: [f32; 2],
    pub millis: f64,
    /// The views' familiarity to the image encoder (None: its card has no statistics).
    pub familiarity: Option<crate::trust::Judgement>,
    /// The vote winner's calibrated confidence (None: the card has no vote calibration).
    pub vote_confidence: Option<f64>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum JobOutput {
    Imported(ImportReport),
    Thumbnails {
        made: usize,
        failed: Vec<String>,
    },
    DeviceCheck {
        values: Vec<f32>,
    },
    Indexed {
        stats: IndexStats,
        version: String,
    },
    Twins(Box<TwinAnswer>),
    Timeline(Box<crate::tracklets::timeline::Timeline>),
    Tracked {
        video_id: i64,
        boxes: Vec<crate::tracklets::tracker::Tracked>,
    },
    Captions {
        frames: Vec<(
            crate::captions::query::CaptionKey,
            crate::captions::query::FrameCaptions,
        )>,
        /// The caption model's name and version.
        model: String,
    },
    CaptionSearch(Box<crate::captions::query::CaptionSearch>),
    Prompts(super::prompt_jobs::PromptOutput),
    /// A promotion (`promoted` set) or a demotion of model `name`, with the library's models
    /// folder and the twin index rebuilt when the twin encoder changed.
    Promoted {
        name: String,
        promoted: Option<super::promote::Promoted>,
        dir: PathBuf,
        reindexed: Option<(IndexStats, String)>,
    },
    /// The review queue, with the twin models' version that ordered it.
    ReviewQueue {
        items: Vec<crate::twins::review::QueueItem>,
        version: String,
        /// Which prompt model's entropy is in it, or why none is.
        prompts: String,
    },
    /// A report made and saved (`json`, its PNG beside it).
    Report {
        card: PathBuf,
        report: Box<crate::eval::report::Report>,
        json: PathBuf,
    },
}

pub(super) fn run(
    compute: &Compute,
    library: &Path,
    job: Job,
    progress: &std::sync::Arc<Progress>,
) -> Result<JobOutput, String> {
    match job {
        Job::Import {
            layout,
            path,
            options,
        } => import_job(library, progress, |store| {
            import::run(layout, store, &path, options, progress)
        }),
        Job::ImportBoxes {
            path,
            video,
            options,
        } => import_job(library, progress, |store| {
            import::boxes_onto_video(store, &path, &video, options, progress)
        }),
        Job::ImportFiles { files, options } => {
            let root = files
                .first()
                .and_then(|f| f.parent())
                .map(Path::to_path_buf)
                .unwrap_or_default();
            import_job(library, progress, |store| {
                import_files(store, &root, &files, options, progress)
            })
        }
        Job::Thumbnails => {
            let mut store = Store::open(library, OpenMode::Existing).map_err(|e| e.to_string())?;
            thumbnails(&mut store, progress).map_err(|e| e.to_string())
        }
        Job::DeviceCheck => Ok(JobOutput::DeviceCheck {
            values: device_check(compute),
        }),
        Job::IndexTwins { models } => {
            let mut store = Store::open(library, OpenMode::Existing).map_err(|e| e.to_string())?;
            let models = TwinModels::load(&models, &compute.device).map_err(|e| e.to_string())?;
            let stats = index_library(&mut store, &models, progress).map_err(|e| e.to_string())?;
            TWIN_CACHE.with(|c| c.borrow_mut().take());
            Ok(JobOutput::Indexed {
                stats,
                version: models.version(),
            })
        }
        Job::Promote { card, run } => {
            let p = super::promote::promote(library, &card, run).map_err(|e| e.to_string())?;
            let (name, dir) = (p.name.clone(), p.dir.clone());
            changed_model(compute, library, name, Some(p), dir, progress)
        }
        Job::ReviewQueue {
            models,
            order,
            limit,
            prompts,
        } => {
            let (entropy, said) = match &prompts {
                Some(card) => match prompt_entropies(compute, library, card, progress) {
                    Ok((h, model)) => (h, format!("with the prompt entropy of {model}")),
                    Err(e) => (Default::default(), format!("without prompt entropy: {e}")),
                },
                None => (
                    Default::default(),
                    "without prompt entropy: no prompt model".into(),
                ),
            };
            let store = Store::open(library, OpenMode::Existing).map_err(|e| e.to_string())?;
            let models = TwinModels::load(&models, &compute.device).map_err(|e| e.to_string())?;
            let index = TwinIndex::load(&store, &models).map_err(|e| e.to_string())?;
            progress.stage("ordering the review queue", 0);
            Ok(JobOutput::ReviewQueue {
                items: crate::twins::review::queue(&index, 6, order, limit, &entropy),
                version: index.version.clone(),
                prompts: said,
            })
        }
        Job::Report { card, data } => {
            use crate::eval::report;
            let active = super::promote::models_dir_for(library);
            let made = report::build(&card, Some(&active), &data, &compute.device, progress)
                .map_err(|e| format!("report of {}: {e}", card.display()))?;
            let json = report::json_path(&card);
            made.save(&json).map_err(|e| e.to_string())?;
            Ok(JobOutput::Report {
                card,
                report: Box::new(made),
                json,
            })
        }
        Job::Demote { name } => {
            super::promote::demote(library, &name).map_err(|e| e.to_string())?;
            let dir = super::promote::active_dir(library);
            changed_model(compute, library, name, None, dir, progress)
        }
        Job::Twins {
            models,
            query,
            k,
            search,
        } => twins(compute, library, &models, query, k, search, progress)
            .map(|a| JobOutput::Twins(Box::new(a)))
            .map_err(|e| e.to_string()),
        Job::TrackBox {
            video_id,
            frame,
            xywh,
        } => {
            let store = Store::open(library, OpenMode::Existing).map_err(|e| e.to_string())?;
            crate::tracklets::tracker::follow_in_video(&store, video_id, frame, xywh, progress)
                .map(|boxes| JobOutput::Tracked { video_id, boxes })
                .map_err(|e| e.to_string())
        }
        Job::DescribeCaptions { models, keys } => {
            let store = Store::open(library, OpenMode::Existing).map_err(|e| e.to_string())?;
            let loaded = caption_model(&models, compute)?;
            crate::captions::query::describe_media(&store, &loaded, &keys, 5, &compute.device)
                .map(|frames| JobOutput::Captions {
                    frames,
                    model: format!("{} {}", loaded.card.name, loaded.card.version),
                })
                .map_err(|e| e.to_string())
        }
        Job::Prompts(job) => {
            super::prompt_jobs::run(compute, library, job, progress).map(JobOutput::Prompts)
        }
        Job::SearchCaptions { models, query } => {
            let store = Store::open(library, OpenMode::Existing).map_err(|e| e.to_string())?;
            let loaded = caption_model(&models, compute)?;
            crate::captions::query::search(&store, &loaded, &query, 24, &compute.device)
                .map(|s| JobOutput::CaptionSearch(Box::new(s)))
                .map_err(|e| e.to_string())
        }
        Job::TrackletTimeline {
            video_id,
            models,
            comparison,
        } => {
            let store = Store::open(library, OpenMode::Existing).map_err(|e| e.to_string())?;
            TIMELINE_CACHE
                .with(|cell| {
                    let mut cell = cell.borrow_mut();
                    let key = (library.to_path_buf(), models.clone());
                    if cell.0.as_ref() != Some(&key) {
                        *cell = (Some(key), Default::default());
                    }
                    crate::tracklets::timeline::build(
                        &store,
                        video_id,
                        (&models, comparison),
                        &compute.device,
                        progress,
                        &mut cell.1,
                    )
                })
                .map(|t| JobOutput::Timeline(Box::new(t)))
                .map_err(|e| e.to_string())
        }
    }
}

/// The models, index and map of the last twin query, kept on the engine thread so the next
/// query of the same library and models starts at encoding.
struct TwinCache {
    key: (PathBuf, PathBuf),
    models: TwinModels,
    index: TwinIndex,
    pca: crate::twins::map::Pca,
    map: std::sync::Arc<crate::twins::map::LibraryMap>,
}

/// The timeline's tracklet embeddings, for one (library, models folder): kept on the engine
/// thread so an edit re-encodes only the tracklets it changed.
type TimelineCache = (
    Option<(PathBuf, PathBuf)>,
    crate::tracklets::twin::TwinCache,
);

thread_local! {
    static TIMELINE_CACHE: std::cell::RefCell<TimelineCache> = std::cell::RefCell::new((None, Default::default()));
    static TWIN_CACHE: std::cell::RefCell<Option<TwinCache>> = const { std::cell::RefCell::new(None) };
}

fn twins(
    compute: &Compute,
    library: &Path,
    models_dir: &Path,
    query: TwinQuery,
    k: usize,
    search: Search,
    progress: &Progress,
) -> Result<TwinAnswer, TwinError> {
    let started = std::time::Instant::now();
    let store = Store::open(library, OpenMode::Existing)?;
    let key = (library.to_path_buf(), models_dir.to_path_buf());
    TWIN_CACHE.with(|cell| {
        let mut cache = cell.borrow_mut();
        if cache.as_ref().is_none_or(|c| c.key != key) {
            *cache = None;
            progress.stage("loading models and index", 0);
            let models = TwinModels::load(models_dir, &compute.device)?;
            let index = TwinIndex::load(&store, &models)?;
            let (pca, points) = index.map();
            let map = index
                .polyps()
                .iter()
                .zip(points)
                .map(|(p, xy)| (p.id, p.histology.clone().unwrap_or_default(), xy))
                .collect();
            let map = std::sync::Arc::new(crate::twins::map::LibraryMap::new(map));
            *cache = Some(TwinCache {
                key,
                models,
                index,
                pca,
                map,
            });
        }
        let c = cache.as_ref().expect("filled above");
        progress.stage("encoding the query", 1);
        let (images, stored, exclude) = match &query {
            TwinQuery::Media {
                ids,
                exclude_polyps,
            } => {
                let mut images = Vec::new();
                let mut stored = Vec::new();
                for id in ids {
                    let m = store.media(*id)?.ok_or_else(|| {
                        TwinError::Image(format!("media {id} is not in the library"))
                    })?;
                    // A view is read from the index only with its familiarity score when
                    // the card has statistics; else it is encoded (both in one pass).
                    let kept = crate::twins::stored_view_embedding(&store, &c.models, &m)?;
                    let score = crate::twins::stored_view_score(&store, &c.models, &m)?;
                    let wanted = c.models.image_card.familiarity.is_some();
                    let kept = match (kept, score) {
                        (Some(v), s) if !wanted || s.is_some() => Some((v, s)),
                        _ => None,
                    };
                    if kept.is_none() {
                        images.push(crate::twins::load_view(&store, &m)?);
                    }
                    stored.push(kept);
                }
                (images, stored, exclude_polyps.clone())
            }
            TwinQuery::Files { paths, boxes } => {
                let mut images = Vec::new();
                for (i, p) in paths.iter().enumerate() {
                    let d = images::decode_file(p)
                        .map_err(|e| TwinError::Image(format!("{}: {e}", p.display())))?;
                    // Files carry no mask: the user's box, else the centred field of view.
                    let focus = match boxes.get(i).copied().flatten() {
                        Some(b) => Focus::Box(b),
                        None => Focus::FieldOfView,
                    };
                    images.push((d.image, focus));
                }
                let stored = vec![None; images.len()];
                (images, stored, Vec::new())
            }
        };
        // Views indexed with these models keep their stored embeddings (and scores); only
        // the others (opened files, a view whose box changed) are encoded.
        let (encoded, fresh_scores) = c.models.encode_views_judged(&images);
        let mut fresh = encoded.into_iter().zip(
            fresh_scores
                .map(|s| s.into_iter().map(Some).collect::<Vec<_>>())
                .unwrap_or_else(|| vec![None; images.len()]),
        );
        let mut views = Vec::new();
        let mut scores = Vec::new();
        for kept in stored {
            if let Some((v, s)) = kept.or_else(|| fresh.next()) {
                views.push(v);
                scores.push(s);
            }
        }
        let scores: Option<Vec<f32>> = scores.into_iter().collect();
        if views.is_empty() {
            return Err(TwinError::Image("no views to query with".into()));
        }
        let (result, embedding) =
            crate::twins::query_views(&c.models, &c.index, &views, k, search, &exclude);
        progress.inc();
        let familiarity = crate::twins::trust::judge(&c.models, scores.as_deref());
        let vote_confidence = crate::twins::trust::vote_confidence(&c.models, &result.vote);
        Ok(TwinAnswer {
            query,
            result,
            version: c.index.version.clone(),
            indexed: c.index.len(),
            turns: c.models.input().turns,
            map: c.map.clone(),
            query_point: c.pca.project(&embedding),
            millis: started.elapsed().as_secs_f64() * 1000.0,
            familiarity,
            vote_confidence,
        })
    })
}

/// The library an import writes to; waiting for another writer shows on the progress line.
fn open_for_import(library: &Path, progress: &std::sync::Arc<Progress>) -> Result<Store, String> {
    let mut store = Store::open(library, OpenMode::CreateIfMissing).map_err(|e| e.to_string())?;
    let p = progress.clone();
    store.on_wait(Box::new(move |msg| p.stage(msg, 0)));
    Ok(store)
}

/// Runs an import into `library`. A library the import made and left holding nothing (the
/// import refused, failed or found nothing to add) is removed again: no empty
/// `library.sqlite` stays behind.
fn import_job(
    library: &Path,
    progress: &std::sync::Arc<Progress>,
    f: impl FnOnce(&mut Store) -> Result<ImportReport, import::ImportError>,
) -> Result<JobOutput, String> {
    let db = crate::store::resolve_db_path(library);
    let new_library = !db.exists();
    let new_folder = db.parent().is_none_or(|root| !root.exists());
    let mut store = open_for_import(library, progress)?;
    let result = f(&mut store);
    if new_library && !result.as_ref().is_ok_and(|r| r.changed) {
        store
            .discard_if_empty(new_folder)
            .map_err(|e| format!("{e} (removing the library this import made)"))?;
    }
    result.map(JobOutput::Imported).map_err(|e| e.to_string())
}

fn import_files(
    store: &mut Store,
    root: &Path,
    files: &[PathBuf],
    options: ImportOptions,
    progress: &Progress,
) -> Result<ImportReport, import::ImportError> {
    let mut problems = import::Problems::default();
    let plan = import::folder::read_files(root, files, progress, &mut problems)?;
    import::write_checked(store, plan, problems, "import:files", options, progress)
}

fn thumbnails(store: &mut Store, progress: &Progress) -> crate::store::Result<JobOutput> {
    let missing = store.media_without_thumbnail()?;
    progress.stage("thumbnails", missing.len() as u64);
    let mut made = Vec::new();
    let mut failed = Vec::new();
    for m in &missing {
        if progress.is_cancelled() {
            break;
        }
        match images::decode_media(store, m) {
            Ok(d) => made.push((
                m.id,
                images::thumbnail_jpeg(&d.image, import::THUMBNAIL_SIDE),
            )),
            Err(e) => failed.push(format!("{}: {e}", m.rel_path)),
        }
        progress.inc();
    }
    store.write(|tx| -> crate::store::Result<()> {
        for (id, png) in &made {
            set_thumbnail(tx, *id, png)?;
        }
        Ok(())
    })?;
    Ok(JobOutput::Thumbnails {
        made: made.len(),
        failed,
    })
}

/// `[[1, 2], [3, 4]] x [[5, 6], [7, 8]]` on the device, row-major.
pub fn device_check(compute: &Compute) -> Vec<f32> {
    let d = &compute.device;
    let a = Tensor::<2>::from_data(TensorData::new(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2]), d);
    let b = Tensor::<2>::from_data(TensorData::new(vec![5.0f32, 6.0, 7.0, 8.0], [2, 2]), d);
    a.matmul(b)
        .into_data()
        .try_to_vec::<f32>()
        .expect("f32 tensor data")
}

/// The caption model in `models`, or why there is none.
fn caption_model(
    models: &Path,
    compute: &Compute,
) -> Result<crate::captions::model::LoadedCaptionModel, String> {
    let path = crate::captions::model::shipped_path(models);
    crate::captions::model::load(&path, &compute.device).map_err(|e| {
        format!(
            "no caption model: {e} (train one with `endotwin train captions` or the Training tab)"
        )
    })
}

/// Each polyp's benign-vs-neoplastic prompt entropy under the prompt model of `card`,
/// encoding the library's stills it has not encoded yet; with the model's name.
fn prompt_entropies(
    compute: &Compute,
    library: &Path,
    card: &Path,
    progress: &std::sync::Arc<Progress>,
) -> Result<(std::collections::HashMap<i64, f64>, String), String> {
    let model = crate::prompts::model::load(card, &compute.device).map_err(|e| e.to_string())?;
    let mut store = Store::open(library, OpenMode::Existing).map_err(|e| e.to_string())?;
    if !store.is_read_only() {
        crate::prompts::query::index_library(&model, &mut store, &compute.device, progress)
            .map_err(|e| e.to_string())?;
    }
    let set = crate::prompts::default_set("benign vs neoplastic");
    let h = crate::prompts::query::polyp_entropies(&model, &store, &set, &compute.device)
        .map_err(|e| e.to_string())?;
    Ok((h, model.named()))
}

/// After a promotion or demotion: the twin index is rebuilt with the library's new twin
/// models (other capabilities key their caches by model version and re-encode on next use).
fn changed_model(
    compute: &Compute,
    library: &Path,
    name: String,
    promoted: Option<super::promote::Promoted>,
    dir: PathBuf,
    progress: &std::sync::Arc<Progress>,
) -> Result<JobOutput, String> {
    let reindexed = super::promote::reindex_after(library, &name, &compute.device, progress)?;
    if reindexed.is_some() {
        TWIN_CACHE.with(|c| c.borrow_mut().take());
    }
    Ok(JobOutput::Promoted {
        name,
        promoted,
        dir,
        reindexed,
    })
}
