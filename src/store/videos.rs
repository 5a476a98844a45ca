//! Procedure videos: their frames, per-frame boxes and tracklets.

use super::db::{OptionalExtension, Transaction, params};
use super::media::{media_columns_of, media_from_row_at};
use super::{MediaRow, Result, Store};

#[derive(Debug, Clone, PartialEq)]
pub struct VideoRow {
    pub id: i64,
    pub examination_id: i64,
    pub code: String,
    pub fps: f64,
    pub frame_count: i64,
    pub tracklet_count: i64,
    pub first_media_id: Option<i64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BoxRow {
    pub frame_index: i64,
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
    pub polyp_id: Option<i64>,
    pub tracklet_id: Option<i64>,
}

pub fn upsert_video(
    tx: &Transaction<'_>,
    examination_id: i64,
    code: &str,
    fps: f64,
) -> Result<i64> {
    if let Some(id) = tx
        .query_row("SELECT id FROM videos WHERE code = ?1", [code], |r| {
            r.get(0)
        })
        .optional()?
    {
        return Ok(id);
    }
    tx.prepare_cached("INSERT INTO videos(examination_id, code, fps) VALUES (?1, ?2, ?3)")?
        .execute(params![examination_id, code, fps])?;
    tx.last_insert_rowid()
}

pub fn add_video_frame(
    tx: &Transaction<'_>,
    video_id: i64,
    frame_index: i64,
    media_id: i64,
) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO video_frames(video_id, frame_index, media_id) VALUES (?1, ?2, ?3) ON CONFLICT (video_id, frame_index) DO UPDATE SET media_id = excluded.media_id",
    )?
    .execute(params![video_id, frame_index, media_id])?;
    Ok(())
}

pub fn insert_tracklet(
    tx: &Transaction<'_>,
    video_id: i64,
    polyp_id: Option<i64>,
    identity: Option<&str>,
) -> Result<i64> {
    tx.execute(
        "INSERT INTO tracklets(video_id, polyp_id, identity) VALUES (?1, ?2, ?3)",
        params![video_id, polyp_id, identity],
    )?;
    tx.last_insert_rowid()
}

pub fn insert_box(tx: &Transaction<'_>, video_id: i64, b: &BoxRow) -> Result<()> {
    tx.execute(
        "INSERT INTO boxes(video_id, frame_index, x, y, w, h, polyp_id, tracklet_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![video_id, b.frame_index, b.x, b.y, b.w, b.h, b.polyp_id, b.tracklet_id],
    )?;
    Ok(())
}

impl Store {
    pub fn videos(&self) -> Result<Vec<VideoRow>> {
        let mut stmt = self.conn().prepare(
            "SELECT v.id, v.examination_id, v.code, v.fps,
                (SELECT count(*) FROM video_frames f WHERE f.video_id = v.id),
                (SELECT count(*) FROM tracklets t WHERE t.video_id = v.id),
                (SELECT f.media_id FROM video_frames f WHERE f.video_id = v.id ORDER BY f.frame_index LIMIT 1)
             FROM videos v ORDER BY v.code",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(VideoRow {
                id: r.get(0)?,
                examination_id: r.get(1)?,
                code: r.get(2)?,
                fps: r.get(3)?,
                frame_count: r.get(4)?,
                tracklet_count: r.get(5)?,
                first_media_id: r.get(6)?,
            })
        })?;
        rows.collect::<Result<_>>()
    }

    pub fn video_frames(&self, video_id: i64) -> Result<Vec<(i64, MediaRow)>> {
        let cols = media_columns_of("m");
        let mut stmt = self.conn().prepare(&format!(
            "SELECT f.frame_index, {cols} FROM video_frames f JOIN media m ON m.id = f.media_id
             WHERE f.video_id = ?1 ORDER BY f.frame_index"
        ))?;
        let rows = stmt.query_map([video_id], |r| Ok((r.get(0)?, media_from_row_at(r, 1)?)))?;
        rows.collect::<Result<_>>()
    }

    pub fn video_boxes(&self, video_id: i64) -> Result<Vec<BoxRow>> {
        Ok(self
            .video_boxes_with_ids(video_id)?
            .into_iter()
            .map(|(_, b)| b)
            .collect())
    }

    /// [`Store::video_boxes`] with each box's id.
    pub fn video_boxes_with_ids(&self, video_id: i64) -> Result<Vec<(i64, BoxRow)>> {
        let mut stmt = self.conn().prepare(
            "SELECT id, frame_index, x, y, w, h, polyp_id, tracklet_id FROM boxes WHERE video_id = ?1 ORDER BY frame_index, id",
        )?;
        let rows = stmt.query_map([video_id], |r| {
            Ok((
                r.get(0)?,
                BoxRow {
                    frame_index: r.get(1)?,
                    x: r.get(2)?,
                    y: r.get(3)?,
                    w: r.get(4)?,
                    h: r.get(5)?,
                    polyp_id: r.get(6)?,
                    tracklet_id: r.get(7)?,
                },
            ))
        })?;
        rows.collect::<Result<_>>()
    }
}
