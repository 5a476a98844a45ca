//! Multi-view sets of one polyp: a folder per polyp, or EndoFinder's JSONL manifest.

use super::paths::{csv_reader, read_manifest};
use super::plan::{Plan, PlanExam, PlanImage, PlanPolyp};
use super::plan::{check_size_mm, check_vienna};
use super::{
    ImportError, Problems, SourceRoot, check_cancel, folder_name, prepare_mask, try_prepare,
};
use crate::plumbing::Progress;
use crate::store::MediaKind;
use std::collections::HashMap;
use std::path::Path;

/// `root/<polyp>/*.jpg`, with an optional `root/pathology.csv` (`polyp,histology` and
/// optionally `vienna_class`, `size_mm` columns).
pub fn read_folders(
    root: &Path,
    links: super::Links,
    progress: &Progress,
    problems: &mut Problems,
) -> Result<Plan, ImportError> {
    if !root.is_dir() {
        return Err(ImportError::source_error(root, "not a folder"));
    }
    let source = SourceRoot::with_links(root, links)?;
    let dirs = source.folders_in(root, problems)?;
    if dirs.is_empty() && problems.0.is_empty() {
        return Err(ImportError::source_error(root, "no polyp folders inside"));
    }
    let csv_path = root.join("pathology.csv");
    let mut pathology = read_pathology_csv(&csv_path, problems)?;
    let mut exam = PlanExam::new(folder_name(root), "colonoscopy", root);
    progress.stage("reading views", dirs.len() as u64);
    for dir in dirs {
        check_cancel(progress)?;
        progress.inc();
        let code = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if let Some(Err(reason)) = pathology.get(&code) {
            problems.push(&csv_path, reason.clone());
            pathology.remove(&code);
            continue;
        }
        let files = source.images_in(&dir, problems)?;
        let mut views = Vec::new();
        let mut claimed = Vec::new();
        for path in files.iter().filter(|p| !is_mask_file(p)) {
            let mask_path = mask_of(path);
            claimed.extend(mask_path.clone());
            let Some(image) = try_prepare(path, problems) else {
                continue;
            };
            let (width, height) = (image.width, image.height);
            let mut view = PlanImage::new(image, MediaKind::View);
            // A view whose mask is there but cannot be used is not imported, and the line
            // naming the mask says so (round 6 N45: a mask too large to decode took its view
            // with it without a word; a FIFO mask left its view imported without one).
            if let Some(mask_path) = mask_path {
                let mask = source
                    .check(&mask_path)
                    .and_then(|_| prepare_mask(&mask_path, width, height));
                match mask {
                    Ok(mask) => view.mask = Some(mask),
                    Err(reason) => {
                        problems.push(
                            &mask_path,
                            format!(
                                "{reason}; the view {} is not imported (fix the mask, or remove \
                                 it to import the view without one)",
                                path.display()
                            ),
                        );
                        continue;
                    }
                }
            }
            views.push(view);
        }
        for mask in unclaimed_masks(&source, &dir, &files, &claimed, problems)? {
            problems.push(
                &mask,
                "a mask named for no view in this folder (masks are `masks/<view's name>` or \
                 `<view's stem>_mask.<ext>`); not imported",
            );
        }
        if views.is_empty() {
            problems.push(&dir, "no readable views in this polyp folder");
            continue;
        }
        let mut polyp = PlanPolyp {
            code: code.clone(),
            views,
            ..Default::default()
        };
        if let Some(Ok((_, (h, v, s)))) = pathology.remove(&code) {
            polyp.histology = h;
            polyp.vienna_class = v;
            polyp.size_mm = s;
        }
        exam.polyps.push(polyp);
    }
    let mut unused: Vec<_> = pathology.into_iter().collect();
    unused.sort_by(|a, b| a.0.cmp(&b.0));
    for (code, row) in unused {
        let reason = match row {
            Ok((n, _)) => format!("row {n} names polyp '{code}', which has no folder here"),
            Err(reason) => reason,
        };
        problems.push(&csv_path, reason);
    }
    Ok(Plan {
        exams: vec![exam],
        ..Default::default()
    })
}

/// The mask files of polyp folder `dir` (`*_mask.*` beside the views, every image in
/// `masks/`) that no view in `files` claimed.
fn unclaimed_masks(
    source: &SourceRoot,
    dir: &Path,
    files: &[std::path::PathBuf],
    claimed: &[std::path::PathBuf],
    problems: &mut Problems,
) -> Result<Vec<std::path::PathBuf>, ImportError> {
    let mut masks: Vec<_> = files.iter().filter(|p| is_mask_file(p)).cloned().collect();
    let masks_dir = dir.join("masks");
    if masks_dir.is_dir() && source.check(&masks_dir).is_ok() {
        masks.extend(source.images_in(&masks_dir, problems)?);
    }
    Ok(masks.into_iter().filter(|m| !claimed.contains(m)).collect())
}

/// A view's mask file named `<view>_mask.<ext>` beside it, read as the mask, not a view.
fn is_mask_file(path: &Path) -> bool {
    path.file_stem()
        .is_some_and(|s| s.to_string_lossy().to_lowercase().ends_with("_mask"))
}

/// The mask of view `path`: `masks/<its file name>` or `masks/<its stem>.<ext>` in its
/// folder, else `<its stem>_mask.<ext>` beside it (white = polyp): the first such name that
/// exists, whatever it is (a FIFO, a link leading outside: refused with its view).
fn mask_of(path: &Path) -> Option<std::path::PathBuf> {
    const EXT: [&str; 6] = ["png", "jpg", "jpeg", "tif", "tiff", "bmp"];
    let dir = path.parent()?;
    let stem = path.file_stem()?.to_string_lossy().into_owned();
    let masks = dir.join("masks");
    std::iter::once(masks.join(path.file_name()?))
        .chain(EXT.iter().map(|e| masks.join(format!("{stem}.{e}"))))
        .chain(EXT.iter().map(|e| dir.join(format!("{stem}_mask.{e}"))))
        .find(|p| std::fs::symlink_metadata(p).is_ok())
}

type PathologyRow = (Option<String>, Option<i64>, Option<f64>);

/// Each polyp's row of `pathology.csv` with its row number, or why the polyp's pathology
/// cannot be trusted: two rows that disagree (both named) or a value out of range.
type PathologyRows = HashMap<String, Result<(usize, PathologyRow), String>>;

fn read_pathology_csv(path: &Path, problems: &mut Problems) -> Result<PathologyRows, ImportError> {
    let mut out = PathologyRows::new();
    if !path.exists() {
        return Ok(out);
    }
    let mut reader = csv_reader(path).map_err(|e| ImportError::source_error(path, e))?;
    let headers = reader
        .headers()
        .map_err(|e| ImportError::source_error(path, format!("malformed CSV header: {e}")))?
        .clone();
    if let Some(twice) = crate::store::duplicate_column(headers.iter()) {
        return Err(ImportError::source_error(
            path,
            format!("the column `{twice}` is given twice; which one holds the value is unclear"),
        ));
    }
    let col = |name: &str| {
        headers
            .iter()
            .position(|h| h.trim().eq_ignore_ascii_case(name))
    };
    let (Some(pc), Some(hc)) = (col("polyp"), col("histology")) else {
        return Err(ImportError::source_error(
            path,
            "needs the columns polyp and histology",
        ));
    };
    // `vienna` is what the import's help long said: read as `vienna_class`.
    let (vc, sc) = (col("vienna_class").or(col("vienna")), col("size_mm"));
    // A column this importer does not read is named, not passed over (round 7 N5: a
    // `colour` column was ignored without a word).
    const READ: [&str; 5] = ["polyp", "histology", "vienna_class", "vienna", "size_mm"];
    for h in headers.iter().map(str::trim) {
        if !READ.iter().any(|r| h.eq_ignore_ascii_case(r)) {
            problems.push(
                path,
                format!(
                    "the column `{h}` is not read (the columns are polyp, histology, \
                     vienna_class, size_mm); its values are not imported"
                ),
            );
        }
    }
    for (i, row) in reader.records().enumerate() {
        let n = i + 2;
        let r = match row {
            Ok(r) => r,
            Err(e) => {
                problems.push(path, format!("row {n}: malformed CSV: {e}"));
                continue;
            }
        };
        let get = |c: Option<usize>| {
            c.and_then(|c| r.get(c))
                .map(str::trim)
                .filter(|s| !s.is_empty())
        };
        let Some(polyp) = get(Some(pc)).map(str::to_string) else {
            problems.push(path, format!("row {n}: no polyp name"));
            continue;
        };
        let parsed = (|| -> Result<PathologyRow, String> {
            Ok((
                // A blank cell gives no histology (under --update-labels the library's
                // stays), as blank Vienna and size cells do.
                get(Some(hc)).map(str::to_string),
                get(vc).map(check_vienna).transpose()?,
                get(sc).map(check_size_mm).transpose()?,
            ))
        })()
        .map_err(|reason| format!("row {n}, polyp '{polyp}': {reason}; the polyp is not imported"));
        let entry = match (out.remove(&polyp), parsed) {
            (None, parsed) => parsed.map(|row| (n, row)),
            (Some(Err(earlier)), _) => Err(earlier),
            (Some(Ok(_)), Err(reason)) => Err(reason),
            (Some(Ok((m, first))), Ok(row)) if first == row => Ok((m, first)),
            (Some(Ok((m, first))), Ok(row)) => Err(format!(
                "rows {m} and {n} both describe polyp '{polyp}' and disagree ({} vs {}); \
                 the polyp is not imported",
                describe(&first),
                describe(&row)
            )),
        };
        out.insert(polyp, entry);
    }
    Ok(out)
}

fn describe((histology, vienna, size): &PathologyRow) -> String {
    let mut s = histology.clone().unwrap_or_else(|| "no histology".into());
    if let Some(v) = vienna {
        s.push_str(&format!(", Vienna {v}"));
    }
    if let Some(mm) = size {
        s.push_str(&format!(", {mm} mm"));
    }
    s
}

/// One polyp line of an EndoFinder manifest, parsed but not yet read from disk.
struct JsonlPolyp {
    line: usize,
    code: String,
    paths: Vec<String>,
    queries: usize,
    histology: Option<String>,
}

impl JsonlPolyp {
    /// The same polyp told twice (line numbers aside).
    fn same_as(&self, other: &JsonlPolyp) -> bool {
        self.code == other.code
            && self.paths == other.paths
            && self.queries == other.queries
            && self.histology == other.histology
    }
}

/// EndoFinder JSONL: one polyp a line, `img_paths` (its views) or `query_paths` and
/// `ref_paths` (both sides are views of the same polyp), and `ground_truth` (its pathology).
/// Paths are relative to the manifest's folder. Two lines with one id that disagree are
/// both refused (named); an exact repeat is read once.
pub fn read_jsonl(
    path: &Path,
    links: super::Links,
    progress: &Progress,
    problems: &mut Problems,
) -> Result<Plan, ImportError> {
    let text = read_manifest(path).map_err(|e| ImportError::source_error(path, e))?;
    let source = SourceRoot::with_links(path, links)?;
    let root = source.path().to_path_buf();
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut exam = PlanExam::new(stem, "colonoscopy", path);
    let mut entries: Vec<JsonlPolyp> = Vec::new();
    let mut refused: HashMap<String, Vec<usize>> = HashMap::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match parse_jsonl_line(line, n + 1) {
            Ok(entry) => {
                if let Some(lines) = refused.get_mut(&entry.code) {
                    lines.push(entry.line);
                    continue;
                }
                match entries.iter().position(|e| e.code == entry.code) {
                    None => entries.push(entry),
                    Some(i) if entries[i].same_as(&entry) => {}
                    Some(i) => {
                        let first = entries.remove(i);
                        refused.insert(entry.code, vec![first.line, entry.line]);
                    }
                }
            }
            Err(reason) => problems.push(path, format!("line {}: {reason}", n + 1)),
        }
    }
    let mut refused: Vec<_> = refused.into_iter().collect();
    refused.sort();
    for (code, lines) in refused {
        let lines: Vec<String> = lines.iter().map(usize::to_string).collect();
        problems.push(
            path,
            format!(
                "lines {} all describe polyp '{code}' with different views or pathology; \
                 the polyp is not imported",
                lines.join(", ")
            ),
        );
    }
    progress.stage("reading polyps", entries.len() as u64);
    let mut read: Vec<(JsonlPolyp, Vec<PlanImage>)> = Vec::new();
    for entry in entries {
        check_cancel(progress)?;
        progress.inc();
        let mut views = Vec::new();
        let mut ok = true;
        for p in &entry.paths {
            match source.resolve(&root, p) {
                Ok(full) => match try_prepare(&full, problems) {
                    Some(img) => views.push(PlanImage::new(img, MediaKind::View)),
                    None => ok = false,
                },
                Err(reason) => {
                    problems.push(path, format!("line {}: {reason}", entry.line));
                    ok = false;
                }
            }
        }
        if !ok {
            // A polyp with some views missing would distort multi-view retrieval: skip it whole.
            continue;
        }
        // Two files of one content are one view in the library: counted as two (round 7 N49).
        let mut hashes = HashMap::new();
        let copy = views.iter().find_map(|v| {
            let hash = crate::store::content_hash(&v.image.bytes);
            hashes
                .insert(hash, v.image.source.clone())
                .map(|first| (first, v.image.source.clone()))
        });
        if let Some((first, second)) = copy {
            problems.push(
                path,
                format!(
                    "line {}: {} and {} are the same image (one view, listed twice); the polyp \
                     is not imported",
                    entry.line,
                    first.display(),
                    second.display()
                ),
            );
            continue;
        }
        read.push((entry, views));
    }
    // The same images on two lines under two ids, by content (round 13 N2: copies under two
    // names passed): one polyp told twice, or two truths for it (round 12 N19: two polyps of
    // one pair of images, adenoma and hyperplastic).
    let mut by_images: HashMap<Vec<String>, Vec<usize>> = HashMap::new();
    for (i, (_, views)) in read.iter().enumerate() {
        let mut key: Vec<String> = views
            .iter()
            .map(|v| crate::store::content_hash(&v.image.bytes))
            .collect();
        key.sort();
        by_images.entry(key).or_default().push(i);
    }
    let mut dropped = vec![false; read.len()];
    let mut groups: Vec<Vec<usize>> = by_images.into_values().filter(|g| g.len() > 1).collect();
    groups.sort();
    for group in groups {
        let lines: Vec<String> = group.iter().map(|&i| read[i].0.line.to_string()).collect();
        let truths: std::collections::BTreeSet<String> = group
            .iter()
            .map(|&i| read[i].0.histology.clone().unwrap_or_else(|| "none".into()))
            .collect();
        if truths.len() > 1 {
            for &i in &group {
                dropped[i] = true;
            }
            problems.push(
                path,
                format!(
                    "lines {} list the same images with different ground truth ({}); none of \
                     them is imported",
                    lines.join(", "),
                    truths.into_iter().collect::<Vec<_>>().join(", ")
                ),
            );
        } else {
            for &i in &group[1..] {
                dropped[i] = true;
            }
            problems.push(
                path,
                format!(
                    "lines {} list the same images: one polyp, imported once (line {})",
                    lines.join(", "),
                    lines[0]
                ),
            );
        }
    }
    let mut keep = dropped.iter().map(|d| !d);
    read.retain(|_| keep.next().unwrap_or(true));
    for (entry, views) in read {
        let mut attributes = Vec::new();
        if entry.queries > 0 {
            attributes.push((
                "endofinder roles".into(),
                format!(
                    "{} query, {} reference views",
                    entry.queries,
                    entry.paths.len() - entry.queries
                ),
            ));
        }
        exam.polyps.push(PlanPolyp {
            code: entry.code,
            histology: entry.histology,
            views,
            attributes,
            ..Default::default()
        });
    }
    if exam.polyps.is_empty() && problems.0.is_empty() {
        return Err(ImportError::source_error(path, "no polyps in the manifest"));
    }
    Ok(Plan {
        exams: vec![exam],
        ..Default::default()
    })
}

fn parse_jsonl_line(line: &str, n: usize) -> Result<JsonlPolyp, String> {
    let value: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("malformed JSON: {e}"))?;
    // Every entry of a path list must be a path: a number or null among them would leave
    // the polyp with views missing, and a polyp missing views is skipped whole.
    let list = |key: &str| -> Result<Option<Vec<String>>, String> {
        let Some(a) = value.get(key).and_then(|v| v.as_array()) else {
            return Ok(None);
        };
        a.iter()
            .map(|v| {
                v.as_str().map(str::to_string).ok_or_else(|| {
                    format!("{key} holds {v}, not a path; the polyp is not imported")
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    };
    let (paths, queries) = match (list("img_paths")?, list("query_paths")?, list("ref_paths")?) {
        // Both ways of listing views: which are the polyp's is a guess (round 7 N49: the
        // query and reference lists were ignored without a word).
        (Some(_), q, r) if q.is_some() || r.is_some() => {
            return Err(
                "gives img_paths and query_paths/ref_paths: which views are the polyp's is \
                 unclear; the polyp is not imported"
                    .into(),
            );
        }
        (Some(views), _, _) => (views, 0),
        (None, Some(q), Some(r)) => {
            let queries = q.len();
            (q.into_iter().chain(r).collect::<Vec<_>>(), queries)
        }
        _ => return Err("needs img_paths, or query_paths and ref_paths".into()),
    };
    if paths.is_empty() {
        return Err("no image paths".into());
    }
    // A view listed twice is one view: counted twice, the polyp's view and role counts were
    // wrong (round 7 N49).
    let mut seen = std::collections::HashSet::new();
    if let Some(twice) = paths.iter().find(|p| !seen.insert(p.trim())) {
        return Err(format!(
            "lists '{twice}' twice (in one list, or as a query and a reference view); the \
             polyp is not imported"
        ));
    }
    let histology = match value.get("ground_truth") {
        Some(serde_json::Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_string()),
        Some(v @ serde_json::Value::Number(_)) => Some(v.to_string()),
        _ => None,
    };
    let code = value
        .get("id")
        .or_else(|| value.get("polyp_id"))
        .map(|v| {
            v.as_str()
                .map(str::to_string)
                .unwrap_or_else(|| v.to_string())
        })
        .unwrap_or_else(|| format!("line{n}"));
    if code.trim().is_empty() {
        return Err("an empty polyp id".into());
    }
    Ok(JsonlPolyp {
        line: n,
        code,
        paths,
        queries,
        histology,
    })
}
