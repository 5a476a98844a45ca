//! Moving a library between engines (`endotwin library copy FROM TO`): every row of every
//! table with its id, and every media item's bytes, in one transaction on the target; then
//! each table read back from both and compared row by row, and each media item read back
//! through its hash check.

use super::db::{Row, Value};
use super::{EngineKind, Result, Store, StoreError};

/// The copied tables, parents first, with their columns (the same on both engines; `meta`
/// is the target's own).
pub const COPIED_TABLES: &[(&str, &str)] = &[
    ("patients", "id, code"),
    ("examinations", "id, patient_id, code, kind, date, source"),
    (
        "media",
        "id, hash, kind, rel_path, source_path, width, height, bytes, examination_id, mask_media_id, thumbnail, captured_at",
    ),
    (
        "polyps",
        "id, examination_id, code, location, size_mm, paris",
    ),
    ("polyp_views", "polyp_id, media_id, view_index"),
    ("pathology", "polyp_id, histology, vienna_class, size_mm"),
    ("attributes", "polyp_id, key, value"),
    ("reports", "id, examination_id, text"),
    ("report_sentences", "id, report_id, idx, text, polyp_id"),
    ("captions", "media_id, text, refined, category"),
    ("videos", "id, examination_id, code, fps"),
    ("video_frames", "video_id, frame_index, media_id"),
    ("tracklets", "id, video_id, polyp_id, identity"),
    (
        "boxes",
        "id, video_id, frame_index, x, y, w, h, polyp_id, tracklet_id",
    ),
    ("labels", "target_kind, target_id, key, value"),
    (
        "label_audit",
        "id, target_kind, target_id, key, who, at, old_value, new_value",
    ),
    (
        "models",
        "id, name, version, kind, config_json, weights_path, created_at",
    ),
    (
        "embeddings",
        "model_id, target_kind, target_id, source_hash, dim, vector, code",
    ),
    (
        "training_runs",
        "id, model_id, recipe, config_json, status, started_at, finished_at, pid",
    ),
    ("run_metrics", "run_id, epoch, step, name, value"),
];

/// Column of `media.mask_media_id` in [`COPIED_TABLES`]: written after every media row is in
/// (a mask may have a higher id than its frame).
const MASK_COLUMN: usize = 9;

/// What a copy moved, each figure checked against the source after it committed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CopyReport {
    /// Rows per table, in [`COPIED_TABLES`] order.
    pub rows: Vec<(String, usize)>,
    /// Media items whose bytes were copied and read back through their hash.
    pub media: usize,
}

fn table_rows(store: &Store, table: &str, columns: &str) -> Result<Vec<Row>> {
    store
        .conn()
        .rows(&format!("SELECT {columns} FROM {table} ORDER BY rowid"), [])
}

/// Copies every row and media item of `from` into `to`, which must hold nothing, in one
/// transaction, then verifies it. `progress(done, total)` counts media items.
pub fn copy_library(
    from: &Store,
    to: &mut Store,
    progress: &dyn Fn(usize, usize),
) -> Result<CopyReport> {
    if !to.holds_nothing()? {
        return Err(StoreError::Invalid(format!(
            "{}: already holds a library; copy into a new, empty one (nothing was written)",
            to.db_path().display()
        )));
    }
    // A damaged source would be copied into a library that passes its checks: refused.
    if let Some(first) = from.integrity_problems(None)?.first() {
        return Err(StoreError::Invalid(format!(
            "{}: the database is damaged ({first}); `endotwin library check` names every \
             problem (nothing was written)",
            from.db_path().display()
        )));
    }
    // Everything is read from one snapshot of the source, so a station writing to it meanwhile
    // changes neither what is copied nor what the copy is compared with (round 10 N13: an
    // import during the copy left a copy that "differed from its source").
    from.in_snapshot(|| copy_snapshot(from, to, progress))
}

fn copy_snapshot(
    from: &Store,
    to: &mut Store,
    progress: &dyn Fn(usize, usize),
) -> Result<CopyReport> {
    let media = from.media_rows()?;
    let target = to.db_path().display().to_string();
    to.write_media(|tx, files| -> Result<()> {
        // Again under the write lock: another copy into the same new library may have
        // committed while this one waited for it (round 7 N57: a raw duplicate key).
        if super::check::row_total_of(tx)? > 0 {
            return Err(StoreError::Invalid(format!(
                "{target}: another copy filled this library while this one waited; nothing was \
                 written (it holds that copy)"
            )));
        }
        for (table, columns) in COPIED_TABLES {
            let n = columns.split(',').count();
            let marks: Vec<String> = (1..=n).map(|i| format!("?{i}")).collect();
            let sql = format!(
                "INSERT INTO {table} ({columns}) VALUES ({})",
                marks.join(", ")
            );
            let mut masks = Vec::new();
            for row in table_rows(from, table, columns)? {
                let mut values = row.0;
                if *table == "media" && values[MASK_COLUMN] != Value::Null {
                    masks.push((values[0].clone(), values[MASK_COLUMN].clone()));
                    values[MASK_COLUMN] = Value::Null;
                }
                tx.execute(&sql, values)?;
            }
            for (id, mask) in masks {
                tx.execute(
                    "UPDATE media SET mask_media_id = ?2 WHERE id = ?1",
                    vec![id, mask],
                )?;
            }
        }
        for (i, m) in media.iter().enumerate() {
            let bytes = from.read_media(m)?;
            let extension = m.rel_path.rsplit_once('.').map_or("bin", |(_, e)| e);
            let (hash, rel) = files.put(&bytes, extension)?;
            if hash != m.hash || rel != m.rel_path {
                return Err(StoreError::Invalid(format!(
                    "media {}: stored as {rel}, not as its row's {} (nothing was written)",
                    m.id, m.rel_path
                )));
            }
            progress(i + 1, media.len());
        }
        if tx.kind() == EngineKind::Postgres {
            super::pg::continue_identities(tx)?;
        }
        Ok(())
    })?;
    verify(from, to)
}

/// Every copied table equal row by row in both libraries, every media item of `to` read back
/// through its hash check.
pub fn verify(from: &Store, to: &Store) -> Result<CopyReport> {
    let mut report = CopyReport::default();
    for (table, columns) in COPIED_TABLES {
        let (a, b) = (
            table_rows(from, table, columns)?,
            table_rows(to, table, columns)?,
        );
        if let Some(i) = (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i)) {
            let shown = |r: Option<&Row>| match r {
                Some(r) => format!("row {} of {} values", i + 1, r.values().len()),
                None => "no such row".to_string(),
            };
            return Err(StoreError::Invalid(format!(
                "the copy at {} does not match its source in table {table} (the source has {}, \
                 the copy {}): it is not a faithful copy; remove it before copying again",
                to.db_path().display(),
                shown(a.get(i)),
                shown(b.get(i))
            )));
        }
        report.rows.push((table.to_string(), a.len()));
    }
    for m in to.media_rows()? {
        to.read_media(&m)?;
        report.media += 1;
    }
    Ok(report)
}

impl Store {
    /// Runs `f` with every read of this store from one snapshot of the library (a read
    /// transaction; on PostgreSQL, repeatable read): writes of other stations meanwhile are not
    /// seen.
    pub fn in_snapshot<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let begin = match self.conn().kind() {
            EngineKind::Sqlite => "BEGIN DEFERRED",
            EngineKind::Postgres => "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
        };
        self.conn().execute_batch(begin)?;
        let result = f();
        let end = self.conn().execute_batch("COMMIT");
        let value = result?;
        end?;
        Ok(value)
    }

    /// Every media row, by id.
    pub fn media_rows(&self) -> Result<Vec<super::MediaRow>> {
        let mut stmt = self.conn().prepare(&format!(
            "SELECT {} FROM media ORDER BY id",
            super::media::MEDIA_COLUMNS
        ))?;
        stmt.query_map([], super::media::media_from_row)?.collect()
    }
}
