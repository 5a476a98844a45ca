//! Where a command may write a file it was asked to write (`--out`, `--json`): never over a
//! library's own files (its database, the database's journal files, anything in `media/`),
//! never over anything that is not a regular file, and over an existing file only when the
//! user said `--force`.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum OutputError {
    #[error(
        "{0}: this is the library's own file; nothing was written (write the export somewhere else)"
    )]
    LibraryFile(PathBuf),
    #[error("{0}: exists; nothing was written (add --force to replace it)")]
    Exists(PathBuf),
    #[error("{0}: exists and is not a regular file; nothing was written")]
    NotAFile(PathBuf),
}

/// The names in a library folder that belong to the library itself.
const LIBRARY_NAMES: &[&str] = &[
    "library.sqlite",
    "library.sqlite-wal",
    "library.sqlite-shm",
    "library.sqlite-journal",
    "media-pending.journal",
];

/// Whether `out` may be written: `library` is the library folder the command runs on (and
/// any folder holding a `library.sqlite` is treated as one).
pub fn check_output(out: &Path, library: Option<&Path>, force: bool) -> Result<(), OutputError> {
    let resolved = resolve(out);
    let parent = resolved.parent().map(Path::to_path_buf).unwrap_or_default();
    let name = resolved
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let library_root = library.map(|l| {
        let l = resolve(l);
        if l.extension().is_some_and(|e| e == "sqlite") {
            l.parent().map(Path::to_path_buf).unwrap_or(l)
        } else {
            l
        }
    });
    let in_library_folder = library_root.as_deref() == Some(parent.as_path())
        || parent.join("library.sqlite").is_file();
    let in_media = resolved.ancestors().skip(1).any(|a| {
        a.file_name().is_some_and(|n| n == "media")
            && (library_root.as_deref() == a.parent()
                || a.with_file_name("library.sqlite").is_file())
    });
    if (in_library_folder && LIBRARY_NAMES.contains(&name.as_str())) || in_media {
        return Err(OutputError::LibraryFile(out.to_path_buf()));
    }
    match std::fs::symlink_metadata(&resolved) {
        Ok(m) if !m.is_file() => Err(OutputError::NotAFile(out.to_path_buf())),
        Ok(_) if !force => Err(OutputError::Exists(out.to_path_buf())),
        _ => Ok(()),
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
}
