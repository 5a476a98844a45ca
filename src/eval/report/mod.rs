//! Evaluation reports: what the Training tab shows after a run (and for any model on demand)
//! and `endotwin eval report` writes. A report scores one model beside the library's active
//! model of the same capability, always on a held-out library that is not the run's training
//! data: the capability's metrics with their bootstrap intervals, ROC and precision-recall
//! curves of its main binary decision, and a confusion matrix. It is saved beside the model's
//! card as `<card>.report.json` and `<card>.report.png`.
//!
//! Adding a capability: a builder in this folder that fills a [`Report`], and a line in
//! [`build`] for its model kind.

pub mod calibration;
pub mod captions;
pub mod draw;
pub mod prompts;
pub mod tracklets;
pub mod twins;

pub use calibration::{CalibrationFigures, ReportCalibration};

use crate::model::weights::{self, ModelKind};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One figure of the model and of the active model beside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportMetric {
    pub name: String,
    pub model: f64,
    pub model_ci: Option<[f64; 2]>,
    pub active: Option<f64>,
    pub active_ci: Option<[f64; 2]>,
}

/// ROC and precision-recall curves of one model's scores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Curves {
    pub label: String,
    /// (false-positive rate, true-positive rate), from (0, 0) to (1, 1).
    pub roc: Vec<[f64; 2]>,
    /// (recall, precision), one point per distinct score threshold, highest first.
    pub pr: Vec<[f64; 2]>,
    /// None when the scores hold one class only (every answer right, say): no figure to give.
    /// A report once wrote NaN here, as JSON `null`, and could not be read back.
    pub auroc: Option<f64>,
    /// Average precision (the area under the step PR curve); None without a positive.
    pub ap: Option<f64>,
    pub positives: usize,
    pub negatives: usize,
}

/// Counts of (truth, prediction): rows are the truth, columns the prediction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Confusion {
    /// What is being decided, and how ("pairs linked at cosine >= 0.75").
    pub of: String,
    pub classes: Vec<String>,
    pub counts: Vec<Vec<usize>>,
}

impl Confusion {
    /// The colour of cell (`truth`, `predicted`): brighter the larger its share of the row,
    /// green on the diagonal, red off it (the PNG and the panel draw it the same).
    pub fn shade(&self, truth: usize, predicted: usize) -> [u8; 3] {
        let row = &self.counts[truth];
        let total: usize = row.iter().sum();
        let share = if total == 0 {
            0.0
        } else {
            row[predicted] as f32 / total as f32
        };
        let g = (40.0 + 215.0 * share) as u8;
        if truth == predicted {
            [g / 3, g, g / 3]
        } else {
            [g, g / 3, g / 3]
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The capability ("tracklet re-identification").
    pub capability: String,
    /// The model scored: its card.
    pub model: String,
    /// The library's active model of the same capability, when there is one.
    pub active: Option<String>,
    /// The held-out library it ran on.
    pub held_out: String,
    pub seed: u64,
    pub bootstrap: usize,
    pub metrics: Vec<ReportMetric>,
    /// What the curves score ("pairs of tracklets: same polyp or not").
    pub curves_of: String,
    /// The model's curves first, then the active model's.
    pub curves: Vec<Curves>,
    /// The model's decisions (the active model's are in the metrics).
    pub confusion: Option<Confusion>,
    /// The calibration of the confidence the model shows, on the held-out data (None: a
    /// report saved before reports measured it).
    #[serde(default)]
    pub calibration: Option<ReportCalibration>,
    pub made_at: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Weights(#[from] weights::WeightsError),
    #[error("{0}")]
    Data(String),
    #[error("{held_out} is the library the run trained on: a report is made on held-out data only")]
    TrainingData { held_out: String },
    #[error(
        "no evaluation report for a {0} yet (reports exist for twin image and scene encoders, tracklet models, prompt models and caption models)"
    )]
    Unsupported(ModelKind),
    #[error("{path}: {}", crate::plumbing::input::plain_io(.io))]
    Io { path: String, io: std::io::Error },
    #[error(transparent)]
    Output(#[from] crate::plumbing::output::OutputError),
}

/// Where a report's held-out data comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportData {
    /// A held-out library; `None`: the phantom's validation split of `seed`, generated.
    pub held_out: Option<PathBuf>,
    /// The library the model trained on: refused as held-out data.
    pub trained_on: Option<PathBuf>,
    pub seed: u64,
    /// Size of a generated split: polyps (twins, prompts), videos and frames per video
    /// (tracklets).
    pub polyps: usize,
    pub videos: usize,
    pub frames: usize,
    /// Captioned capsule frames of a generated split (caption reports).
    pub capsule_frames: usize,
}

impl Default for ReportData {
    fn default() -> Self {
        ReportData {
            held_out: None,
            trained_on: None,
            seed: 29,
            polyps: 200,
            videos: 12,
            frames: 800,
            capsule_frames: 480,
        }
    }
}

impl ReportData {
    /// Refuses a held-out library that is the one the model trained on.
    fn check(&self) -> Result<(), ReportError> {
        if let (Some(held), Some(trained)) = (&self.held_out, &self.trained_on) {
            let same = |a: &Path, b: &Path| {
                let canon = |p: &Path| {
                    let folder = if p.is_file() {
                        p.parent().unwrap_or(p)
                    } else {
                        p
                    };
                    folder
                        .canonicalize()
                        .unwrap_or_else(|_| folder.to_path_buf())
                };
                canon(a) == canon(b)
            };
            if same(held, trained) {
                return Err(ReportError::TrainingData {
                    held_out: held.display().to_string(),
                });
            }
            // Another path to the same images (a copy of the training library) is no more
            // held out: any image both hold, by content hash, refuses the report.
            let hashes = |p: &Path| -> Result<std::collections::HashSet<String>, ReportError> {
                let store = crate::store::Store::open_read_only(p)
                    .map_err(|e| ReportError::Data(format!("{}: {e}", p.display())))?;
                Ok(store
                    .media_rows()
                    .map_err(|e| ReportError::Data(format!("{}: {e}", p.display())))?
                    .into_iter()
                    .map(|m| m.hash)
                    .collect())
            };
            let (h, t) = (hashes(held)?, hashes(trained)?);
            let shared = h.intersection(&t).count();
            if shared > 0 {
                return Err(ReportError::Data(format!(
                    "{}: {shared} of its {} images are in {}, the library the run trained on: \
                     a report is made on held-out data only (nothing was written)",
                    held.display(),
                    h.len(),
                    trained.display()
                )));
            }
        }
        Ok(())
    }
}

/// The report for the model of `card`, beside the active model of its capability in
/// `active_models` (the library's models folder; default: the shipped one, which also gives a
/// tracklet head its twin encoder), on `data`. Runs the models on `device`.
pub fn build(
    card: &Path,
    active_models: Option<&Path>,
    data: &ReportData,
    device: &burn::tensor::Device,
    progress: &crate::plumbing::Progress,
) -> Result<Report, ReportError> {
    data.check()?;
    let kind = weights::read_card(card)?.kind;
    match kind {
        ModelKind::TrackletEncoder | ModelKind::TrackletHead => {
            tracklets::report(card, active_models, data, device, progress)
        }
        ModelKind::ImageEncoder | ModelKind::SceneEncoder => {
            twins::report(card, active_models, data, device, progress)
        }
        ModelKind::PromptModel => prompts::report(card, active_models, data, device, progress),
        ModelKind::CaptionModel => captions::report(card, active_models, data, device, progress),
        other => Err(ReportError::Unsupported(other)),
    }
}

/// The models folder reports compare with: `active_models`, else the shipped one.
fn models_folder(active_models: Option<&Path>) -> PathBuf {
    active_models
        .map(Path::to_path_buf)
        .unwrap_or_else(crate::default_models_dir)
}

/// The active model to set beside `card`: the first of `names` (card names, most preferred
/// first) present in `dir`, unless that is `card` itself.
fn active_card(card: &Path, dir: &Path, names: &[&str]) -> Option<PathBuf> {
    let same = |p: &Path| p.canonicalize().ok() == card.canonicalize().ok();
    names
        .iter()
        .map(|name| dir.join(format!("{name}.json")))
        .find(|p| p.is_file())
        .filter(|p| !same(p))
}

/// The active model beside `card` ([`active_card`]) with its card's path, loaded by `load`.
fn load_active<M>(
    card: &Path,
    dir: &Path,
    names: &[&str],
    load: impl FnOnce(&Path) -> Result<M, ReportError>,
) -> Result<Option<(PathBuf, M)>, ReportError> {
    active_card(card, dir, names)
        .map(|path| load(&path).map(|m| (path, m)))
        .transpose()
}

/// Where the report of `card` is saved: `<card stem>.report.json` beside it.
pub fn json_path(card: &Path) -> PathBuf {
    let stem = card.file_stem().and_then(|s| s.to_str()).unwrap_or("model");
    card.with_file_name(format!("{stem}.report.json"))
}

impl Report {
    /// Where [`Report::save`] puts the picture of a report saved at `json`.
    pub fn png_path(json: &Path) -> PathBuf {
        json.with_extension("png")
    }

    /// Where [`Report::save`] puts the reliability diagram of a report saved at `json` (a
    /// model with a stored calibration): `<stem>.reliability.png`.
    pub fn reliability_path(json: &Path) -> PathBuf {
        json.with_extension("reliability.png")
    }

    /// Writes the report as JSON at `json`, its picture beside it (`.png`) and, for a model
    /// with a stored calibration, its reliability diagram (`.reliability.png`), each written
    /// beside and renamed into place. Every path goes through the output guard first: never
    /// a library's own file or anything but a regular file (an existing report is replaced;
    /// the caller checks a path the user named against `--force`). Returns the pictures
    /// written.
    pub fn save(&self, json: &Path) -> Result<Vec<PathBuf>, ReportError> {
        use crate::plumbing::output::check_output;
        let png = Report::png_path(json);
        let diagram = self
            .calibration
            .as_ref()
            .and_then(ReportCalibration::figures)
            .map(|c| (Report::reliability_path(json), draw::calibration(c)));
        check_output(json, None, true)?;
        check_output(&png, None, true)?;
        if let Some((path, _)) = &diagram {
            check_output(path, None, true)?;
        }
        let text = serde_json::to_string_pretty(self).expect("a report serialises");
        let pictures: Vec<(PathBuf, Vec<u8>)> = std::iter::once((png, draw::picture(self)))
            .chain(diagram)
            .map(|(path, img)| {
                let mut bytes = std::io::Cursor::new(Vec::new());
                img.write_to(&mut bytes, image::ImageFormat::Png)
                    .map_err(|e| ReportError::Io {
                        path: path.display().to_string(),
                        io: std::io::Error::other(e.to_string()),
                    })?;
                Ok((path, bytes.into_inner()))
            })
            .collect::<Result<_, ReportError>>()?;
        // A report replacing a calibrated model's earlier one takes its diagram with it: a
        // stale diagram beside a report without calibration would show confidences it has not.
        let stale = Report::reliability_path(json);
        let stale = (diagram_missing(&pictures, &stale) && json.is_file() && stale.is_file())
            .then_some(stale);
        write_replacing(json, text.as_bytes())?;
        for (path, bytes) in &pictures {
            write_replacing(path, bytes)?;
        }
        if let Some(stale) = stale {
            std::fs::remove_file(&stale).map_err(|io| ReportError::Io {
                path: stale.display().to_string(),
                io,
            })?;
        }
        Ok(pictures.into_iter().map(|p| p.0).collect())
    }

    /// A saved report.
    pub fn load(json: &Path) -> Result<Report, ReportError> {
        let text = std::fs::read_to_string(json).map_err(|io| ReportError::Io {
            path: json.display().to_string(),
            io,
        })?;
        serde_json::from_str(&text).map_err(|e| ReportError::Io {
            path: json.display().to_string(),
            io: std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()),
        })
    }

    /// The report as text, one figure a line (the CLI prints it).
    pub fn text(&self) -> String {
        let mut out = format!(
            "{} report: {}\nheld out: {} (seed {}, {} bootstrap resamples)\n",
            self.capability, self.model, self.held_out, self.seed, self.bootstrap
        );
        if let Some(a) = &self.active {
            out.push_str(&format!("beside the active model: {a}\n"));
        }
        let ci = |c: &Option<[f64; 2]>| match c {
            Some([lo, hi]) => format!(" [{lo:.3}, {hi:.3}]"),
            None => String::new(),
        };
        for m in &self.metrics {
            out.push_str(&format!(
                "  {:<34} {:.3}{}",
                m.name,
                m.model,
                ci(&m.model_ci)
            ));
            if let Some(a) = m.active {
                out.push_str(&format!("   active {a:.3}{}", ci(&m.active_ci)));
            }
            out.push('\n');
        }
        for c in &self.curves {
            out.push_str(&format!(
                "  curves of {} ({}): AUROC {}, AP {}, {} positive / {} negative\n",
                c.label,
                self.curves_of,
                shown(c.auroc),
                shown(c.ap),
                c.positives,
                c.negatives
            ));
        }
        if let Some(c) = &self.confusion {
            out.push_str(&format!("  confusion ({}), rows true:\n", c.of));
            for (name, row) in c.classes.iter().zip(&c.counts) {
                let cells: Vec<String> = row.iter().map(|n| format!("{n:>7}")).collect();
                out.push_str(&format!("    {name:<16}{}\n", cells.join("")));
            }
        }
        if let Some(c) = &self.calibration {
            out.push_str(&c.text());
            if let Some(f) = c.figures()
                && fitted_on_held_out(&f.fitted_on, &self.held_out)
            {
                out.push_str(
                    "  note: the calibration was fitted on this split (its card says so): the \
                     calibrated error here is not a held-out figure; --seed N or --held-out \
                     LIBRARY measures it on data it never saw\n",
                );
            }
        }
        out
    }
}

/// Whether a calibration `fitted_on` names the held-out data of a report (`held_out`: "phantom
/// validation split of seed 29, 200 polyps ..." or a library's path): then the report's
/// calibrated error is measured on the calibration's own data.
fn fitted_on_held_out(fitted_on: &str, held_out: &str) -> bool {
    let key = held_out.split([',', ':']).next().unwrap_or_default().trim();
    !key.is_empty() && fitted_on.contains(key)
}

/// A curve's area to three places, or why there is none ("-": one class only).
pub fn shown(area: Option<f64>) -> String {
    area.map_or("- (one class only)".to_string(), |a| format!("{a:.3}"))
}

impl Curves {
    /// The ROC and precision-recall curves of `scores` (higher: more likely positive). Tied
    /// scores make one step, never a staircase that depends on input order.
    pub fn of(label: &str, scores: &[f64], positive: &[bool]) -> Curves {
        let mut idx: Vec<usize> = (0..scores.len()).collect();
        idx.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
        let positives = positive.iter().filter(|&&p| p).count();
        let negatives = positive.len() - positives;
        let (mut tp, mut fp) = (0usize, 0usize);
        let mut roc = vec![[0.0, 0.0]];
        let mut pr = Vec::new();
        let mut ap = 0.0;
        let mut i = 0;
        while i < idx.len() {
            let mut j = i;
            let before = tp;
            while j < idx.len() && scores[idx[j]] == scores[idx[i]] {
                if positive[idx[j]] {
                    tp += 1;
                } else {
                    fp += 1;
                }
                j += 1;
            }
            let rate = |n: usize, of: usize| if of == 0 { 0.0 } else { n as f64 / of as f64 };
            roc.push([rate(fp, negatives), rate(tp, positives)]);
            let precision = tp as f64 / (tp + fp) as f64;
            pr.push([rate(tp, positives), precision]);
            ap += rate(tp - before, positives) * precision;
            i = j;
        }
        Curves {
            label: label.to_string(),
            roc,
            pr,
            auroc: (positives > 0 && negatives > 0)
                .then(|| super::metrics::auroc(scores, positive)),
            ap: (positives > 0).then_some(ap),
            positives,
            negatives,
        }
    }
}

/// Writes `bytes` to a file beside `path` and renames it into place: a failed write leaves
/// what was there.
fn write_replacing(path: &Path, bytes: &[u8]) -> Result<(), ReportError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.partial"));
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|io| {
            let _ = std::fs::remove_file(&tmp);
            ReportError::Io {
                path: path.display().to_string(),
                io,
            }
        })
}

/// Whether `pictures` leaves out the reliability diagram at `diagram`.
fn diagram_missing(pictures: &[(PathBuf, Vec<u8>)], diagram: &Path) -> bool {
    !pictures.iter().any(|(p, _)| p == diagram)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_on_the_split_a_calibration_was_fitted_on_is_told_apart() {
        let fitted =
            "train11kv (every 5th polyp) + the phantom validation split of seed 29 (200 polyps)";
        assert!(fitted_on_held_out(
            fitted,
            "phantom validation split of seed 29, 200 polyps x 4 views"
        ));
        assert!(!fitted_on_held_out(
            fitted,
            "phantom validation split of seed 31, 200 polyps x 4 views"
        ));
        assert!(!fitted_on_held_out(fitted, ""));
    }

    #[test]
    fn a_report_without_calibration_replacing_one_with_takes_its_stale_diagram_away() {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("m.report.json");
        let diagram = Report::reliability_path(&json);
        let report = Report {
            capability: "captioning".into(),
            model: "m.json".into(),
            active: None,
            held_out: "held".into(),
            seed: 1,
            bootstrap: 10,
            metrics: Vec::new(),
            curves_of: "frames".into(),
            curves: Vec::new(),
            confusion: None,
            calibration: None,
            made_at: "now".into(),
        };
        // No earlier report: a file of that name is not this report's, and stays.
        std::fs::write(&diagram, b"someone's").unwrap();
        report.save(&json).unwrap();
        assert!(diagram.is_file());
        // Replacing a report: its diagram goes with it.
        report.save(&json).unwrap();
        assert!(!diagram.exists());
        assert!(json.is_file() && Report::png_path(&json).is_file());
    }

    #[test]
    fn curves_match_hand_computation() {
        // Scores 0.9 (+), 0.8 (-), 0.7 (+), 0.1 (-): ROC steps (0, .5), (.5, .5), (.5, 1), (1, 1).
        let c = Curves::of("m", &[0.7, 0.1, 0.9, 0.8], &[true, false, true, false]);
        assert_eq!(
            c.roc,
            vec![[0.0, 0.0], [0.0, 0.5], [0.5, 0.5], [0.5, 1.0], [1.0, 1.0]]
        );
        assert_eq!(c.pr[0], [0.5, 1.0]);
        assert_eq!(c.pr[2], [1.0, 2.0 / 3.0]);
        // AP = 0.5 * 1 + 0.5 * 2/3; AUROC = 0.75.
        assert!((c.ap.unwrap() - (0.5 + 1.0 / 3.0)).abs() < 1e-12);
        assert!((c.auroc.unwrap() - 0.75).abs() < 1e-12);
        assert_eq!((c.positives, c.negatives), (2, 2));
    }

    /// Every answer right (no negative): no AUROC to give, said so, and the report's JSON is
    /// read back (it held `null` where a number was expected and could not be, before).
    #[test]
    fn curves_of_one_class_have_no_auroc_and_round_trip() {
        let c = Curves::of("m", &[0.9, 0.8], &[true, true]);
        assert_eq!((c.auroc, c.ap), (None, Some(1.0)));
        assert_eq!(shown(c.auroc), "- (one class only)");
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<Curves>(&json).unwrap(), c);
        let none = Curves::of("m", &[0.9], &[false]);
        assert_eq!((none.auroc, none.ap), (None, None));
    }

    #[test]
    fn tied_scores_make_one_step() {
        let c = Curves::of("m", &[0.5, 0.5, 0.5, 0.5], &[true, false, false, true]);
        assert_eq!(c.roc, vec![[0.0, 0.0], [1.0, 1.0]]);
        assert_eq!(c.pr, vec![[1.0, 0.5]]);
    }

    #[test]
    fn the_training_library_is_refused_as_held_out_data() {
        let dir = tempfile::tempdir().unwrap();
        let data = ReportData {
            held_out: Some(dir.path().to_path_buf()),
            trained_on: Some(dir.path().join(".").to_path_buf()),
            ..ReportData::default()
        };
        let e = data.check().unwrap_err();
        assert!(e.to_string().contains("held-out data only"), "{e}");
    }
}
