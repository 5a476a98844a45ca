//! Opening the database file: the header check before SQLite touches it, read-write and
//! read-only connections, and the read-only open used to look at a damaged library.

use super::{LOCK_WAIT, OpenMode, Result, Store, StoreError, resolve_db_path};
use rusqlite::{Connection, OpenFlags};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The library databases this process opens read-only whoever asks ([`keep_read_only`]).
static KEPT_READ_ONLY: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Makes every later [`Store::open`] of the library at `path` (a folder or its database file)
/// in this process a read-only open: nothing is written at open or after, no journal file is
/// made beside it, and writes fail with [`StoreError::ReadOnly`]. For a library the tool
/// itself calls read only (the source tree's `sample_db/` read as a last resort).
pub fn keep_read_only(path: &Path) {
    let db = canonical_db(path);
    let mut kept = KEPT_READ_ONLY.lock().unwrap_or_else(|e| e.into_inner());
    if !kept.contains(&db) {
        kept.push(db);
    }
}

/// Whether the library at `path` was marked by [`keep_read_only`].
pub fn is_kept_read_only(path: &Path) -> bool {
    let kept = KEPT_READ_ONLY.lock().unwrap_or_else(|e| e.into_inner());
    !kept.is_empty() && kept.contains(&canonical_db(path))
}

fn canonical_db(path: &Path) -> PathBuf {
    let db = resolve_db_path(path);
    std::fs::canonicalize(&db).unwrap_or(db)
}

impl Store {
    /// Opens an existing library to look at it (`info`, `library check`): as [`Store::open`],
    /// but a database that is damaged where opening would write (a migration, a stale run to
    /// mark) is opened read-only instead, so nothing is written to it and it can still be read.
    pub fn open_to_inspect(path: &Path) -> Result<Store> {
        match Store::open(path, OpenMode::Existing) {
            Err(StoreError::Damaged { .. }) => Store::open_read_only(path),
            other => other,
        }
    }

    /// Opens an existing library read-only: nothing is written at open or after (writes fail
    /// with [`StoreError::ReadOnly`]), and no journal file is left beside it.
    pub fn open_read_only(path: &Path) -> Result<Store> {
        if let Some(url) = super::pg::library_url(path) {
            let mut store = super::pg::open(url, OpenMode::Existing)?;
            store
                .conn
                .execute_batch("SET default_transaction_read_only = on")?;
            store.read_only = true;
            return Ok(store);
        }
        let db_path = resolve_db_path(path);
        super::refuse_odd_journal(&db_path)?;
        let meta = std::fs::metadata(&db_path).map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound => StoreError::Missing {
                path: path.to_path_buf(),
            },
            _ => StoreError::Io {
                path: db_path.clone(),
                source,
            },
        })?;
        if !meta.is_file() {
            return Err(StoreError::NotALibrary {
                path: db_path,
                reason: "not a regular file".into(),
            });
        }
        check_sqlite_header(&db_path, meta.len())?;
        let root = db_path.parent().map(Path::to_path_buf).unwrap_or_default();
        crate::plumbing::output::protect_database(&db_path);
        let conn = open_read_only_connection(&db_path)?;
        let mut store = Store {
            conn: super::db::Connection::sqlite(conn),
            db_path,
            root,
            read_only: true,
            wait_notice: None,
            checked: false,
        };
        store.check_and_migrate(OpenMode::Existing)?;
        Ok(store)
    }
}

/// Refuses a non-empty file that does not start with the SQLite header, before SQLite
/// (which opens lazily) could touch it.
pub(super) fn check_sqlite_header(path: &Path, len: u64) -> Result<()> {
    use std::io::Read;
    if len == 0 {
        return Ok(());
    }
    let mut header = [0u8; 16];
    let mut file = std::fs::File::open(path).map_err(|source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let n = file.read(&mut header).map_err(|source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if n < 16 || &header != b"SQLite format 3\0" {
        return Err(StoreError::NotALibrary {
            path: path.to_path_buf(),
            reason: "not an SQLite database".into(),
        });
    }
    Ok(())
}

/// A read-only connection that leaves no file behind: SQLite's read-only mode when the
/// database's WAL is there (its content must be read), else the file read as immutable (a
/// read-only connection would create a `-wal` and `-shm` it cannot remove).
pub(super) fn open_read_only_connection(path: &Path) -> Result<Connection> {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    if Path::new(&wal).exists() {
        return open_connection(path, true);
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    let uri = format!("file:{}?immutable=1", path.display());
    let conn = Connection::open_with_flags(uri, flags)?;
    conn.execute_batch("PRAGMA foreign_keys = ON;")?;
    Ok(conn)
}

pub(super) fn open_connection(path: &Path, read_only: bool) -> Result<Connection> {
    let conn = if read_only {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        match Connection::open_with_flags(path, flags) {
            Ok(c) if c.query_row("PRAGMA user_version", [], |_| Ok(())).is_ok() => c,
            // A WAL library in a read-only folder cannot create its -shm file; SQLite can
            // still read it as immutable.
            _ => {
                let uri = format!("file:{}?immutable=1", path.display());
                Connection::open_with_flags(uri, flags | OpenFlags::SQLITE_OPEN_URI)?
            }
        }
    } else {
        Connection::open(path)?
    };
    conn.busy_timeout(LOCK_WAIT)?;
    conn.execute_batch("PRAGMA foreign_keys = ON;")?;
    Ok(conn)
}
