//! How imported rows meet rows already in the library.
//!
//! An import adds what is new and leaves what is there. A label it brings that would change
//! one the library already holds (a polyp's histology, Vienna class, size, location, Paris
//! class or attribute; a media item's caption or label; a video's frames or boxes) is not
//! applied: it is returned as a [`LabelChange`] for the user to resolve through the audited
//! labelling path. Under [`LabelPolicy::Update`] (the CLI's `--update-labels`) it is applied,
//! and each changed label writes one audit row (who, when, old value, new value). A label
//! the library does not have yet is filled in, with an audit row when its target already
//! existed. Equal values write nothing, so importing the same source twice is a no-op.

use super::db::{OptionalExtension, Transaction, params};
use super::labels::{TargetKind, audit};
use super::{NewPolyp, Result};

/// What an import does with a label that differs from the library's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelPolicy {
    /// Keep the library's value; report the difference.
    Keep,
    /// Apply the source's value with an audit row per label, written as `who`.
    Update { who: String },
}

/// A label an import found different from the library's.
#[derive(Debug, Clone, PartialEq)]
pub struct LabelChange {
    /// What carries the label, e.g. `polyp P-12` or `media 31 (a/b.jpg)`.
    pub target: String,
    pub key: String,
    pub library: String,
    pub incoming: String,
    /// Whether it was applied (`--update-labels`).
    pub applied: bool,
}

impl std::fmt::Display for LabelChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.applied {
            write!(
                f,
                "{}: {} changed from '{}' to '{}' (audited)",
                self.target, self.key, self.library, self.incoming
            )
        } else {
            write!(
                f,
                "{}: {} is '{}' in the library but '{}' in this source; kept the library's \
                 (change it through labelling, or import again with --update-labels)",
                self.target, self.key, self.library, self.incoming
            )
        }
    }
}

/// The policy and the differences met so far, for one import's transaction.
#[derive(Debug)]
pub struct Merge {
    pub policy: LabelPolicy,
    /// Who fills a missing label on an existing target (the import's name).
    pub who: String,
    pub changes: Vec<LabelChange>,
}

struct Target<'a> {
    kind: TargetKind,
    id: i64,
    name: &'a str,
}

impl Merge {
    pub fn new(policy: LabelPolicy, who: &str) -> Merge {
        Merge {
            policy,
            who: who.to_string(),
            changes: Vec::new(),
        }
    }

    /// Compares one label; returns whether the caller should write `incoming`.
    /// Writes the audit row for fills and applied changes.
    fn label(
        &mut self,
        tx: &Transaction<'_>,
        target: &Target<'_>,
        key: &str,
        library: Option<String>,
        incoming: Option<String>,
    ) -> Result<bool> {
        let Some(incoming) = incoming else {
            return Ok(false);
        };
        match library {
            Some(old) if old == incoming => Ok(false),
            None => {
                audit(
                    tx,
                    target.kind,
                    target.id,
                    key,
                    &self.who,
                    None,
                    Some(&incoming),
                )?;
                Ok(true)
            }
            Some(old) => {
                let applied = match &self.policy {
                    LabelPolicy::Keep => false,
                    LabelPolicy::Update { who } => {
                        audit(
                            tx,
                            target.kind,
                            target.id,
                            key,
                            who,
                            Some(&old),
                            Some(&incoming),
                        )?;
                        true
                    }
                };
                self.changes.push(LabelChange {
                    target: target.name.to_string(),
                    key: key.to_string(),
                    library: old,
                    incoming,
                    applied,
                });
                Ok(applied)
            }
        }
    }
}

fn fmt_mm(v: f64) -> String {
    format!("{v}")
}

/// The polyp with this code: created with everything when new (returns `true`), otherwise
/// merged label by label.
pub fn merge_polyp(tx: &Transaction<'_>, p: &NewPolyp, merge: &mut Merge) -> Result<(i64, bool)> {
    let existing: Option<i64> = tx
        .query_row("SELECT id FROM polyps WHERE code = ?1", [&p.code], |r| {
            r.get(0)
        })
        .optional()?;
    let Some(id) = existing else {
        return Ok((super::upsert_polyp(tx, p)?, true));
    };
    let name = format!("polyp {}", p.code);
    let target = Target {
        kind: TargetKind::Polyp,
        id,
        name: &name,
    };
    let label = |key: &str| -> Result<Option<String>> {
        tx.query_row(
            "SELECT value FROM labels WHERE target_kind = 'polyp' AND target_id = ?1 AND key = ?2",
            params![id, key],
            |r| r.get(0),
        )
        .optional()
    };
    type Current = (
        Option<String>,
        Option<i64>,
        Option<f64>,
        Option<String>,
        Option<String>,
    );
    let (histology, vienna, size, location, paris): Current = tx.query_row(
        "SELECT pa.histology, pa.vienna_class, coalesce(p.size_mm, pa.size_mm), p.location, p.paris
         FROM polyps p LEFT JOIN pathology pa ON pa.polyp_id = p.id WHERE p.id = ?1",
        [id],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
    )?;
    let has_pathology = histology.is_some();
    let histology = label("histology")?.or(histology);
    let vienna = label("vienna_class")?.or(vienna.map(|v| v.to_string()));
    if merge.label(tx, &target, "histology", histology, p.histology.clone())? {
        let h = p.histology.as_deref().unwrap_or("unknown");
        tx.execute(
            "INSERT INTO pathology(polyp_id, histology) VALUES (?1, ?2)
             ON CONFLICT(polyp_id) DO UPDATE SET histology = ?2",
            params![id, h],
        )?;
        tx.execute(
            "UPDATE labels SET value = ?2 WHERE target_kind = 'polyp' AND target_id = ?1 AND key = 'histology'",
            params![id, h],
        )?;
    }
    let incoming_vienna = p.vienna_class.map(|v| v.to_string());
    if merge.label(tx, &target, "vienna_class", vienna, incoming_vienna.clone())? {
        if !has_pathology && p.histology.is_none() {
            tx.execute(
                "INSERT INTO pathology(polyp_id, histology) VALUES (?1, 'unknown') ON CONFLICT DO NOTHING",
                [id],
            )?;
        }
        tx.execute(
            "UPDATE pathology SET vienna_class = ?2 WHERE polyp_id = ?1",
            params![id, p.vienna_class],
        )?;
        tx.execute(
            "UPDATE labels SET value = ?2 WHERE target_kind = 'polyp' AND target_id = ?1 AND key = 'vienna_class'",
            params![id, incoming_vienna],
        )?;
    }
    if merge.label(
        tx,
        &target,
        "size_mm",
        size.map(fmt_mm),
        p.size_mm.map(fmt_mm),
    )? {
        tx.execute(
            "UPDATE polyps SET size_mm = ?2 WHERE id = ?1",
            params![id, p.size_mm],
        )?;
        tx.execute(
            "UPDATE pathology SET size_mm = ?2 WHERE polyp_id = ?1",
            params![id, p.size_mm],
        )?;
    }
    if merge.label(tx, &target, "location", location, p.location.clone())? {
        tx.execute(
            "UPDATE polyps SET location = ?2 WHERE id = ?1",
            params![id, p.location],
        )?;
    }
    if merge.label(tx, &target, "paris", paris, p.paris.clone())? {
        tx.execute(
            "UPDATE polyps SET paris = ?2 WHERE id = ?1",
            params![id, p.paris],
        )?;
    }
    for (k, v) in &p.attributes {
        let old: Option<String> = tx
            .query_row(
                "SELECT value FROM attributes WHERE polyp_id = ?1 AND key = ?2",
                params![id, k],
                |r| r.get(0),
            )
            .optional()?;
        if merge.label(tx, &target, k, old, Some(v.clone()))? {
            tx.execute(
                "INSERT INTO attributes(polyp_id, key, value) VALUES (?1, ?2, ?3) ON CONFLICT (polyp_id, key) DO UPDATE SET value = excluded.value",
                params![id, k, v],
            )?;
        }
    }
    Ok((id, false))
}

/// A media item's caption: written when it has none, compared otherwise.
pub fn merge_caption(
    tx: &Transaction<'_>,
    media_id: i64,
    name: &str,
    text: &str,
    refined: Option<(&str, &str)>,
    merge: &mut Merge,
) -> Result<()> {
    let old: Option<String> = super::cases::caption_of(tx, media_id)?;
    if old.is_none() {
        // A new caption on media this import brings is plain data, not a change.
        return super::set_caption(tx, media_id, text, refined);
    }
    let target = Target {
        kind: TargetKind::Media,
        id: media_id,
        name,
    };
    if merge.label(tx, &target, "caption", old, Some(text.to_string()))? {
        super::set_caption(tx, media_id, text, refined)?;
    }
    Ok(())
}

/// A label that arrives with a media item (e.g. a HyperKvasir class).
pub fn merge_media_label(
    tx: &Transaction<'_>,
    media_id: i64,
    name: &str,
    key: &str,
    value: &str,
    merge: &mut Merge,
) -> Result<()> {
    let old: Option<String> = tx
        .query_row(
            "SELECT value FROM labels WHERE target_kind = 'media' AND target_id = ?1 AND key = ?2",
            params![media_id, key],
            |r| r.get(0),
        )
        .optional()?;
    let target = Target {
        kind: TargetKind::Media,
        id: media_id,
        name,
    };
    if merge.label(tx, &target, key, old, Some(value.to_string()))? {
        tx.execute(
            "INSERT INTO labels(target_kind, target_id, key, value) VALUES ('media', ?1, ?2, ?3) ON CONFLICT (target_kind, target_id, key) DO UPDATE SET value = excluded.value",
            params![media_id, key, value],
        )?;
    }
    Ok(())
}

/// One frame of a video: added when the index is free, compared otherwise.
pub fn merge_video_frame(
    tx: &Transaction<'_>,
    video: (i64, &str),
    frame_index: i64,
    media_id: i64,
    merge: &mut Merge,
) -> Result<()> {
    let old: Option<i64> = tx
        .query_row(
            "SELECT media_id FROM video_frames WHERE video_id = ?1 AND frame_index = ?2",
            params![video.0, frame_index],
            |r| r.get(0),
        )
        .optional()?;
    let name = format!("video {}", video.1);
    let target = Target {
        kind: TargetKind::Video,
        id: video.0,
        name: &name,
    };
    let key = format!("frame {frame_index}");
    let fmt = |m: i64| format!("media {m}");
    let write = match old {
        None => true,
        Some(_) => merge.label(tx, &target, &key, old.map(fmt), Some(fmt(media_id)))?,
    };
    if write {
        super::add_video_frame(tx, video.0, frame_index, media_id)?;
    }
    Ok(())
}

/// Whether a video already holds boxes, and if so whether they are `incoming` (same frames
/// and coordinates within a hundredth of a pixel). Returns whether the caller should
/// (re)write the video's boxes; an applied change first removes the old boxes and tracklets.
pub fn merge_video_boxes(
    tx: &Transaction<'_>,
    video: (i64, &str),
    incoming: &[(i64, [f64; 4])],
    merge: &mut Merge,
) -> Result<bool> {
    let mut stmt = tx.prepare(
        "SELECT frame_index, x, y, w, h FROM boxes WHERE video_id = ?1 ORDER BY frame_index, x, y",
    )?;
    let old: Vec<(i64, [f64; 4])> = stmt
        .query_map([video.0], |r| {
            Ok((r.get(0)?, [r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?]))
        })?
        .collect::<Result<_>>()?;
    if old.is_empty() {
        return Ok(!incoming.is_empty());
    }
    let mut new: Vec<(i64, [f64; 4])> = incoming.to_vec();
    new.sort_by(|a, b| {
        (a.0, a.1[0], a.1[1])
            .partial_cmp(&(b.0, b.1[0], b.1[1]))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let same = old.len() == new.len()
        && old
            .iter()
            .zip(&new)
            .all(|(a, b)| a.0 == b.0 && a.1.iter().zip(&b.1).all(|(x, y)| (x - y).abs() < 0.01));
    if same {
        return Ok(false);
    }
    let name = format!("video {}", video.1);
    let target = Target {
        kind: TargetKind::Video,
        id: video.0,
        name: &name,
    };
    let describe = |b: &[(i64, [f64; 4])]| {
        let frames: std::collections::BTreeSet<i64> = b.iter().map(|x| x.0).collect();
        format!("{} boxes on {} frames", b.len(), frames.len())
    };
    let applied = merge.label(
        tx,
        &target,
        "boxes",
        Some(describe(&old)),
        Some(describe(&new)),
    )?;
    if applied {
        tx.execute("DELETE FROM boxes WHERE video_id = ?1", [video.0])?;
        tx.execute("DELETE FROM tracklets WHERE video_id = ?1", [video.0])?;
    }
    Ok(applied)
}
