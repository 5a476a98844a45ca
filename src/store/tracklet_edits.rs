//! A video's tracklets as the reviewer sees them, and the reviewer's edits to them. Each edit
//! is one transaction with its audit row (who, when, old, new), like a pathology correction:
//! which polyp a tracklet shows, a tracklet split at a frame (and joined back, for undo), a
//! new polyp for a tracklet no existing one fits, and link decisions between two tracklets.

use super::db::{OptionalExtension, Transaction, params};
use super::labels::{TargetKind, audit};
pub use super::tracklet_versions::TrackletWritten;
use super::tracklet_versions::{check_read, version_of, written};
use super::{Result, Store, StoreError};

/// One tracklet of a video with its extent and the polyp it is labelled with.
#[derive(Debug, Clone, PartialEq)]
pub struct TrackletRow {
    pub id: i64,
    pub video_id: i64,
    pub polyp_id: Option<i64>,
    pub polyp_code: Option<String>,
    pub first_frame: i64,
    pub last_frame: i64,
    pub boxes: i64,
    /// The tracklet's version when read: pass it with an edit made on what was shown
    /// ([`Store::assign_tracklet_as_read`]) so another station's change since is not
    /// overwritten.
    pub version: i64,
}

/// What a reviewer decided about a re-identification link between two tracklets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkDecision {
    /// The same polyp.
    Accepted,
    /// Different polyps.
    Rejected,
}

impl LinkDecision {
    pub fn as_str(self) -> &'static str {
        match self {
            LinkDecision::Accepted => "accepted",
            LinkDecision::Rejected => "rejected",
        }
    }
    pub fn parse(s: &str) -> Option<LinkDecision> {
        match s {
            "accepted" => Some(LinkDecision::Accepted),
            "rejected" => Some(LinkDecision::Rejected),
            _ => None,
        }
    }
}

/// The label key of the link from the lower tracklet id to `other` (stored on the lower id).
fn link_key(other: i64) -> String {
    format!("link:{other}")
}

fn check_who(who: &str) -> Result<()> {
    super::labels::check_reviewer(who)
}

fn polyp_text(tx: &Transaction<'_>, polyp: Option<i64>) -> Result<Option<String>> {
    let Some(id) = polyp else { return Ok(None) };
    let code: Option<String> = tx
        .query_row("SELECT code FROM polyps WHERE id = ?1", [id], |r| r.get(0))
        .optional()?;
    Ok(Some(format!("{} (polyp {id})", code.unwrap_or_default())))
}

fn tracklet_video(tx: &Transaction<'_>, tracklet: i64) -> Result<i64> {
    tx.query_row(
        "SELECT video_id FROM tracklets WHERE id = ?1",
        [tracklet],
        |r| r.get(0),
    )
    .optional()?
    .ok_or_else(|| StoreError::Invalid(format!("tracklet {tracklet} is not in the library")))
}

impl Store {
    /// A tracklet's version as the reviewer reads it ([`TrackletRow::version`]).
    pub fn tracklet_version(&self, tracklet: i64) -> Result<i64> {
        version_of(self.conn(), tracklet)
    }

    /// The tracklets of a video in order of their first frame.
    pub fn video_tracklets(&self, video_id: i64) -> Result<Vec<TrackletRow>> {
        let mut stmt = self.conn().prepare(
            "SELECT t.id, t.video_id, t.polyp_id, p.code,
                    min(b.frame_index), max(b.frame_index), count(b.id),
                    (SELECT coalesce(max(a.id), 0) FROM label_audit a
                     WHERE a.target_kind = 'tracklet' AND a.target_id = t.id)
             FROM tracklets t
             LEFT JOIN polyps p ON p.id = t.polyp_id
             LEFT JOIN boxes b ON b.tracklet_id = t.id
             WHERE t.video_id = ?1
             GROUP BY t.id, t.video_id, t.polyp_id, p.code
             HAVING count(b.id) > 0
             ORDER BY min(b.frame_index), t.id",
        )?;
        let rows = stmt.query_map([video_id], |r| {
            Ok(TrackletRow {
                id: r.get(0)?,
                video_id: r.get(1)?,
                polyp_id: r.get(2)?,
                polyp_code: r.get(3)?,
                first_frame: r.get(4)?,
                last_frame: r.get(5)?,
                boxes: r.get(6)?,
                version: r.get(7)?,
            })
        })?;
        rows.collect::<Result<_>>()
    }

    /// The polyps of the examination a video belongs to: (id, code).
    pub fn video_polyps(&self, video_id: i64) -> Result<Vec<(i64, String)>> {
        let mut stmt = self.conn().prepare(
            "SELECT p.id, p.code FROM polyps p JOIN videos v ON v.examination_id = p.examination_id
             WHERE v.id = ?1 ORDER BY p.code",
        )?;
        let rows = stmt.query_map([video_id], |r| Ok((r.get(0)?, r.get(1)?)))?;
        rows.collect::<Result<_>>()
    }

    /// Labels a tracklet (and its boxes) with a polyp, or with none. Returns the previous
    /// polyp. Audited under the tracklet, key `polyp`.
    pub fn assign_tracklet(
        &mut self,
        who: &str,
        tracklet: i64,
        polyp: Option<i64>,
    ) -> Result<Option<i64>> {
        self.assign_tracklet_as_read(who, tracklet, polyp, None)
            .map(|w| w.value)
    }

    /// [`Store::assign_tracklet`] by a reviewer who read the tracklet at version `read`: when
    /// another station edited it since, nothing is written and [`StoreError::Conflict`] says
    /// who changed what.
    pub fn assign_tracklet_as_read(
        &mut self,
        who: &str,
        tracklet: i64,
        polyp: Option<i64>,
        read: Option<i64>,
    ) -> Result<TrackletWritten<Option<i64>>> {
        check_who(who)?;
        self.write(|tx| -> Result<TrackletWritten<Option<i64>>> {
            let video = tracklet_video(tx, tracklet)?;
            check_read(tx, &[(tracklet, read)])?;
            if let Some(p) = polyp {
                let same_exam: bool = tx.query_row(
                    "SELECT EXISTS(SELECT 1 FROM polyps p JOIN videos v ON v.examination_id = p.examination_id
                     WHERE p.id = ?1 AND v.id = ?2)",
                    params![p, video],
                    |r| r.get(0),
                )?;
                if !same_exam {
                    return Err(StoreError::Invalid(format!(
                        "polyp {p} is not a polyp of this video's examination"
                    )));
                }
            }
            let old: Option<i64> = tx.query_row(
                "SELECT polyp_id FROM tracklets WHERE id = ?1",
                [tracklet],
                |r| r.get(0),
            )?;
            if old == polyp {
                return written(tx, old, &[tracklet]);
            }
            tx.execute(
                "UPDATE tracklets SET polyp_id = ?2 WHERE id = ?1",
                params![tracklet, polyp],
            )?;
            tx.execute(
                "UPDATE boxes SET polyp_id = ?2 WHERE tracklet_id = ?1",
                params![tracklet, polyp],
            )?;
            let (o, n) = (polyp_text(tx, old)?, polyp_text(tx, polyp)?);
            audit(
                tx,
                TargetKind::Tracklet,
                tracklet,
                "polyp",
                who,
                o.as_deref(),
                n.as_deref(),
            )?;
            written(tx, old, &[tracklet])
        })
    }

    /// A new polyp in the video's examination, for a tracklet that shows one no existing
    /// polyp is: code `<examination>-R<n>`. Audited under the polyp, key `created`.
    pub fn new_review_polyp(&mut self, who: &str, video_id: i64) -> Result<i64> {
        check_who(who)?;
        self.write(|tx| -> Result<i64> {
            let (exam, exam_code): (i64, String) = tx
                .query_row(
                    "SELECT e.id, e.code FROM videos v JOIN examinations e ON e.id = v.examination_id
                     WHERE v.id = ?1",
                    [video_id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?
                .ok_or_else(|| StoreError::Invalid(format!("video {video_id} is not in the library")))?;
            let mut n = 1;
            let code = loop {
                let code = format!("{exam_code}-R{n}");
                let taken: bool = tx.query_row(
                    "SELECT EXISTS(SELECT 1 FROM polyps WHERE code = ?1)",
                    [&code],
                    |r| r.get(0),
                )?;
                if !taken {
                    break code;
                }
                n += 1;
            };
            tx.execute(
                "INSERT INTO polyps(examination_id, code) VALUES (?1, ?2)",
                params![exam, code],
            )?;
            let id = tx.last_insert_rowid()?;
            let note = format!("{code}, from tracklet review of video {video_id}");
            audit(tx, TargetKind::Polyp, id, "created", who, None, Some(&note))?;
            Ok(id)
        })
    }

    /// Splits a tracklet before `frame`: its boxes from `frame` on become a new tracklet of
    /// the same polyp. Returns the new tracklet's id. Audited under the tracklet, key `split`.
    pub fn split_tracklet(&mut self, who: &str, tracklet: i64, frame: i64) -> Result<i64> {
        self.split_tracklet_as_read(who, tracklet, frame, None)
            .map(|w| w.value)
    }

    /// [`Store::split_tracklet`] checked against the version `read` (see
    /// [`Store::assign_tracklet_as_read`]).
    pub fn split_tracklet_as_read(
        &mut self,
        who: &str,
        tracklet: i64,
        frame: i64,
        read: Option<i64>,
    ) -> Result<TrackletWritten<i64>> {
        check_who(who)?;
        self.write(|tx| -> Result<TrackletWritten<i64>> {
            tracklet_video(tx, tracklet)?;
            check_read(tx, &[(tracklet, read)])?;
            let (first, last): (Option<i64>, Option<i64>) = tx.query_row(
                "SELECT min(frame_index), max(frame_index) FROM boxes WHERE tracklet_id = ?1",
                [tracklet],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            let (Some(first), Some(last)) = (first, last) else {
                return Err(StoreError::Invalid(format!(
                    "tracklet {tracklet} has no boxes"
                )));
            };
            if frame <= first || frame > last {
                return Err(StoreError::Invalid(format!(
                    "a split must fall inside the tracklet: frame {frame} is not in {}..={last}",
                    first + 1
                )));
            }
            tx.execute(
                "INSERT INTO tracklets(video_id, polyp_id, identity)
                 SELECT video_id, polyp_id, identity FROM tracklets WHERE id = ?1",
                [tracklet],
            )?;
            let new = tx.last_insert_rowid()?;
            tx.execute(
                "UPDATE boxes SET tracklet_id = ?2 WHERE tracklet_id = ?1 AND frame_index >= ?3",
                params![tracklet, new, frame],
            )?;
            let note = format!("at frame {frame}: frames {frame}..={last} are tracklet {new}");
            audit(
                tx,
                TargetKind::Tracklet,
                tracklet,
                "split",
                who,
                None,
                Some(&note),
            )?;
            written(tx, new, &[tracklet, new])
        })
    }

    /// Joins tracklet `absorbed` into `kept` (both of one video): its boxes move over and its
    /// row goes, with its link decisions. The undo of a split. Audited under `kept`, key `join`.
    pub fn join_tracklets(&mut self, who: &str, kept: i64, absorbed: i64) -> Result<()> {
        self.join_tracklets_as_read(who, kept, absorbed, [None, None])
            .map(|w| w.value)
    }

    /// [`Store::join_tracklets`] checked against the versions `read` of `kept` and `absorbed`
    /// (see [`Store::assign_tracklet_as_read`]): the undo of a split is refused when another
    /// station changed either part since.
    pub fn join_tracklets_as_read(
        &mut self,
        who: &str,
        kept: i64,
        absorbed: i64,
        read: [Option<i64>; 2],
    ) -> Result<TrackletWritten<()>> {
        check_who(who)?;
        self.write(|tx| -> Result<TrackletWritten<()>> {
            if kept == absorbed || tracklet_video(tx, kept)? != tracklet_video(tx, absorbed)? {
                return Err(StoreError::Invalid(format!(
                    "tracklets {kept} and {absorbed} are not two tracklets of one video"
                )));
            }
            check_read(tx, &[(kept, read[0]), (absorbed, read[1])])?;
            tx.execute(
                "UPDATE boxes SET tracklet_id = ?1 WHERE tracklet_id = ?2",
                params![kept, absorbed],
            )?;
            tx.execute(
                "DELETE FROM labels WHERE (target_kind = 'tracklet' AND target_id = ?1)
                    OR (target_kind = 'tracklet' AND key = ?2)",
                params![absorbed, link_key(absorbed)],
            )?;
            tx.execute("DELETE FROM tracklets WHERE id = ?1", [absorbed])?;
            let note = format!("tracklet {absorbed} joined back");
            audit(
                tx,
                TargetKind::Tracklet,
                kept,
                "join",
                who,
                None,
                Some(&note),
            )?;
            written(tx, (), &[kept])
        })
    }

    /// A new tracklet on a video from boxes a reviewer drew or a tracker followed: (frame,
    /// x, y, w, h), each on a frame the video has. Returns its id. Audited under the video,
    /// key `tracklet added`.
    pub fn add_tracklet(
        &mut self,
        who: &str,
        video_id: i64,
        polyp: Option<i64>,
        boxes: &[(i64, [f64; 4])],
        how: &str,
    ) -> Result<i64> {
        check_who(who)?;
        if boxes.is_empty() {
            return Err(StoreError::Invalid(
                "a tracklet needs at least one box".into(),
            ));
        }
        self.write(|tx| -> Result<i64> {
            for (frame, b) in boxes {
                let size: Option<(u32, u32)> = tx
                    .query_row(
                        "SELECT m.width, m.height FROM video_frames f JOIN media m ON m.id = f.media_id
                         WHERE f.video_id = ?1 AND f.frame_index = ?2",
                        params![video_id, frame],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .optional()?;
                let Some((w, h)) = size else {
                    return Err(StoreError::Invalid(format!(
                        "video {video_id} has no frame {frame}"
                    )));
                };
                let inside = b.iter().all(|v| v.is_finite())
                    && b[2] > 0.0
                    && b[3] > 0.0
                    && b[0] >= -1.0
                    && b[1] >= -1.0
                    && b[0] + b[2] <= w as f64 + 1.0
                    && b[1] + b[3] <= h as f64 + 1.0;
                if !inside {
                    return Err(StoreError::Invalid(format!(
                        "frame {frame}: box {b:?} is not inside the {w}x{h} frame"
                    )));
                }
            }
            tx.execute(
                "INSERT INTO tracklets(video_id, polyp_id, identity) VALUES (?1, ?2, NULL)",
                params![video_id, polyp],
            )?;
            let id = tx.last_insert_rowid()?;
            for (frame, [x, y, w, h]) in boxes {
                tx.execute(
                    "INSERT INTO boxes(video_id, frame_index, x, y, w, h, polyp_id, tracklet_id)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                    params![video_id, frame, x, y, w, h, polyp, id],
                )?;
            }
            let (first, last) = (
                boxes.iter().map(|b| b.0).min().expect("not empty"),
                boxes.iter().map(|b| b.0).max().expect("not empty"),
            );
            let note = format!(
                "tracklet {id}: {} boxes, frames {first}..={last}, {how}",
                boxes.len()
            );
            audit(tx, TargetKind::Video, video_id, "tracklet added", who, None, Some(&note))?;
            Ok(id)
        })
    }

    /// Removes a tracklet with its boxes and link decisions (the undo of
    /// [`Store::add_tracklet`]). Audited under the video, key `tracklet removed`.
    pub fn remove_tracklet(&mut self, who: &str, tracklet: i64) -> Result<()> {
        self.remove_tracklet_as_read(who, tracklet, None)
    }

    /// [`Store::remove_tracklet`] checked against the version `read` (see
    /// [`Store::assign_tracklet_as_read`]): the undo of an added tracklet is refused when
    /// another station gave it a polyp, split it or decided a link on it since.
    pub fn remove_tracklet_as_read(
        &mut self,
        who: &str,
        tracklet: i64,
        read: Option<i64>,
    ) -> Result<()> {
        check_who(who)?;
        self.write(|tx| -> Result<()> {
            let video = tracklet_video(tx, tracklet)?;
            check_read(tx, &[(tracklet, read)])?;
            let boxes = tx.execute("DELETE FROM boxes WHERE tracklet_id = ?1", [tracklet])?;
            tx.execute(
                "DELETE FROM labels WHERE target_kind = 'tracklet' AND (target_id = ?1 OR key = ?2)",
                params![tracklet, link_key(tracklet)],
            )?;
            tx.execute("DELETE FROM tracklets WHERE id = ?1", [tracklet])?;
            let note = format!("tracklet {tracklet} with its {boxes} boxes");
            audit(tx, TargetKind::Video, video, "tracklet removed", who, None, Some(&note))
        })
    }

    /// Records (or, with `None`, clears) the reviewer's decision on the link between two
    /// tracklets. Returns the previous decision.
    /// Moves (or resizes) video box `box_id` to `xywh`: one transaction with its audit row on
    /// the box's video (key `box N`, old and new as `x,y,w,h`). Returns the old place.
    pub fn move_box(&mut self, who: &str, box_id: i64, xywh: [f64; 4]) -> Result<[f64; 4]> {
        self.move_box_as_read(who, box_id, xywh, None)
    }

    /// Where video box `box_id` is now (x, y, w, h), if the library has it.
    pub fn box_place(&self, box_id: i64) -> Result<Option<[f64; 4]>> {
        self.conn()
            .query_row(
                "SELECT x, y, w, h FROM boxes WHERE id = ?1",
                [box_id],
                |r| Ok([r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?]),
            )
            .optional()
    }

    /// The code of the polyp tracklet `tracklet` is labelled with, if any.
    pub fn tracklet_polyp_code(&self, tracklet: i64) -> Result<Option<String>> {
        self.conn()
            .query_row(
                "SELECT p.code FROM tracklets t JOIN polyps p ON p.id = t.polyp_id WHERE t.id = ?1",
                [tracklet],
                |r| r.get(0),
            )
            .optional()
    }

    /// [`Store::move_box`] by a reviewer who read the box at `read` (x, y, w, h): when it was
    /// moved since, nothing is written and [`StoreError::Conflict`] says where it is now.
    pub fn move_box_as_read(
        &mut self,
        who: &str,
        box_id: i64,
        xywh: [f64; 4],
        read: Option<[f64; 4]>,
    ) -> Result<[f64; 4]> {
        check_who(who)?;
        if !(xywh.iter().all(|v| v.is_finite()) && xywh[2] > 0.0 && xywh[3] > 0.0) {
            return Err(StoreError::Invalid(format!(
                "box {box_id}: {xywh:?} is not x,y,w,h with a positive size"
            )));
        }
        let found: Option<(i64, [f64; 4])> = self
            .conn()
            .query_row(
                "SELECT video_id, x, y, w, h FROM boxes WHERE id = ?1",
                [box_id],
                |r| Ok((r.get(0)?, [r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?])),
            )
            .optional()?;
        let Some((video, old)) = found else {
            return Err(StoreError::Invalid(format!(
                "no box {box_id} in this library"
            )));
        };
        let text = |b: [f64; 4]| format!("{},{},{},{}", b[0], b[1], b[2], b[3]);
        self.write(|tx| -> Result<()> {
            // Read again under the write lock: another station's move since is not undone.
            if let Some(read) = read {
                let now: [f64; 4] = tx.query_row(
                    "SELECT x, y, w, h FROM boxes WHERE id = ?1",
                    [box_id],
                    |r| Ok([r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?]),
                )?;
                if now.iter().zip(read).any(|(a, b)| (a - b).abs() > 1e-6) {
                    return Err(StoreError::Conflict {
                        target: format!("box {box_id} of video {video}"),
                        key: "place".into(),
                        changes: format!(
                            "another writer (read at {}, now at {})",
                            text(read),
                            text(now)
                        ),
                    });
                }
            }
            tx.execute(
                "UPDATE boxes SET x = ?2, y = ?3, w = ?4, h = ?5 WHERE id = ?1",
                params![box_id, xywh[0], xywh[1], xywh[2], xywh[3]],
            )?;
            audit(
                tx,
                TargetKind::Video,
                video,
                &format!("box {box_id}"),
                who,
                Some(&text(old)),
                Some(&text(xywh)),
            )
        })?;
        Ok(old)
    }

    pub fn decide_link(
        &mut self,
        who: &str,
        a: i64,
        b: i64,
        decision: Option<LinkDecision>,
    ) -> Result<Option<LinkDecision>> {
        self.decide_link_as_read(who, a, b, decision, [None, None])
            .map(|w| w.value)
    }

    /// [`Store::decide_link`] checked against the versions `read` of `a` and `b` (see
    /// [`Store::assign_tracklet_as_read`]). The decision is a label on the lower id, key
    /// `link:<higher id>`, audited there.
    pub fn decide_link_as_read(
        &mut self,
        who: &str,
        a: i64,
        b: i64,
        decision: Option<LinkDecision>,
        read: [Option<i64>; 2],
    ) -> Result<TrackletWritten<Option<LinkDecision>>> {
        check_who(who)?;
        let (lo, hi) = (a.min(b), a.max(b));
        let key = link_key(hi);
        let value = decision.map(LinkDecision::as_str);
        self.write(|tx| -> Result<TrackletWritten<Option<LinkDecision>>> {
            if lo == hi || tracklet_video(tx, lo)? != tracklet_video(tx, hi)? {
                return Err(StoreError::Invalid(format!(
                    "tracklets {a} and {b} are not two tracklets of one video"
                )));
            }
            check_read(tx, &[(a, read[0]), (b, read[1])])?;
            let old: Option<String> = tx
                .query_row(
                    "SELECT value FROM labels
                     WHERE target_kind = 'tracklet' AND target_id = ?1 AND key = ?2",
                    params![lo, key],
                    |r| r.get(0),
                )
                .optional()?;
            if old.as_deref() != value {
                match value {
                    Some(v) => tx.execute(
                        "INSERT INTO labels(target_kind, target_id, key, value)
                         VALUES ('tracklet', ?1, ?2, ?3)
                         ON CONFLICT (target_kind, target_id, key) DO UPDATE SET value = excluded.value",
                        params![lo, key, v],
                    )?,
                    None => tx.execute(
                        "DELETE FROM labels
                         WHERE target_kind = 'tracklet' AND target_id = ?1 AND key = ?2",
                        params![lo, key],
                    )?,
                };
                audit(
                    tx,
                    TargetKind::Tracklet,
                    lo,
                    &key,
                    who,
                    old.as_deref(),
                    value,
                )?;
            }
            let old = old.as_deref().and_then(LinkDecision::parse);
            written(tx, old, &[a, b])
        })
    }

    /// Every link decision among a video's tracklets: (lower id, higher id, decision).
    pub fn link_decisions(&self, video_id: i64) -> Result<Vec<(i64, i64, LinkDecision)>> {
        let mut stmt = self.conn().prepare(
            "SELECT l.target_id, l.key, l.value FROM labels l JOIN tracklets t ON t.id = l.target_id
             WHERE l.target_kind = 'tracklet' AND l.key LIKE 'link:%' AND t.video_id = ?1",
        )?;
        let rows = stmt.query_map([video_id], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (lo, key, value) = row?;
            let hi = key.trim_start_matches("link:").parse::<i64>().ok();
            if let (Some(hi), Some(d)) = (hi, LinkDecision::parse(&value)) {
                out.push((lo, hi, d));
            }
        }
        Ok(out)
    }
}
