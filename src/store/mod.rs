//! The case library: one SQLite file plus a content-addressed `media/` folder beside it.
//!
//! All SQL of the program lives under this module. Every multi-row change runs inside
//! [`Store::write`], which is one transaction: it commits only if the closure returns `Ok`.

mod audit;
mod cases;
mod check;
mod connection;
mod copy;
mod db;
mod labels;
mod listing;
mod media;
mod merge;
mod models;
mod pg;
pub mod pg_tls;
mod pg_value;
mod schema;
mod schema_pg;
mod tracklet_edits;
mod tracklet_versions;
mod twin_search;
mod values;
mod videos;

pub use audit::{ChangeMark, check_audit_time};
pub use cases::*;
pub use check::{LibraryCheck, row_total_of};
pub use copy::{COPIED_TABLES, CopyReport, copy_library};
pub use labels::{
    AuditEntry, AuditFilter, IMPORTER_PREFIX, Label, LabelWritten, LibraryAudit,
    MAX_REVIEWER_CHARS, TargetKind, VIEW_BOX_KEY, check_reviewer, format_view_box, import_label,
    parse_view_box,
};
pub use listing::{CaseFilter, CaseListing, ExamNode};
pub use media::{
    MediaFiles, MediaKind, MediaRow, NewMedia, PENDING_JOURNAL, content_hash, insert_media,
    media_examination, path_within, pending_journals, set_mask, set_thumbnail,
};
pub use merge::{
    LabelChange, LabelPolicy, Merge, merge_caption, merge_media_label, merge_polyp,
    merge_video_boxes, merge_video_frame,
};
pub use models::{
    EmbeddingRow, EmbeddingSet, EmbeddingTarget, ModelRow, RunRow, ensure_model, finish_run,
    link_run_model, log_metric, put_embedding, start_run,
};
pub use pg::library_url;
pub use schema::{APPLICATION_ID, CURRENT_VERSION};
pub use tracklet_edits::*;
pub use values::{
    HISTOLOGY, LOCATIONS, MAX_VALUE_CHARS, MORPHOLOGY, SIZE_CLASSES, canonical_label_value,
    check_label_value, duplicate_column, is_printable, size_class_of, vienna_classes_of,
    vienna_misfit,
};
pub use videos::*;

use connection::{check_sqlite_header, open_connection};
pub use connection::{is_kept_read_only, keep_read_only};
use db::Connection;
#[cfg(test)]
use db::params;
pub use db::{EngineKind, Transaction};
use std::path::{Path, PathBuf};

/// File name of the SQLite database inside a library folder.
pub const DB_FILE: &str = "library.sqlite";
/// Folder (beside the database) holding media files named by content hash.
pub const MEDIA_DIR: &str = "media";

/// What a person can do about a write the disk refused: a full disk, a quota or a file-size
/// limit (`ulimit -f`) reads as raw `File too large (os error 27)` otherwise (round 7 N13).
pub fn io_hint(e: &std::io::Error) -> &'static str {
    use std::io::ErrorKind;
    match e.kind() {
        ErrorKind::StorageFull | ErrorKind::QuotaExceeded | ErrorKind::FileTooLarge => {
            " (the disk is full, or a quota or file-size limit such as `ulimit -f` stopped the \
             write): free some space or raise the limit, then try again; what was not written \
             is not in the library"
        }
        _ => "",
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{}: not an EndoTwin library ({reason})", library_name(path))]
    NotALibrary { path: PathBuf, reason: String },
    #[error(
        "{path}: the disk refused to read or write it ({reason}); free some space or check the disk (the library itself may be fine, nothing was changed)"
    )]
    Disk { path: PathBuf, reason: String },
    #[error(
        "{path}: library schema version {found} is newer than this EndoTwin supports ({supported}); update EndoTwin to open it"
    )]
    NewerSchema {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    #[error(
        "{path}: library is read-only and needs an upgrade from schema {found} to {supported}; make it writable or copy it"
    )]
    ReadOnlyNeedsMigration {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    #[error("{path}: library is read-only; changes are disabled")]
    ReadOnly { path: PathBuf },
    #[error("{path}: no library here (no {DB_FILE})")]
    Missing { path: PathBuf },
    #[error("{path}: {source}{}", io_hint(source))]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("library database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("library database error: {}", pg_message(.0))]
    Postgres(postgres::Error),
    #[error(
        "the connection to the library's database server was lost ({0}); a change in flight was not confirmed: look at the library again (reopen it) before repeating it"
    )]
    ConnectionLost(String),
    #[error("library database error: {0}")]
    Database(String),
    #[error("library database error: the query returned no row")]
    NoRow,
    #[error(
        "{path}: the library is busy: another EndoTwin has been writing to it for {waited_s} s; nothing was written, try again when it is done"
    )]
    Locked { path: PathBuf, waited_s: u64 },
    #[error(
        "{path}: library schema version {found} is not one EndoTwin ever wrote; refusing to open it"
    )]
    UnknownSchema { path: PathBuf, found: i64 },
    #[error(
        "{path}: {DB_FILE} is missing or empty, but {MEDIA_DIR}/ beside it holds a library's images; refusing to start a new library over them (restore {DB_FILE} from a backup, or name a new folder)"
    )]
    MediaWithoutDatabase { path: PathBuf },
    #[error(
        "{path}: the library database is damaged ({problem}); nothing was written. Restore {DB_FILE} from a backup; `endotwin library check` lists what is wrong"
    )]
    Damaged { path: PathBuf, problem: String },
    #[error(
        "{path}: media {id} ({file}) no longer holds the image imported as it: its bytes changed on disk; `endotwin library check` lists every such file"
    )]
    MediaChanged {
        path: PathBuf,
        id: i64,
        file: String,
    },
    #[error(
        "{path}: media {id}'s file name '{file}' is not a file in {MEDIA_DIR}/ (its row was changed); not read; `endotwin library check` lists every such row"
    )]
    MediaOutsideLibrary {
        path: PathBuf,
        id: i64,
        file: String,
    },
    #[error(
        "{path}: media {id}'s file {file} is missing from media/ (moved or deleted); not read; `endotwin library check` lists every such file"
    )]
    MediaFileMissing {
        path: PathBuf,
        id: i64,
        file: String,
    },
    #[error(
        "{path}: media {id}'s file {file} is not a regular file (a FIFO, device or link to one); not read; `endotwin library check` lists every such file"
    )]
    MediaNotAFile {
        path: PathBuf,
        id: i64,
        file: String,
    },
    #[error(
        "{path}: lies inside the {MEDIA_DIR}/ or models/ folder of the library in {library} (or at the name of its database's files); a new library is not made there (nothing was written): name a folder outside it"
    )]
    InsideAnotherLibrary { path: PathBuf, library: PathBuf },
    #[error(
        "{url}: cannot reach the library's database server ({reason}); check the server, the URL and $PGPASSWORD (nothing was changed)"
    )]
    Unreachable { url: String, reason: String },
    #[error(
        "{target} {key}: changed since you read it, by {changes}; nothing was written (look at the new value and set yours again if it still holds)"
    )]
    Conflict {
        target: String,
        key: String,
        changes: String,
    },
    #[error("{0}")]
    Invalid(String),
}

/// How messages name the library at `path`: its folder, or its server's URL without the
/// password.
pub fn library_name(path: &Path) -> String {
    match pg::library_url(path) {
        Some(url) => pg::redacted(url),
        // A mistyped server URL (`POSTGRES://`) keeps its password hidden too; a folder's path
        // never starts with a scheme.
        None => pg::redacted(&path.display().to_string()),
    }
}

/// The library whose `media/` (or promoted `models/`) folder holds `folder` (at any depth), if any: the folder of
/// such a library's database. Links in the part that exists are resolved first.
pub fn library_around(folder: &Path) -> Option<PathBuf> {
    let absolute = if folder.is_absolute() {
        folder.to_path_buf()
    } else {
        std::env::current_dir().ok()?.join(folder)
    };
    // The longest leading part that exists, resolved; the rest appended as the folders would
    // be made (`zz/../models/y` is `models/y`: round 11 N2).
    let parts: Vec<std::path::Component> = absolute.components().collect();
    let mut known = 0;
    let mut prefix = PathBuf::new();
    for (i, part) in parts.iter().enumerate() {
        prefix.push(part);
        if prefix.exists() {
            known = i + 1;
        } else {
            break;
        }
    }
    let mut resolved = std::fs::canonicalize(parts[..known].iter().collect::<PathBuf>()).ok()?;
    for part in &parts[known..] {
        match part {
            std::path::Component::ParentDir => {
                resolved.pop();
            }
            std::path::Component::CurDir => {}
            other => resolved.push(other),
        }
    }
    // Inside a library's media/, or inside the models/ a promotion makes for it, whether or
    // not one was made yet (round 10 N27: a copy made there blocked the first promotion).
    // Or at the name of a library's database or one of SQLite's files beside it (round 11
    // N10: a library made at `L/library.sqlite-wal` made L's own database unreadable).
    let beside_database = |n: &std::ffi::OsStr| {
        n.to_str()
            .and_then(|n| n.strip_prefix(DB_FILE))
            .is_some_and(|rest| ["", "-wal", "-shm", "-journal"].contains(&rest))
    };
    resolved
        .ancestors()
        .filter(|a| {
            a.file_name()
                .is_some_and(|n| n == MEDIA_DIR || n == "models" || beside_database(n))
        })
        .filter_map(Path::parent)
        .find(|library| library.join(DB_FILE).is_file())
        .map(Path::to_path_buf)
}

/// Databases up to this size get SQLite's full integrity check before the first write
/// (indexes against their tables); larger ones the quick check.
pub const FULL_CHECK_BYTES: u64 = 512 * 1024 * 1024;

/// How long a write waits for another process holding the library's write lock.
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Told once when a write has to wait for the lock (the import's progress line).
pub type WaitNotice = Box<dyn Fn(&str) + Send>;

pub type Result<T> = std::result::Result<T, StoreError>;

/// How to open a library.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// Open an existing library; refuse a path with none.
    Existing,
    /// Open, or create an empty library when none exists.
    CreateIfMissing,
}

/// An open library.
pub struct Store {
    conn: Connection,
    db_path: PathBuf,
    root: PathBuf,
    read_only: bool,
    wait_notice: Option<WaitNotice>,
    /// Whether the database passed its integrity check (done once, before the first write).
    checked: bool,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("db_path", &self.db_path)
            .field("read_only", &self.read_only)
            .finish()
    }
}

/// Refuses the library at `path` when its database or media folder is shared with another
/// library, as every open for writing does ([`Store::open`]); `library check` asks it of the
/// library it checks read-only (round 8 N1: it said "whole" of one).
pub fn check_not_shared(path: &Path) -> Result<()> {
    if pg::library_url(path).is_some() {
        return Ok(());
    }
    let db_path = resolve_db_path(path);
    let root = db_path.parent().map(Path::to_path_buf).unwrap_or_default();
    refuse_shared_database(&db_path, &root)
}

/// A database or media folder shared with another library (round 7 N1, N29): a database
/// with a second name (a hard link; a symbolic one is refused above) or a `media/` that is a
/// link to another library's would get rows naming files written elsewhere.
fn refuse_shared_database(db_path: &Path, root: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let Ok(m) = std::fs::metadata(db_path)
            && m.is_file()
            && m.nlink() > 1
        {
            return Err(StoreError::NotALibrary {
                path: db_path.to_path_buf(),
                reason: format!(
                    "the database has {} names (hard links): another folder may hold the same \
                     database, whose rows would then name images written here; make a copy \
                     of its own with `endotwin library copy` (nothing was changed)",
                    m.nlink()
                ),
            });
        }
    }
    let media = root.join(MEDIA_DIR);
    if std::fs::symlink_metadata(&media).is_ok_and(|m| m.file_type().is_symlink())
        && let Ok(target) = std::fs::canonicalize(&media)
        && let Some(beside) = target.parent()
        && beside.join(DB_FILE).is_file()
        && std::fs::canonicalize(root).ok().as_deref() != Some(beside)
    {
        return Err(StoreError::NotALibrary {
            path: media,
            reason: format!(
                "media/ is a link to another library's images ({}): this library's images \
                 would be written into it; give it a media folder of its own (nothing was \
                 changed)",
                target.display()
            ),
        });
    }
    Ok(())
}

/// Resolves a user-given path (a library folder or its database file) to the database file.
/// Refuses a database whose journal files (`-journal`, `-wal`, `-shm` beside it) are not
/// regular files: SQLite would open a FIFO there as a hot journal and wait for ever.
pub(crate) fn refuse_odd_journal(db_path: &Path) -> Result<()> {
    match odd_journal(db_path) {
        Some(path) => Err(StoreError::NotALibrary {
            path: db_path.to_path_buf(),
            reason: format!(
                "{} is not a regular file (a FIFO, device or link) where SQLite keeps the database's journal: remove it; nothing was opened",
                path.display()
            ),
        }),
        None => Ok(()),
    }
}

/// The first of the database's journal files (`-journal`, `-wal`, `-shm`) that is there and
/// is not a regular file.
pub(crate) fn odd_journal(db_path: &Path) -> Option<PathBuf> {
    ["-journal", "-wal", "-shm"]
        .iter()
        .map(|suffix| {
            let mut name = db_path.as_os_str().to_owned();
            name.push(suffix);
            PathBuf::from(name)
        })
        .find(|path| std::fs::symlink_metadata(path).is_ok_and(|m| !m.is_file()))
}

/// Whether `path` is named as a database file (`.sqlite`, `.sqlite3`, `.db`, any case).
fn has_database_extension(path: &Path) -> bool {
    path.extension().is_some_and(|e| {
        ["sqlite", "sqlite3", "db"].contains(&e.to_string_lossy().to_lowercase().as_str())
    })
}

pub fn resolve_db_path(path: &Path) -> PathBuf {
    // A name that is not there yet is a folder unless it reads as a database file
    // (`lib.v2` is a folder to make, `cases.sqlite` a database).
    let database_name = has_database_extension(path);
    let there = std::fs::symlink_metadata(path).is_ok();
    if path.is_dir() || path.extension().is_none() || (!there && !database_name) {
        path.join(DB_FILE)
    } else {
        path.to_path_buf()
    }
}

impl Store {
    /// Opens the library at `path` (a folder or a `.sqlite` file).
    ///
    /// Foreign files, newer schemas and read-only libraries that need migration are refused
    /// before anything is written. A read-only file opens read-only: reads work, writes fail
    /// with [`StoreError::ReadOnly`].
    pub fn open(path: &Path, mode: OpenMode) -> Result<Store> {
        let db_path = resolve_db_path(path);
        let root = db_path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        if db_path.parent().is_none() || db_path.as_os_str().is_empty() || root == Path::new("/") {
            return Err(StoreError::NotALibrary {
                path: path.to_path_buf(),
                reason: "the filesystem's root is no library folder; name a folder of its own"
                    .into(),
            });
        }
        if let Some(url) = pg::library_url(path) {
            return pg::open(url, mode);
        }
        // A server's URL mistyped (`POSTGRES://`, `postgres:/host`) would otherwise be a folder
        // made on this machine (round 12 N8).
        let lower = path.to_string_lossy().trim().to_ascii_lowercase();
        if lower.starts_with("postgres:") || lower.starts_with("postgresql:") {
            return Err(StoreError::NotALibrary {
                path: path.to_path_buf(),
                reason: "it looks like a PostgreSQL URL but is not one: write it \
                         postgres://USER@HOST/DATABASE (the scheme in lower case, two slashes); \
                         nothing was made"
                    .into(),
            });
        }
        if is_kept_read_only(&db_path) {
            return Store::open_read_only(path);
        }
        // A file without an extension (a README, an image) was taken for a folder: "no
        // library here (no library.sqlite)", or a raw "File exists" on a write (round 9 N2).
        if db_path != path && std::fs::metadata(path).is_ok_and(|m| !m.is_dir()) {
            return Err(StoreError::NotALibrary {
                path: path.to_path_buf(),
                reason: format!(
                    "a file, not a library folder (a library is a folder holding {DB_FILE}, or \
                     a .sqlite file); nothing was changed"
                ),
            });
        }
        // A database that is a link to another library's: its media would be written beside
        // the link while its rows went into the other library (which then names files it
        // does not have). Open the library where it lives.
        if std::fs::symlink_metadata(&db_path).is_ok_and(|m| m.file_type().is_symlink()) {
            let target = std::fs::canonicalize(&db_path)
                .map(|t| t.display().to_string())
                .unwrap_or_else(|_| "nothing".into());
            return Err(StoreError::NotALibrary {
                path: db_path.clone(),
                reason: format!(
                    "the database is a link to {target}; open that library's own folder (its media/ is beside it)"
                ),
            });
        }
        refuse_shared_database(&db_path, &root)?;
        refuse_odd_journal(&db_path)?;
        let exists = db_path.exists();
        let empty =
            !exists || std::fs::metadata(&db_path).is_ok_and(|m| m.is_file() && m.len() == 0);
        // A new library in a file the user named as another kind of file (round 8 N32: an
        // empty `photo.png` became a database): a library is a folder, or its `.sqlite` file.
        let database_name =
            db_path.file_name().is_some_and(|n| n == DB_FILE) || has_database_extension(&db_path);
        if empty && mode == OpenMode::CreateIfMissing && !database_name {
            return Err(StoreError::NotALibrary {
                path: db_path,
                reason: "named as another kind of file, not a database: a new library is made \
                         in a folder (`--library FOLDER`) or a `.sqlite` file; nothing was \
                         written"
                    .into(),
            });
        }
        if empty && mode == OpenMode::CreateIfMissing && media::media_dir_has_files(&root) {
            return Err(StoreError::MediaWithoutDatabase { path: root });
        }
        if !exists {
            if mode == OpenMode::Existing {
                return Err(StoreError::Missing {
                    path: path.to_path_buf(),
                });
            }
            if let Some(library) = library_around(&root) {
                return Err(StoreError::InsideAnotherLibrary {
                    path: path.to_path_buf(),
                    library,
                });
            }
            std::fs::create_dir_all(&root).map_err(|source| StoreError::Io {
                path: root.clone(),
                source,
            })?;
        }
        let meta = exists
            .then(|| std::fs::metadata(&db_path))
            .transpose()
            .map_err(|source| StoreError::Io {
                path: db_path.clone(),
                source,
            })?;
        if let Some(meta) = &meta {
            if meta.is_dir() {
                return Err(StoreError::NotALibrary {
                    path: db_path,
                    reason: "is a folder".into(),
                });
            }
            if !meta.is_file() {
                return Err(StoreError::NotALibrary {
                    path: db_path,
                    reason: "not a regular file (a FIFO, socket or device)".into(),
                });
            }
            check_sqlite_header(&db_path, meta.len())?;
        }
        // Permission bits, not a failed write: root ignores them, and we must not write. A
        // file or folder this user may not write (another owner's library) is read-only too.
        // A library nobody may write (its file or folder without write bits: `chmod a-w`) is
        // read leaving no `-wal`/`-shm` behind (root could make them); another owner's may be
        // written by them meanwhile, so it is read through SQLite's locks.
        let no_write_bits = meta.is_some_and(|m| m.permissions().readonly())
            || (exists && std::fs::metadata(&root).is_ok_and(|m| m.permissions().readonly()));
        let read_only = no_write_bits || (exists && !(may_write(&db_path) && may_write(&root)));
        let conn = Connection::sqlite(if no_write_bits {
            connection::open_read_only_connection(&db_path)?
        } else {
            open_connection(&db_path, read_only)?
        });
        let mut store = Store {
            conn,
            db_path,
            root,
            read_only,
            wait_notice: None,
            checked: false,
        };
        crate::plumbing::output::protect_database(&store.db_path);
        store.check_and_migrate(mode)?;
        // The one write of an open: checked first, so a damaged database is refused untouched.
        let stale = match store.read_only {
            true => Vec::new(),
            false => models::stale_runs(&store.conn)?,
        };
        if !stale.is_empty() {
            store.ensure_intact()?;
            models::mark_stale_runs(&store.conn, &stale)?;
        }
        Ok(store)
    }

    /// Opens an in-memory library whose media folder is `root` (tests and dry runs).
    pub fn open_in_memory(root: &Path) -> Result<Store> {
        let conn = rusqlite::Connection::open_in_memory()?;
        conn.execute_batch("PRAGMA foreign_keys = ON;")?;
        let conn = Connection::sqlite(conn);
        let mut store = Store {
            conn,
            db_path: PathBuf::from(":memory:"),
            root: root.to_path_buf(),
            read_only: false,
            wait_notice: None,
            checked: true,
        };
        store.check_and_migrate(OpenMode::CreateIfMissing)?;
        Ok(store)
    }

    pub fn db_path(&self) -> &Path {
        &self.db_path
    }

    /// The library folder (holds the database and `media/`).
    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn media_dir(&self) -> PathBuf {
        self.root.join(MEDIA_DIR)
    }

    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    pub fn schema_version(&self) -> Result<i64> {
        match self.conn.as_sqlite() {
            Some(c) => Ok(c.query_row("PRAGMA user_version", [], |r| r.get(0))?),
            None => pg::schema_version(&self.conn),
        }
    }

    /// Which engine holds this library.
    pub fn engine(&self) -> EngineKind {
        self.conn.kind()
    }

    /// How this station's connection to a library's server is protected: the TLS version
    /// (`TLSv1.3`), or `None` when it is not encrypted. `Ok(None)` on SQLite too (no network).
    pub fn server_tls(&self) -> Result<Option<String>> {
        if self.engine() == EngineKind::Sqlite {
            return Ok(None);
        }
        let row: Option<(bool, Option<String>)> = self
            .conn
            .rows(
                "SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                [],
            )?
            .first()
            .map(|r| Ok::<_, StoreError>((r.get(0)?, r.get(1)?)))
            .transpose()?;
        Ok(row.and_then(|(ssl, version)| ssl.then(|| version.unwrap_or_else(|| "TLS".into()))))
    }

    /// Says `notice` once whenever a write has to wait for another process's lock.
    pub fn on_wait(&mut self, notice: WaitNotice) {
        self.wait_notice = Some(notice);
    }

    /// Runs `f` in one transaction: all of its changes land, or none do. The write lock is
    /// taken first (waiting up to [`LOCK_WAIT`] for another process), so `f` never fails
    /// half-way for want of it. Media files staged by a process killed mid-import are swept
    /// first, as by [`Store::write_media`]: any write leaves the library whole.
    pub fn write<T, E>(
        &mut self,
        f: impl FnOnce(&Transaction<'_>) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E>
    where
        E: From<StoreError>,
    {
        self.write_inner(|tx, _| f(tx).map(|v| (v, true)))
    }

    /// [`Store::write`] for changes that bring media files: `f` puts them through the
    /// [`MediaFiles`] it is given, under the lock. When the transaction does not commit, the
    /// files it created are removed again, so the library never holds a file no row names.
    /// Files left by a process killed mid-write are swept here first.
    pub fn write_media<T, E>(
        &mut self,
        f: impl FnOnce(&Transaction<'_>, &mut MediaFiles) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E>
    where
        E: From<StoreError>,
    {
        self.write_inner(|tx, files| f(tx, files).map(|v| (v, true)))
    }

    /// As [`Store::write_media`], but `f` also says whether its work changed anything: work
    /// that changed nothing is rolled back, so the library's file stays as it was byte for
    /// byte (an import of what the library already holds).
    pub fn write_media_if_changed<T, E>(
        &mut self,
        f: impl FnOnce(&Transaction<'_>, &mut MediaFiles) -> std::result::Result<(T, bool), E>,
    ) -> std::result::Result<T, E>
    where
        E: From<StoreError>,
    {
        self.write_inner(f)
    }

    fn write_inner<T, E>(
        &mut self,
        f: impl FnOnce(&Transaction<'_>, &mut MediaFiles) -> std::result::Result<(T, bool), E>,
    ) -> std::result::Result<T, E>
    where
        E: From<StoreError>,
    {
        if self.read_only {
            return Err(StoreError::ReadOnly {
                path: self.db_path.clone(),
            }
            .into());
        }
        self.ensure_intact().map_err(E::from)?;
        self.wait_for_lock().map_err(E::from)?;
        let db = self.db_path.clone();
        let mut files = MediaFiles::new(&self.root, &self.conn);
        let tx = self
            .conn
            .transaction()
            .map_err(|e| E::from(locked(e, &db)))?;
        if self.db_path != Path::new(":memory:") && self.conn.kind() == EngineKind::Sqlite {
            media::sweep_pending(&tx, &self.root).map_err(E::from)?;
        }
        // A write that does not commit removes its files while it still holds the write
        // lock: removed after the lock went, a file could be one the next writer had just
        // found in place and committed a row for. Each write keeps a journal of its own
        // (two stations importing at once: `bench library` found the next writer's sweep
        // failing on a shared journal removed under it).
        let value = match f(&tx, &mut files) {
            Ok((v, true)) => v,
            Ok((v, false)) => {
                files.discard();
                drop(tx);
                return Ok(v);
            }
            Err(e) => {
                files.discard();
                drop(tx);
                return Err(e);
            }
        };
        if let Err(e) = tx.commit() {
            files.discard();
            return Err(E::from(locked(e, &db)));
        }
        // After the commit (the lock is gone): only this write's own journal goes, naming
        // only files its rows now name; a crash before it leaves a journal the next write
        // sweeps, removing nothing.
        files.committed();
        Ok(value)
    }

    /// Tells the wait notice when another process holds the write lock right now.
    fn wait_for_lock(&mut self) -> Result<()> {
        let Some(notice) = &self.wait_notice else {
            return Ok(());
        };
        let free = match self.conn.as_sqlite() {
            Some(conn) => {
                conn.busy_timeout(std::time::Duration::ZERO)?;
                let free = conn.execute_batch("BEGIN IMMEDIATE; ROLLBACK;").is_ok();
                if !free && !conn.is_autocommit() {
                    conn.execute_batch("ROLLBACK")?;
                }
                conn.busy_timeout(LOCK_WAIT)?;
                free
            }
            None => pg::writer_lock_free(&self.conn)?,
        };
        if !free {
            notice("waiting for the library (another EndoTwin is writing to it)");
        }
        Ok(())
    }

    pub(crate) fn conn(&self) -> &Connection {
        &self.conn
    }
}

impl From<postgres::Error> for StoreError {
    /// A server gone (restarted, network cut) is named as such, apart from refused queries.
    fn from(e: postgres::Error) -> StoreError {
        // SQLSTATE classes 08 (connection exception) and 57 (the server shutting down or
        // ending the session).
        let ended = e
            .code()
            .is_some_and(|c| c.code().starts_with("08") || c.code().starts_with("57P"));
        match e.is_closed() || ended || e.as_db_error().is_none() && io_error(&e) {
            true => StoreError::ConnectionLost(pg_message(&e)),
            false => StoreError::Postgres(e),
        }
    }
}

/// The server's own message for a refused query (the client's `Display` says only
/// "db error"), else the client's.
fn pg_message(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} (SQLSTATE {})", db.message(), db.code().code()),
        None => match std::error::Error::source(e) {
            Some(cause) => format!("{e}: {cause}"),
            None => e.to_string(),
        },
    }
}

/// Whether a PostgreSQL client error came from the connection (I/O), not the server.
fn io_error(e: &postgres::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if s.is::<std::io::Error>() {
            return true;
        }
        source = s.source();
    }
    false
}

/// A write that could not take the library's write lock in time, named as such.
fn locked(e: StoreError, db: &Path) -> StoreError {
    let busy = match &e {
        StoreError::Sqlite(e) => matches!(
            e.sqlite_error_code(),
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
        ),
        StoreError::Postgres(e) => pg::is_lock_timeout(e),
        _ => false,
    };
    match busy {
        true => StoreError::Locked {
            path: db.to_path_buf(),
            waited_s: LOCK_WAIT.as_secs(),
        },
        false => e,
    }
}

/// Current UTC time as RFC 3339 text (seconds), without pulling in a date crate.
/// Whether this process may write `path` (access(2): its owner, group and mode as they apply
/// to this user).
fn may_write(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
            return false;
        };
        // SAFETY: a valid NUL-terminated path; access(2) only reads it.
        unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        true
    }
}

/// UTC time `seconds_ago` seconds before now, as [`now_utc`] writes it (comparable as text).
pub fn utc_seconds_ago(seconds_ago: i64) -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    format_utc(secs - seconds_ago)
}

pub fn now_utc() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    format_utc(secs)
}

pub(crate) fn format_utc(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests;
