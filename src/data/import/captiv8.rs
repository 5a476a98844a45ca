//! CAPTIV8-style capsule data: one CSV per patient with the columns `Patient ID, name,
//! capture_time, image_path, video_path, image_label`. Image paths are relative to the CSV.
//! Each patient becomes a capsule examination; each row a capsule image with its label as the
//! caption.

use super::paths::csv_reader;
use super::plan::{Plan, PlanExam, PlanImage};
use super::{ImportError, Problems, SourceRoot, check_cancel, try_prepare};
use crate::plumbing::Progress;
use crate::store::MediaKind;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub fn read(
    path: &Path,
    progress: &Progress,
    problems: &mut Problems,
) -> Result<Plan, ImportError> {
    let source = SourceRoot::new(path)?;
    let csvs: Vec<PathBuf> = if path.is_dir() {
        source.files_in(path, "csv", problems)?
    } else {
        vec![path.to_path_buf()]
    };
    if csvs.is_empty() && problems.0.is_empty() {
        return Err(ImportError::source_error(path, "no CSV files found"));
    }
    let mut exams: BTreeMap<String, PlanExam> = BTreeMap::new();
    // Each image file once: (where it was named, its caption); a second row with another
    // caption refuses the image (both rows named).
    let mut seen: BTreeMap<PathBuf, (String, String)> = BTreeMap::new();
    let mut refused: BTreeMap<PathBuf, Vec<String>> = BTreeMap::new();
    progress.stage("reading capsule CSVs", csvs.len() as u64);
    for csv_path in csvs {
        check_cancel(progress)?;
        progress.inc();
        let root = csv_path.parent().unwrap_or(Path::new(".")).to_path_buf();
        let mut reader = match csv_reader(&csv_path) {
            Ok(r) => r,
            Err(e) => {
                problems.push(&csv_path, e.to_string());
                continue;
            }
        };
        let headers: Vec<String> = match reader.headers() {
            Ok(h) => h.iter().map(|h| h.trim().to_ascii_lowercase()).collect(),
            Err(e) => {
                problems.push(&csv_path, format!("malformed CSV header: {e}"));
                continue;
            }
        };
        let col = |name: &str| headers.iter().position(|h| h == name);
        let (Some(pid), Some(img), Some(label)) =
            (col("patient id"), col("image_path"), col("image_label"))
        else {
            problems.push(
                &csv_path,
                "needs the columns Patient ID, image_path and image_label",
            );
            continue;
        };
        let time = col("capture_time");
        for (i, rec) in reader.records().enumerate() {
            let row = i + 2;
            let rec = match rec {
                Ok(r) => r,
                Err(e) => {
                    problems.push(&csv_path, format!("row {row}: malformed CSV: {e}"));
                    continue;
                }
            };
            let get = |c: usize| rec.get(c).map(str::trim).unwrap_or_default().to_string();
            let full = match source.resolve(&root, &get(img)) {
                Ok(p) => p,
                Err(reason) => {
                    problems.push(&csv_path, format!("row {row}: {reason}"));
                    continue;
                }
            };
            let at = format!("{} row {row}", csv_path.display());
            let real = full.canonicalize().unwrap_or_else(|_| full.clone());
            if let Some(rows) = refused.get_mut(&real) {
                rows.push(at);
                continue;
            }
            if let Some((first, caption)) = seen.get(&real) {
                if *caption != get(label) {
                    refused.insert(real.clone(), vec![first.clone(), at]);
                }
                continue;
            }
            seen.insert(real, (at, get(label)));
            let Some(prepared) = try_prepare(&full, problems) else {
                continue;
            };
            let patient = get(pid);
            if patient.is_empty() {
                problems.push(&csv_path, format!("row {row}: no Patient ID"));
                continue;
            }
            let mut frame = PlanImage::new(prepared, MediaKind::Capsule);
            frame.caption = Some(get(label));
            frame.captured_at = time.map(get).filter(|t| !t.is_empty());
            exams
                .entry(patient.clone())
                .or_insert_with(|| PlanExam {
                    code: format!("capsule/{patient}"),
                    patient: Some(patient.clone()),
                    kind: "capsule".into(),
                    source: csv_path.display().to_string(),
                    ..Default::default()
                })
                .frames
                .push(frame);
        }
    }
    for (image, rows) in refused {
        problems.push(
            &image,
            format!(
                "named with different captions by {}; the image is not imported",
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
    })
}
