//! Whole-library checks: a change counter, a textual snapshot of every row (to prove that a
//! refused import changed nothing), and the rows that break the library's rules.

use super::media::content_hash;
use super::media::{MEDIA_COLUMNS, media_from_row};
use super::{BoxRow, Result, Store};

/// What `endotwin library check` found: each list names its problems, one line each.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct LibraryCheck {
    /// What SQLite's full integrity check reports.
    pub integrity: Vec<String>,
    /// Media rows whose file no longer hashes to the row's hash (swapped, edited, damaged).
    pub changed: Vec<String>,
    /// Media rows whose file is gone (or is no regular file).
    pub missing: Vec<String>,
    /// Files under `media/` that no row names (a restored backup's newer files, a crash's
    /// leftovers): reported, never deleted.
    pub unnamed: Vec<String>,
    /// Rows that break the library's rules ([`Store::invalid_rows`]).
    pub invalid: Vec<String>,
    /// How many media files were hashed.
    pub media_checked: usize,
}

impl LibraryCheck {
    pub fn is_healthy(&self) -> bool {
        self.integrity.is_empty()
            && self.changed.is_empty()
            && self.missing.is_empty()
            && self.unnamed.is_empty()
            && self.invalid.is_empty()
    }
}

/// The tables a snapshot covers, in order, with the columns that identify a row's content.
const TABLES: &[&str] = &[
    "patients",
    "examinations",
    "media",
    "polyps",
    "polyp_views",
    "pathology",
    "attributes",
    "reports",
    "report_sentences",
    "captions",
    "videos",
    "video_frames",
    "tracklets",
    "boxes",
    "labels",
    "label_audit",
];

impl Store {
    /// Refuses to write to a damaged database: SQLite's integrity check (the quick one on
    /// databases over [`super::FULL_CHECK_BYTES`]) runs once per open, before the first write.
    pub(super) fn ensure_intact(&mut self) -> Result<()> {
        if self.checked {
            return Ok(());
        }
        let problems = self.integrity_problems(None)?;
        if let Some(first) = problems.first() {
            return Err(super::StoreError::Damaged {
                path: self.db_path.clone(),
                problem: if problems.len() > 1 {
                    format!("{first}; and {} more", problems.len() - 1)
                } else {
                    first.clone()
                },
            });
        }
        self.checked = true;
        Ok(())
    }

    /// What SQLite's integrity check finds wrong (empty when the database is intact).
    /// `full`: the whole check (`None`: full below [`super::FULL_CHECK_BYTES`], quick above).
    pub fn integrity_problems(&self, full: Option<bool>) -> Result<Vec<String>> {
        let Some(conn) = self.conn().as_sqlite() else {
            return super::pg::integrity_problems(self.conn());
        };
        let size = std::fs::metadata(&self.db_path).map_or(0, |m| m.len());
        let full = full.unwrap_or(size <= super::FULL_CHECK_BYTES);
        let pragma = if full {
            "PRAGMA integrity_check(20)"
        } else {
            "PRAGMA quick_check(20)"
        };
        let rows: rusqlite::Result<Vec<String>> = conn
            .prepare(pragma)
            .and_then(|mut stmt| stmt.query_map([], |r| r.get(0))?.collect());
        Ok(match rows {
            Ok(rows) => rows.into_iter().filter(|r| r != "ok").collect(),
            Err(e) => vec![e.to_string()],
        })
    }

    /// Checks the whole library: the database's integrity, every media file's hash, files
    /// missing and files no row names, and the rows that break its rules. Reads only.
    /// `progress(done, total)` is told after each media file.
    pub fn library_check(&self, progress: &dyn Fn(usize, usize)) -> Result<LibraryCheck> {
        let mut out = LibraryCheck {
            integrity: self.integrity_problems(Some(true))?,
            ..LibraryCheck::default()
        };
        if !out.integrity.is_empty() {
            // Rows of a damaged database cannot be trusted to name files.
            return Ok(out);
        }
        let mut stmt = self
            .conn()
            .prepare(&format!("SELECT {MEDIA_COLUMNS} FROM media ORDER BY id"))?;
        let rows: Vec<super::MediaRow> =
            stmt.query_map([], media_from_row)?.collect::<Result<_>>()?;
        let mut named = std::collections::HashSet::new();
        for (i, m) in rows.iter().enumerate() {
            named.insert(m.rel_path.clone());
            if !super::media::is_media_rel_path(&m.rel_path) {
                // Named by `invalid_rows` below; never read.
                progress(i + 1, rows.len());
                continue;
            }
            if self.engine() == super::EngineKind::Postgres {
                match self.read_media(m) {
                    Ok(_) => out.media_checked += 1,
                    Err(super::StoreError::MediaChanged { .. }) => out.changed.push(format!(
                        "media {} ({}): its bytes in the database no longer match the image imported as it (from {})",
                        m.id, m.hash, m.source_path
                    )),
                    Err(e) => return Err(e),
                }
                progress(i + 1, rows.len());
                continue;
            }
            let path = self.media_path(m);
            // Never followed or read unless a regular file: a FIFO would block, a link to a
            // device would never end.
            match std::fs::symlink_metadata(&path) {
                Ok(meta) if meta.is_file() => {
                    let same = meta.len() == m.bytes
                        && std::fs::read(&path).is_ok_and(|b| content_hash(&b) == m.hash);
                    if !same {
                        out.changed.push(format!(
                            "media {} ({}): its bytes no longer match the image imported as it (from {})",
                            m.id, m.rel_path, m.source_path
                        ));
                    }
                    out.media_checked += 1;
                }
                Ok(meta) => out.changed.push(format!(
                    "media {} ({}): the file was replaced by {}; not read (imported from {})",
                    m.id,
                    m.rel_path,
                    file_kind(&path, &meta),
                    m.source_path
                )),
                Err(_) => out.missing.push(format!(
                    "media {} ({}): the file is missing (imported from {})",
                    m.id, m.rel_path, m.source_path
                )),
            }
            progress(i + 1, rows.len());
        }
        let mut files = Vec::new();
        if self.engine() == super::EngineKind::Sqlite {
            list_files(&self.media_dir(), &mut files);
        } else {
            out.unnamed = super::pg::unnamed_media(self.conn())?;
        }
        files.sort();
        for f in files {
            let rel = f
                .strip_prefix(self.root())
                .unwrap_or(&f)
                .to_string_lossy()
                .replace('\\', "/");
            if std::fs::symlink_metadata(&f).is_ok_and(|m| m.file_type().is_symlink()) {
                // A link in media/ (round 8 N1: a folder linked to another library's was
                // called a file no row names).
                let target = std::fs::read_link(&f)
                    .map(|t| t.display().to_string())
                    .unwrap_or_default();
                out.unnamed.push(format!(
                    "{rel}: a link (to {target}) where the library keeps its own files: images \
                     read through it are another folder's; replace it with the files themselves"
                ));
            } else if !named.contains(&rel) {
                out.unnamed.push(format!("{rel}: no row names this file"));
            }
        }
        // The database's own journals and the pending-media journal: a FIFO or device there
        // hangs the next open or write, so it is named.
        if let Some(path) = super::odd_journal(self.db_path()) {
            out.unnamed.push(format!(
                "{}: not a regular file where SQLite keeps the database's journal (a FIFO, device or link): remove it",
                path.display()
            ));
        }
        for journal in super::media::pending_journals(self.root()) {
            let name = journal
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            match std::fs::symlink_metadata(&journal) {
                Ok(m) if !m.is_file() => out.unnamed.push(format!(
                    "{name}: not a regular file (a FIFO, device or link): every write is refused until it is removed"
                )),
                Ok(_) => out.unnamed.push(format!(
                    "{name}: a write did not finish (or is finishing now); the next write (an import, a label change) removes the files it names that no row names"
                )),
                Err(_) => {}
            }
        }
        out.invalid = self
            .invalid_rows()?
            .into_iter()
            .filter(|r| !r.contains("is missing"))
            .collect();
        Ok(out)
    }

    /// The number of rows in every clinical table together: equal before and after means
    /// the write added, removed and audited nothing.
    pub fn row_total(&self) -> Result<i64> {
        row_total_of(self.conn())
    }

    /// Every row of every clinical table as text, table by table in rowid order.
    pub fn snapshot(&self) -> Result<String> {
        let mut out = String::new();
        for table in TABLES {
            out.push_str(&format!("## {table}\n"));
            let mut stmt = self
                .conn()
                .prepare(&format!("SELECT * FROM {table} ORDER BY rowid"))?;
            for row in stmt.query([])? {
                let cells: Vec<String> = row.values().iter().map(|v| format!("{v:?}")).collect();
                out.push_str(&cells.join("|"));
                out.push('\n');
            }
        }
        Ok(out)
    }

    /// Rows that break a rule every writer must keep: boxes that cannot exist on their frame,
    /// sizes and Vienna classes out of range, media without their file, examinations with
    /// nothing in them. Empty on a healthy library.
    pub fn invalid_rows(&self) -> Result<Vec<String>> {
        let mut bad = Vec::new();
        let mut stmt = self.conn().prepare(
            "SELECT b.id, b.x, b.y, b.w, b.h, m.width, m.height FROM boxes b
             LEFT JOIN video_frames f ON f.video_id = b.video_id AND f.frame_index = b.frame_index
             LEFT JOIN media m ON m.id = f.media_id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                BoxRow {
                    frame_index: 0,
                    x: r.get(1)?,
                    y: r.get(2)?,
                    w: r.get(3)?,
                    h: r.get(4)?,
                    polyp_id: None,
                    tracklet_id: None,
                },
                r.get::<_, Option<u32>>(5)?,
                r.get::<_, Option<u32>>(6)?,
            ))
        })?;
        for row in rows {
            let (id, b, w, h) = row?;
            match (w, h) {
                (Some(w), Some(h)) if box_is_valid(&b, w, h) => {}
                (Some(w), Some(h)) => bad.push(format!(
                    "box {id} [{}, {}, {}, {}] cannot exist on its {w}x{h} frame",
                    b.x, b.y, b.w, b.h
                )),
                _ => bad.push(format!("box {id} is on a frame the video does not have")),
            }
        }
        let checks: [(&str, &str); 5] = [
            (
                "SELECT 'polyp ' || id || ' size ' || size_mm FROM polyps
                 WHERE size_mm IS NOT NULL AND NOT (size_mm > 0 AND size_mm <= 300)",
                "size out of range",
            ),
            (
                "SELECT 'pathology of polyp ' || polyp_id || ' size ' || size_mm FROM pathology
                 WHERE size_mm IS NOT NULL AND NOT (size_mm > 0 AND size_mm <= 300)",
                "size out of range",
            ),
            (
                "SELECT 'pathology of polyp ' || polyp_id || ' Vienna ' || vienna_class FROM pathology
                 WHERE vienna_class IS NOT NULL AND vienna_class NOT BETWEEN 1 AND 5",
                "Vienna class out of range",
            ),
            (
                "SELECT 'examination ' || code FROM examinations e WHERE
                 NOT EXISTS (SELECT 1 FROM media m WHERE m.examination_id = e.id)
                 AND NOT EXISTS (SELECT 1 FROM polyps p WHERE p.examination_id = e.id)
                 AND NOT EXISTS (SELECT 1 FROM videos v WHERE v.examination_id = e.id)
                 AND NOT EXISTS (SELECT 1 FROM reports r WHERE r.examination_id = e.id)",
                "empty",
            ),
            (
                "SELECT 'media ' || id || ' ' || width || 'x' || height FROM media
                 WHERE width <= 0 OR height <= 0",
                "no pixels",
            ),
        ];
        for (sql, what) in checks {
            let mut stmt = self.conn().prepare(sql)?;
            for name in stmt.query_map([], |r| r.get::<_, String>(0))? {
                bad.push(format!("{}: {what}", name?));
            }
        }
        bad.extend(self.damaged_embeddings()?);
        let mut stmt = self.conn().prepare("SELECT id, rel_path FROM media")?;
        for row in stmt.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))? {
            let (id, rel) = row?;
            if !super::media::is_media_rel_path(&rel) {
                // A changed row (`../../etc/passwd`): named, never looked at.
                bad.push(format!(
                    "media {id}: its file name '{rel}' is not a file in media/; not read"
                ));
            } else if self.engine() == super::EngineKind::Sqlite
                && !self.root().join(&rel).is_file()
            {
                bad.push(format!("media {id}: its file {rel} is missing"));
            }
        }
        Ok(bad)
    }
}

/// Whether a stored box can exist on a `width` x `height` frame: finite, positive size,
/// inside the image.
fn box_is_valid(b: &BoxRow, width: u32, height: u32) -> bool {
    let v = [b.x, b.y, b.w, b.h];
    v.iter().all(|x| x.is_finite())
        && b.w > 0.0
        && b.h > 0.0
        && b.x >= 0.0
        && b.y >= 0.0
        && b.x + b.w <= width as f64 + 1e-6
        && b.y + b.h <= height as f64 + 1e-6
}

/// Every file (not folder) below `dir`, links not followed.
fn list_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        match e.file_type() {
            Ok(t) if t.is_dir() => list_files(&e.path(), out),
            Ok(_) => out.push(e.path()),
            Err(_) => {}
        }
    }
}

/// What a media path that is not a regular file is, in words (for `library check`).
fn file_kind(path: &std::path::Path, meta: &std::fs::Metadata) -> String {
    let t = meta.file_type();
    if t.is_symlink() {
        return match std::fs::read_link(path) {
            Ok(to) => format!("a symbolic link (to {})", to.display()),
            Err(_) => "a symbolic link".into(),
        };
    }
    if t.is_dir() {
        return "a folder".into();
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO (named pipe)".into();
        }
        if t.is_socket() {
            return "a socket".into();
        }
        if t.is_char_device() || t.is_block_device() {
            return "a device".into();
        }
    }
    "something that is not a regular file".into()
}

impl Store {
    /// Index rows whose vector does not hold its `dim` values, or whose width or code length
    /// differs from the other rows of its model (round 15 N7: one truncated row made `twins`
    /// panic while `library check` called the library whole). `endotwin index` encodes such a
    /// row again.
    fn damaged_embeddings(&self) -> Result<Vec<String>> {
        type Shape = (i64, Option<i64>);
        let mut stmt = self.conn().prepare(
            "SELECT e.model_id, m.name, e.target_kind, e.target_id, CAST(e.dim AS BIGINT),
                    CAST(length(e.vector) AS BIGINT), CAST(length(e.code) AS BIGINT)
             FROM embeddings e JOIN models m ON m.id = e.model_id ORDER BY e.model_id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, i64>(5)?,
                r.get::<_, Option<i64>>(6)?,
            ))
        })?;
        let rows: Vec<_> = rows.collect::<Result<_>>()?;
        // The shape most rows of a model have is its shape.
        let mut counts: std::collections::HashMap<(i64, Shape), usize> = Default::default();
        for (model, _, _, _, dim, _, code) in &rows {
            *counts.entry((*model, (*dim, *code))).or_default() += 1;
        }
        let mut usual: std::collections::HashMap<i64, (Shape, usize)> = Default::default();
        for ((model, shape), n) in counts {
            let best = usual.entry(model).or_insert((shape, 0));
            if n > best.1 || (n == best.1 && shape > best.0) {
                *best = (shape, n);
            }
        }
        let mut bad = Vec::new();
        for (model, name, kind, target, dim, bytes, code) in rows {
            let (shape, _) = usual[&model];
            let why = if bytes != 4 * dim {
                format!("{bytes} bytes for {dim} values")
            } else if (dim, code) != shape {
                format!(
                    "{dim} values and a code of {} bytes where its model's other rows hold {} and {}",
                    code.unwrap_or(0),
                    shape.0,
                    shape.1.unwrap_or(0)
                )
            } else {
                continue;
            };
            bad.push(format!(
                "{name} index row of {kind} {target}: {why}; damaged: `endotwin index` encodes it again"
            ));
        }
        Ok(bad)
    }

    /// Whether no table of the library holds a row (a library that was opened, perhaps just
    /// made, and given nothing).
    pub fn holds_nothing(&self) -> Result<bool> {
        for table in TABLES
            .iter()
            .chain(&["models", "embeddings", "training_runs"])
        {
            let any: bool = self.conn().query_row(
                &format!("SELECT EXISTS(SELECT 1 FROM {table})"),
                [],
                |r| r.get(0),
            )?;
            if any {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Removes a library this process just made when it holds nothing (an import that was
    /// refused or imported nothing, a demo that failed): the database with its journal files,
    /// an empty `media/` and, when `remove_folder`, the library folder if it is empty. A
    /// library holding anything is kept. Says whether it was removed.
    pub fn discard_if_empty(self, remove_folder: bool) -> Result<bool> {
        if self.read_only
            || self.engine() == super::EngineKind::Postgres
            || !self.holds_nothing()?
        {
            return Ok(false);
        }
        let db = self.db_path.clone();
        let root = self.root.clone();
        drop(self);
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut name = db.as_os_str().to_owned();
            name.push(suffix);
            let path = std::path::PathBuf::from(name);
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(super::StoreError::Io { path, source: e });
                }
                _ => {}
            }
        }
        // Only empty folders go (remove_dir refuses the others).
        let _ = std::fs::remove_dir(root.join(super::MEDIA_DIR));
        if remove_folder {
            let _ = std::fs::remove_dir(&root);
        }
        Ok(true)
    }
}

/// [`Store::row_total`] as seen inside a write (a transaction derefs to its connection).
pub fn row_total_of(conn: &super::db::Connection) -> Result<i64> {
    let sql = TABLES
        .iter()
        .map(|t| format!("(SELECT count(*) FROM {t})"))
        .collect::<Vec<_>>()
        .join(" + ");
    conn.query_row(&format!("SELECT {sql}"), [], |r| r.get(0))
}
