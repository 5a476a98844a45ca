//! Where a command may write a file it was asked to write (`--out`, `--json`): never over a
//! library's own files (its database under whatever name it was opened, the database's
//! journal files, anything in `media/` or in the `models/` a promotion made for it), never
//! over anything that is not a regular file, and over an existing file only when the user
//! said `--force`.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum OutputError {
    #[error(
        "{0}: this is the library's own file; nothing was written (write to a file outside the library; its models change only through `model promote` and `model demote`)"
    )]
    LibraryFile(PathBuf),
    #[error(
        "{0}: a symbolic link; an output is written to a file of its own, never through a link, --force or not (`labels export --out -` writes to standard output); nothing was written"
    )]
    Link(PathBuf),
    #[error("{0}: exists; nothing was written (add --force to replace it)")]
    Exists(PathBuf),
    #[error("{0}: exists and is not a regular file; nothing was written")]
    NotAFile(PathBuf),
    #[error(
        "{0}: an SQLite database (a library's, or a copy of one); nothing was written, --force or not"
    )]
    Database(PathBuf),
}

/// The names in a library folder that belong to the library itself.
const LIBRARY_NAMES: &[&str] = &[
    "library.sqlite",
    "library.sqlite-wal",
    "library.sqlite-shm",
    "library.sqlite-journal",
    "media-pending.journal",
    // The lock promote and demote hold (round 8 N27: an export written there was removed by
    // the next demote).
    ".models.lock",
    // Its folders, before they are made (round 15 N18: `--json L/models` made a file where a
    // promotion makes the library's models folder, and every promotion then failed).
    "media",
    "models",
];

/// The files SQLite keeps beside a database, by the suffix it adds to the database's name.
const JOURNAL_SUFFIXES: &[&str] = &["", "-wal", "-shm", "-journal"];

/// Every database this process has opened (the store tells on each open), whatever its name.
static OPEN_DATABASES: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Marks `db` as a library database: no output is written over it, its journal files or the
/// `media/` folder beside it, `--force` or not, for as long as the process runs.
pub fn protect_database(db: &Path) {
    let db = resolve(db);
    let mut open = OPEN_DATABASES.lock().unwrap_or_else(|e| e.into_inner());
    if !open.contains(&db) {
        open.push(db);
    }
}

/// Whether `out` may be written: `library` is the library the command runs on (its folder or
/// its database file, under any name), and any folder holding a `library.sqlite` and any
/// database opened by this process ([`protect_database`]) are treated as libraries too.
pub fn check_output(out: &Path, library: Option<&Path>, force: bool) -> Result<(), OutputError> {
    let resolved = resolve(out);
    let parent = resolved.parent().map(Path::to_path_buf).unwrap_or_default();
    let name = resolved
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // A library named by its database file (`--library x/cases.sqlite`): that file is its
    // database, whatever it is called.
    let library_db = library
        .filter(|l| !l.is_dir() && l.extension().is_some())
        .map(resolve);
    let library_root = library.map(|l| {
        let l = resolve(l);
        if l.extension().is_some_and(|e| e == "sqlite") || library_db.as_ref() == Some(&l) {
            l.parent().map(Path::to_path_buf).unwrap_or(l)
        } else {
            l
        }
    });
    let in_library_folder = library_root.as_deref() == Some(parent.as_path())
        || parent.join("library.sqlite").is_file();
    // Inside a library's media/ (a library: its folder or any folder holding a database
    // beside a media/ folder, whatever the database is called), or inside the models folder
    // a promotion made for one (marked ACTIVE; changed only by promote and demote).
    let in_media = resolved.ancestors().skip(1).any(|a| {
        let name = a.file_name();
        (name.is_some_and(|n| n == "media")
            && (library_root.as_deref() == a.parent() || a.parent().is_some_and(holds_database)))
            || (name.is_some_and(|n| n == "models") && is_library_models(a))
    });
    // Another library's database under another name (with its journal files): a SQLite
    // database beside a media/ folder.
    let base = JOURNAL_SUFFIXES
        .iter()
        .filter(|s| !s.is_empty())
        .find_map(|s| name.strip_suffix(s))
        .unwrap_or(&name);
    let other_database = parent.join("media").is_dir() && is_sqlite(&parent.join(base));
    let databases: Vec<PathBuf> = OPEN_DATABASES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .cloned()
        .chain(library_db)
        .collect();
    let journal_of_a_write = name.starts_with("media-pending.") && name.ends_with(".journal");
    if (in_library_folder && (LIBRARY_NAMES.contains(&name.as_str()) || journal_of_a_write))
        || in_media
        || other_database
        || databases.iter().any(|db| belongs_to(&resolved, db))
    {
        return Err(OutputError::LibraryFile(out.to_path_buf()));
    }
    // Any SQLite database (a library copied away as `backup.sqlite`, with no media/ beside
    // it): an export never replaces one, --force or not.
    if is_sqlite(&parent.join(base)) {
        return Err(OutputError::Database(out.to_path_buf()));
    }
    // A link would be replaced by a file, or written through (round 9 N37: `--out
    // /dev/stdout` was "exists: add --force").
    if std::fs::symlink_metadata(out).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(OutputError::Link(out.to_path_buf()));
    }
    match std::fs::symlink_metadata(&resolved) {
        Ok(m) if !m.is_file() => Err(OutputError::NotAFile(out.to_path_buf())),
        Ok(_) if !force => Err(OutputError::Exists(out.to_path_buf())),
        _ => Ok(()),
    }
}

/// Whether `path` is a SQLite database file (by its header; a FIFO or device is not read).
fn is_sqlite(path: &Path) -> bool {
    use std::io::Read;
    if !std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut head = [0u8; 16];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| &head == b"SQLite format 3\0")
}

/// Whether `folder` holds a library's database: `library.sqlite`, or any SQLite database
/// beside a `media/` folder.
fn holds_database(folder: &Path) -> bool {
    folder.join("library.sqlite").is_file()
        || (folder.join("media").is_dir()
            && std::fs::read_dir(folder).is_ok_and(|entries| {
                entries.flatten().any(|e| {
                    e.path().extension().is_some_and(|x| x == "sqlite") && is_sqlite(&e.path())
                })
            }))
}

/// Whether `out` (resolved) is the database `db`, one of its journal files, the same file
/// through another (hard) link, or a file in the `media/` folder beside it.
fn belongs_to(out: &Path, db: &Path) -> bool {
    let named = JOURNAL_SUFFIXES.iter().any(|suffix| {
        let mut journal = db.as_os_str().to_owned();
        journal.push(suffix);
        out == Path::new(&journal)
    });
    let in_media = db
        .parent()
        .is_some_and(|root| out.starts_with(root.join("media")));
    named || in_media || same_file(out, db)
}

/// Whether `a` and `b` are one file on disk (both exist and share device and inode).
pub fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (a, b);
        false
    }
}

/// `path` made absolute with its folder's links resolved (the file itself need not exist;
/// a link as the last part is followed).
fn resolve(path: &Path) -> PathBuf {
    if let Ok(p) = std::fs::canonicalize(path) {
        return p;
    }
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    match (abs.parent(), abs.file_name()) {
        (Some(parent), Some(name)) => std::fs::canonicalize(parent)
            .unwrap_or_else(|_| parent.to_path_buf())
            .join(name),
        _ => abs,
    }
}

/// The file a promotion writes into a library's own `models/` folder to mark it as such.
pub const MODELS_MARKER: &str = "ACTIVE";

/// Whether `dir` is some library's own models folder (made by a promotion): it holds the
/// ACTIVE marker, or it lost it but still holds what only promotions make (`previous/`,
/// `demoted/`) or something else where the marker belongs. A `models/` folder of cards the
/// user keeps beside a library is none of these (round 6 N39: a promoted library whose marker
/// was deleted fell back to the shipped models without a word).
pub fn is_library_models(dir: &Path) -> bool {
    // A link is never a library's own models folder (round 12 N18: a link to another
    // library's was loaded, promoted into and demoted from as this one's).
    dir.is_dir()
        && !std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink())
        && (std::fs::symlink_metadata(dir.join(MODELS_MARKER)).is_ok()
            || dir.join("previous").is_dir()
            || dir.join("demoted").is_dir())
}

/// What is wrong with a library models folder's marker, if anything: missing, or not a
/// regular file (a FIFO, device, folder or link).
pub fn models_marker_problem(dir: &Path) -> Option<String> {
    if !is_library_models(dir) {
        return None;
    }
    let marker = dir.join(MODELS_MARKER);
    match std::fs::symlink_metadata(&marker) {
        Ok(m) if m.is_file() => None,
        Ok(_) => Some(format!(
            "{}: the marker of the library's own models is not a regular file (a FIFO, device, \
             folder or link); replace it with an empty file",
            marker.display()
        )),
        Err(_) => Some(format!(
            "{}: the marker of the library's own models is missing (previous/ or demoted/ \
             show that models were promoted here); if these are the library's models, put an \
             empty file there",
            marker.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_and_existing_files_are_not_written_over() {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("lib");
        std::fs::create_dir_all(lib.join("media/ab")).unwrap();
        std::fs::write(lib.join("library.sqlite"), b"x").unwrap();
        let db = lib.join("library.sqlite");
        assert_eq!(
            check_output(&db, Some(&lib), true),
            Err(OutputError::LibraryFile(db.clone()))
        );
        // Named through `..` and from another library argument: still the library's.
        let sneaky = lib.join("media/../library.sqlite-wal");
        assert!(matches!(
            check_output(&sneaky, None, true),
            Err(OutputError::LibraryFile(_))
        ));
        let in_media = lib.join("media/ab/x.png");
        assert!(matches!(
            check_output(&in_media, Some(&lib), true),
            Err(OutputError::LibraryFile(_))
        ));
        let other = dir.path().join("labels.csv");
        assert_eq!(check_output(&other, Some(&lib), false), Ok(()));
        std::fs::write(&other, b"old").unwrap();
        assert_eq!(
            check_output(&other, Some(&lib), false),
            Err(OutputError::Exists(other.clone()))
        );
        assert_eq!(check_output(&other, Some(&lib), true), Ok(()));
        assert!(matches!(
            check_output(dir.path(), Some(&lib), true),
            Err(OutputError::NotAFile(_))
        ));
        // A file named like a database outside any library is the user's own.
        let own = dir.path().join("library.sqlite");
        assert_eq!(check_output(&own, Some(&lib), false), Ok(()));
    }

    #[test]
    fn a_database_opened_under_another_name_is_the_librarys_own_file() {
        let dir = tempfile::tempdir().unwrap();
        let x = dir.path().join("x");
        std::fs::create_dir_all(&x).unwrap();
        let db = x.join("cases.sqlite");
        std::fs::write(&db, b"x").unwrap();
        for name in ["cases.sqlite", "cases.sqlite-wal", "cases.sqlite-shm"] {
            let out = x.join(name);
            assert_eq!(
                check_output(&out, Some(&db), true),
                Err(OutputError::LibraryFile(out.clone())),
                "{name}"
            );
        }
        assert!(matches!(
            check_output(&x.join("media/ab/c.png"), Some(&db), true),
            Err(OutputError::LibraryFile(_))
        ));
        assert_eq!(
            check_output(&x.join("labels.csv"), Some(&db), false),
            Ok(())
        );
        // Opened by the process (not named on the command line): still refused.
        let other = dir.path().join("y/other.db");
        std::fs::create_dir_all(other.parent().unwrap()).unwrap();
        std::fs::write(&other, b"x").unwrap();
        protect_database(&other);
        assert!(matches!(
            check_output(&other, None, true),
            Err(OutputError::LibraryFile(_))
        ));
        let link = dir.path().join("hard.db");
        std::fs::hard_link(&other, &link).unwrap();
        assert!(matches!(
            check_output(&link, None, true),
            Err(OutputError::LibraryFile(_))
        ));
    }
}
