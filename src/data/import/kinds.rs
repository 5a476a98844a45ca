//! One picture, one role: an image the library holds as a mask is never taken in as a
//! polyp's view or a frame, and an image it holds as a view or frame never as a mask (round
//! 13 N2: a copy of a mask under another name became two polyps' view without a word).

use super::plan::{Plan, PlanImage};
use super::{ImportError, Problems};
use crate::store::{MediaKind, Store, content_hash};
use std::path::Path;

/// Why `bytes`, wanted as `kind`, cannot be imported: the library holds the same image in
/// the other role (a mask against a picture).
fn clash(store: &Store, bytes: &[u8], kind: MediaKind) -> Result<Option<String>, ImportError> {
    let Some(row) = store.media_by_hash(&content_hash(bytes))? else {
        return Ok(None);
    };
    let is_mask = |k: MediaKind| k == MediaKind::Mask;
    Ok((is_mask(row.kind) != is_mask(kind)).then(|| {
        format!(
            "the same image is already in the library as a {} (media {}, from {}), not a {}",
            row.kind.as_str(),
            row.id,
            row.source_path,
            kind.as_str()
        )
    }))
}

/// Why one plan image (or its mask) cannot be imported, if it cannot.
fn image_clash(store: &Store, pi: &PlanImage) -> Result<Option<(String, String)>, ImportError> {
    if let Some(why) = clash(store, &pi.image.bytes, pi.kind)? {
        return Ok(Some((pi.image.source.display().to_string(), why)));
    }
    if let Some(m) = &pi.mask
        && let Some(why) = clash(store, &m.bytes, MediaKind::Mask)?
    {
        return Ok(Some((m.source.display().to_string(), why)));
    }
    Ok(None)
}

/// Drops from `plan` every polyp with a view, and every frame, whose image the library holds
/// in the other role, each named in `problems`. A polyp is dropped whole, as one with a view
/// missing is (its views are one set).
pub fn keep_roles(
    plan: &mut Plan,
    store: &Store,
    problems: &mut Problems,
) -> Result<(), ImportError> {
    for exam in &mut plan.exams {
        let mut kept = Vec::with_capacity(exam.frames.len());
        for frame in std::mem::take(&mut exam.frames) {
            match image_clash(store, &frame)? {
                Some((source, why)) => {
                    problems.push(Path::new(&source), format!("{why}; not imported"))
                }
                None => kept.push(frame),
            }
        }
        exam.frames = kept;
        let mut kept = Vec::with_capacity(exam.polyps.len());
        for polyp in std::mem::take(&mut exam.polyps) {
            let mut refused = None;
            for view in &polyp.views {
                refused = image_clash(store, view)?;
                if refused.is_some() {
                    break;
                }
            }
            match refused {
                Some((source, why)) => problems.push(
                    Path::new(&source),
                    format!("{why}; polyp '{}' is not imported", polyp.code),
                ),
                None => kept.push(polyp),
            }
        }
        exam.polyps = kept;
    }
    Ok(())
}
