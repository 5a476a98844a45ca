//! Reading a file the user named (a prompt set, a labels CSV, a checkpoint): a regular file
//! of at most a given size, checked before a byte is read. A FIFO would block the read for
//! ever and a device (`/dev/zero`) never end; both are refused at once, by name.

use std::io::Read;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{0}: not a regular file (a folder, FIFO or device)")]
    NotAFile(PathBuf),
    #[error("`-`: {0} is read from a file, not standard input; name the file")]
    StandardInput(&'static str),
    #[error("{path}: {} MB; {what} may be at most {} MB", .bytes >> 20, .max >> 20)]
    TooLarge {
        path: PathBuf,
        bytes: u64,
        max: u64,
        what: &'static str,
    },
    #[error(
        "{path}: line {line} is not UTF-8 text (byte {byte} of the file); save the file as UTF-8 and try again"
    )]
    NotUtf8 {
        path: PathBuf,
        line: usize,
        byte: usize,
    },
    // Said in words, and not a `source` a printed chain would repeat as Rust writes it.
    #[error("{path}: cannot read: {}", plain_io(.io))]
    Read { path: PathBuf, io: std::io::Error },
}

/// The size of `path` when it is a regular file (links followed) of at most `max` bytes;
/// `what` names the kind of file in the refusal ("a prompt set").
pub fn check_file(path: &Path, max: u64, what: &'static str) -> Result<u64, InputError> {
    if path.as_os_str() == "-" {
        return Err(InputError::StandardInput(what));
    }
    let meta = std::fs::metadata(path).map_err(|io| InputError::Read {
        path: path.to_path_buf(),
        io,
    })?;
    if !meta.is_file() {
        return Err(InputError::NotAFile(path.to_path_buf()));
    }
    if meta.len() > max {
        return Err(InputError::TooLarge {
            path: path.to_path_buf(),
            bytes: meta.len(),
            max,
            what,
        });
    }
    Ok(meta.len())
}

/// The bytes of `path`, a regular file of at most `max` bytes ([`check_file`]); a file that
/// grows past `max` while it is read is refused too.
pub fn read_file(path: &Path, max: u64, what: &'static str) -> Result<Vec<u8>, InputError> {
    let len = check_file(path, max, what)?;
    let read = |io| InputError::Read {
        path: path.to_path_buf(),
        io,
    };
    let mut bytes = Vec::with_capacity(len as usize);
    std::fs::File::open(path)
        .and_then(|f| f.take(max + 1).read_to_end(&mut bytes))
        .map_err(read)?;
    if bytes.len() as u64 > max {
        return Err(InputError::TooLarge {
            path: path.to_path_buf(),
            bytes: bytes.len() as u64,
            max,
            what,
        });
    }
    Ok(bytes)
}

/// The text of `path` ([`read_file`]), which must be UTF-8.
pub fn read_text(path: &Path, max: u64, what: &'static str) -> Result<String, InputError> {
    String::from_utf8(read_file(path, max, what)?).map_err(|e| {
        let byte = e.utf8_error().valid_up_to();
        let line = 1 + e.as_bytes()[..byte].iter().filter(|&&b| b == b'\n').count();
        InputError::NotUtf8 {
            path: path.to_path_buf(),
            line,
            byte: byte + 1,
        }
    })
}

/// An operating-system error in words a user reads ("no such file or folder"), not Rust's
/// ("No such file or directory (os error 2)").
pub fn plain_io(e: &std::io::Error) -> String {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::NotFound => "no such file or folder".into(),
        K::NotADirectory => "a part of the path is a file, not a folder".into(),
        K::IsADirectory => "a folder, not a file".into(),
        K::PermissionDenied => "permission denied".into(),
        K::StorageFull => "the disk is full".into(),
        K::ReadOnlyFilesystem => "the file system is read-only".into(),
        _ if e.raw_os_error() == Some(40) => "a loop of symbolic links".into(),
        _ => e.to_string(),
    }
}

/// `path` as a message shows it: control characters (an escape sequence, a line break in a
/// file name) escaped, so that a name cannot colour the terminal or split the line (round 17
/// N22); everything else as it is.
pub fn shown_path(path: &std::path::Path) -> String {
    let text = path.display().to_string();
    if !text.chars().any(char::is_control) {
        return text;
    }
    text.chars()
        .map(|c| match c.is_control() {
            true => c.escape_default().to_string(),
            false => c.to_string(),
        })
        .collect()
}

/// The first character of `text` that shows as nothing or moves the terminal (a control
/// character other than a tab), named for a refusal: `holds the character U+001B`.
pub fn control_character(text: &str) -> Option<String> {
    text.chars()
        .find(|c| c.is_control() && *c != '\t')
        .map(|c| format!("holds the character U+{:04X}", c as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_a_folder_and_a_large_file_are_refused_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            read_file(dir.path(), 10, "a test file"),
            Err(InputError::NotAFile(_))
        ));
        #[cfg(unix)]
        assert!(matches!(
            read_file(Path::new("/dev/zero"), 10, "a test file"),
            Err(InputError::NotAFile(_))
        ));
        let big = dir.path().join("big");
        std::fs::write(&big, [0u8; 11]).unwrap();
        let e = read_file(&big, 10, "a test file").unwrap_err();
        assert!(e.to_string().contains("a test file may be at most"), "{e}");
        assert_eq!(read_text(&big, 11, "a test file").unwrap().len(), 11);
        let latin = dir.path().join("latin.csv");
        std::fs::write(&latin, b"a,b\nc\xe6cum,d\n").unwrap();
        let said = read_text(&latin, 100, "a test file")
            .unwrap_err()
            .to_string();
        assert!(
            said.contains("line 2 is not UTF-8") && said.contains("byte 6"),
            "{said}"
        );
    }
}
