//! `endotwin labels export|import|history`: the library's polyp labels out to a CSV and back
//! in; every audited change of the library, filtered by reviewer and date.

use anyhow::{Context, Result};
use endotwin::store::{OpenMode, Store};
use std::path::{Path, PathBuf};

#[derive(clap::Subcommand)]
pub enum LabelsWhat {
    /// Write every polyp's labels (histology, Vienna class, Paris class, location, size,
    /// surface, colour, morphology, size class) to a file.
    Export {
        /// The file format (csv: one row per polyp, `polyp` then one column per label;
        /// jsonl: one polyp per line with its views and labels, EndoFinder's multi-view sets;
        /// coco: video frames with their boxes, each box's tracklet and polyp, and frame labels).
        #[arg(long, value_enum, default_value_t = Format::Csv)]
        format: Format,
        /// The file to write (a new file; the global `--force` replaces an existing one,
        /// never the library's own files); `-` writes to standard output.
        #[arg(long)]
        out: PathBuf,
    },
    /// Read a labels file (CSV or JSONL, told apart by its first character) and print what it would change; `--apply` changes it (one audited
    /// transaction per label).
    Import {
        file: PathBuf,
        #[arg(long)]
        apply: bool,
        /// Who signs the audit rows (default: $USER).
        #[arg(long)]
        who: Option<String>,
        /// Change nothing (and exit 1) when any line or label of the file cannot be used;
        /// without it the usable lines are applied and the others named.
        #[arg(long)]
        strict: bool,
    },
    /// Every audited label change of the library, newest first: when, who, what, old -> new.
    History(HistoryArgs),
}

#[derive(clap::Args)]
pub struct HistoryArgs {
    /// Only this reviewer's changes.
    #[arg(long)]
    who: Option<String>,
    /// Only changes on or after this UTC date or time (2026-11-25, 2026-11-25T10:00:00Z).
    #[arg(long)]
    since: Option<String>,
    /// Only changes on or before this UTC date (or before this time).
    #[arg(long)]
    until: Option<String>,
    /// At most this many changes, newest first (0: all).
    #[arg(long, default_value_t = 50)]
    limit: usize,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Format {
    Csv,
    Jsonl,
    /// Boxes with tracklet identities and frame labels (COCO JSON).
    Coco,
}

pub fn run(library: &Path, what: LabelsWhat) -> Result<()> {
    match what {
        LabelsWhat::History(a) => {
            for (flag, when) in [("--since", &a.since), ("--until", &a.until)] {
                if let Some(w) = when {
                    endotwin::store::check_audit_time(w)
                        .map_err(|e| anyhow::anyhow!("{flag}: {e}"))?;
                }
            }
            // Both are UTC times written the same way: text order is time order, as in the
            // store's query (a bare date as --until means up to the end of that day).
            let end = |u: &String| match u.len() {
                10 => format!("{u}T99"),
                _ => u.clone(),
            };
            if let (Some(since), Some(until)) = (&a.since, &a.until)
                && *since > end(until)
            {
                anyhow::bail!(
                    "--since {since} is after --until {until}: no change can match (nothing was read)"
                );
            }
            let store = Store::open(library, OpenMode::Existing)?;
            let filter = endotwin::store::AuditFilter {
                who: a.who,
                since: a.since,
                until: a.until,
                // One more than shown, to tell the reader when there are more (round 9 N6:
                // the default 50 cut the trail without a word).
                limit: if a.limit == 0 {
                    0
                } else {
                    a.limit.saturating_add(1)
                },
            };
            let mut rows = store.audit_log(&filter)?;
            if rows.is_empty() {
                println!("no label changes match");
            }
            if a.limit > 0 && rows.len() > a.limit {
                rows.truncate(a.limit);
                eprintln!(
                    "note: the latest {} changes are shown, and more match: --limit 0 shows them all",
                    a.limit
                );
            }
            for r in rows {
                let e = &r.entry;
                // Whatever a row holds, it prints as one line: nothing in it can start another.
                let show = |v: Option<&str>| v.map_or("—".to_string(), one_line_text);
                println!(
                    "{}  {}  {} {}: {} -> {}",
                    e.at,
                    one_line_text(&e.who),
                    one_line_text(&r.target_name),
                    one_line_text(&e.key),
                    show(e.old_value.as_deref()),
                    show(e.new_value.as_deref())
                );
            }
            Ok(())
        }
        LabelsWhat::Export { format, out } => {
            // A file named for another format would hold this one (round 10 N25: `--out
            // x.json` wrote CSV without a word).
            let extension = out
                .extension()
                .map(|e| e.to_string_lossy().to_lowercase())
                .unwrap_or_default();
            let (name, fits) = match format {
                Format::Csv => ("csv", ["csv", "txt", ""].contains(&extension.as_str())),
                Format::Jsonl => (
                    "jsonl",
                    ["jsonl", "ndjson", ""].contains(&extension.as_str()),
                ),
                Format::Coco => ("coco", ["json", ""].contains(&extension.as_str())),
            };
            // The guard's own refusals (a library file, a model, a link) come first.
            if out.as_os_str() != "-" {
                super::check_output(&out)?;
            }
            if out.as_os_str() != "-" && !fits {
                anyhow::bail!(
                    "--out {}: a .{extension} file for the {name} format; name it for the format \
                     (.csv, .jsonl, or .json for coco) or choose the format with --format; \
                     nothing was written",
                    out.display()
                );
            }
            let store = Store::open(library, OpenMode::Existing)?;
            let text = match format {
                Format::Csv => endotwin::labels::export_csv(&store)?,
                Format::Jsonl => endotwin::labels::export_jsonl(&store)?,
                Format::Coco => endotwin::labels::coco::export(&store)?,
            };
            // `--out -`: standard output (the file's text alone, for a pipe), as tools do.
            if out.as_os_str() == "-" {
                use std::io::Write;
                let mut stdout = std::io::stdout().lock();
                stdout
                    .write_all(text.as_bytes())
                    .and_then(|_| stdout.flush())
                    .map_err(|e| {
                        anyhow::anyhow!(
                            "--out -: cannot write to standard output ({}); the export is \
                             incomplete",
                            endotwin::plumbing::input::plain_io(&e)
                        )
                    })?;
                return Ok(());
            }
            super::write_output(&out, text.as_bytes())?;
            match format {
                Format::Csv | Format::Jsonl => {
                    let polyps = match format {
                        Format::Csv => text.lines().count().saturating_sub(1),
                        _ => text.lines().count(),
                    };
                    println!("wrote the labels of {polyps} polyps to {}", out.display());
                }
                Format::Coco => {
                    let v: serde_json::Value = serde_json::from_str(&text)?;
                    let n = |k: &str| v[k].as_array().map_or(0, Vec::len);
                    println!(
                        "wrote {} frames and {} boxes (tracklet identities, frame labels) to {}",
                        n("images"),
                        n("annotations"),
                        out.display()
                    );
                }
            }
            Ok(())
        }
        LabelsWhat::Import {
            file,
            apply,
            who,
            strict,
        } => {
            let who = who.or_else(|| std::env::var("USER").ok());
            if apply && who.is_none() {
                anyhow::bail!(
                    "labels import --apply needs the name of who makes the changes: pass --who NAME \
                     (no $USER here); nothing was changed"
                );
            }
            let who = who.unwrap_or_else(|| "labels import".into());
            if apply {
                endotwin::store::check_reviewer(&who)?;
            }
            let text = read_labels_file(&file)?;
            let mut store = Store::open(library, OpenMode::Existing)?;
            let (changes, problems) = endotwin::labels::diff_file(&store, &text)
                .with_context(|| file.display().to_string())?;
            for p in &problems {
                eprintln!("skipped {p}");
            }
            if strict && !problems.is_empty() {
                anyhow::bail!(
                    "{}: {} lines or labels cannot be used (named above); with --strict nothing \
                     was changed",
                    file.display(),
                    problems.len()
                );
            }
            if changes.is_empty() && !problems.is_empty() {
                anyhow::bail!(
                    "{}: nothing imported: every difference was skipped ({} named above)",
                    file.display(),
                    problems.len()
                );
            }
            if changes.is_empty() {
                println!("no changes");
                return Ok(());
            }
            for c in &changes {
                println!("{c}");
            }
            if !apply {
                println!(
                    "{} changes; run again with --apply to make them",
                    changes.len()
                );
                return Ok(());
            }
            let n = endotwin::labels::apply(&mut store, &who, &changes)?;
            println!("applied {n} changes, each audited as \"{who}\"");
            if !problems.is_empty() {
                println!(
                    "{} lines or labels were skipped (named above); --strict changes nothing \
                     when any is",
                    problems.len()
                );
            }
            Ok(())
        }
    }
}

/// The largest labels file `labels import` reads.
const MAX_LABELS_FILE: u64 = 64 << 20;

/// A labels file's text: a regular file (not a FIFO or device) of at most 64 MiB.
fn read_labels_file(file: &Path) -> Result<String> {
    // `-`: standard input, as `labels export --out -` writes standard output (round 11 N16).
    if file.as_os_str() == "-" {
        use std::io::Read;
        let mut bytes = Vec::new();
        std::io::stdin()
            .lock()
            .take(MAX_LABELS_FILE + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| {
                anyhow::anyhow!(
                    "-: cannot read standard input ({})",
                    endotwin::plumbing::input::plain_io(&e)
                )
            })?;
        if bytes.len() as u64 > MAX_LABELS_FILE {
            anyhow::bail!(
                "-: standard input holds more than {} MB; a labels file may be at most that",
                MAX_LABELS_FILE >> 20
            );
        }
        return String::from_utf8(bytes).map_err(|e| {
            let byte = e.utf8_error().valid_up_to();
            let line = 1 + e.as_bytes()[..byte].iter().filter(|&&b| b == b'\n').count();
            anyhow::anyhow!(
                "-: line {line} of standard input is not UTF-8 text; save the file as UTF-8"
            )
        });
    }
    Ok(endotwin::plumbing::input::read_text(
        file,
        MAX_LABELS_FILE,
        "a labels file",
    )?)
}

/// `text` with every character that is not printable on one line written as `\u{..}`.
fn one_line_text(text: &str) -> String {
    text.chars()
        .map(|c| {
            if endotwin::store::is_printable(c) {
                c.to_string()
            } else {
                format!("\\u{{{:x}}}", c as u32)
            }
        })
        .collect()
}
