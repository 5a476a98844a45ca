//! The command line's edge: one file per command family, each calling its capability's
//! public functions and printing what they return. Errors become one line on stderr.

pub mod bench;
pub mod captions;
pub mod demo;
pub mod eval;
pub mod eval_strip;
pub mod eval_trust;
pub mod gui;
pub mod import;
pub mod info;
pub mod labels;
pub mod library;
pub mod model;
pub mod prompts;
pub mod tracklet_links;
pub mod tracklets;
pub mod train;
pub mod trust;
pub mod twins;

use endotwin::plumbing::Progress;

/// The compute backend a command runs on ([`endotwin::compute::select`]), its note said on
/// stderr first when it may surprise (a software adapter forced: minutes of silence before).
pub fn compute(pref: endotwin::compute::BackendPref) -> anyhow::Result<endotwin::compute::Compute> {
    let compute = endotwin::compute::select(pref)?;
    if let Some(note) = &compute.note {
        eprintln!("note: {note}");
    }
    Ok(compute)
}
use indicatif::{ProgressBar, ProgressStyle};
use std::sync::Arc;

/// The library the command runs on and whether `--force` was given: what
/// [`write_output`] needs to keep a command off the library's own files.
static OUTPUT_RULES: std::sync::OnceLock<(std::path::PathBuf, bool)> = std::sync::OnceLock::new();

/// Sets the rules [`write_output`] applies (once, from `main`).
pub fn set_output_rules(library: &std::path::Path, force: bool) {
    let _ = OUTPUT_RULES.set((library.to_path_buf(), force));
}

/// The library and `--force` of [`set_output_rules`] (none and no force before it is called).
fn output_rules() -> (Option<&'static std::path::Path>, bool) {
    OUTPUT_RULES
        .get()
        .map(|(l, f)| (Some(l.as_path()), *f))
        .unwrap_or((None, false))
}

/// Checks a file the command will write (`--json`, `--confusion`, `--out`) against the
/// output guard now, before the work that makes it: never the library's own files or
/// anything but a regular file, never an existing file without `--force`.
pub fn check_output(path: &std::path::Path) -> anyhow::Result<()> {
    // `-` is no file name here (round 7 N31: a file named `-` was written); only `labels
    // export --out -` writes to standard output, its text alone.
    if path.as_os_str() == "-" {
        anyhow::bail!(
            "-: this command writes its output to a file; give a file name (only `labels \
             export --out -` writes to standard output); nothing was written"
        );
    }
    let (library, force) = output_rules();
    endotwin::plumbing::output::check_output(path, library, force)?;
    // A model (a card with its record beside it, or the record of one): what a command line
    // answers with, or what a training run saved (round 8 N26: `labels export --out
    // models/twin-image.json --force` broke every twin query). Only training writes models.
    let card = match path.extension().is_some_and(|e| e == "bpk") {
        true => path.with_extension("json"),
        false => path.to_path_buf(),
    };
    // A training run's checkpoints (what --resume continues): round 9 N1, a labels export
    // over a run's state.json, after which the next run discarded the run's epochs.
    if std::path::absolute(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .ancestors()
        .skip(1)
        .any(|a| {
            a.file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with(".checkpoints"))
        })
    {
        anyhow::bail!(
            "{}: inside a training run's checkpoints (what --resume continues); an output is \
             never written there, --force or not: choose another folder; nothing was written",
            path.display()
        );
    }
    if path.exists()
        && endotwin::model::weights::record_path(&card).is_file()
        && endotwin::model::weights::read_card(&card).is_ok()
    {
        anyhow::bail!(
            "{}: a model (its card and record); an output is never written over one, --force \
             or not (only training and `model promote` change models): choose another name; \
             nothing was written",
            path.display()
        );
    }
    Ok(())
}

/// The arguments that name a file a command writes when it is done; [`check_named_outputs`]
/// puts them through the output guard before the command starts.
const OUTPUT_ARGS: &[&str] = &["json", "confusion"];
/// Other arguments that name what a command writes (folders, checked by their commands):
/// never taken for one of its inputs.
const WRITTEN_ARGS: &[&str] = &["out", "diagrams"];

/// Checks every `--json` and `--confusion` of the parsed command line ([`check_output`]), so
/// a command that may not write its file is refused at once, not after an hour's evaluation.
pub fn check_named_outputs(matches: &clap::ArgMatches) -> anyhow::Result<()> {
    let mut level = Some(matches);
    let mut named: Vec<(&str, std::path::PathBuf)> = Vec::new();
    while let Some(m) = level {
        for id in OUTPUT_ARGS {
            if let Ok(Some(paths)) = m.try_get_many::<std::path::PathBuf>(id) {
                for path in paths {
                    check_output(path)?;
                    // Two outputs under one name: the second would replace the first (round 7
                    // N8: the JSON report was replaced by the confusion picture).
                    let same = |p: &std::path::Path| {
                        p == path.as_path()
                            || (std::path::absolute(p).ok() == std::path::absolute(path).ok())
                    };
                    if let Some((other, _)) = named.iter().find(|(_, p)| same(p)) {
                        anyhow::bail!(
                            "--{other} and --{id} both name {}: each output needs a file of its \
                             own; nothing was run",
                            path.display()
                        );
                    }
                    named.push((id, path.clone()));
                }
            }
        }
        // An output that is one of the command's own inputs would replace it, --force or not
        // (round 9 N26: `twins in.png --json in.png --force` turned the image into JSON).
        for input in m.ids().map(|id| id.as_str()) {
            if OUTPUT_ARGS.contains(&input) || WRITTEN_ARGS.contains(&input) {
                continue;
            }
            let Ok(Some(paths)) = m.try_get_many::<std::path::PathBuf>(input) else {
                continue;
            };
            for path in paths {
                if let Some((output, _)) = named.iter().find(|(_, p)| same_file(p, path)) {
                    anyhow::bail!(
                        "--{output} names {}, an input of this command (its {input}): an output \
                         never replaces what the command reads, --force or not; name another \
                         file (nothing was run)",
                        path.display()
                    );
                }
            }
        }
        level = m.subcommand().map(|(_, sub)| sub);
    }
    Ok(())
}

/// Whether the command line gives any of the options `ids` (at any subcommand level).
pub fn names_any(matches: &clap::ArgMatches, ids: &[&str]) -> bool {
    let mut level = Some(matches);
    while let Some(m) = level {
        if m.ids().any(|id| {
            ids.contains(&id.as_str())
                && m.value_source(id.as_str()) == Some(clap::parser::ValueSource::CommandLine)
        }) {
            return true;
        }
        level = m.subcommand().map(|(_, sub)| sub);
    }
    false
}

/// Whether the command given (its deepest subcommand) has the option `id` at all.
pub fn takes_arg(matches: &clap::ArgMatches, id: &str) -> bool {
    let mut m = matches;
    while let Some((_, sub)) = m.subcommand() {
        m = sub;
    }
    m.try_contains_id(id).is_ok()
}

/// Whether `a` and `b` name one file: the same device and inode where both exist, else the
/// same absolute path.
pub fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    match (a.exists(), b.exists()) {
        (true, true) => endotwin::plumbing::output::same_file(a, b),
        _ => a == b || std::path::absolute(a).ok() == std::path::absolute(b).ok(),
    }
}

/// Writes a file the user asked for (`--out`, `--json`): never over the library's own files,
/// never over an existing file without `--force`; written beside and renamed into place, so
/// a failed write leaves what was there.
pub fn write_output(path: &std::path::Path, bytes: &[u8]) -> anyhow::Result<()> {
    check_output(path)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let folder = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    if !folder.is_dir() {
        anyhow::bail!(
            "{}: cannot write: its folder {} is not there (make it first); nothing was written",
            path.display(),
            folder.display()
        );
    }
    let tmp = path.with_file_name(format!(".{name}.partial"));
    std::fs::write(&tmp, bytes)
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            anyhow::anyhow!(
                "{}: cannot write: {}; nothing was written",
                path.display(),
                endotwin::plumbing::input::plain_io(&e)
            )
        })
}

/// Writes `image` as a PNG file through [`write_output`].
pub fn write_png(path: &std::path::Path, image: &image::RgbImage) -> anyhow::Result<()> {
    let mut bytes = std::io::Cursor::new(Vec::new());
    image.write_to(&mut bytes, image::ImageFormat::Png)?;
    write_output(path, bytes.get_ref())
}

/// Joins an error chain into one line, dropping links already contained in the previous one.
pub fn one_line(e: &anyhow::Error) -> String {
    let mut out: Vec<String> = Vec::new();
    for c in e.chain().map(|c| c.to_string()) {
        // A context naming a file, then the cause naming it again (round 10 N32:
        // `fifo.png: fifo.png: not a regular file`): the cause alone.
        if let Some(last) = out.last_mut()
            && c.starts_with(&format!("{last}: "))
        {
            *last = c;
            continue;
        }
        if out.last().is_none_or(|last| !last.contains(c.as_str())) {
            out.push(c);
        }
    }
    out.join(": ")
}

/// The exact command line, recorded in model cards.
pub fn command_line() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

/// Mesa's Vulkan loader prints `error: XDG_RUNTIME_DIR is invalid or not set` on every
/// adapter probe when the variable is missing (servers, CI, sudo). A private runtime folder
/// keeps a healthy run free of lines that start with `error:`.
pub fn quiet_platform_warnings() {
    let usable = std::env::var_os("XDG_RUNTIME_DIR")
        .map(std::path::PathBuf::from)
        .is_some_and(|p| p.is_dir());
    if usable {
        return;
    }
    let dir = std::env::temp_dir().join(format!("endotwin-runtime-{}", user_id()));
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
    }
    // SAFETY: called first thing in `main`, before any other thread exists.
    unsafe { std::env::set_var("XDG_RUNTIME_DIR", &dir) };
}

fn user_id() -> String {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let Ok(m) = std::fs::metadata("/proc/self") {
            return m.uid().to_string();
        }
    }
    std::env::var("USER").unwrap_or_else(|_| "user".into())
}

/// A bar drawing `progress` (stage name, steps) until it is finished.
pub fn stage_bar() -> ProgressBar {
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{msg:>16} [{bar:40}] {pos}/{len} {eta}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar
}

/// Mirrors `progress` into `bar` from a thread of its own until the bar is finished.
pub fn watch(progress: Arc<Progress>, bar: ProgressBar) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while !bar.is_finished() {
            bar.set_message(progress.stage_name());
            bar.set_length(progress.total());
            bar.set_position(progress.done());
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    })
}

/// One `--compare LABEL=FOLDER` argument.
/// Refuses two `--compare` (or `--head`) entries of one command under the same label: their
/// rows could not be told apart.
pub fn check_compare_labels(matches: &clap::ArgMatches) -> anyhow::Result<()> {
    let mut level = Some(matches);
    while let Some(m) = level {
        for (id, flag) in [("compare", "compare"), ("heads", "head")] {
            if let Ok(Some(values)) = m.try_get_many::<String>(id) {
                let mut seen: Vec<&str> = Vec::new();
                for v in values {
                    let label = v.split_once('=').map_or(v.as_str(), |(l, _)| l);
                    if seen.contains(&label) {
                        anyhow::bail!(
                            "--{flag} {label}= is given twice: each needs its own label (their rows could not be told apart)"
                        );
                    }
                    seen.push(label);
                }
            }
        }
        level = m.subcommand().map(|(_, sub)| sub);
    }
    Ok(())
}

pub fn compare_arg(c: &str) -> anyhow::Result<(&str, &std::path::Path)> {
    match c.split_once('=') {
        Some((label, folder)) if !label.is_empty() && !folder.is_empty() => {
            Ok((label, std::path::Path::new(folder)))
        }
        _ => anyhow::bail!("--compare {c}: write LABEL=FOLDER"),
    }
}

/// A `--models` folder the user named must hold model cards: a folder that is not there (or
/// holds none) would leave only fallbacks and baselines, without a word.
pub fn check_models_folder(dir: &std::path::Path) -> anyhow::Result<()> {
    let holds_card = std::fs::read_dir(dir).is_ok_and(|mut d| {
        d.any(|e| e.is_ok_and(|e| e.path().extension().is_some_and(|x| x == "json")))
    });
    if !holds_card {
        anyhow::bail!(
            "--models {}: not a folder of model cards (nothing was evaluated)",
            dir.display()
        );
    }
    Ok(())
}

/// Locks `folder` (made if new) for a command that writes a library into it (`library copy`,
/// `demo`): a second such command into it at the same time is refused by name (round 6 N47,
/// round 7 N82: two demos into one folder left rows naming missing files). The operating
/// system's lock on the folder itself: it goes when the process does, and leaves no file; a
/// folder it made is removed again if the command leaves it empty.
pub(crate) fn lock_folder(folder: &std::path::Path, what: &str) -> anyhow::Result<FolderLock> {
    use anyhow::Context;
    if std::fs::symlink_metadata(folder).is_ok() && !folder.exists() {
        anyhow::bail!(
            "{}: a link to nothing (its target is gone); name a folder; nothing was written",
            folder.display()
        );
    }
    if folder.exists() && !folder.is_dir() {
        anyhow::bail!(
            "{}: a file, not a folder; a library is written into a folder; nothing was written",
            folder.display()
        );
    }
    let made = !folder.exists();
    std::fs::create_dir_all(folder).with_context(|| {
        format!(
            "{}: cannot make the folder (nothing was written)",
            folder.display()
        )
    })?;
    let lock = FolderLock {
        path: folder.to_path_buf(),
        made,
        handle: std::fs::File::open(folder).with_context(|| {
            format!(
                "{}: cannot open the folder (nothing was written)",
                folder.display()
            )
        })?,
    };
    match lock.handle.try_lock() {
        Ok(()) => Ok(lock),
        Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
            "{}: another `{what}` is writing into this folder right now; nothing was written \
             (when it is done, the folder holds what it made)",
            folder.display()
        ),
        Err(std::fs::TryLockError::Error(e)) => Err(anyhow::Error::from(e).context(format!(
            "{}: cannot lock the folder (nothing was written)",
            folder.display()
        ))),
    }
}

/// [`lock_folder`]'s lock.
pub(crate) struct FolderLock {
    path: std::path::PathBuf,
    made: bool,
    handle: std::fs::File,
}

impl Drop for FolderLock {
    fn drop(&mut self) {
        // Only an empty folder goes (remove_dir refuses the others).
        if self.made {
            let _ = std::fs::remove_dir(&self.path);
        }
    }
}
