//! CVC-ClinicDB as it is released: `Original/N.tif` frames and `Ground Truth/N.tif` masks
//! (`.tiff` or `.png` too; the folder names in any case), and the frame-to-sequence table,
//! from `sequences.csv` (`frame,sequence`) or else parsed from the release's `README.txt`
//! (`|  429 to 447  |  21  |`). Each sequence shows one polyp from several points of view: it
//! becomes one polyp (in an examination of its own, as each sequence comes from a video
//! study) whose views are its frames in frame order, each with its mask. The frames' TIFFs say
//! grey but hold RGB; the decoder reads them as the colour frames they are.

use super::plan::{Plan, PlanExam, PlanImage, PlanPolyp};
use super::{ImportError, Problems, SourceRoot, check_cancel, prepare_mask, try_prepare};
use crate::plumbing::Progress;
use crate::store::MediaKind;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const EXTENSIONS: [&str; 3] = ["tif", "tiff", "png"];

pub fn read(
    root: &Path,
    links: super::Links,
    progress: &Progress,
    problems: &mut Problems,
) -> Result<Plan, ImportError> {
    let not_cvc = |why: &str| {
        ImportError::source_error(
            root,
            format!(
                "not a CVC-ClinicDB folder: {why} (expected Original/, Ground Truth/ and sequences.csv or README.txt)"
            ),
        )
    };
    let originals = child_folder(root, "original").ok_or_else(|| not_cvc("no Original/"))?;
    let masks = child_folder(root, "ground truth").ok_or_else(|| not_cvc("no Ground Truth/"))?;
    // A folder without any table is no CVC-ClinicDB folder; a table there that cannot be
    // read is said as what it is.
    let has_table = ["sequences.csv", "README.txt", "readme.txt", "Readme.txt"]
        .iter()
        .any(|n| root.join(n).is_file());
    let (table, not_here) = read_table(root).map_err(|why| match has_table {
        true => ImportError::source_error(root, why),
        false => not_cvc(&why),
    })?;
    let source = SourceRoot::with_links(root, links)?;
    let frames = numbered_images(&source, &originals, problems)?;
    let mask_files = numbered_images(&source, &masks, problems)?;
    // Sequence -> its frames in order.
    let notes = not_here.into_iter().collect();
    let mut sequences: BTreeMap<u32, Vec<(u32, PathBuf)>> = BTreeMap::new();
    for (n, path) in frames {
        match table.get(&n) {
            Some(&seq) => sequences.entry(seq).or_default().push((n, path)),
            None => problems.push(&path, format!("frame {n} is in no sequence of the table")),
        }
    }
    let total: usize = sequences.values().map(Vec::len).sum();
    progress.stage("reading frames", total as u64);
    let mut exams = Vec::new();
    for (seq, mut frames) in sequences {
        frames.sort();
        let code = format!("cvc-clinicdb-seq{seq:02}");
        let mut exam = PlanExam::new(code.clone(), "colonoscopy", root);
        let mut views = Vec::new();
        for (n, path) in frames {
            check_cancel(progress)?;
            progress.inc();
            let Some(mask_path) = mask_files.get(&n) else {
                problems.push(&path, format!("no mask {n} in Ground Truth/"));
                continue;
            };
            let Some(image) = try_prepare(&path, problems) else {
                continue;
            };
            let mask = match prepare_mask(mask_path, image.width, image.height) {
                Ok(m) => m,
                Err(reason) => {
                    problems.push(
                        mask_path,
                        format!("{reason}; its frame {} is not imported", path.display()),
                    );
                    continue;
                }
            };
            let mut view = PlanImage::new(image, MediaKind::View);
            view.mask = Some(mask);
            views.push(view);
        }
        if views.is_empty() {
            continue;
        }
        exam.polyps.push(PlanPolyp {
            code: format!("seq{seq:02}"),
            views,
            ..Default::default()
        });
        exams.push(exam);
    }
    Ok(Plan { exams, notes })
}

/// The folder directly in `root` whose name is `name` in any case.
fn child_folder(root: &Path, name: &str) -> Option<PathBuf> {
    std::fs::read_dir(root)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            p.is_dir()
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().eq_ignore_ascii_case(name))
        })
}

/// The images directly in `dir` named by a frame number (`429.tif`), by number.
fn numbered_images(
    source: &SourceRoot,
    dir: &Path,
    problems: &mut Problems,
) -> Result<BTreeMap<u32, PathBuf>, ImportError> {
    let mut out = BTreeMap::new();
    // One listing of the folder, so a refused entry (a link leading out) is named once.
    for path in source.images_in(dir, problems)? {
        let ext = path.extension().map(|e| e.to_string_lossy().to_lowercase());
        if !ext.as_deref().is_some_and(|e| EXTENSIONS.contains(&e)) {
            continue;
        }
        let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned());
        match stem.as_deref().map(str::parse::<u32>) {
            Some(Ok(n)) => {
                if let Some(first) = out.insert(n, path.clone()) {
                    problems.push(
                        &path,
                        format!(
                            "frame {n} given twice (also {}); this one is used",
                            first.display()
                        ),
                    );
                }
            }
            _ => problems.push(&path, "not named by a frame number (e.g. 429.tif)"),
        }
    }
    Ok(out)
}

/// Frame number -> sequence, from `sequences.csv` or else the release's `README.txt`.
pub fn sequence_table(root: &Path) -> Result<BTreeMap<u32, u32>, String> {
    read_table(root).map(|(table, _)| table)
}

/// The frames the table names that Original/ does not hold (a partial copy of the release
/// names hundreds), as one line: how many, the first few, the sequences left with none.
/// `named` is each table row as (first frame, last frame, sequence).
fn not_here(
    named: &[(u32, u32, u32)],
    present: &std::collections::BTreeSet<u32>,
) -> Option<String> {
    let mut missing = 0u64;
    let mut first_missing = Vec::new();
    let mut sequences: BTreeMap<u32, bool> = BTreeMap::new();
    for &(first, last, seq) in named {
        let here = present.range(first..=last).count() as u64;
        let span = u64::from(last - first) + 1;
        missing += span - here;
        *sequences.entry(seq).or_default() |= here > 0;
        // Walked only while a few are still to name, and only over rows with a gap: a row
        // is never walked past its first missing frames plus the frames present in it.
        let mut n = first;
        while here < span && first_missing.len() < 5 && n <= last {
            if !present.contains(&n) {
                first_missing.push(n.to_string());
            }
            n = match n.checked_add(1) {
                Some(m) => m,
                None => break,
            };
        }
    }
    if missing == 0 {
        return None;
    }
    first_missing.sort_by_key(|n| n.parse::<u32>().unwrap_or(0));
    first_missing.truncate(5);
    let more = if missing > 5 { ", ..." } else { "" };
    let absent: Vec<u32> = sequences
        .iter()
        .filter(|(_, h)| !**h)
        .map(|(s, _)| *s)
        .collect();
    let sequences = match absent.as_slice() {
        [] => String::new(),
        [one] => format!("; sequence {one} has no frame here"),
        many => format!("; {} sequences have no frame here", many.len()),
    };
    Some(format!(
        "the sequence table names {missing} frames not in Original/ ({}{more}){sequences}",
        first_missing.join(", ")
    ))
}

/// [`sequence_table`], and the line [`not_here`] says of it.
fn read_table(root: &Path) -> Result<(BTreeMap<u32, u32>, Option<String>), String> {
    let csv = root.join("sequences.csv");
    if csv.is_file() {
        let text = super::paths::read_manifest(&csv)?;
        let mut out = BTreeMap::new();
        // Columns as the header names them (`frame,sequence` or `sequence,frame`); without a
        // header, frame then sequence.
        let (mut fc, mut sc) = (0, 1);
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            // The header is any first line that is not a row of numbers.
            let is_row = line
                .split(',')
                .take(2)
                .all(|c| c.trim().parse::<u32>().is_ok());
            if line.is_empty() {
                continue;
            }
            if i == 0 && !is_row {
                let names: Vec<String> = line
                    .split(',')
                    .map(|c| c.trim().to_ascii_lowercase())
                    .collect();
                let find = |n: &str| names.iter().position(|c| c == n);
                match (find("frame"), find("sequence")) {
                    (Some(f), Some(s)) => (fc, sc) = (f, s),
                    _ => {
                        return Err(format!(
                            "sequences.csv: the header `{line}` does not name the columns frame and sequence"
                        ));
                    }
                }
                continue;
            }
            let cells: Vec<&str> = line.split(',').map(str::trim).collect();
            match (
                cells.get(fc).map(|c| c.parse::<u32>()),
                cells.get(sc).map(|c| c.parse::<u32>()),
            ) {
                (Some(Ok(frame)), Some(Ok(seq))) => {
                    if out.insert(frame, seq).is_some_and(|s| s != seq) {
                        return Err(format!(
                            "sequences.csv line {}: frame {frame} in two sequences",
                            i + 1
                        ));
                    }
                }
                _ => {
                    return Err(format!(
                        "sequences.csv line {}: not `frame,sequence`: {line}",
                        i + 1
                    ));
                }
            }
        }
        let named: Vec<(u32, u32, u32)> = out.iter().map(|(&f, &s)| (f, f, s)).collect();
        let note = not_here(&named, &frames_present(root));
        return Ok((out, note));
    }
    let readme = ["README.txt", "readme.txt", "Readme.txt"]
        .iter()
        .map(|n| root.join(n))
        .find(|p| p.is_file())
        .ok_or("no sequences.csv and no README.txt with the frame-to-sequence table")?;
    // The release's README is not UTF-8 throughout (a Latin-1 byte or two): read it as it is.
    let bytes = std::fs::metadata(&readme)
        .map_err(|e| e.to_string())
        .and_then(|m| {
            if m.len() > 1 << 20 {
                Err(format!("{}: larger than a README is", readme.display()))
            } else {
                std::fs::read(&readme).map_err(|e| e.to_string())
            }
        })?;
    let text = String::from_utf8_lossy(&bytes);
    let rows = readme_rows(&text, &readme)?;
    if rows.is_empty() {
        return Err(format!(
            "{}: no `first to last | sequence` rows",
            readme.display()
        ));
    }
    // Each row's range is walked over the frames Original/ holds, never over every number it
    // spans (`0 to 4294967295` is four billion numbers and a handful of frames).
    let present = frames_present(root);
    let mut out = BTreeMap::new();
    for row in &rows {
        for &frame in present.range(row.first..=row.last) {
            out.insert(frame, row.sequence);
        }
    }
    let named: Vec<(u32, u32, u32)> = rows.iter().map(|r| (r.first, r.last, r.sequence)).collect();
    let note = not_here(&named, &present);
    Ok((out, note))
}

/// The most frames one README row may span: CVC-ClinicDB's longest sequence has 25 and the
/// whole release 612.
const MAX_ROW_FRAMES: u64 = 100_000;

/// One `first to last | sequence` row of the README, with its line number.
struct ReadmeRow {
    first: u32,
    last: u32,
    sequence: u32,
    line: usize,
}

/// The README's `first to last | sequence` rows. A row spanning more than
/// [`MAX_ROW_FRAMES`] frames, and two rows whose ranges share a frame but not their
/// sequence, are refused by line (as `sequences.csv` refuses a frame in two sequences).
/// Why a table line whose first cell is a range (`first to last | sequence`) is no row; `None`
/// for a good row and for any other line (prose, headers).
fn malformed_row(line: &str) -> Option<String> {
    if !line.contains('|') {
        return None;
    }
    let cells: Vec<&str> = line
        .split('|')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    let (first, last) = cells.first()?.split_once(" to ")?;
    if cells.len() != 2 {
        return Some(format!(
            "{} cells where a row has 2 (frames, sequence)",
            cells.len()
        ));
    }
    let number = |t: &str| t.trim().parse::<u32>().ok();
    match (number(first), number(last), number(cells[1])) {
        (Some(a), Some(b), Some(_)) if a > b => Some(format!("frames {a} to {b} run backwards")),
        (Some(_), Some(_), Some(_)) => None,
        _ => Some(
            "a frame or sequence number that is not a whole number from 0 to 4294967295".into(),
        ),
    }
}

/// The dash of a table line shaped `first – last | sequence` (any dash), else `None`.
fn dash_range(line: &str) -> Option<char> {
    let cells: Vec<&str> = line
        .split('|')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    let [range, sequence] = cells[..] else {
        return None;
    };
    let digits = |t: &str| !t.trim().is_empty() && t.trim().chars().all(|c| c.is_ascii_digit());
    let dash = range
        .chars()
        .find(|c| matches!(c, '-' | '\u{2010}'..='\u{2015}' | '\u{2212}'))?;
    let (a, b) = range.split_once(dash)?;
    (digits(a) && digits(b) && digits(sequence)).then_some(dash)
}

fn readme_rows(text: &str, readme: &Path) -> Result<Vec<ReadmeRow>, String> {
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if !line.contains(" to ") {
            // `448 – 451 | 22`: a row whose range is written with a dash is named, not passed
            // over (its frames would then be "in no sequence of the table").
            if let Some(dash) = dash_range(line) {
                return Err(format!(
                    "{} line {}: a range written with `{dash}`; write it `first to last`: `{}`",
                    readme.display(),
                    i + 1,
                    line.trim()
                ));
            }
            continue;
        }
        // A line shaped as a row (`first to last | sequence`, signs and all) whose numbers are
        // no frame range is named, not passed over or read as something else.
        if let Some(why) = malformed_row(line) {
            return Err(format!(
                "{} line {}: {why}: `{}`",
                readme.display(),
                i + 1,
                line.trim()
            ));
        }
        let numbers: Vec<u32> = line
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|t| t.parse().ok())
            .collect();
        let [first, last, sequence] = numbers[..] else {
            continue;
        };
        if first > last {
            continue;
        }
        if u64::from(last - first) + 1 > MAX_ROW_FRAMES {
            return Err(format!(
                "{} line {}: frames {first} to {last} are {} frames, more than a sequence has (at most {MAX_ROW_FRAMES}): `{}`",
                readme.display(),
                i + 1,
                u64::from(last - first) + 1,
                line.trim()
            ));
        }
        rows.push(ReadmeRow {
            first,
            last,
            sequence,
            line: i + 1,
        });
    }
    let mut by_start: Vec<&ReadmeRow> = rows.iter().collect();
    by_start.sort_by_key(|r| (r.first, r.last));
    let mut reach: Option<&ReadmeRow> = None;
    for row in by_start {
        match reach {
            Some(prev) if row.first <= prev.last && row.sequence != prev.sequence => {
                return Err(format!(
                    "{}: line {} (frames {} to {}, sequence {}) and line {} (frames {} to {}, sequence {}) put frame {} in two sequences",
                    readme.display(),
                    prev.line,
                    prev.first,
                    prev.last,
                    prev.sequence,
                    row.line,
                    row.first,
                    row.last,
                    row.sequence,
                    row.first
                ));
            }
            Some(prev) if prev.last >= row.last => {}
            _ => reach = Some(row),
        }
    }
    Ok(rows)
}

/// The frame numbers of the images in `root`'s Original/ (by file name; none when there is
/// no such folder).
fn frames_present(root: &Path) -> std::collections::BTreeSet<u32> {
    let Some(dir) = child_folder(root, "original") else {
        return Default::default();
    };
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension()
                .is_some_and(|e| EXTENSIONS.contains(&e.to_string_lossy().to_lowercase().as_str()))
        })
        .filter_map(|p| p.file_stem()?.to_str()?.parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Empty files named as the frames `numbers` in `root`'s Original/ (only names are read).
    fn frames(root: &Path, numbers: &[u32]) {
        std::fs::create_dir_all(root.join("Original")).unwrap();
        for n in numbers {
            std::fs::write(root.join(format!("Original/{n}.tif")), b"").unwrap();
        }
    }

    #[test]
    fn the_readme_table_gives_each_frame_its_sequence() {
        let dir = tempfile::tempdir().unwrap();
        frames(dir.path(), &[1, 25, 26, 429, 447, 547]);
        std::fs::write(
            dir.path().join("README.txt"),
            "       |      1 to  25    |\t 1\t|\n       |    429 to 447    |\t21\t|\n\t  |    547 to 571    |27\t|\n",
        )
        .unwrap();
        let t = sequence_table(dir.path()).unwrap();
        assert_eq!(
            (t[&1], t[&25], t[&429], t[&447], t[&547]),
            (1, 1, 21, 21, 27)
        );
        assert!(!t.contains_key(&26));
        std::fs::write(dir.path().join("sequences.csv"), "frame,sequence\n3,2\n").unwrap();
        assert_eq!(
            sequence_table(dir.path())
                .unwrap()
                .into_iter()
                .collect::<Vec<_>>(),
            [(3, 2)]
        );
        // A table without its header keeps its first row.
        std::fs::write(dir.path().join("sequences.csv"), "3,2\n4,2\n").unwrap();
        assert_eq!(sequence_table(dir.path()).unwrap().len(), 2);
        // The header says which column is which (W14: `sequence,frame` was read by position).
        std::fs::write(
            dir.path().join("sequences.csv"),
            "Sequence, Frame\n21,429\n21,430\n",
        )
        .unwrap();
        assert_eq!(
            sequence_table(dir.path())
                .unwrap()
                .into_iter()
                .collect::<Vec<_>>(),
            [(429, 21), (430, 21)]
        );
        std::fs::write(dir.path().join("sequences.csv"), "id,seq\n1,2\n").unwrap();
        let e = sequence_table(dir.path()).unwrap_err();
        assert!(
            e.contains("does not name the columns frame and sequence"),
            "{e}"
        );
    }

    #[test]
    fn a_huge_or_overlapping_readme_row_is_refused_by_line() {
        let dir = tempfile::tempdir().unwrap();
        frames(dir.path(), &[1, 2, 3]);
        let readme = dir.path().join("README.txt");
        std::fs::write(&readme, "| 0 to 4294967295 | 1 |\n").unwrap();
        let e = sequence_table(dir.path()).unwrap_err();
        assert!(e.contains("line 1") && e.contains("4294967295"), "{e}");
        std::fs::write(&readme, "| 1 to 25 | 1 |\n| 20 to 30 | 2 |\n").unwrap();
        let e = sequence_table(dir.path()).unwrap_err();
        assert!(e.contains("line 1") && e.contains("line 2"), "{e}");
        // A range far past the frames there is walked over those frames only.
        std::fs::write(&readme, "| 1 to 99999 | 1 |\n").unwrap();
        assert_eq!(sequence_table(dir.path()).unwrap().len(), 3);
    }
}
