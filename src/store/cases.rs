//! Examinations, polyps and their views, reports and captions: rows, writes and the
//! queries the case browser needs.

use super::db::{OptionalExtension, Row, Transaction, params};
use super::media::{media_columns_of, media_from_row};
use super::{MediaRow, Result, Store};

#[derive(Debug, Clone, PartialEq)]
pub struct ExaminationRow {
    pub id: i64,
    pub code: String,
    pub patient: Option<String>,
    pub kind: String,
    pub date: Option<String>,
    pub source: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PolypRow {
    pub id: i64,
    pub examination_id: i64,
    pub code: String,
    pub location: Option<String>,
    pub size_mm: Option<f64>,
    pub paris: Option<String>,
    pub histology: Option<String>,
    pub vienna_class: Option<i64>,
    pub view_count: i64,
    /// First view, for the browser's thumbnail.
    pub first_media_id: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct LibraryStats {
    pub examinations: i64,
    pub polyps: i64,
    pub media: i64,
    pub videos: i64,
    pub media_bytes: i64,
    /// Capsule frames, and how many of them have a caption (finding).
    pub capsule_frames: i64,
    pub captioned: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SentenceRow {
    pub text: String,
    pub polyp_id: Option<i64>,
}

// ---- writes (inside a transaction) ----------------------------------------------------------

#[derive(Debug, Clone, Default)]
pub struct NewExamination {
    pub code: String,
    pub patient_code: Option<String>,
    pub kind: String,
    pub date: Option<String>,
    pub source: String,
}

#[derive(Debug, Clone, Default)]
pub struct NewPolyp {
    pub examination_id: i64,
    pub code: String,
    pub location: Option<String>,
    pub size_mm: Option<f64>,
    pub paris: Option<String>,
    pub histology: Option<String>,
    pub vienna_class: Option<i64>,
    pub attributes: Vec<(String, String)>,
}

/// Whether an examination with this code is in the library.
pub fn examination_exists(tx: &Transaction<'_>, code: &str) -> Result<bool> {
    Ok(tx
        .query_row("SELECT 1 FROM examinations WHERE code = ?1", [code], |_| {
            Ok(())
        })
        .optional()?
        .is_some())
}

/// Removes examination `id` when nothing belongs to it (no media, polyp, video or report):
/// an import whose items were all in the library already made it for nothing. Whether it went.
pub fn drop_examination_if_empty(tx: &Transaction<'_>, id: i64) -> Result<bool> {
    let gone = tx.execute(
        "DELETE FROM examinations WHERE id = ?1
         AND NOT EXISTS (SELECT 1 FROM media m WHERE m.examination_id = ?1)
         AND NOT EXISTS (SELECT 1 FROM polyps p WHERE p.examination_id = ?1)
         AND NOT EXISTS (SELECT 1 FROM videos v WHERE v.examination_id = ?1)
         AND NOT EXISTS (SELECT 1 FROM reports r WHERE r.examination_id = ?1)",
        [id],
    )?;
    Ok(gone > 0)
}

/// Removes polyp `id` when it has no view and no box: an import whose every view or box of
/// it was refused or already in the library made it for nothing. Whether it went.
pub fn drop_polyp_if_empty(tx: &Transaction<'_>, id: i64) -> Result<bool> {
    let gone = tx.execute(
        "DELETE FROM polyps WHERE id = ?1
         AND NOT EXISTS (SELECT 1 FROM polyp_views v WHERE v.polyp_id = ?1)
         AND NOT EXISTS (SELECT 1 FROM boxes b WHERE b.polyp_id = ?1)
         AND NOT EXISTS (SELECT 1 FROM tracklets t WHERE t.polyp_id = ?1)
         AND NOT EXISTS (SELECT 1 FROM report_sentences r WHERE r.polyp_id = ?1)",
        [id],
    )?;
    Ok(gone > 0)
}

/// Finds or creates the examination with this code.
pub fn upsert_examination(tx: &Transaction<'_>, e: &NewExamination) -> Result<i64> {
    if let Some(id) = tx
        .query_row(
            "SELECT id FROM examinations WHERE code = ?1",
            [&e.code],
            |r| r.get(0),
        )
        .optional()?
    {
        return Ok(id);
    }
    let patient_id: Option<i64> = match &e.patient_code {
        Some(code) => {
            tx.execute(
                "INSERT INTO patients(code) VALUES (?1) ON CONFLICT DO NOTHING",
                [code],
            )?;
            Some(
                tx.query_row("SELECT id FROM patients WHERE code = ?1", [code], |r| {
                    r.get(0)
                })?,
            )
        }
        None => None,
    };
    let kind = if e.kind.is_empty() {
        "colonoscopy"
    } else {
        &e.kind
    };
    tx.prepare_cached(
        "INSERT INTO examinations(patient_id, code, kind, date, source) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(
        params![patient_id, e.code, kind, e.date, e.source],
    )?;
    tx.last_insert_rowid()
}

/// Finds or creates the polyp with this code; pathology and attributes are written when given.
pub fn upsert_polyp(tx: &Transaction<'_>, p: &NewPolyp) -> Result<i64> {
    let existing: Option<i64> = tx
        .query_row("SELECT id FROM polyps WHERE code = ?1", [&p.code], |r| {
            r.get(0)
        })
        .optional()?;
    let id = match existing {
        Some(id) => id,
        None => {
            tx.prepare_cached(
                "INSERT INTO polyps(examination_id, code, location, size_mm, paris) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(
                params![p.examination_id, p.code, p.location, p.size_mm, p.paris],
            )?;
            tx.last_insert_rowid()?
        }
    };
    if let Some(h) = &p.histology {
        tx.prepare_cached(
            "INSERT INTO pathology(polyp_id, histology, vienna_class, size_mm) VALUES (?1, ?2, ?3, ?4) ON CONFLICT (polyp_id) DO UPDATE SET histology = excluded.histology, vienna_class = excluded.vienna_class, size_mm = excluded.size_mm",
        )?
        .execute(
            params![id, h, p.vienna_class, p.size_mm],
        )?;
    }
    for (k, v) in &p.attributes {
        tx.prepare_cached(
            "INSERT INTO attributes(polyp_id, key, value) VALUES (?1, ?2, ?3) ON CONFLICT (polyp_id, key) DO UPDATE SET value = excluded.value",
        )?
        .execute(params![id, k, v])?;
    }
    Ok(id)
}

pub fn add_polyp_view(
    tx: &Transaction<'_>,
    polyp_id: i64,
    media_id: i64,
    view_index: i64,
) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO polyp_views(polyp_id, media_id, view_index) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
    )?
    .execute(params![polyp_id, media_id, view_index])?;
    Ok(())
}

/// Takes a view away from a polyp (the media item stays in the library), e.g. a view that
/// shows another lesion.
pub fn remove_polyp_view(tx: &Transaction<'_>, polyp_id: i64, media_id: i64) -> Result<()> {
    tx.execute(
        "DELETE FROM polyp_views WHERE polyp_id = ?1 AND media_id = ?2",
        params![polyp_id, media_id],
    )?;
    Ok(())
}

/// Adds a report made of sentences, each optionally tied to the polyp it describes.
pub fn insert_report(
    tx: &Transaction<'_>,
    examination_id: i64,
    sentences: &[SentenceRow],
) -> Result<i64> {
    let text = sentences
        .iter()
        .map(|s| s.text.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    tx.execute(
        "INSERT INTO reports(examination_id, text) VALUES (?1, ?2)",
        params![examination_id, text],
    )?;
    let report_id = tx.last_insert_rowid()?;
    for (i, s) in sentences.iter().enumerate() {
        tx.execute(
            "INSERT INTO report_sentences(report_id, idx, text, polyp_id) VALUES (?1, ?2, ?3, ?4)",
            params![report_id, i as i64, s.text, s.polyp_id],
        )?;
    }
    Ok(report_id)
}

/// Adds the report unless the examination already has one with the same text (a repeated
/// import adds nothing). Returns whether it was added.
pub fn insert_report_once(
    tx: &Transaction<'_>,
    examination_id: i64,
    sentences: &[SentenceRow],
) -> Result<bool> {
    let text = sentences
        .iter()
        .map(|s| s.text.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    let known: i64 = tx.query_row(
        "SELECT COUNT(*) FROM reports WHERE examination_id = ?1 AND text = ?2",
        params![examination_id, text],
        |r| r.get(0),
    )?;
    if known > 0 {
        return Ok(false);
    }
    insert_report(tx, examination_id, sentences)?;
    Ok(true)
}

/// A media item's raw finding and, when known, its refinement (caption label, category).
pub fn set_caption(
    tx: &Transaction<'_>,
    media_id: i64,
    text: &str,
    refined: Option<(&str, &str)>,
) -> Result<()> {
    tx.execute(
        "INSERT INTO captions(media_id, text, refined, category) VALUES (?1, ?2, ?3, ?4) ON CONFLICT (media_id) DO UPDATE SET text = excluded.text, refined = excluded.refined, category = excluded.category",
        params![media_id, text, refined.map(|r| r.0), refined.map(|r| r.1)],
    )?;
    Ok(())
}

// ---- reads ----------------------------------------------------------------------------------

/// [`POLYP_QUERY`] for every polyp at once: the views counted in one pass over `polyp_views`
/// instead of two lookups a polyp (a 100k-polyp library lists in a fraction of the time). The
/// first view is the one with the lowest index (a window function: both engines have them).
const ALL_POLYPS_QUERY: &str =
    "SELECT p.id, p.examination_id, p.code, p.location, coalesce(p.size_mm, pa.size_mm), p.paris,
        pa.histology, pa.vienna_class, coalesce(v.n, 0), v.first
    FROM polyps p LEFT JOIN pathology pa ON pa.polyp_id = p.id
    LEFT JOIN (SELECT polyp_id, count(*) OVER (PARTITION BY polyp_id) AS n, media_id AS first,
                      row_number() OVER (PARTITION BY polyp_id ORDER BY view_index, media_id) AS k
               FROM polyp_views) v ON v.polyp_id = p.id AND v.k = 1";

const POLYP_QUERY: &str =
    "SELECT p.id, p.examination_id, p.code, p.location, coalesce(p.size_mm, pa.size_mm), p.paris,
        pa.histology, pa.vienna_class,
        (SELECT count(*) FROM polyp_views v WHERE v.polyp_id = p.id),
        (SELECT v.media_id FROM polyp_views v WHERE v.polyp_id = p.id ORDER BY v.view_index, v.media_id LIMIT 1)
    FROM polyps p LEFT JOIN pathology pa ON pa.polyp_id = p.id";

fn polyp_from_row(r: &Row) -> Result<PolypRow> {
    Ok(PolypRow {
        id: r.get(0)?,
        examination_id: r.get(1)?,
        code: r.get(2)?,
        location: r.get(3)?,
        size_mm: r.get(4)?,
        paris: r.get(5)?,
        histology: r.get(6)?,
        vienna_class: r.get(7)?,
        view_count: r.get(8)?,
        first_media_id: r.get(9)?,
    })
}

impl Store {
    pub fn stats(&self) -> Result<LibraryStats> {
        self.conn().query_row(
            "SELECT (SELECT count(*) FROM examinations), (SELECT count(*) FROM polyps),
                    (SELECT count(*) FROM media), (SELECT count(*) FROM videos),
                    (SELECT CAST(coalesce(sum(bytes), 0) AS BIGINT) FROM media),
                    (SELECT count(*) FROM media WHERE kind = 'capsule'),
                    (SELECT count(*) FROM media m JOIN captions c ON c.media_id = m.id
                       WHERE m.kind = 'capsule')",
            [],
            |r| {
                Ok(LibraryStats {
                    examinations: r.get(0)?,
                    polyps: r.get(1)?,
                    media: r.get(2)?,
                    videos: r.get(3)?,
                    media_bytes: r.get(4)?,
                    capsule_frames: r.get(5)?,
                    captioned: r.get(6)?,
                })
            },
        )
    }

    pub fn examinations(&self) -> Result<Vec<ExaminationRow>> {
        let mut stmt = self.conn().prepare(
            "SELECT e.id, e.code, p.code, e.kind, e.date, e.source
             FROM examinations e LEFT JOIN patients p ON p.id = e.patient_id ORDER BY e.code",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(ExaminationRow {
                id: r.get(0)?,
                code: r.get(1)?,
                patient: r.get(2)?,
                kind: r.get(3)?,
                date: r.get(4)?,
                source: r.get(5)?,
            })
        })?;
        rows.collect::<Result<_>>()
    }

    /// Each examination's source (a dataset folder, a phantom split), by its id: what the
    /// familiarity marks set a threshold for apiece.
    pub fn examination_sources(&self) -> Result<std::collections::HashMap<i64, String>> {
        Ok(self
            .examinations()?
            .into_iter()
            .map(|e| (e.id, e.source))
            .collect())
    }

    pub fn polyps(&self) -> Result<Vec<PolypRow>> {
        let mut stmt = self
            .conn()
            .prepare(&format!("{ALL_POLYPS_QUERY} ORDER BY p.code"))?;
        let rows = stmt.query_map([], polyp_from_row)?;
        rows.collect::<Result<_>>()
    }

    pub fn polyp(&self, id: i64) -> Result<Option<PolypRow>> {
        self.conn()
            .query_row(
                &format!("{POLYP_QUERY} WHERE p.id = ?1"),
                [id],
                polyp_from_row,
            )
            .optional()
    }

    /// The view media ids of every polyp, in view order, in one query.
    pub fn all_polyp_view_ids(&self) -> Result<std::collections::HashMap<i64, Vec<i64>>> {
        let mut stmt = self
            .conn()
            .prepare("SELECT polyp_id, media_id FROM polyp_views ORDER BY polyp_id, view_index")?;
        let mut out: std::collections::HashMap<i64, Vec<i64>> = Default::default();
        for row in stmt.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))? {
            let (p, m) = row?;
            out.entry(p).or_default().push(m);
        }
        Ok(out)
    }

    pub fn polyp_views(&self, polyp_id: i64) -> Result<Vec<MediaRow>> {
        let cols = media_columns_of("m");
        let mut stmt = self.conn().prepare(&format!(
            "SELECT {cols} FROM polyp_views v JOIN media m ON m.id = v.media_id
             WHERE v.polyp_id = ?1 ORDER BY v.view_index"
        ))?;
        let rows = stmt.query_map([polyp_id], media_from_row)?;
        rows.collect::<Result<_>>()
    }

    /// Every value the library's polyps have for attribute `key`, sorted.
    pub fn attribute_values(&self, key: &str) -> Result<Vec<String>> {
        let mut stmt = self
            .conn()
            .prepare("SELECT DISTINCT value FROM attributes WHERE key = ?1 ORDER BY value")?;
        let rows = stmt.query_map([key], |r| r.get(0))?;
        rows.collect::<Result<_>>()
    }

    pub fn attributes(&self, polyp_id: i64) -> Result<Vec<(String, String)>> {
        let mut stmt = self
            .conn()
            .prepare("SELECT key, value FROM attributes WHERE polyp_id = ?1 ORDER BY key")?;
        let rows = stmt.query_map([polyp_id], |r| Ok((r.get(0)?, r.get(1)?)))?;
        rows.collect::<Result<_>>()
    }

    /// Report sentences of an examination, in order.
    pub fn report_sentences(&self, examination_id: i64) -> Result<Vec<SentenceRow>> {
        let mut stmt = self.conn().prepare(
            "SELECT s.text, s.polyp_id FROM report_sentences s JOIN reports r ON r.id = s.report_id
             WHERE r.examination_id = ?1 ORDER BY r.id, s.idx",
        )?;
        let rows = stmt.query_map([examination_id], |r| {
            Ok(SentenceRow {
                text: r.get(0)?,
                polyp_id: r.get(1)?,
            })
        })?;
        rows.collect::<Result<_>>()
    }

    pub fn examination(&self, id: i64) -> Result<Option<ExaminationRow>> {
        Ok(self.examinations()?.into_iter().find(|e| e.id == id))
    }

    pub fn caption(&self, media_id: i64) -> Result<Option<String>> {
        caption_of(self.conn(), media_id)
    }

    /// A media item's stored refinement (caption label, category), when it has one.
    pub fn caption_refinement(&self, media_id: i64) -> Result<Option<(String, String)>> {
        self.conn()
            .query_row(
                "SELECT refined, category FROM captions WHERE media_id = ?1
                   AND refined IS NOT NULL AND category IS NOT NULL",
                [media_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
    }

    /// Every caption of the library (raw findings), by media id.
    pub fn all_captions(&self) -> Result<std::collections::HashMap<i64, String>> {
        let mut stmt = self.conn().prepare("SELECT media_id, text FROM captions")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        rows.collect::<Result<_>>()
    }

    /// The captions of these media items (those that have one), by media id.
    pub fn captions_of(&self, media_ids: &[i64]) -> Result<std::collections::HashMap<i64, String>> {
        let mut out = std::collections::HashMap::new();
        for chunk in media_ids.chunks(500) {
            let ids: Vec<String> = chunk.iter().map(i64::to_string).collect();
            let mut stmt = self.conn().prepare(&format!(
                "SELECT media_id, text FROM captions WHERE media_id IN ({})",
                ids.join(",")
            ))?;
            for row in stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))? {
                let (id, text) = row?;
                out.insert(id, text);
            }
        }
        Ok(out)
    }

    /// Distinct histology values, for the browser's filter.
    pub fn histologies(&self) -> Result<Vec<String>> {
        self.distinct("SELECT DISTINCT histology FROM pathology ORDER BY histology")
    }

    pub fn locations(&self) -> Result<Vec<String>> {
        self.distinct(
            "SELECT DISTINCT location FROM polyps WHERE location IS NOT NULL ORDER BY location",
        )
    }

    fn distinct(&self, sql: &str) -> Result<Vec<String>> {
        let mut stmt = self.conn().prepare(sql)?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        rows.collect::<Result<_>>()
    }
}

/// Removes an examination that holds nothing (its rows cascade).
pub fn delete_examination(tx: &Transaction<'_>, id: i64) -> Result<()> {
    tx.execute("DELETE FROM examinations WHERE id = ?1", [id])?;
    Ok(())
}

/// A media item's caption (its raw finding), read on `conn` (a transaction's too).
pub(super) fn caption_of(conn: &super::db::Connection, media_id: i64) -> Result<Option<String>> {
    conn.query_row(
        "SELECT text FROM captions WHERE media_id = ?1",
        [media_id],
        |r| r.get(0),
    )
    .optional()
}
