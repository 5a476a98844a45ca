//! The `endotwin` command: parses the command line and hands each subcommand to its file in
//! `cli/`, which calls its capability. No subcommand starts the GUI.

mod cli;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use endotwin::compute::BackendPref;
use std::path::{Path, PathBuf};

#[derive(Parser)]
#[command(
    name = "endotwin",
    version,
    about = "Colonoscopy case review: digital twins, prompts, tracklets, fine-tuning."
)]
struct Cli {
    /// Library folder (or its library.sqlite). Default: $ENDOTWIN_LIBRARY, else sample_db/ (in
    /// this folder, else beside the executable, else in the source tree the executable was
    /// built from: read only, commands that write refuse it).
    #[arg(long, global = true)]
    library: Option<PathBuf>,
    /// Where tensors run: auto (GPU when a hardware adapter exists), gpu, or cpu.
    /// Also ENDOTWIN_BACKEND.
    #[arg(long, global = true, value_enum)]
    backend: Option<BackendPref>,
    /// Replace an existing output file (`--out`, `--json`); the library's own files are
    /// never written over. `model half`: re-point the cards that read the halved weights.
    #[arg(long, global = true)]
    force: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Open the GUI (the default when no subcommand is given).
    Gui(cli::gui::GuiArgs),
    /// Print the version, the compute backend and adapter, the library's contents and the
    /// models folder.
    Info,
    /// Import a data layout into the library (created when missing).
    Import(cli::import::ImportArgs),
    /// Generate the synthetic colonoscopy phantom into a new library folder.
    Demo(cli::demo::DemoArgs),
    /// Evaluate: `phantom` runs the no-learning baselines on held-out phantom data.
    Eval {
        #[command(subcommand)]
        what: cli::eval::EvalWhat,
    },
    /// Benchmarks (figures, not tests): `encode` times the image encoders on each backend.
    Bench {
        #[command(subcommand)]
        what: cli::bench::BenchWhat,
    },
    /// Train a model on the library's data with one of the recipes (`--list` names them);
    /// checkpoints every epoch, `--resume` continues.
    #[command(after_help = cli::train::recipes_help(), disable_help_flag = true)]
    Train(cli::train::TrainArgs),
    /// Index the library's polyps for twin retrieval with the models in --models (only what
    /// changed since the last run is encoded).
    Index(cli::twins::IndexArgs),
    /// Retrieve the digital twins of a polyp from one or more views (image files).
    Twins(cli::twins::TwinsArgs),
    /// A video's tracklets compared as the Tracklets tab compares them: the re-identification
    /// links, the polyp count, and each unfamiliar link's `unfamiliar:` line.
    Tracklets(cli::tracklet_links::LinksArgs),
    /// Models: `import-hf-clip` converts a Hugging Face CLIP checkpoint to a card + record;
    /// `promote RUN` / `demote NAME` change the library's active models.
    Model {
        #[command(subcommand)]
        what: cli::model::ModelWhat,
    },
    /// Labels: `export` writes every polyp's labels to a CSV, `import` reads one back and
    /// lists (or with --apply makes, audited) the changes.
    Labels {
        #[command(subcommand)]
        what: cli::labels::LabelsWhat,
    },
    /// Capsule captions: `refine` a raw finding (two lines: caption, category), `describe`
    /// images with the caption model.
    Captions {
        #[command(subcommand)]
        what: cli::captions::CaptionsWhat,
    },
    /// Text prompts (Endo-CLIP): `score` an image against a prompt set, `search` the
    /// library's polyps by a sentence, `index` the library with a prompt model.
    Prompts {
        #[command(subcommand)]
        what: cli::prompts::PromptsWhat,
    },
    /// Write a contact sheet (one PNG): a sample of the library's views, frames and video
    /// frames (2 views of up to 8 polyps, a frame of up to 6 examinations, 4 frames of up to 2
    /// videos).
    ContactSheet(cli::demo::ContactSheetArgs),
    /// The library itself: `check` verifies the database, every media file's hash, missing
    /// files and files no row names (exit 1 when anything is wrong).
    Library {
        #[command(subcommand)]
        what: cli::library::LibraryWhat,
    },
}

fn main() {
    // A reader that stops early (`endotwin ... | head`) ends the process the way it ends any
    // Unix tool, quietly, instead of a panic at the next print (Rust ignores SIGPIPE).
    #[cfg(unix)]
    // SAFETY: first thing in `main`, before any other thread exists; SIG_DFL is always valid.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    cli::quiet_platform_warnings();
    // Standard output that cannot be written (a full disk, a closed terminal): said in words
    // and exit 1, as any tool, not a panic with a backtrace (round 11 N13).
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let text = info.payload_as_str().unwrap_or_default();
        if let Some(why) = text.strip_prefix("failed printing to stdout: ") {
            eprintln!(
                "error: cannot write to standard output ({why}); what it shows is incomplete"
            );
            std::process::exit(1);
        }
        default_hook(info)
    }));
    // A global option given before and after the subcommand: clap keeps the last without a
    // word (round 12 N16: an import went into the second library named).
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .take_while(|a| a != "--")
        .collect();
    for option in ["--library", "--backend"] {
        let mut values: Vec<&str> = Vec::new();
        for (i, a) in args.iter().enumerate() {
            if a == option {
                values.push(args.get(i + 1).map_or("", String::as_str));
            } else if let Some(v) = a.strip_prefix(&format!("{option}=")) {
                values.push(v);
            }
        }
        values.dedup();
        if values.len() > 1 {
            // A server's password is never printed (round 17 N2).
            let shown: Vec<String> = values
                .iter()
                .map(|v| endotwin::store::library_name(std::path::Path::new(v)))
                .collect();
            eprintln!(
                "error: {option} is given {} times with different values ({}); give it once \
                 (nothing was run)",
                values.len(),
                shown.join(", ")
            );
            std::process::exit(2);
        }
    }
    let matches = Cli::command().try_get_matches().unwrap_or_else(|e| {
        // Help and version printed where they cannot be written are said so (round 12 N2:
        // `--help >/dev/full` exited 0 with nothing shown).
        use std::io::Write;
        let printed = e.print().and_then(|()| std::io::stdout().flush());
        if let Err(io) = printed {
            eprintln!(
                "error: cannot write to standard output ({})",
                endotwin::plumbing::input::plain_io(&io)
            );
            std::process::exit(1);
        }
        std::process::exit(e.exit_code())
    });
    let parsed = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    if let Err(e) = run(parsed, &matches) {
        let line = cli::one_line(&e);
        eprintln!("error: {line}");
        let refused = e.chain().find_map(|cause| {
            let io = cause.downcast_ref::<std::io::Error>()?;
            Some(endotwin::store::io_hint(io)).filter(|h| !h.is_empty())
        });
        if let Some(hint) = refused.filter(|h| !line.contains(h.trim())) {
            // A write the disk refused, from any command (round 7 N13: `File too large (os
            // error 27)` alone).
            eprintln!("the write was refused{hint}");
        }
        if damaged_database(&e) {
            // Said in words, whichever command met it (round 7 R24: "database disk image is
            // malformed: Error code 11" alone, from read commands).
            eprintln!(
                "a library database is damaged: `endotwin --library LIB library check` names \
                 every problem; restore library.sqlite from a backup (nothing was changed)"
            );
        }
        std::process::exit(1);
    }
}

/// Whether `e` came from SQLite finding a database file damaged (or not a database at all).
fn damaged_database(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        let code = cause
            .downcast_ref::<rusqlite::Error>()
            .or_else(
                || match cause.downcast_ref::<endotwin::store::StoreError>() {
                    Some(endotwin::store::StoreError::Sqlite(inner)) => Some(inner),
                    _ => None,
                },
            )
            .and_then(|inner| inner.sqlite_error_code());
        matches!(
            code,
            Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
        )
    })
}

/// Whether `command` may write to its library (the GUI labels, imports, trains, indexes,
/// promotes, applies labels, caches prompt embeddings): such a command is not run on the
/// source tree's `sample_db/` by default ([`endotwin::library_is_source_tree_fallback`]).
fn writes_library(command: &Command) -> bool {
    match command {
        Command::Info
        | Command::Demo(_)
        | Command::ContactSheet(_)
        | Command::Eval { .. }
        | Command::Twins(_)
        | Command::Tracklets(_)
        | Command::Captions { .. } => false,
        // The library benchmark's clients make label edits.
        Command::Bench { what } => matches!(what, cli::bench::BenchWhat::Library { .. }),
        Command::Library { what } => {
            matches!(what, cli::library::LibraryWhat::Prune { apply: true, .. })
        }
        Command::Labels { what } => matches!(what, cli::labels::LabelsWhat::Import { .. }),
        Command::Train(args) => !args.lists_only(),
        // A card's trust fitted on named libraries and a card's report write only the card's
        // files; the library is not opened.
        Command::Model { what } => {
            !matches!(
                what,
                cli::model::ModelWhat::Trust(args) if !args.fit.is_empty()
            ) && !matches!(
                what,
                cli::model::ModelWhat::Report(args) if args.card.is_some()
            )
        }
        // Scoring one image file reads no library; search and index cache embeddings in it.
        Command::Prompts { what } => !matches!(what, cli::prompts::PromptsWhat::Score { .. }),
        Command::Gui(_) | Command::Import(_) | Command::Index(_) => true,
    }
}

/// Whether `command` may read the default models folder (commands given their own `--models`
/// or `--model` still count: the note then only says where the default is).
fn uses_default_models(command: &Command) -> bool {
    !matches!(
        command,
        Command::Demo(_)
            | Command::ContactSheet(_)
            | Command::Bench { .. }
            | Command::Labels { .. }
            | Command::Library { .. }
    )
}

/// Says when $ENDOTWIN_MODELS names a folder this command will not load from: a library in
/// which a model was promoted loads its own `models/` (round 10 N17: the variable was
/// ignored without a word). Commands given `--models` or `--model` load what they name.
fn note_models_env_not_used(library: &Path, command: &Command, matches: &clap::ArgMatches) {
    let Some(env) = std::env::var_os("ENDOTWIN_MODELS") else {
        return;
    };
    if !uses_default_models(command) || cli::names_any(matches, &["models", "model", "card"]) {
        return;
    }
    let used = endotwin::engine::promote::models_dir_for(library);
    if used == endotwin::default_models_dir() {
        return;
    }
    eprintln!(
        "note: $ENDOTWIN_MODELS ({}) is not used for this library: a model was promoted in \
         it, so it loads its own {} (from then on, whatever is demoted){}",
        Path::new(&env).display(),
        used.display(),
        if cli::takes_arg(matches, "models") {
            format!("; --models {} uses that folder", Path::new(&env).display())
        } else {
            String::new()
        }
    );
}

/// Refuses a command that would load its models from $ENDOTWIN_MODELS when the variable
/// names no folder, or one without a model card (round 15 N1: `tracklets` fell back to colour histograms without a word,
/// and `captions` advised training a model). `info` says it instead.
fn refuse_models_env_not_a_folder(
    library: &Path,
    command: &Command,
    matches: &clap::ArgMatches,
) -> anyhow::Result<()> {
    let Some(env) = std::env::var_os("ENDOTWIN_MODELS") else {
        return Ok(());
    };
    let env = Path::new(&env);
    // A folder without a single model card is as good as none (round 16 N1: `tracklets`
    // fell back to colour histograms for an empty one).
    let holds_cards = || {
        std::fs::read_dir(env).is_ok_and(|entries| {
            entries
                .flatten()
                .any(|e| e.file_name().to_string_lossy().ends_with(".json"))
        })
    };
    if (env.is_dir() && holds_cards())
        || matches!(command, Command::Info)
        || !uses_default_models(command)
        || cli::names_any(matches, &["models", "model", "card"])
        || endotwin::engine::promote::models_dir_for(library) != env
    {
        return Ok(());
    }
    anyhow::bail!(
        "$ENDOTWIN_MODELS names {}, {}; name a folder of model cards (or unset it for models/); nothing was done",
        env.display(),
        if env.is_dir() {
            "a folder that holds no model card"
        } else if env.exists() {
            "which is not a folder"
        } else {
            "which is not there"
        }
    )
}

fn run(parsed: Cli, matches: &clap::ArgMatches) -> anyhow::Result<()> {
    let pref = BackendPref::resolve(parsed.backend)?;
    if parsed.library.is_none()
        && std::env::var_os("ENDOTWIN_LIBRARY")
            .is_some_and(|v| v.to_string_lossy().trim().is_empty())
    {
        anyhow::bail!(
            "ENDOTWIN_LIBRARY is set but empty; name a library folder (or unset it for sample_db/)"
        );
    }
    // As ENDOTWIN_LIBRARY above (round 8 N13: an empty ENDOTWIN_MODELS fell back to the
    // source tree's models without a word).
    if std::env::var_os("ENDOTWIN_MODELS").is_some_and(|v| v.to_string_lossy().trim().is_empty()) {
        anyhow::bail!(
            "ENDOTWIN_MODELS is set but empty; name a models folder (or unset it for models/)"
        );
    }
    if parsed
        .library
        .as_ref()
        .is_some_and(|l| l.as_os_str().to_string_lossy().trim().is_empty())
    {
        anyhow::bail!("--library is empty; name a library folder");
    }
    let command = parsed
        .command
        .unwrap_or(Command::Gui(cli::gui::GuiArgs::default()));
    let parsed_library_is_fallback =
        parsed.library.is_none() && endotwin::library_is_source_tree_fallback();
    if parsed_library_is_fallback && writes_library(&command) {
        anyhow::bail!(
            "no --library given, no $ENDOTWIN_LIBRARY and no sample_db/ in this folder or beside \
             the executable; this command writes to its library and does not write to the source tree's {} \
             (nothing was changed): pass --library FOLDER",
            endotwin::source_tree_sample_db().display()
        );
    }
    // The source tree's folders are read only as a last resort, and said (round 8 N13: a copied
    // binary read a developer's checkout without a word).
    // Not for commands that never open the default library (round 17 N2: `library copy FROM
    // TO` said it read the source tree's sample library).
    let opens_default_library = !matches!(
        command,
        Command::Demo(_)
            | Command::Eval { .. }
            | Command::Library {
                what: cli::library::LibraryWhat::Copy { .. }
            }
    );
    if parsed_library_is_fallback && opens_default_library {
        eprintln!(
            "note: no --library, no $ENDOTWIN_LIBRARY and no sample_db/ in this folder or beside \
             the executable: reading the source tree's {}",
            endotwin::source_tree_sample_db().display()
        );
    }
    if endotwin::models_is_source_tree_fallback() && uses_default_models(&command) {
        eprintln!(
            "note: no $ENDOTWIN_MODELS and no models/ in this folder or beside the executable: \
             the models are the source tree's {}",
            endotwin::default_models_dir().display()
        );
    }
    // `library copy FROM TO` names its libraries itself: a --library beside them that is
    // neither would be ignored without a word (round 13 N6).
    if let (
        Some(given),
        Command::Library {
            what: cli::library::LibraryWhat::Copy { from, .. },
        },
    ) = (&parsed.library, &command)
        && !cli::same_file(given, from)
    {
        anyhow::bail!(
            "library copy copies {} (its FROM), not --library {}: drop --library (nothing was \
             copied)",
            endotwin::store::library_name(from),
            endotwin::store::library_name(given)
        );
    }
    let library = parsed.library.unwrap_or_else(endotwin::default_library);
    // What the note above calls read only is opened so (round 10 N3: SQLite made and removed
    // a -wal and -shm beside the source tree's database).
    if parsed_library_is_fallback {
        endotwin::store::keep_read_only(&library);
    }
    note_models_env_not_used(&library, &command, matches);
    refuse_models_env_not_a_folder(&library, &command, matches)?;
    cli::set_output_rules(&library, parsed.force);
    cli::check_named_outputs(matches)?;
    cli::check_compare_labels(matches)?;
    if reads_library_rows(&command) {
        warn_if_damaged(&library);
    }
    let ran = match command {
        Command::Gui(args) => cli::gui::run(library.clone(), pref, args),
        Command::Info => cli::info::run(&library, pref),
        Command::Import(args) => cli::import::run(&library, pref, args),
        Command::Demo(args) => cli::demo::run(args),
        Command::ContactSheet(args) => cli::demo::contact_sheet(&library, args),
        Command::Eval { what } => cli::eval::run(pref, what),
        Command::Bench { what } => cli::bench::run(&library, what),
        Command::Train(args) => cli::train::run(library.clone(), pref, parsed.force, args),
        Command::Index(args) => cli::twins::index(&library, pref, args),
        Command::Twins(args) => cli::twins::query(&library, pref, args),
        Command::Tracklets(args) => cli::tracklet_links::run(&library, pref, args),
        Command::Model { what } => cli::model::run(&library, pref, what),
        Command::Labels { what } => cli::labels::run(&library, what),
        Command::Captions { what } => cli::captions::run(&library, pref, what),
        Command::Prompts { what } => cli::prompts::run(&library, pref, what),
        Command::Library { what } => cli::library::run(&library, what),
    };
    ran.map_err(|e| name_the_server(e, &library))
}

/// Whether `command` answers from the library's rows without checking the database first
/// (`info`, `library check` and every write check it themselves; `eval` checks its held-out
/// library; `demo` makes a new one).
fn reads_library_rows(command: &Command) -> bool {
    matches!(
        command,
        Command::ContactSheet(_)
            | Command::Twins(_)
            | Command::Tracklets(_)
            | Command::Labels { .. }
            | Command::Captions { .. }
            | Command::Prompts { .. }
            | Command::Model { .. }
            | Command::Bench { .. }
    )
}

/// Says, before a command reads it, that the library's SQLite database is damaged (checked
/// read-only, in full up to 512 MB as `info` checks): its answers could be wrong or missing
/// rows without a word otherwise
/// (round 8 R7: `labels export`, `twins` and `tracklets` answered from a damaged database, or
/// failed with a raw SQL type error).
fn warn_if_damaged(library: &std::path::Path) {
    use endotwin::store::Store;
    if endotwin::store::library_url(library).is_some() {
        return;
    }
    let Ok(store) = Store::open_read_only(library) else {
        return;
    };
    if let Ok(problems) = store.integrity_problems(None)
        && let Some(first) = problems.first()
    {
        eprintln!(
            "warning: {}: the library database is damaged ({first}); what follows may be wrong \
             or incomplete: `endotwin --library {} library check` names every problem; restore \
             library.sqlite from a backup",
            store.db_path().display(),
            library.display()
        );
    }
}

/// A lost connection to a library's server names the server (the store's error says what
/// happened and what to do, not where).
fn name_the_server(e: anyhow::Error, library: &std::path::Path) -> anyhow::Error {
    use endotwin::store::StoreError;
    let lost = e.chain().any(|c| {
        matches!(
            c.downcast_ref::<StoreError>(),
            Some(StoreError::ConnectionLost(_))
        )
    });
    match lost {
        true => e.context(format!(
            "library {}",
            endotwin::store::library_name(library)
        )),
        false => e,
    }
}
