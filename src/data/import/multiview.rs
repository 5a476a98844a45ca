//! Multi-view sets of one polyp: a folder per polyp, or EndoFinder's JSONL manifest.

use super::plan::{Plan, PlanExam, PlanImage, PlanPolyp};
use super::{
    ImportError, Problems, check_cancel, folder_name, images_in, resolve_in_root, try_prepare,
};
use crate::plumbing::Progress;
use crate::store::MediaKind;
use std::path::Path;

/// `root/<polyp>/*.jpg`, with an optional `root/pathology.csv` (`polyp,histology` and
/// optionally `vienna_class`, `size_mm` columns).
pub fn read_folders(
    root: &Path,
    progress: &Progress,
    problems: &mut Problems,
) -> Result<Plan, ImportError> {
    if !root.is_dir() {
        return Err(ImportError::source_error(root, "not a folder"));
    }
    let mut dirs: Vec<_> = std::fs::read_dir(root)
        .map_err(|e| ImportError::source_error(root, e.to_string()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    if dirs.is_empty() {
        return Err(ImportError::source_error(root, "no polyp folders inside"));
    }
    let pathology = read_pathology_csv(&root.join("pathology.csv"), problems)?;
    let mut exam = PlanExam::new(folder_name(root), "colonoscopy", root);
    progress.stage("reading views", dirs.len() as u64);
    for dir in dirs {
        check_cancel(progress)?;
        progress.inc();
        let code = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let views: Vec<PlanImage> = images_in(&dir)?
            .iter()
            .filter_map(|p| try_prepare(p, problems))
            .map(|img| PlanImage::new(img, MediaKind::View))
            .collect();
        if views.is_empty() {
            problems.push(&dir, "no readable views in this polyp folder");
            continue;
        }
        let mut polyp = PlanPolyp {
            code: code.clone(),
            views,
            ..Default::default()
        };
        if let Some((h, v, s)) = pathology.get(&code) {
            polyp.histology = Some(h.clone());
            polyp.vienna_class = *v;
            polyp.size_mm = *s;
        }
        exam.polyps.push(polyp);
    }
    Ok(Plan { exams: vec![exam] })
}

type PathologyRow = (String, Option<i64>, Option<f64>);

fn read_pathology_csv(
    path: &Path,
    problems: &mut Problems,
) -> Result<std::collections::HashMap<String, PathologyRow>, ImportError> {
    let mut out = std::collections::HashMap::new();
    if !path.exists() {
        return Ok(out);
    }
    let mut reader =
        csv::Reader::from_path(path).map_err(|e| ImportError::source_error(path, e.to_string()))?;
    let headers = reader
        .headers()
        .map_err(|e| ImportError::source_error(path, format!("malformed CSV header: {e}")))?
        .clone();
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
    let (vc, sc) = (col("vienna_class"), col("size_mm"));
    for (i, row) in reader.records().enumerate() {
        match row {
            Ok(r) => {
                let get = |c: Option<usize>| {
                    c.and_then(|c| r.get(c))
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                };
                out.insert(
                    get(Some(pc)).unwrap_or_default().to_string(),
                    (
                        get(Some(hc)).unwrap_or("unknown").to_string(),
                        get(vc).and_then(|v| v.parse().ok()),
                        get(sc).and_then(|v| v.parse().ok()),
                    ),
                );
            }
            Err(e) => problems.push(path, format!("row {}: malformed CSV: {e}", i + 2)),
        }
    }
    Ok(out)
}

/// EndoFinder JSONL: one polyp a line, `img_paths` (its views) or `query_paths` and
/// `ref_paths` (both sides are views of the same polyp), and `ground_truth` (its pathology).
/// Paths are relative to the manifest's folder.
pub fn read_jsonl(
    path: &Path,
    progress: &Progress,
    problems: &mut Problems,
) -> Result<Plan, ImportError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ImportError::source_error(path, e.to_string()))?;
    let root = path.parent().unwrap_or(Path::new("."));
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut exam = PlanExam::new(stem, "colonoscopy", path);
    let lines: Vec<&str> = text.lines().collect();
    progress.stage("reading polyps", lines.len() as u64);
    for (n, line) in lines.iter().enumerate() {
        check_cancel(progress)?;
        progress.inc();
        if line.trim().is_empty() {
            continue;
        }
        let at = |reason: String| format!("line {}: {reason}", n + 1);
        let value: serde_json::Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => {
                problems.push(path, at(format!("malformed JSON: {e}")));
                continue;
            }
        };
        let list = |key: &str| -> Option<Vec<String>> {
            value.get(key)?.as_array().map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
        };
        let (paths, roles): (Vec<String>, Vec<&str>) =
            match (list("img_paths"), list("query_paths"), list("ref_paths")) {
                (Some(views), _, _) => {
                    let n = views.len();
                    (views, vec!["view"; n])
                }
                (None, Some(q), Some(r)) => {
                    let roles = std::iter::repeat_n("query", q.len())
                        .chain(std::iter::repeat_n("reference", r.len()))
                        .collect();
                    (q.into_iter().chain(r).collect(), roles)
                }
                _ => {
                    problems.push(
                        path,
                        at("needs img_paths, or query_paths and ref_paths".into()),
                    );
                    continue;
                }
            };
        if paths.is_empty() {
            problems.push(path, at("no image paths".into()));
            continue;
        }
        let mut views = Vec::new();
        let mut ok = true;
        for p in &paths {
            match resolve_in_root(root, p) {
                Ok(full) => match try_prepare(&full, problems) {
                    Some(img) => views.push(PlanImage::new(img, MediaKind::View)),
                    None => ok = false,
                },
                Err(reason) => {
                    problems.push(path, at(reason));
                    ok = false;
                }
            }
        }
        if !ok {
            // A polyp with some views missing would distort multi-view retrieval: skip it whole.
            continue;
        }
        let histology = match value.get("ground_truth") {
            Some(serde_json::Value::String(s)) => Some(s.clone()),
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
            .unwrap_or_else(|| format!("line{}", n + 1));
        let q = roles.iter().filter(|r| **r == "query").count();
        let mut attributes = Vec::new();
        if q > 0 {
            attributes.push((
                "endofinder roles".into(),
                format!("{q} query, {} reference views", roles.len() - q),
            ));
        }
        exam.polyps.push(PlanPolyp {
            code,
            histology,
            views,
            attributes,
            ..Default::default()
        });
    }
    if exam.polyps.is_empty() && problems.0.is_empty() {
        return Err(ImportError::source_error(path, "no polyps in the manifest"));
    }
    Ok(Plan { exams: vec![exam] })
}
