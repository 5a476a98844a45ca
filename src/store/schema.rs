//! The library schema and its migrations.
//!
//! `PRAGMA user_version` holds the schema version. Each migration is one SQL batch applied in
//! its own transaction together with the version bump, so a library is always at a whole
//! version. A library whose version is newer than [`CURRENT_VERSION`] is refused untouched.

use super::{OpenMode, Result, Store, StoreError, media};
use std::path::Path;

/// Schema version this build writes.
pub const CURRENT_VERSION: i64 = 3;

/// `application_id` stamped into every library so foreign SQLite files are recognised
/// ("ETWN" in ASCII).
pub const APPLICATION_ID: i64 = 0x4554_574E;

/// Migration `i` brings a library from version `i` to `i + 1`.
pub const MIGRATIONS: &[&str] = &[V1, V2, V3];

/// Version 2: a training run records the process that runs it, so a run whose process died
/// (killed, crashed) is marked `interrupted` when the library is next opened.
const V2: &str = "ALTER TABLE training_runs ADD COLUMN pid INTEGER;";

/// Version 3: a caption keeps its refinement (caption label and category) beside the raw
/// finding, which is never overwritten; rows written before it have none until written again.
const V3: &str = "ALTER TABLE captions ADD COLUMN refined TEXT;
ALTER TABLE captions ADD COLUMN category TEXT;";

const V1: &str = r#"
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE patients (
    id    INTEGER PRIMARY KEY,
    code  TEXT NOT NULL UNIQUE
);

CREATE TABLE examinations (
    id          INTEGER PRIMARY KEY,
    patient_id  INTEGER REFERENCES patients(id) ON DELETE CASCADE,
    code        TEXT NOT NULL UNIQUE,
    kind        TEXT NOT NULL DEFAULT 'colonoscopy',
    date        TEXT,
    source      TEXT NOT NULL DEFAULT ''
);

-- Media files live in the library's media/ folder under their content hash.
CREATE TABLE media (
    id           INTEGER PRIMARY KEY,
    hash         TEXT NOT NULL UNIQUE,
    kind         TEXT NOT NULL,
    rel_path     TEXT NOT NULL,
    source_path  TEXT NOT NULL DEFAULT '',
    width        INTEGER NOT NULL,
    height       INTEGER NOT NULL,
    bytes        INTEGER NOT NULL,
    examination_id INTEGER REFERENCES examinations(id) ON DELETE SET NULL,
    mask_media_id  INTEGER REFERENCES media(id) ON DELETE SET NULL,
    thumbnail    BLOB,
    captured_at  TEXT
);
CREATE INDEX media_examination ON media(examination_id);

CREATE TABLE polyps (
    id              INTEGER PRIMARY KEY,
    examination_id  INTEGER NOT NULL REFERENCES examinations(id) ON DELETE CASCADE,
    code            TEXT NOT NULL UNIQUE,
    location        TEXT,
    size_mm         REAL,
    paris           TEXT
);
CREATE INDEX polyps_examination ON polyps(examination_id);

-- A multi-view set: the views of one polyp, in order.
CREATE TABLE polyp_views (
    polyp_id    INTEGER NOT NULL REFERENCES polyps(id) ON DELETE CASCADE,
    media_id    INTEGER NOT NULL REFERENCES media(id) ON DELETE CASCADE,
    view_index  INTEGER NOT NULL,
    PRIMARY KEY (polyp_id, media_id)
);

CREATE TABLE pathology (
    polyp_id      INTEGER PRIMARY KEY REFERENCES polyps(id) ON DELETE CASCADE,
    histology     TEXT NOT NULL,
    vienna_class  INTEGER,
    size_mm       REAL
);

-- Free-form clinical attributes (surface pattern, colour, pedicle, ...).
CREATE TABLE attributes (
    polyp_id  INTEGER NOT NULL REFERENCES polyps(id) ON DELETE CASCADE,
    key       TEXT NOT NULL,
    value     TEXT NOT NULL,
    PRIMARY KEY (polyp_id, key)
);

CREATE TABLE reports (
    id              INTEGER PRIMARY KEY,
    examination_id  INTEGER NOT NULL REFERENCES examinations(id) ON DELETE CASCADE,
    text            TEXT NOT NULL
);

CREATE TABLE report_sentences (
    id         INTEGER PRIMARY KEY,
    report_id  INTEGER NOT NULL REFERENCES reports(id) ON DELETE CASCADE,
    idx        INTEGER NOT NULL,
    text       TEXT NOT NULL,
    polyp_id   INTEGER REFERENCES polyps(id) ON DELETE SET NULL
);

-- Capsule-style captions shared by several frames.
CREATE TABLE captions (
    media_id  INTEGER PRIMARY KEY REFERENCES media(id) ON DELETE CASCADE,
    text      TEXT NOT NULL
);

CREATE TABLE videos (
    id              INTEGER PRIMARY KEY,
    examination_id  INTEGER NOT NULL REFERENCES examinations(id) ON DELETE CASCADE,
    code            TEXT NOT NULL UNIQUE,
    fps             REAL NOT NULL DEFAULT 25.0
);

CREATE TABLE video_frames (
    video_id     INTEGER NOT NULL REFERENCES videos(id) ON DELETE CASCADE,
    frame_index  INTEGER NOT NULL,
    media_id     INTEGER NOT NULL REFERENCES media(id) ON DELETE CASCADE,
    PRIMARY KEY (video_id, frame_index)
);

CREATE TABLE tracklets (
    id        INTEGER PRIMARY KEY,
    video_id  INTEGER NOT NULL REFERENCES videos(id) ON DELETE CASCADE,
    polyp_id  INTEGER REFERENCES polyps(id) ON DELETE SET NULL,
    identity  TEXT
);

CREATE TABLE boxes (
    id           INTEGER PRIMARY KEY,
    video_id     INTEGER NOT NULL REFERENCES videos(id) ON DELETE CASCADE,
    frame_index  INTEGER NOT NULL,
    x REAL NOT NULL, y REAL NOT NULL, w REAL NOT NULL, h REAL NOT NULL,
    polyp_id     INTEGER REFERENCES polyps(id) ON DELETE SET NULL,
    tracklet_id  INTEGER REFERENCES tracklets(id) ON DELETE SET NULL
);
CREATE INDEX boxes_video_frame ON boxes(video_id, frame_index);

-- Labels on any target (a polyp, a media item, a tracklet). Every change appends an audit row.
CREATE TABLE labels (
    target_kind  TEXT NOT NULL,
    target_id    INTEGER NOT NULL,
    key          TEXT NOT NULL,
    value        TEXT NOT NULL,
    PRIMARY KEY (target_kind, target_id, key)
);

CREATE TABLE label_audit (
    id           INTEGER PRIMARY KEY,
    target_kind  TEXT NOT NULL,
    target_id    INTEGER NOT NULL,
    key          TEXT NOT NULL,
    who          TEXT NOT NULL,
    at           TEXT NOT NULL,
    old_value    TEXT,
    new_value    TEXT
);
-- The log is append-only: the database itself refuses edits and deletes.
CREATE TRIGGER label_audit_no_update BEFORE UPDATE ON label_audit
BEGIN SELECT RAISE(ABORT, 'label_audit is append-only'); END;
CREATE TRIGGER label_audit_no_delete BEFORE DELETE ON label_audit
BEGIN SELECT RAISE(ABORT, 'label_audit is append-only'); END;

CREATE TABLE models (
    id           INTEGER PRIMARY KEY,
    name         TEXT NOT NULL,
    version      TEXT NOT NULL,
    kind         TEXT NOT NULL,
    config_json  TEXT NOT NULL,
    weights_path TEXT NOT NULL DEFAULT '',
    created_at   TEXT NOT NULL,
    UNIQUE (name, version)
);

CREATE TABLE embeddings (
    model_id     INTEGER NOT NULL REFERENCES models(id) ON DELETE CASCADE,
    target_kind  TEXT NOT NULL,
    target_id    INTEGER NOT NULL,
    source_hash  TEXT NOT NULL,
    dim          INTEGER NOT NULL,
    vector       BLOB NOT NULL,
    code         BLOB,
    PRIMARY KEY (model_id, target_kind, target_id)
);

CREATE TABLE training_runs (
    id           INTEGER PRIMARY KEY,
    model_id     INTEGER REFERENCES models(id) ON DELETE SET NULL,
    recipe       TEXT NOT NULL,
    config_json  TEXT NOT NULL,
    status       TEXT NOT NULL,
    started_at   TEXT NOT NULL,
    finished_at  TEXT
);

CREATE TABLE run_metrics (
    run_id  INTEGER NOT NULL REFERENCES training_runs(id) ON DELETE CASCADE,
    epoch   INTEGER NOT NULL,
    step    INTEGER NOT NULL,
    name    TEXT NOT NULL,
    value   REAL NOT NULL
);
CREATE INDEX run_metrics_run ON run_metrics(run_id);
"#;

impl Store {
    pub(super) fn check_and_migrate(&mut self, mode: OpenMode) -> Result<()> {
        let Some(conn) = self.conn.as_sqlite() else {
            return super::pg::check_and_create(self, mode);
        };
        // One statement, one snapshot: read one by one, another process creating the library
        // meanwhile could be seen half (its tables, not yet its application id), and the
        // library called another application's (a race of two creators at once).
        let (found, app_id, tables): (i64, i64, i64) = conn
            .query_row(
                "SELECT (SELECT user_version FROM pragma_user_version),
                        (SELECT application_id FROM pragma_application_id),
                        (SELECT count(*) FROM sqlite_master)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .map_err(|e| self.not_a_library(e))?;
        if tables > 0 && app_id != APPLICATION_ID {
            return Err(StoreError::NotALibrary {
                path: self.db_path.clone(),
                reason: "an SQLite database of another application".into(),
            });
        }
        if found < 0 {
            return Err(StoreError::UnknownSchema {
                path: self.db_path.clone(),
                found,
            });
        }
        if found > CURRENT_VERSION {
            return Err(StoreError::NewerSchema {
                path: self.db_path.clone(),
                found,
                supported: CURRENT_VERSION,
            });
        }
        if found == CURRENT_VERSION {
            return Ok(());
        }
        if found == 0 && tables > 0 {
            // A library whose version number was set to 0 (round 8 N10: called "an empty
            // file or database" with all its tables and polyps in it).
            return Err(StoreError::NotALibrary {
                path: self.db_path.clone(),
                reason: format!(
                    "it says schema version 0 but holds {tables} tables and indexes; something \
                     other than EndoTwin changed it: restore library.sqlite from a backup; \
                     nothing was changed"
                ),
            });
        }
        if found == 0 && mode == OpenMode::Existing {
            return Err(StoreError::NotALibrary {
                path: self.db_path.clone(),
                reason: "an empty file or database".into(),
            });
        }
        if found == 0
            && self.db_path != Path::new(":memory:")
            && media::media_dir_has_files(&self.root)
        {
            return Err(StoreError::MediaWithoutDatabase {
                path: self.root.clone(),
            });
        }
        if self.read_only {
            return Err(StoreError::ReadOnlyNeedsMigration {
                path: self.db_path.clone(),
                found,
                supported: CURRENT_VERSION,
            });
        }
        if found > 0 {
            // A migration writes: a damaged database is refused before it.
            self.ensure_intact()?;
        }
        if self.db_path != Path::new(":memory:") {
            // WAL lets the GUI read while the engine writes; set once, it sticks to the file.
            self.sqlite()
                .query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))?;
        }
        for (from, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
            let tx = self.conn.transaction()?;
            // Another process may have made this step while this one waited for the write
            // lock (two `library copy` into one new folder at once: the second ran the
            // first migration again and failed with raw SQL, round 6 N47).
            let now: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
            if now > from as i64 {
                continue;
            }
            // A database whose version number was set back by something else (a v3 library
            // saying 1) fails its step on tables it already has: said so, not raw SQL, and the
            // step's transaction leaves nothing changed (round 7 N11).
            if tx.execute_batch(sql).is_err() {
                return Err(StoreError::NotALibrary {
                    path: self.db_path.clone(),
                    reason: format!(
                        "it says schema version {now}, but its tables are not those of that \
                         version (the step to version {} does not apply to them); something \
                         other than EndoTwin changed it: restore library.sqlite from a backup; \
                         nothing was changed",
                        from + 1
                    ),
                });
            }
            tx.execute_batch(&format!(
                "PRAGMA user_version = {}; PRAGMA application_id = {};",
                from + 1,
                APPLICATION_ID
            ))?;
            tx.commit()?;
        }
        self.conn.execute(
            "INSERT INTO meta(key, value) VALUES ('created_by', ?1) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [concat!("endotwin ", env!("CARGO_PKG_VERSION"))],
        )?;
        Ok(())
    }

    /// The SQLite connection of an SQLite library (its pragmas and checks).
    pub(super) fn sqlite(&self) -> &rusqlite::Connection {
        self.conn.as_sqlite().expect("an SQLite library")
    }

    /// A database that cannot be read as a library: named as such unless the disk itself
    /// failed (full, or an I/O error), which says nothing about the library (W11).
    pub(super) fn not_a_library(&self, e: rusqlite::Error) -> StoreError {
        let disk = matches!(
            e.sqlite_error_code(),
            Some(rusqlite::ErrorCode::DiskFull | rusqlite::ErrorCode::SystemIoFailure)
        );
        let corrupt = e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseCorrupt);
        match (disk, corrupt) {
            (true, _) => StoreError::Disk {
                path: self.db_path.clone(),
                reason: e.to_string(),
            },
            // A library's database that SQLite finds damaged is said to be one, not "no
            // library" (round 7 R24).
            (false, true) => StoreError::NotALibrary {
                path: self.db_path.clone(),
                reason: format!(
                    "the database is damaged ({e}): restore library.sqlite from a backup; \
                     nothing was changed"
                ),
            },
            (false, false) => StoreError::NotALibrary {
                path: self.db_path.clone(),
                reason: e.to_string(),
            },
        }
    }
}
