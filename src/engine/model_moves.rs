//! Moving a library's model files as one step. A promotion or demotion is several renames (a
//! card and its record each, out of the active place and into it); a process killed between
//! two of them left `models/` with a card and no record, or neither (round 12 N21: no caption
//! model, and the one before the promotion lost to demote). The renames are written to a
//! journal in the models folder first, with how many are done; the next promote or demote,
//! or the next load of the library's models, finishes an interrupted one before anything else.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The journal's name in the library's models folder.
pub const JOURNAL: &str = ".moves.journal";

#[derive(Serialize, Deserialize)]
struct Journal {
    /// (from, to) renames, in order.
    moves: Vec<(PathBuf, PathBuf)>,
    /// How many of them are done.
    done: usize,
}

/// The renames that move model `card` (and its record, first) to `to`.
pub fn model_moves(card: &Path, to: &Path) -> [(PathBuf, PathBuf); 2] {
    use crate::model::weights::record_path;
    [
        (record_path(card), record_path(to)),
        (card.to_path_buf(), to.to_path_buf()),
    ]
}

/// Makes `moves` in the models folder `dir`, journaled: killed at any point, the next
/// [`finish_interrupted`] completes them.
pub fn journaled(dir: &Path, moves: &[(PathBuf, PathBuf)]) -> std::io::Result<()> {
    let mut journal = Journal {
        moves: moves.to_vec(),
        done: 0,
    };
    write(dir, &journal)?;
    while journal.done < journal.moves.len() {
        let (from, to) = &journal.moves[journal.done];
        std::fs::rename(from, to)?;
        journal.done += 1;
        write(dir, &journal)?;
    }
    std::fs::remove_file(dir.join(JOURNAL))
}

/// Completes the renames of a promote or demote that was killed in `dir`, if any: true when
/// one was finished. A rename whose source is gone was made before the journal said so.
pub fn finish_interrupted(dir: &Path) -> std::io::Result<bool> {
    let path = dir.join(JOURNAL);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let mut journal: Journal = serde_json::from_str(&text).map_err(|e| {
        std::io::Error::other(format!(
            "{}: an unreadable journal of an interrupted promote or demote ({e})",
            path.display()
        ))
    })?;
    while journal.done < journal.moves.len() {
        let (from, to) = &journal.moves[journal.done];
        if std::fs::symlink_metadata(from).is_ok() {
            std::fs::rename(from, to)?;
        }
        journal.done += 1;
        write(dir, &journal)?;
    }
    std::fs::remove_file(&path)?;
    Ok(true)
}

/// The journal written whole (beside, synced, renamed into place).
fn write(dir: &Path, journal: &Journal) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = dir.join(format!("{JOURNAL}.partial"));
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(serde_json::to_string(journal)?.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&tmp, dir.join(JOURNAL))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Killed after any number of renames (the journal's count one behind the last, or not),
    /// the rest are made by the next finish, and a move whose source is back again (a later
    /// step's target) is not made twice.
    #[test]
    fn an_interrupted_journal_is_finished_from_where_it_stopped() {
        for renamed in 0..=2 {
            for lagging in [false, true] {
                let dir = tempfile::tempdir().unwrap();
                let d = dir.path();
                for name in ["a", "b"] {
                    std::fs::write(d.join(name), name).unwrap();
                }
                // a -> c, then b -> a: the second fills the name the first emptied.
                let moves = vec![(d.join("a"), d.join("c")), (d.join("b"), d.join("a"))];
                let mut journal = Journal {
                    moves: moves.clone(),
                    done: 0,
                };
                write(d, &journal).unwrap();
                for (i, (from, to)) in moves.iter().take(renamed).enumerate() {
                    std::fs::rename(from, to).unwrap();
                    if !(lagging && i + 1 == renamed) {
                        journal.done += 1;
                        write(d, &journal).unwrap();
                    }
                }
                assert!(finish_interrupted(d).unwrap());
                assert_eq!(std::fs::read_to_string(d.join("c")).unwrap(), "a");
                assert_eq!(std::fs::read_to_string(d.join("a")).unwrap(), "b");
                assert!(!d.join("b").exists() && !d.join(JOURNAL).exists());
                assert!(!finish_interrupted(d).unwrap());
            }
        }
    }
}
