//! `endotwin library check`: is the library whole? The database's integrity, every media
//! file against its content hash, files missing and files no row names, rows that break the
//! library's rules. Reads only; each problem one line; exit status 1 when there is one.
//! `endotwin library copy FROM TO`: a library moved between SQLite and PostgreSQL.
//! `endotwin library prune --models DIR`: the embeddings of model versions no card in DIR
//! names any more (each re-train or `model half` leaves the old set behind), dropped.

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
    /// Drop the embeddings of model versions that no card in the given models folders names
    /// (left behind by every re-train or re-index). Lists them; deletes only with --apply.
    Prune {
        /// Models folders whose cards' versions are kept (repeatable).
        #[arg(long = "models", required = true)]
        models: Vec<PathBuf>,
        /// Delete them (without it, only the list is printed and nothing changes).
        #[arg(long)]
        apply: bool,
        /// Also prune versions the library first saw within the last hour (kept by default:
        /// an index run with another models folder may be writing them now).
        #[arg(long)]
        include_recent: bool,
    },
}

pub fn run(library: &Path, what: LibraryWhat) -> Result<()> {
    match what {
        LibraryWhat::Check => check(library),
        LibraryWhat::Copy { from, to } => copy(&from, &to),
        LibraryWhat::Prune {
            models,
            apply,
            include_recent,
        } => prune(library, &models, apply, include_recent),
    }
}

/// The versions the cards in `folders` are, and the sets made from them (`<version>+...`:
/// a polyp's mean of views, a familiarity score) count as current. A card beside its record
/// must read; a JSON file without a record is kept when it is a card (said), else passed over.
fn kept_versions(folders: &[PathBuf]) -> Result<Vec<String>> {
    let mut versions = Vec::new();
    for folder in folders {
        let entries = std::fs::read_dir(folder).map_err(|e| {
            anyhow::anyhow!(
                "--models {}: {}; --models names a folder of model cards (nothing was \
                     changed)",
                folder.display(),
                endotwin::plumbing::input::plain_io(&e)
            )
        })?;
        let mut cards = 0;
        for entry in entries {
            let path = entry?.path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let card = if path.with_extension("bpk").is_file() {
                endotwin::model::weights::read_card(&path)?
            } else {
                match endotwin::model::weights::read_card(&path) {
                    Ok(card) => {
                        println!(
                            "note: {} has no record beside it; its version {} is kept",
                            path.display(),
                            card.version
                        );
                        card
                    }
                    Err(_) => continue,
                }
            };
            if card.version.trim().is_empty() {
                anyhow::bail!(
                    "{}: the card names no version; nothing was changed",
                    path.display()
                );
            }
            versions.push(card.version);
            cards += 1;
        }
        if cards == 0 {
            anyhow::bail!(
                "{} holds no model card (a <name>.json beside its <name>.bpk); nothing was changed",
                folder.display()
            );
        }
    }
    Ok(versions)
}

/// How recent a version must be for prune to keep it without --include-recent.
const RECENT_S: i64 = 3600;

fn prune(library: &Path, folders: &[PathBuf], apply: bool, include_recent: bool) -> Result<()> {
    // The library's own models (a promotion made it use them) are always kept: their sets
    // are the index it answers with.
    let mut folders = folders.to_vec();
    // Said once every folder was read (round 11 N16: "kept: ..." and then an error).
    let mut said = Vec::new();
    let own = endotwin::engine::promote::active_dir(library);
    if endotwin::engine::promote::is_library_models(&own) {
        said.push(format!(
            "kept: the versions of the library's own models ({})",
            own.display()
        ));
        // previous/ and demoted/ may be empty (after a demote): read only when they hold a card.
        let holds_card = |dir: &Path| {
            std::fs::read_dir(dir).is_ok_and(|mut d| {
                d.any(|e| e.is_ok_and(|e| e.path().extension().is_some_and(|x| x == "json")))
            })
        };
        for dir in [own.clone(), own.join("previous"), own.join("demoted")] {
            if holds_card(&dir) && !folders.contains(&dir) {
                folders.push(dir);
            }
        }
    }
    // The models folder this command line answers with ($ENDOTWIN_MODELS, else the shipped
    // one) is in use too: its sets are what `twins` reads (round 8 N21: pruning with another
    // --models deleted them).
    let in_use = endotwin::engine::promote::models_dir_for(library);
    if in_use.is_dir() && !folders.contains(&in_use) {
        said.push(format!(
            "kept: the versions of the models in use ({})",
            in_use.display()
        ));
        folders.push(in_use);
    }
    let kept = kept_versions(&folders)?;
    for line in said {
        println!("{line}");
    }
    let current = |version: &str| {
        kept.iter().any(|k| {
            version == k
                || version
                    .strip_prefix(k.as_str())
                    .is_some_and(|rest| rest.starts_with('+'))
        })
    };
    let mut store = if apply {
        Store::open(library, OpenMode::Existing)?
    } else {
        Store::open_read_only(library)?
    };
    let (stale, recent): (Vec<_>, Vec<_>) = store
        .embedding_sets()?
        .into_iter()
        .filter(|set| set.rows > 0 && !current(&set.version))
        .partition(|set| {
            include_recent || set.created_at < endotwin::store::utc_seconds_ago(RECENT_S)
        });
    for set in &recent {
        println!(
            "kept: {} {} ({} embeddings), first written {}, within the last hour: an index \
             with another models folder may be writing it now (--include-recent prunes it too)",
            set.name, set.version, set.rows, set.created_at
        );
    }
    if stale.is_empty() {
        match recent.is_empty() {
            true => println!(
                "every embedding set is of a version the models folders name: nothing to prune"
            ),
            false => println!("nothing to prune but the recent sets above; nothing was changed"),
        }
        return Ok(());
    }
    let rows: usize = stale.iter().map(|s| s.rows).sum();
    for set in &stale {
        println!(
            "stale: {} {} ({} embeddings)",
            set.name, set.version, set.rows
        );
    }
    if !apply {
        println!(
            "{} stale sets, {rows} embeddings; nothing was changed (--apply deletes them)",
            stale.len()
        );
        // --apply would refuse a damaged database: say so now, not after the listing.
        if let Some(first) = store.integrity_problems(None)?.first() {
            println!(
                "note: the database is damaged ({first}); --apply will refuse to write to it (`endotwin library check` names every problem)"
            );
        }
        return Ok(());
    }
    let ids: Vec<i64> = stale.iter().map(|s| s.model_id).collect();
    let deleted = store.drop_embeddings(&ids)?;
    println!(
        "deleted {deleted} embeddings of {} stale sets from {}",
        stale.len(),
        store.db_path().display()
    );
    Ok(())
}

fn copy(from: &Path, to: &Path) -> Result<()> {
    let source = Store::open_read_only(from)?;
    let is_url = |p: &Path| p.to_string_lossy().contains("://");
    // Where the copy's models folder will be (`to` may not exist yet).
    let to_models = endotwin::store::resolve_db_path(to)
        .parent()
        .map(|p| p.join("models"))
        .unwrap_or_default();
    if !is_url(from)
        && !is_url(to)
        && endotwin::engine::promote::is_library_models(&endotwin::engine::promote::active_dir(
            from,
        ))
        && to_models.exists()
    {
        anyhow::bail!(
            "{} exists: the copy's models folder would mix the library's own models with \
             others (nothing was copied)",
            to_models.display()
        );
    }
    // The library's own models are checked before anything is copied (they go last).
    let own_models = endotwin::engine::promote::active_dir(from);
    if !is_url(from) && endotwin::engine::promote::is_library_models(&own_models) {
        endotwin::engine::promote::verify_models_folder(&own_models).map_err(|e| {
            anyhow::Error::from(e).context(format!(
                "library copy {} to {} (nothing was copied)",
                endotwin::store::library_name(from),
                endotwin::store::library_name(to)
            ))
        })?;
    }
    // Inside a library's media/ or models/ (round 10 N27), refused before any folder is made.
    if !is_url(to)
        && let Some(around) = endotwin::store::library_around(
            endotwin::store::resolve_db_path(to)
                .parent()
                .unwrap_or(Path::new(".")),
        )
    {
        return Err(endotwin::store::StoreError::InsideAnotherLibrary {
            path: to.to_path_buf(),
            library: around,
        }
        .into());
    }
    // One copy at a time into a folder (round 6 N47: two into one new folder at once, the
    // second failed with raw SQL, and its clean-up could have removed media files the first
    // had just written). The OS lock on the folder goes when this process does.
    let _one_at_a_time = if is_url(to) {
        None
    } else {
        let db = endotwin::store::resolve_db_path(to);
        Some(super::lock_folder(
            // `vid1.mp4`'s folder is `.`, not an empty name (round 8 N20).
            db.parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new(".")),
            "library copy",
        )?)
    };
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
            // The inner message says whether anything was written.
            return Err(anyhow::Error::from(e).context(format!(
                "library copy {} to {}",
                endotwin::store::library_name(from),
                endotwin::store::library_name(to)
            )));
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
    // The library's own models (what a promotion made it use) go with it: without them the
    // copy would answer with the shipped models. A PostgreSQL library has no folder for them.
    use endotwin::engine::promote;
    use endotwin::store::EngineKind;
    let own = promote::active_dir(from);
    if source.engine() == EngineKind::Sqlite && promote::is_library_models(&own) {
        if target.engine() == EngineKind::Sqlite {
            let (dir, files) =
                promote::copy_active_models(from, to)?.expect("the source has its own models");
            println!(
                "the library's own models ({}) copied to {}: {files} files, each read back",
                own.display(),
                dir.display()
            );
        } else {
            println!(
                "note: the library's own models ({}) are not in the database and were not \
                 copied: a PostgreSQL library reads the models folder each workstation has \
                 (--models)",
                own.display()
            );
        }
    }
    Ok(())
}

fn check(library: &Path) -> Result<()> {
    // Read-only: the check writes nothing, not even a stale run's status (a library that
    // needs a migration first is opened as `info` opens it).
    let store = match Store::open_read_only(library) {
        Err(StoreError::ReadOnlyNeedsMigration { .. }) => Store::open_to_inspect(library)?,
        other => other?,
    };
    // A library every other command refuses is not "whole" (round 8 N1).
    endotwin::store::check_not_shared(library)?;
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
    // The library's own models (a promotion made them its answers): each card against its
    // record, as demote and every load check them.
    let mut models = Vec::new();
    let own = endotwin::engine::promote::active_dir(library);
    if store.engine() == endotwin::store::EngineKind::Sqlite
        && endotwin::engine::promote::is_library_models(&own)
    {
        models.extend(endotwin::engine::promote::models_marker_problem(&own));
        for dir in [own.clone(), own.join("previous"), own.join("demoted")] {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let files: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
            let mut cards: Vec<PathBuf> = files
                .iter()
                .filter(|p| p.extension().is_some_and(|x| x == "json") && !is_report(p))
                .cloned()
                .collect();
            cards.sort();
            for card in &cards {
                if let Err(e) = endotwin::model::weights::verify_pair(card) {
                    models.push(e.to_string());
                }
            }
            // A record no card names (its card deleted, or a promote cut short) is named too
            // (round 7 N76).
            let mut records: Vec<&PathBuf> = files
                .iter()
                .filter(|p| p.extension().is_some_and(|x| x == "bpk"))
                .filter(|p| !p.with_extension("json").exists())
                .collect();
            records.sort();
            for record in records {
                models.push(format!(
                    "{}: a weights record with no model card beside it",
                    record.display()
                ));
            }
        }
        // The library's own models answer for the twins: its twin encoder must be there.
        let twin = own.join(format!("{}.json", endotwin::twins::IMAGE_MODEL));
        if std::fs::symlink_metadata(&twin).is_err() {
            // Advice that leads somewhere (round 8 N5: demote has nothing to go back to when
            // the twin encoder was never promoted).
            let image = endotwin::twins::IMAGE_MODEL;
            let remedy = match own.join("previous").join(format!("{image}.json")).is_file() {
                true => format!(
                    "`endotwin model demote {image}` brings back the one before the last promotion"
                ),
                false => format!(
                    "copy {image}.json and {image}.bpk from {} back into it, or `endotwin model \
                     promote RUN` a twin training run",
                    endotwin::default_models_dir().display()
                ),
            };
            models.push(format!(
                "{}: the library's active digital-twin image encoder is missing ({remedy})",
                twin.display()
            ));
        }
    }
    // A finished run whose saved model is gone: its promote and report would fail (round 8
    // N6). Not a fault of the library's own files, but named where everything else is.
    if report.integrity.is_empty() {
        for (run, _, status) in store.runs()? {
            if let Some(card) = store.run_card(run)?
                && std::fs::symlink_metadata(&card).is_err()
            {
                models.push(format!(
                    "run #{run} ({status}): its model card {card} is gone (moved or deleted); \
                     `model promote {run}` and `model report --run {run}` cannot read it"
                ));
            }
        }
    }
    let sections = [
        ("database", &report.integrity),
        ("changed", &report.changed),
        ("missing", &report.missing),
        ("unnamed", &report.unnamed),
        ("invalid", &report.invalid),
        ("models", &models),
    ];
    for (what, lines) in sections {
        for line in lines.iter() {
            println!("{what}: {line}");
        }
    }
    if report.is_healthy() && models.is_empty() {
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

/// Whether `path` is a model report (`<card>.report.json`), not a card.
fn is_report(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n.to_string_lossy().ends_with(".report.json"))
}
