//! `endotwin library check`: is the library whole? The database's integrity, every media
//! file against its content hash, files missing and files no row names, rows that break the
//! library's rules. Reads only; each problem one line; exit status 1 when there is one.

use anyhow::Result;
use endotwin::store::{Store, StoreError};
use std::path::Path;

#[derive(clap::Subcommand)]
pub enum LibraryWhat {
    /// Check the database's integrity and every media file's hash; name each problem.
    Check,
}

pub fn run(library: &Path, what: LibraryWhat) -> Result<()> {
    match what {
        LibraryWhat::Check => check(library),
    }
}

fn check(library: &Path) -> Result<()> {
    // Read-only: the check writes nothing, not even a stale run's status (a library that
    // needs a migration first is opened as `info` opens it).
    let store = match Store::open_read_only(library) {
        Err(StoreError::ReadOnlyNeedsMigration { .. }) => Store::open_to_inspect(library)?,
        other => other?,
    };
    let bar = super::stage_bar();
    bar.set_message("hashing media");
    let report = store.library_check(&|done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    })?;
    bar.finish_and_clear();
    let sections = [
        ("database", &report.integrity),
        ("changed", &report.changed),
        ("missing", &report.missing),
        ("unnamed", &report.unnamed),
        ("invalid", &report.invalid),
    ];
    for (what, lines) in sections {
        for line in lines.iter() {
            println!("{what}: {line}");
        }
    }
    if report.is_healthy() {
        println!(
            "library {} is whole: database intact, {} media files match their hashes",
            store.root().display(),
            report.media_checked
        );
        return Ok(());
    }
    let count = sections.iter().map(|(_, l)| l.len()).sum::<usize>();
    anyhow::bail!(
        "library {}: {count} problem{} (named above); nothing was changed",
        store.root().display(),
        if count == 1 { "" } else { "s" }
    )
}
