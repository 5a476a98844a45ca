//! REAL-Colon: `video_info.csv`, `lesion_info.csv`, and per video `<video>_frames/` with the
//! images and `<video>_annotations/` with one VOC XML per frame, whose objects carry
//! `unique_id` (`video_lesion`) and a `bndbox`. Each video becomes an examination with one
//! video; each lesion a polyp with size, site and histology from `lesion_info.csv`.

use super::paths::csv_reader;
use super::plan::{Plan, PlanBox, PlanExam, PlanImage, PlanVideo};
use super::plan::{check_box, check_size_mm};
use super::{ImportError, Problems, SourceRoot, check_cancel, coco::histology_name, try_prepare};
use crate::plumbing::Progress;
use crate::store::MediaKind;
use std::collections::HashMap;
use std::path::Path;

/// One VOC object: its identity and box (x, y, w, h).
#[derive(Debug, Clone, PartialEq)]
pub struct VocObject {
    pub unique_id: String,
    pub xywh: [f64; 4],
}

/// An object being read: unique_id, name, and xmin/ymin/xmax/ymax as they arrive.
type Partial = (Option<String>, Option<String>, [Option<f64>; 4]);

/// Parses a VOC annotation; objects without `unique_id` fall back to `name`. An object
/// whose box is impossible (xmin not below xmax, ...) comes back as its reason, so the rest
/// of the file still counts.
pub fn parse_voc(xml: &str) -> Result<Vec<Result<VocObject, String>>, String> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut stack: Vec<String> = Vec::new();
    let mut objects = Vec::new();
    let mut current: Option<Partial> = None;
    loop {
        match reader
            .read_event()
            .map_err(|e| format!("malformed XML at byte {}: {e}", reader.buffer_position()))?
        {
            Event::Start(e) => {
                let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
                if name == "object" {
                    current = Some((None, None, [None; 4]));
                }
                stack.push(name);
            }
            Event::End(_) if stack.pop().as_deref() == Some("object") => {
                let (uid, name, b) = current.take().expect("inside an object");
                let id = uid
                    .or(name)
                    .ok_or("an object has neither unique_id nor name")?;
                let [Some(x0), Some(y0), Some(x1), Some(y1)] = b else {
                    return Err(format!("object {id} has an incomplete bndbox"));
                };
                objects.push(if x1 <= x0 || y1 <= y0 {
                    Err(format!(
                        "object {id}: xmin {x0} / ymin {y0} are not below xmax {x1} / ymax {y1}; box refused"
                    ))
                } else {
                    Ok(VocObject {
                        unique_id: id,
                        xywh: [x0, y0, x1 - x0, y1 - y0],
                    })
                });
            }
            Event::End(_) => {}
            Event::Text(t) => {
                let text = t.decode().map_err(|e| e.to_string())?.trim().to_string();
                if let (Some(obj), Some(tag)) = (current.as_mut(), stack.last()) {
                    match tag.as_str() {
                        "unique_id" => obj.0 = Some(text),
                        "name" if stack.len() >= 2 && stack[stack.len() - 2] == "object" => {
                            obj.1 = Some(text)
                        }
                        "xmin" | "ymin" | "xmax" | "ymax" => {
                            let v: f64 = text
                                .parse()
                                .map_err(|_| format!("{tag} is not a number: '{text}'"))?;
                            let i = ["xmin", "ymin", "xmax", "ymax"]
                                .iter()
                                .position(|t| t == tag)
                                .expect("listed");
                            obj.2[i] = Some(v);
                        }
                        _ => {}
                    }
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if !stack.is_empty() {
        return Err("malformed XML: unclosed elements".into());
    }
    Ok(objects)
}

/// A CSV file: lower-cased headers and each row's trimmed values.
struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

fn read_csv(path: &Path) -> Result<Table, ImportError> {
    let mut reader = csv_reader(path).map_err(|e| ImportError::source_error(path, e))?;
    let headers: Vec<String> = reader
        .headers()
        .map_err(|e| ImportError::source_error(path, format!("malformed CSV: {e}")))?
        .iter()
        .map(|h| h.trim().to_ascii_lowercase())
        .collect();
    let mut rows = Vec::new();
    for (i, rec) in reader.records().enumerate() {
        let rec = rec.map_err(|e| {
            ImportError::source_error(path, format!("row {}: malformed CSV: {e}", i + 2))
        })?;
        rows.push(rec.iter().map(|v| v.trim().to_string()).collect());
    }
    Ok(Table { headers, rows })
}

impl Table {
    /// The column holding one field: the first of `exact` that is a header, else the one
    /// header starting with `prefix`. Two such headers and no exact one is ambiguous: both
    /// are named and neither is read (the value never depends on the order of anything).
    fn column(
        &self,
        exact: &[&str],
        prefix: &str,
        path: &Path,
        problems: &mut Problems,
    ) -> Option<usize> {
        if let Some(i) = exact
            .iter()
            .find_map(|e| self.headers.iter().position(|h| h == e))
        {
            return Some(i);
        }
        let alike: Vec<usize> = (0..self.headers.len())
            .filter(|&i| self.headers[i].starts_with(prefix))
            .collect();
        match alike[..] {
            [i] => Some(i),
            [] => None,
            _ => {
                let names: Vec<&str> = alike.iter().map(|&i| self.headers[i].as_str()).collect();
                problems.push(
                    path,
                    format!(
                        "columns {} could each be the {prefix} (none is named {}); none of \
                         them is read: rename the one to use",
                        names.join(", "),
                        exact.join(" or ")
                    ),
                );
                None
            }
        }
    }
}

/// A row's value in a column, if the column exists and the value is not empty.
fn cell(row: &[String], column: Option<usize>) -> Option<&String> {
    column.and_then(|i| row.get(i)).filter(|v| !v.is_empty())
}

/// Trailing digits of a file stem (`001-001_1234` -> 1234).
fn frame_number(stem: &str) -> Option<i64> {
    let digits: String = stem
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits.chars().rev().collect::<String>().parse().ok()
}

/// A lesion's row of `lesion_info.csv`.
#[derive(Debug, Clone, PartialEq)]
struct Lesion {
    size_mm: Option<f64>,
    site: Option<String>,
    histology: Option<String>,
    paris: Option<String>,
}

/// Lesions by unique id; a lesion given by two rows that disagree, or with a size out of
/// range, is an error naming its rows.
fn read_lesions(
    path: &Path,
    problems: &mut Problems,
) -> Result<HashMap<String, Result<Lesion, String>>, ImportError> {
    let mut out: HashMap<String, (usize, Result<Lesion, String>)> = HashMap::new();
    let table = read_csv(path)?;
    let id_col = table.column(
        &["unique_object_id", "unique_id"],
        "unique_object",
        path,
        problems,
    );
    let size_col = table.column(&["size_mm", "size [mm]", "size"], "size", path, problems);
    let site_col = table.column(&["site", "location"], "site", path, problems);
    let histology_col = table.column(&["histology"], "histolog", path, problems);
    let paris_col = table.column(&["paris", "paris_classification"], "paris", path, problems);
    // A column read by none of these is named, not passed over (round 7 N32: a `paris`
    // column was dropped without a word).
    let read = [id_col, size_col, site_col, histology_col, paris_col];
    for (i, h) in table.headers.iter().enumerate() {
        if !read.contains(&Some(i)) {
            problems.push(
                path,
                format!(
                    "the column `{h}` is not read (EndoTwin reads unique_object_id, size, \
                     site, histology and paris); its values are not imported"
                ),
            );
        }
    }
    for (i, row) in table.rows.iter().enumerate() {
        let n = i + 2;
        let Some(id) = cell(row, id_col) else {
            problems.push(path, format!("row {n}: no unique_object_id"));
            continue;
        };
        let lesion = cell(row, size_col)
            .map(|s| check_size_mm(s))
            .transpose()
            .map(|size_mm| Lesion {
                size_mm,
                site: cell(row, site_col).cloned(),
                histology: cell(row, histology_col).and_then(|h| histology_name(h)),
                // `Is` as written in some tables is the class `0-Is`.
                paris: cell(row, paris_col).map(|v| match v.starts_with("0-") {
                    true => v.clone(),
                    false => format!("0-{v}"),
                }),
            })
            .map_err(|reason| {
                format!("row {n}, lesion {id}: {reason}; its pathology is not imported")
            });
        let entry = match out.remove(id) {
            None => (n, lesion),
            Some((m, Ok(first))) if lesion.as_ref() == Ok(&first) => (m, Ok(first)),
            Some((m, Ok(_))) => (
                m,
                Err(format!(
                    "rows {m} and {n} both describe lesion {id} and disagree; its pathology is \
                     not imported (its boxes are)"
                )),
            ),
            Some((m, Err(e))) => (m, Err(e)),
        };
        out.insert(id.clone(), entry);
    }
    Ok(out.into_iter().map(|(k, (_, v))| (k, v)).collect())
}

pub fn read(
    root: &Path,
    links: super::Links,
    progress: &Progress,
    problems: &mut Problems,
) -> Result<Plan, ImportError> {
    let (vpath, lpath) = (root.join("video_info.csv"), root.join("lesion_info.csv"));
    if !vpath.is_file() || !lpath.is_file() {
        return Err(ImportError::source_error(
            root,
            "not a REAL-Colon folder: expected video_info.csv and lesion_info.csv",
        ));
    }
    let source = SourceRoot::with_links(root, links)?;
    let videos = read_csv(&vpath)?;
    let name_col = videos.column(&["unique_video_name", "video"], "video", &vpath, problems);
    let fps_col = videos.column(&["fps"], "fps", &vpath, problems);
    let lesions = read_lesions(&lpath, problems)?;
    let mut plan = Plan::default();
    progress.stage("reading videos", videos.rows.len() as u64);
    // A video is one row: a second row of it is named, not imported again (round 17 N3: the
    // summary counted it twice and its other fps was dropped without a word).
    let mut first_row: std::collections::HashMap<&str, (usize, Option<&String>)> =
        Default::default();
    for (i, v) in videos.rows.iter().enumerate() {
        check_cancel(progress)?;
        progress.inc();
        let Some(name) = cell(v, name_col) else {
            problems.push(&vpath, "a row without unique_video_name");
            continue;
        };
        let fps_cell = cell(v, fps_col);
        if let Some(&(row, first_fps)) = first_row.get(name.as_str()) {
            let shown = |f: Option<&String>| f.map_or("none".to_string(), |f| f.to_string());
            let differ = if shown(first_fps) == shown(fps_cell) {
                String::new()
            } else {
                format!(
                    " with another fps ({} there, {} here)",
                    shown(first_fps),
                    shown(fps_cell)
                )
            };
            problems.push(
                &vpath,
                format!(
                    "row {}: video {name} is described again{differ}; only row {row} is used",
                    i + 2
                ),
            );
            continue;
        }
        first_row.insert(name, (i + 2, fps_cell));
        if let Err(reason) = SourceRoot::plain_name(name) {
            problems.push(&vpath, format!("video {reason}; refused"));
            continue;
        }
        let frames_dir = root.join(format!("{name}_frames"));
        let ann_dir = root.join(format!("{name}_annotations"));
        if !frames_dir.is_dir() {
            problems.push(&frames_dir, "frames folder of this video is missing");
            continue;
        }
        if let Err(reason) = source.check(&frames_dir) {
            problems.push(&frames_dir, reason);
            continue;
        }
        let fps = match fps_cell.map(|f| f.parse::<f64>()) {
            None => 25.0,
            Some(Ok(f)) if f.is_finite() && f > 0.0 && f <= 1000.0 => f,
            Some(_) => {
                problems.push(
                    &vpath,
                    format!("video {name}: fps is not a number between 0 and 1000; refused"),
                );
                continue;
            }
        };
        let mut exam = PlanExam::new(name.clone(), "colonoscopy", root);
        let mut video = PlanVideo {
            code: name.clone(),
            fps,
            ..Default::default()
        };
        for frame_path in source.images_in(&frames_dir, problems)? {
            check_cancel(progress)?;
            let stem = frame_path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let Some(index) = frame_number(&stem) else {
                problems.push(&frame_path, "no frame number at the end of the file name");
                continue;
            };
            let xml_path = ann_dir.join(format!("{stem}.xml"));
            let objects = if xml_path.is_file() {
                match source
                    .check(&xml_path)
                    .and_then(|_| super::paths::read_manifest(&xml_path))
                    .and_then(|x| parse_voc(&x))
                {
                    Ok(o) => o,
                    Err(reason) => {
                        problems.push(&xml_path, reason);
                        continue;
                    }
                }
            } else {
                Vec::new()
            };
            let Some(img) = try_prepare(&frame_path, problems) else {
                continue;
            };
            let (w, h) = (img.width, img.height);
            video
                .frames
                .push((index, PlanImage::new(img, MediaKind::VideoFrame)));
            for o in objects {
                let o = match o {
                    Ok(o) => o,
                    Err(reason) => {
                        problems.push(&xml_path, reason);
                        continue;
                    }
                };
                if let Err(reason) = check_box(o.xywh, w, h) {
                    problems.push(
                        &xml_path,
                        format!("object {}: {reason}; box refused", o.unique_id),
                    );
                    continue;
                }
                exam.polyp_mut(&o.unique_id);
                video.boxes.push(PlanBox {
                    frame_index: index,
                    xywh: o.xywh,
                    polyp: o.unique_id,
                });
            }
        }
        for p in exam.polyps.iter_mut() {
            match lesions.get(&p.code) {
                Some(Ok(l)) => {
                    p.size_mm = l.size_mm;
                    p.location = l.site.clone();
                    p.histology = l.histology.clone();
                    p.paris = l.paris.clone();
                }
                Some(Err(reason)) => problems.push(&lpath, reason.clone()),
                // Boxes under an id the lesion table lacks (a typo, or `<name>` standing in for
                // a missing `unique_id`) make a polyp of their own: said (round 9 N39).
                None if !lesions.is_empty() => problems.push(
                    &lpath,
                    format!(
                        "boxes name `{}`, which has no row here (a unique_id the table lacks, \
                         or a box without unique_id read by its name): imported as a polyp of \
                         its own, without pathology",
                        p.code
                    ),
                ),
                None => {}
            }
        }
        video.frames.sort_by_key(|(i, _)| *i);
        exam.videos.push(video);
        plan.exams.push(exam);
    }
    // A lesion row no box refers to describes a polyp the import does not make: named, not
    // passed over (round 7 N32).
    let boxed: std::collections::HashSet<&str> = plan
        .exams
        .iter()
        .flat_map(|e| e.polyps.iter().map(|p| p.code.as_str()))
        .collect();
    let mut unboxed: Vec<&String> = lesions
        .keys()
        .filter(|k| !boxed.contains(k.as_str()))
        .collect();
    unboxed.sort();
    if let Some(first) = unboxed.first() {
        problems.push(
            &lpath,
            format!(
                "{} lesion(s) with no box in any imported frame, first {first}: their rows \
                 are not imported",
                unboxed.len()
            ),
        );
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn voc_objects_are_read_with_their_identity_and_box() {
        let xml = "<annotation><filename>001-001_12.jpg</filename><object><name>lesion</name>\
            <unique_id>001-001_1</unique_id><bndbox><xmin>10</xmin><ymin>20</ymin><xmax>50</xmax><ymax>80</ymax></bndbox>\
            </object></annotation>";
        assert_eq!(
            parse_voc(xml).unwrap(),
            vec![Ok(VocObject {
                unique_id: "001-001_1".into(),
                xywh: [10.0, 20.0, 40.0, 60.0]
            })]
        );
        assert!(parse_voc("<annotation><object><name>x</name>").is_err());
        assert_eq!(frame_number("001-001_1234"), Some(1234));
    }
}
