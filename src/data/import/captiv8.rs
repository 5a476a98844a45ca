//! CAPTIV8 capsule data as published: per-patient frame CSVs with the columns `Patient ID,
//! name, capture_time, image_path, video_path, image_label` (in the public repository under
//! `data/img_text_pair/`), and per-patient diagnostic CSVs `No.,Attribute,Value` (under
//! `data/diag_data/`). The CSVs are found anywhere below the folder given. Each patient
//! becomes a capsule examination, each frame row a capsule image with its label as the
//! caption, each diagnostic row a note of the examination's report ("Attribute: Value").
//!
//! An image path is tried, in this order for every row, relative to the folder given (the
//! dataset root), relative to the CSV's folder, then by its file name anywhere below the root;
//! the first that exists is used. `video_path` is never read (the published videos are absent).
//! Blank lines, a missing final newline, the pandas index column, quoted commas, trailing
//! commas and bytes that are not UTF-8 are taken in stride; a row that cannot be used is
//! reported with why and nothing else is lost.

use super::paths::MAX_MANIFEST_BYTES;
use super::plan::{Plan, PlanExam, PlanImage};
use super::{ImportError, Problems, SourceRoot, check_cancel, try_prepare};
use crate::plumbing::Progress;
use crate::store::MediaKind;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

pub fn read(
    path: &Path,
    links: super::Links,
    progress: &Progress,
    problems: &mut Problems,
) -> Result<Plan, ImportError> {
    let source = SourceRoot::with_links(path, links)?;
    let (root, csvs): (PathBuf, Vec<PathBuf>) = if path.is_dir() {
        (
            path.to_path_buf(),
            source.files_below(path, "csv", problems)?,
        )
    } else {
        let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        (dir, vec![path.to_path_buf()])
    };
    if csvs.is_empty() && problems.0.is_empty() {
        return Err(ImportError::source_error(
            path,
            "no CSV files found in it or any folder below it",
        ));
    }
    let by_name = FileNames::new(&source, &root);
    let mut exams: BTreeMap<String, PlanExam> = BTreeMap::new();
    // Each image file once: (where it was named, its caption, its patient); a second row
    // with another caption or patient refuses the image (both rows named).
    let mut seen: BTreeMap<PathBuf, (String, String, String)> = BTreeMap::new();
    let mut refused: BTreeMap<PathBuf, Vec<String>> = BTreeMap::new();
    progress.stage("reading capsule CSVs", csvs.len() as u64);
    for csv_path in csvs {
        check_cancel(progress)?;
        progress.inc();
        let table = match Table::read(&csv_path) {
            Ok(t) => t,
            Err(e) => {
                problems.push(&csv_path, e);
                continue;
            }
        };
        let col = |name: &str| table.headers.iter().position(|h| h == name);
        if let (Some(attr), Some(value)) = (col("attribute"), col("value")) {
            diagnostic_notes(&csv_path, &table, attr, value, &mut exams, problems);
            continue;
        }
        let (Some(pid), Some(img), Some(label)) =
            (col("patient id"), col("image_path"), col("image_label"))
        else {
            problems.push(
                &csv_path,
                "needs the columns Patient ID, image_path and image_label (frames) or \
                 No., Attribute and Value (diagnostic data)",
            );
            continue;
        };
        let time = col("capture_time");
        let csv_dir = csv_path.parent().unwrap_or(Path::new(".")).to_path_buf();
        // A frame CSV named after a patient it holds (`P001.csv`) holds only that patient: a
        // row of another is refused, not made into an examination of its own.
        let stem = csv_path
            .file_stem()
            .map(|s| s.to_string_lossy().trim().to_string())
            .unwrap_or_default();
        let named_for = table
            .rows
            .iter()
            .any(|(_, rec)| {
                rec.get(pid)
                    .is_some_and(|v| v.trim() == stem || same_shape_id(v.trim(), &stem))
            })
            .then_some(stem);
        for (row, rec) in &table.rows {
            let get = |c: usize| rec.get(c).map(|v| v.trim().to_string()).unwrap_or_default();
            let full = match locate(&source, &root, &csv_dir, &by_name, &get(img)) {
                Ok(p) => p,
                Err(reason) => {
                    problems.push(&csv_path, format!("row {row}: {reason}"));
                    continue;
                }
            };
            // A row refused here makes no claim on its image (W15: it used to veto the
            // image's good row elsewhere as a "conflicting caption").
            let patient = get(pid);
            if patient.is_empty() {
                problems.push(&csv_path, format!("row {row}: no Patient ID"));
                continue;
            }
            if let Some(named) = &named_for
                && patient != *named
            {
                problems.push(
                    &csv_path,
                    format!(
                        "row {row}: patient {patient} in the file of patient {named}; not imported"
                    ),
                );
                continue;
            }
            let captured = time.map(get).filter(|t| !t.is_empty());
            if let Some(t) = &captured
                && !capture_time_ok(t)
            {
                problems.push(
                    &csv_path,
                    format!("row {row}: capture_time {t:?} is not a time of day (hh:mm:ss); not imported"),
                );
                continue;
            }
            let at = format!("{} row {row}", csv_path.display());
            let real = full.canonicalize().unwrap_or_else(|_| full.clone());
            if let Some(rows) = refused.get_mut(&real) {
                rows.push(at);
                continue;
            }
            if let Some((first, caption, owner)) = seen.get(&real) {
                if *caption != get(label) || *owner != patient {
                    refused.insert(real.clone(), vec![first.clone(), at]);
                } else {
                    // The same frame, patient and finding again (a row or file given twice):
                    // one frame, said (round 13 N16: a repeated file vanished without a word).
                    problems.push(
                        &csv_path,
                        format!("row {row}: repeats {first} (the same image, patient and finding); it is imported once"),
                    );
                }
                continue;
            }
            seen.insert(real, (at, get(label), patient.clone()));
            let Some(prepared) = try_prepare(&full, problems) else {
                continue;
            };
            let mut frame = PlanImage::new(prepared, MediaKind::Capsule);
            let finding = get(label);
            if finding.is_empty() {
                problems.push(
                    &csv_path,
                    format!("row {row}: no finding (image_label is empty); the frame is imported without a caption"),
                );
            } else {
                frame.caption = Some(finding);
            }
            frame.captured_at = captured;
            exam_of(&mut exams, &patient, &csv_path).frames.push(frame);
        }
        if let Some(why) = &table.broken {
            problems.push(&csv_path, why.clone());
        }
        for (row, bytes) in &table.not_utf8 {
            problems.push(
                &csv_path,
                format!("row {row}: {bytes} bytes that are not UTF-8 were replaced by U+FFFD"),
            );
        }
    }
    for (image, rows) in refused {
        problems.push(
            &image,
            format!(
                "named for different patients or with different captions by {}; the image is not imported",
                rows.join(" and ")
            ),
        );
        let real = |f: &PlanImage| f.image.source.canonicalize().ok();
        for exam in exams.values_mut() {
            exam.frames.retain(|f| real(f).as_ref() != Some(&image));
        }
    }
    Ok(Plan {
        exams: exams.into_values().collect(),
        ..Default::default()
    })
}

/// Whether `id` and `stem` are patient identifiers of one shape: the same letters before the
/// same number of digits (`P002` and `P003`), so a file named `P003.csv` whose rows all say
/// `P002` is a file of patient P003 holding another patient's rows, not a list of its own.
fn same_shape_id(id: &str, stem: &str) -> bool {
    let split = |s: &str| {
        let digits = s.len() - s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        (s[..s.len() - digits].to_string(), digits)
    };
    let (a, b) = (split(id), split(stem));
    a.1 > 0 && a == b && id.chars().all(|c| c.is_ascii_alphanumeric())
}

fn exam_of<'a>(
    exams: &'a mut BTreeMap<String, PlanExam>,
    patient: &str,
    csv: &Path,
) -> &'a mut PlanExam {
    exams
        .entry(patient.to_string())
        .or_insert_with(|| PlanExam {
            code: format!("capsule/{patient}"),
            patient: Some(patient.to_string()),
            kind: "capsule".into(),
            source: csv.display().to_string(),
            ..Default::default()
        })
}

/// Whether `t` is a capture time: `h:mm:ss` (CAPTIV8's hours since the capsule started, any
/// number), a whole number of seconds, either after an optional `YYYY-MM-DD ` date; minutes
/// and seconds below 60, months 1-12, days 1-31.
fn capture_time_ok(t: &str) -> bool {
    let digits = |p: &str| !p.is_empty() && p.len() <= 9 && p.chars().all(|c| c.is_ascii_digit());
    let below =
        |p: &str, n: u32| p.len() == 2 && digits(p) && p.parse::<u32>().is_ok_and(|v| v < n);
    let (date, time) = match t.split_once(' ') {
        Some((d, tm)) => (Some(d), tm),
        None => (None, t),
    };
    let date_ok = date.is_none_or(|d| {
        let parts: Vec<&str> = d.split('-').collect();
        matches!(parts.as_slice(), [y, m, dd]
            if y.len() == 4 && digits(y)
                && digits(m) && m.parse::<u32>().is_ok_and(|v| (1..=12).contains(&v))
                && digits(dd) && dd.parse::<u32>().is_ok_and(|v| (1..=31).contains(&v)))
    });
    let parts: Vec<&str> = time.split(':').collect();
    let time_ok = match parts.as_slice() {
        [secs] => digits(secs),
        [h, m, sec] => digits(h) && below(m, 60) && below(sec, 60),
        _ => false,
    };
    date_ok && time_ok
}

/// A diagnostic CSV (`No.,Attribute,Value`): the notes of the patient its file is named
/// after (the file stem, e.g. `P001.csv` or `diag_P001.csv` -> patient `P001`).
fn diagnostic_notes(
    csv: &Path,
    table: &Table,
    attr: usize,
    value: usize,
    exams: &mut BTreeMap<String, PlanExam>,
    problems: &mut Problems,
) {
    let stem = csv
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_default();
    let patient = stem
        .strip_prefix("diag_")
        .or_else(|| stem.strip_prefix("diag"))
        .unwrap_or(&stem)
        .trim_matches(['_', '-', ' '])
        .to_string();
    if patient.is_empty() {
        problems.push(csv, "a diagnostic CSV must be named after its patient");
        return;
    }
    let mut notes = Vec::new();
    for (_, rec) in &table.rows {
        let a = rec.get(attr).map(|v| v.trim()).unwrap_or_default();
        let v = rec.get(value).map(|v| v.trim()).unwrap_or_default();
        if !a.is_empty() && !v.is_empty() {
            notes.push(format!("{a}: {v}"));
        }
    }
    if !notes.is_empty() {
        exam_of(exams, &patient, csv).notes.extend(notes);
    }
}

/// Finds a row's image: relative to the root, to the CSV's folder, then by file name.
fn locate(
    source: &SourceRoot,
    root: &Path,
    csv_dir: &Path,
    by_name: &FileNames,
    rel: &str,
) -> Result<PathBuf, String> {
    if rel.is_empty() {
        return Err("no image_path".into());
    }
    let mut first_error = None;
    for base in [root, csv_dir] {
        match source.resolve(base, rel) {
            Ok(p) => return Ok(p),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    let name = Path::new(rel.replace('\\', "/").as_str())
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    match by_name.find(&name) {
        Some(Ok(p)) => Ok(p),
        Some(Err(many)) => Err(format!(
            "'{rel}' is not where the CSV says, and {many} files below the root are called \
             '{name}'; which one is meant is unclear"
        )),
        None => Err(first_error.unwrap_or_else(|| format!("'{rel}' is missing"))),
    }
}

/// Image files below the root by file name (listed once, on first use).
struct FileNames<'a> {
    source: &'a SourceRoot,
    root: &'a Path,
    index: std::cell::OnceCell<HashMap<String, Vec<PathBuf>>>,
}

impl<'a> FileNames<'a> {
    fn new(source: &'a SourceRoot, root: &'a Path) -> FileNames<'a> {
        FileNames {
            source,
            root,
            index: std::cell::OnceCell::new(),
        }
    }

    /// The one file called `name`, or how many there are when more than one.
    fn find(&self, name: &str) -> Option<Result<PathBuf, usize>> {
        let index = self.index.get_or_init(|| {
            let mut quiet = Problems::default();
            let mut index: HashMap<String, Vec<PathBuf>> = HashMap::new();
            for p in self
                .source
                .image_files(self.root, &mut quiet)
                .unwrap_or_default()
            {
                if let Some(n) = p.file_name() {
                    index
                        .entry(n.to_string_lossy().to_string())
                        .or_default()
                        .push(p);
                }
            }
            index
        });
        match index.get(name).map(Vec::as_slice) {
            Some([one]) => Some(Ok(one.clone())),
            Some(many) if many.len() > 1 => Some(Err(many.len())),
            _ => None,
        }
    }
}

/// A CSV read leniently: lower-cased trimmed headers, rows by their 1-based line-ish number
/// (the header is row 1), blank rows dropped, fields of any count, invalid UTF-8 replaced.
struct Table {
    headers: Vec<String>,
    rows: Vec<(usize, Vec<String>)>,
    /// Rows with bytes that were not UTF-8, and how many.
    not_utf8: Vec<(usize, usize)>,
    /// Where reading stopped early, and why.
    broken: Option<String>,
}

impl Table {
    fn read(path: &Path) -> Result<Table, String> {
        let len = std::fs::metadata(path).map_err(|e| e.to_string())?.len();
        if len > MAX_MANIFEST_BYTES {
            return Err(format!(
                "CSV is {} MiB, more than the {} MiB a manifest may be",
                len >> 20,
                MAX_MANIFEST_BYTES >> 20
            ));
        }
        let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
        let bytes = bytes
            .strip_prefix(b"\xef\xbb\xbf")
            .unwrap_or(&bytes)
            .to_vec();
        let mut reader = csv::ReaderBuilder::new()
            .flexible(true)
            .has_headers(true)
            .from_reader(std::io::Cursor::new(bytes));
        let headers: Vec<String> = reader
            .byte_headers()
            .map_err(|e| format!("malformed CSV header: {e}"))?
            .iter()
            .map(|h| String::from_utf8_lossy(h).trim().to_ascii_lowercase())
            .collect();
        let mut rows = Vec::new();
        let mut not_utf8 = Vec::new();
        let mut record = csv::ByteRecord::new();
        let mut broken = None;
        let mut row = 1;
        loop {
            row += 1;
            match reader.read_byte_record(&mut record) {
                Ok(false) => break,
                Ok(true) => {}
                Err(e) => {
                    broken = Some(format!(
                        "row {row}: malformed CSV ({e}); the rows after it are not read"
                    ));
                    break;
                }
            }
            if record.iter().all(|f| f.iter().all(u8::is_ascii_whitespace)) {
                continue;
            }
            let mut bad = 0;
            let fields: Vec<String> = record
                .iter()
                .map(|f| match std::str::from_utf8(f) {
                    Ok(s) => s.to_string(),
                    Err(_) => {
                        bad += f.iter().filter(|b| !b.is_ascii()).count();
                        String::from_utf8_lossy(f).into_owned()
                    }
                })
                .collect();
            if bad > 0 {
                not_utf8.push((row, bad));
            }
            rows.push((row, fields));
        }
        Ok(Table {
            headers,
            rows,
            not_utf8,
            broken,
        })
    }
}
