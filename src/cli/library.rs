//! `endotwin library check`: is the library whole? The database's integrity, every media
//! file against its content hash, files missing and files no row names, rows that break the
//! library's rules. Reads only; each problem one line; exit status 1 when there is one.
//! `endotwin library copy FROM TO`: a library moved between SQLite and PostgreSQL.

use anyhow::Result;
use endotwin::store::{OpenMode, Store, StoreError};
use std::path::{Path, PathBuf};

#[derive(clap::Subcommand)]
pub enum LibraryWhat {
    /// Check the database's integrity and every media file's hash; name each problem.
    Check,
    /// Copy a library into a new, empty one, between SQLite folders and PostgreSQL databases
    /// (`postgres://user@host/db`) either way; every row and media item is compared after.
    Copy {
        /// The library to copy (a folder or a postgres:// URL); only read.
        from: PathBuf,
        /// The new library (a new folder, or an empty PostgreSQL database).
        to: PathBuf,
    },
}

pub fn run(library: &Path, what: LibraryWhat) -> Result<()> {
    match what {
        LibraryWhat::Check => check(library),
        LibraryWhat::Copy { from, to } => copy(&from, &to),
    }
}

fn copy(from: &Path, to: &Path) -> Result<()> {
    let source = Store::open_read_only(from)?;
    let made = !endotwin::store::resolve_db_path(to).exists();
    let mut target = Store::open(to, OpenMode::CreateIfMissing)?;
    let bar = super::stage_bar();
    bar.set_message("copying media");
    let copied = endotwin::store::copy_library(&source, &mut target, &|done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    });
    bar.finish_and_clear();
    let report = match copied {
        Ok(report) => report,
        Err(e) => {
            // A refused copy wrote nothing: a library this command just made goes again.
            if made {
                let _ = target.discard_if_empty(true);
            }
            return Err(e.into());
        }
    };
    for (table, rows) in report.rows.iter().filter(|(_, n)| *n > 0) {
        println!("{table}: {rows} rows");
    }
    println!(
        "copied {} to {}: every row compared, {} media items read back through their hash",
        source.db_path().display(),
        target.db_path().display(),
        report.media
    );
    Ok(())
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
    // A PostgreSQL library is named by its URL (its media are in the database).
    let shown = match store.engine() {
        endotwin::store::EngineKind::Sqlite => store.root().to_path_buf(),
        endotwin::store::EngineKind::Postgres => store.db_path().to_path_buf(),
    };
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
            shown.display(),
            report.media_checked
        );
        return Ok(());
    }
    let count = sections.iter().map(|(_, l)| l.len()).sum::<usize>();
    anyhow::bail!(
        "library {}: {count} problem{} (named above); nothing was changed",
        shown.display(),
        if count == 1 { "" } else { "s" }
    )
}
