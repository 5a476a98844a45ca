//! Fitting a model's trust (familiarity statistics and confidence calibration) on the
//! libraries it learned from and in-domain validation libraries, and storing them in its
//! card: what `endotwin model trust` runs and what every in-app training run does when it
//! has saved its model.

use crate::model::weights::{self, ModelKind};
use crate::plumbing::Progress;
use crate::store::{OpenMode, Store};
use crate::trust::{Calibration, Familiarity, Gathered};
use burn::tensor::Device;
use std::path::{Path, PathBuf};

/// Where a fit reads: the model's own data (every `every`-th item held out for validation;
/// 0: none) and in-domain validation libraries it never trained on.
pub struct Libraries {
    pub fit: Vec<PathBuf>,
    pub validation: Vec<PathBuf>,
    pub every: usize,
    /// Text-prompt models: frames read per library at most.
    pub frames: usize,
    /// An image encoder card is fitted as the tracklet comparisons' frame encoder (on its
    /// tracklet frames) rather than as a twin encoder (on polyp views).
    pub tracklets: bool,
    /// Folders to look in for the frame encoder a tracklet head reads (after the head's own
    /// folder and the shipped models folder).
    pub models: Vec<PathBuf>,
}

impl Libraries {
    /// The model's one training library, every fifth item held out for validation.
    pub fn of(library: &Path) -> Libraries {
        Libraries {
            fit: vec![library.to_path_buf()],
            validation: Vec::new(),
            every: 5,
            frames: 4000,
            tracklets: false,
            models: Vec::new(),
        }
    }

    /// (fit, validation) gathered by `gather` from every library.
    fn assemble<G: Gathered>(
        &self,
        gather: impl Fn(&Store, &str) -> Result<G, String>,
    ) -> Result<(G, G), String> {
        if self.every == 1 {
            return Err(
                "holding out every item leaves nothing to fit: give 0 or at least 2".into(),
            );
        }
        if self.every == 0 && self.validation.is_empty() {
            return Err(
                "no item held out and no validation library to set the threshold on".into(),
            );
        }
        // A threshold set on the data it was fitted on marks nothing it should: refused.
        let same = |a: &PathBuf| {
            let db = crate::store::resolve_db_path(a);
            std::fs::canonicalize(&db).unwrap_or(db)
        };
        for (i, f) in self.fit.iter().enumerate() {
            if self.fit[..i].iter().any(|g| same(g) == same(f)) {
                return Err(format!(
                    "{} is named twice as a fit library (its items would count twice); \
                     nothing was changed",
                    f.display()
                ));
            }
        }
        // Another path to the same images (a copy) is no validation either: by content hash.
        let hashes = |p: &PathBuf| -> Result<std::collections::HashSet<String>, String> {
            let store = Store::open_read_only(p).map_err(|e| format!("{}: {e}", p.display()))?;
            Ok(store
                .media_rows()
                .map_err(|e| format!("{}: {e}", p.display()))?
                .into_iter()
                .map(|m| m.hash)
                .collect())
        };
        // Two fit libraries that share images (a copy named beside its original) would count
        // those images twice, and a hold-out would validate on copies of fitted ones.
        if self.fit.len() > 1 {
            let mut seen = std::collections::HashSet::new();
            for f in &self.fit {
                let mine = hashes(f)?;
                let shared = mine.intersection(&seen).count();
                if shared > 0 {
                    return Err(format!(
                        "{}: {shared} of its images are in another fit library (a copy?): they would count twice; nothing was changed",
                        f.display()
                    ));
                }
                seen.extend(mine);
            }
        }
        if !self.validation.is_empty() {
            let mut fit_hashes = std::collections::HashSet::new();
            for f in &self.fit {
                fit_hashes.extend(hashes(f)?);
            }
            for v in &self.validation {
                let shared = hashes(v)?.intersection(&fit_hashes).count();
                if shared > 0 && !self.fit.iter().any(|f| same(f) == same(v)) {
                    return Err(format!(
                        "{}: {shared} of its images are in the fit libraries: validation data \
                         must be data the fit never saw; nothing was changed",
                        v.display()
                    ));
                }
            }
        }
        if let Some(both) = self
            .validation
            .iter()
            .find(|v| self.fit.iter().any(|f| same(f) == same(v)))
        {
            return Err(format!(
                "{} is both a fit and a validation library: validation data must be data the \
                 fit never saw (hold out with --hold-out-every instead); nothing was changed",
                both.display()
            ));
        }
        let read = |path: &PathBuf| -> Result<G, String> {
            let store = Store::open(path, OpenMode::Existing)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            // Statistics fitted on a damaged database's rows would be stored without a word.
            if let Some(problem) = store
                .integrity_problems(None)
                .map_err(|e| format!("{}: {e}", path.display()))?
                .first()
            {
                return Err(format!(
                    "{}: the database is damaged ({problem}); `endotwin library check` names \
                     every problem; nothing was changed",
                    path.display()
                ));
            }
            gather(&store, &path.display().to_string())
        };
        let join = |a: Option<G>, b: G| {
            Some(match a {
                Some(a) => a.join(b),
                None => b,
            })
        };
        let (mut fit, mut validation) = (None, None);
        for path in &self.fit {
            let g = read(path)?;
            if self.every >= 2 {
                let (kept, held) = g.split(self.every);
                fit = join(fit, kept);
                validation = join(validation, held);
            } else {
                fit = join(fit, g);
            }
        }
        for path in &self.validation {
            validation = join(validation, read(path)?);
        }
        match (fit, validation) {
            (Some(f), Some(v)) => Ok((f, v)),
            _ => Err("no fit library".into()),
        }
    }
}

/// A calibration whose expected calibration error on its own validation answers stays
/// above this is dropped.
pub const MAX_STORED_ECE: f64 = 0.1;

/// One line naming what a fit left out because its file could not be read (the first three,
/// then a count), or nothing.
fn left_out<'a>(what: &str, items: impl Iterator<Item = &'a String>) -> Option<String> {
    let items: Vec<&String> = items.collect();
    if items.is_empty() {
        return None;
    }
    let named: Vec<&str> = items.iter().take(3).map(|s| s.as_str()).collect();
    let more = match items.len().saturating_sub(3) {
        0 => String::new(),
        n => format!(" (and {n} more)"),
    };
    Some(format!(
        "left out {} {what} whose file could not be read: {}{more}",
        items.len(),
        named.join("; ")
    ))
}

/// `error`, and what was left out when that is why too little was left to fit on.
fn with_note(error: String, note: &Option<String>) -> String {
    match note {
        Some(n) => format!("{error} ({n})"),
        None => error,
    }
}

/// What a fit found, one line each (the CLI prints them, the Training tab logs them).
pub struct Refit {
    pub lines: Vec<String>,
}

/// Fits the trust of the model whose card is `card` on `libraries` and writes it into the
/// card. Twin image encoders: view familiarity and the vote; caption models: frames and the
/// category head; text-prompt models: frames and the detector's polyp probability. Other
/// kinds are refused by name.
pub fn refit(
    card: &Path,
    libraries: &Libraries,
    device: &Device,
    progress: &Progress,
) -> Result<Refit, String> {
    let named = |e: &dyn std::fmt::Display| format!("{}: {e}", card.display());
    let kind = weights::read_card(card).map_err(|e| named(&e))?;
    let name = kind.name.clone();
    let mut lines = Vec::new();
    // One card holds one set of statistics: the twin encoder's judge polyp views (the Digital
    // twins tab), the tracklet frame encoder's judge tracklet frames. Fitting one on the
    // other's data would leave its answers judged against the wrong inputs without a word.
    if kind.kind == ModelKind::ImageEncoder {
        use crate::twins::{FRAME_IMAGE_MODEL, IMAGE_MODEL};
        if libraries.tracklets && name == IMAGE_MODEL {
            return Err(named(&format!(
                "`{IMAGE_MODEL}` judges polyp views: its statistics are not fitted on tracklet frames (fit a copy named `{FRAME_IMAGE_MODEL}` with --tracklets); nothing was changed"
            )));
        }
        if !libraries.tracklets && name == FRAME_IMAGE_MODEL {
            return Err(named(&format!(
                "`{FRAME_IMAGE_MODEL}` judges tracklet frames: give --tracklets; nothing was changed"
            )));
        }
    }
    let (familiarity, calibration, what): (Familiarity, Option<(&str, Option<Calibration>)>, &str) =
        match kind.kind {
            ModelKind::ImageEncoder if libraries.tracklets => {
                let twins = crate::twins::TwinModels::load_cards(card, None, device)
                    .map_err(|e| named(&e))?;
                (
                    tracklet_fit(&twins, None, libraries, progress).map_err(|e| named(&e))?,
                    None,
                    "tracklet frames",
                )
            }
            ModelKind::TrackletHead => {
                let (head, head_card) =
                    crate::tracklets::load_head(card, device).map_err(|e| named(&e))?;
                let twins = frame_encoder_of(card, &head_card, libraries, device)?;
                (
                    tracklet_fit(&twins, Some(&head), libraries, progress)
                        .map_err(|e| named(&e))?,
                    None,
                    "tracklet fragments",
                )
            }
            ModelKind::ImageEncoder => {
                use crate::twins::{TwinModels, trust};
                let models = TwinModels::load_cards(card, None, device).map_err(|e| named(&e))?;
                let (fit, validation) = libraries.assemble(|store, name| {
                    trust::gather(store, &models, name, progress).map_err(|e| e.to_string())
                })?;
                let note = left_out("views", fit.left_out.iter().chain(&validation.left_out));
                let (f, vote) =
                    trust::fit(&fit, &validation).map_err(|e| with_note(named(&e), &note))?;
                lines.extend(note);
                if vote.is_none() {
                    lines.push(
                        "vote not calibrated: fewer than 20 validation polyps with a pathology"
                            .into(),
                    );
                }
                (f, Some((crate::trust::VOTE, vote)), "views")
            }
            ModelKind::CaptionModel => {
                use crate::captions::{model, trust};
                let loaded = model::load(card, device).map_err(|e| named(&e))?;
                let (fit, validation) = libraries.assemble(|store, name| {
                    trust::gather(store, &loaded, name, device, progress).map_err(|e| e.to_string())
                })?;
                let note = left_out(
                    "capsule frames",
                    fit.left_out.iter().chain(&validation.left_out),
                );
                let (f, category) =
                    trust::fit(&fit, &validation).map_err(|e| with_note(named(&e), &note))?;
                lines.extend(note);
                (
                    f,
                    Some((crate::trust::CATEGORY, Some(category))),
                    "capsule frames",
                )
            }
            ModelKind::PromptModel => {
                use crate::prompts::{model, trust};
                let loaded = model::load(card, device).map_err(|e| named(&e))?;
                let (fit, validation) = libraries.assemble(|store, name| {
                    trust::gather(
                        store,
                        &loaded,
                        name,
                        libraries.frames,
                        trust::Crops::Masked,
                        device,
                        progress,
                    )
                    .map_err(|e| e.to_string())
                })?;
                let note = left_out("frames", fit.left_out.iter().chain(&validation.left_out));
                let (f, detector) =
                    trust::fit(&fit, &validation).map_err(|e| with_note(named(&e), &note))?;
                lines.extend(note);
                if detector.is_none() {
                    lines.push(
                        "polyp probability not calibrated: the validation frames are all of one kind"
                            .into(),
                    );
                }
                (f, Some((crate::trust::DETECTOR, detector)), "frames")
            }
            other => {
                return Err(format!(
                    "{}: a {other} card; familiarity is fitted for twin image encoders (and, with --tracklets, tracklet frame encoders), tracklet heads, caption models and text-prompt models",
                    card.display()
                ));
            }
        };
    lines.insert(
        0,
        format!(
            "{name}: familiarity fitted on {} {what}, threshold {:.3} ({:.1} % of {} validation {what} beyond it)",
            familiarity.fitted,
            familiarity.threshold,
            familiarity.validation_marked * 100.0,
            familiarity.validated
        ),
    );
    // A calibration that leaves its own validation answers badly calibrated is not stored:
    // the number would be called "confidence" without earning it.
    let calibration = calibration.map(|(label, c)| match c {
        Some(c) if c.ece_fitted > MAX_STORED_ECE => {
            lines.push(format!(
                "{label} not calibrated: the best temperature or isotonic map still leaves an \
                 expected calibration error of {:.3} on the validation answers (above {MAX_STORED_ECE})",
                c.ece_fitted
            ));
            (label, None)
        }
        other => (label, other),
    });
    if let Some((label, Some(c))) = &calibration {
        lines.push(format!(
            "{label} calibrated ({}) on {} validation answers: ECE {:.3} -> {:.3} on them",
            match c.map {
                crate::trust::CalibrationMap::Temperature { .. } => "temperature",
                crate::trust::CalibrationMap::Isotonic { .. } => "isotonic",
            },
            c.answers,
            c.ece_raw,
            c.ece_fitted
        ));
    }
    weights::update_card(card, |c| {
        c.familiarity = Some(familiarity);
        if let Some((label, calibration)) = calibration {
            match calibration {
                Some(v) => {
                    c.calibration.insert(label.into(), v);
                }
                None => {
                    c.calibration.remove(label);
                }
            }
        }
    })
    .map_err(|e| named(&e))?;
    Ok(Refit { lines })
}

/// A tracklet model's familiarity: the frame features of the tracklets of the libraries.
fn tracklet_fit(
    twins: &crate::twins::TwinModels,
    head: Option<&crate::model::tracklet::TrackletEncoder>,
    libraries: &Libraries,
    progress: &Progress,
) -> Result<Familiarity, String> {
    use crate::tracklets::trust;
    let (fit, validation) = libraries.assemble(|store, name| {
        trust::gather(store, twins, head, name, progress).map_err(|e| e.to_string())
    })?;
    for g in [&fit, &validation] {
        if g.frames.iter().all(Vec::is_empty) {
            return Err(format!(
                "{}: no tracklet of {} frames or more",
                g.name,
                crate::tracklets::fragments::MIN_TRACKLET_FRAMES
            ));
        }
    }
    trust::fit(&fit, &validation, head.is_some()).map_err(|e| e.to_string())
}

/// The frame encoder a tracklet head learned over (the card's `reads`): looked for in the
/// head's folder, then `libraries.models`, then the shipped models folder, as the tracklet
/// comparisons' frame encoder or the twin encoder.
fn frame_encoder_of(
    card: &Path,
    head: &weights::ModelCard,
    libraries: &Libraries,
    device: &Device,
) -> Result<crate::twins::TwinModels, String> {
    use crate::twins::TwinModels;
    let reads = head.reads.as_ref().ok_or_else(|| {
        format!(
            "{}: the head's card does not say which twin encoder it reads",
            card.display()
        )
    })?;
    let mut dirs: Vec<PathBuf> = card.parent().map(Path::to_path_buf).into_iter().collect();
    dirs.extend(libraries.models.iter().cloned());
    dirs.push(crate::default_models_dir());
    for dir in &dirs {
        for loaded in [
            TwinModels::load_frames(dir, device),
            TwinModels::load(dir, device),
        ] {
            if let Ok(t) = loaded
                && t.image_card.sha256 == reads.sha256
            {
                return Ok(t);
            }
        }
    }
    Err(format!(
        "{}: the twin encoder the head reads ({} {}) is in none of {}",
        card.display(),
        reads.name,
        reads.version,
        dirs.iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ))
}
