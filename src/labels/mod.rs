//! The library's polyp labels out to a file and back in: a CSV a researcher can edit in a
//! spreadsheet, and an import that lists what it would change and changes it only when told,
//! each change through the audited label path. Exporting and importing again changes nothing.
//!
//! Columns: `polyp` (its code), then [`POLYP_KEYS`]; an empty cell is "no value" (importing
//! it clears the label), a missing column leaves that label alone.
//!
//! The same labels as EndoFinder-style JSONL (multi-view sets), one polyp per line:
//! `{"polyp": CODE, "views": [files...], "labels": {KEY: VALUE or null}}`; a key absent from
//! `labels` leaves that label alone, `null` clears it; `views` is for the reader (the library's
//! stored file of each view, relative to the library) and is not imported.

pub mod coco;

use crate::store::{Store, StoreError, TargetKind};

/// The polyp labels the CSV carries, in column order.
pub const POLYP_KEYS: [&str; 10] = [
    "histology",
    "vienna_class",
    "paris",
    "location",
    "size_mm",
    "surface",
    "colour",
    "morphology",
    "size class",
    tags::KEY,
];

/// A polyp's tags (a reviewer's own groups: "teaching set", "ask pathology"): one label,
/// the tags sorted and joined by ", ".
pub mod tags {
    /// The polyp label key that holds them.
    pub const KEY: &str = "tags";

    /// `tag` trimmed, or why it is no tag.
    pub fn check(tag: &str) -> Result<String, String> {
        let t = tag.trim();
        if t.is_empty() {
            return Err("a tag needs some text".into());
        }
        if t.contains(',') || t.chars().any(char::is_control) {
            return Err(format!("tag '{t}': no commas or control characters"));
        }
        if t.chars().count() > 40 {
            return Err(format!("tag '{t}': at most 40 characters"));
        }
        Ok(t.to_string())
    }

    /// The tags of a label value.
    pub fn parse(value: Option<&str>) -> std::collections::BTreeSet<String> {
        value
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect()
    }

    /// The label value with `tag` added (or removed); `None` when no tag is left.
    pub fn with(value: Option<&str>, tag: &str, add: bool) -> Option<String> {
        let mut all = parse(value);
        if add {
            all.insert(tag.to_string());
        } else {
            all.remove(tag);
        }
        (!all.is_empty()).then(|| all.into_iter().collect::<Vec<_>>().join(", "))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LabelsError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("not a labels CSV: {0}")]
    Format(String),
    #[error("not a labels JSONL: {0}")]
    Jsonl(String),
    #[error("not a labels COCO JSON: {0}")]
    Coco(String),
}

/// What a change is made to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ChangeKind {
    /// A polyp's label `key` (`polyp_id` is the polyp).
    #[default]
    Polyp,
    /// An image's label `key`: a frame's "polyp / no polyp", a still image's drawn polyp
    /// box (`polyp_id` is the image's media id).
    Frame,
    /// Which polyp a tracklet shows (`polyp_id` is the tracklet; values are polyp codes).
    Tracklet,
    /// Where a video box is (`polyp_id` is the box's id; values are `x,y,w,h`).
    VideoBox,
    /// An image's caption, the raw finding (`polyp_id` is the image's media id); refined when
    /// applied.
    Caption,
}

/// One label the file gives differently from the library.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub kind: ChangeKind,
    /// The polyp's id, or the frame's media id, or the tracklet's id (see `kind`).
    pub polyp_id: i64,
    /// What it is called: the polyp's code, the frame's file, "tracklet N".
    pub polyp: String,
    pub key: String,
    pub old: Option<String>,
    pub new: Option<String>,
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "(none)".into());
        write!(
            f,
            "{} {}: {} -> {}",
            self.polyp,
            self.key,
            show(&self.old),
            show(&self.new)
        )
    }
}

/// A CSV cell as it is written out: a value a spreadsheet would run as a formula (it begins
/// with `=`, `+`, `-`, `@`, a tab or a carriage return) gets a leading `'` (OWASP's rule for
/// CSV injection), and so does a value that already looks like such an escaped cell, so that
/// [`csv_cell_in`] reads every cell back to exactly the value written.
pub fn csv_cell_out(value: &str) -> std::borrow::Cow<'_, str> {
    if needs_quote_mark(value) {
        format!("'{value}").into()
    } else {
        value.into()
    }
}

/// A CSV cell as it is read in: undoes [`csv_cell_out`]. A cell that no export escaped (a
/// value beginning with `'` followed by anything else) is read as it is.
pub fn csv_cell_in(cell: &str) -> &str {
    match cell.strip_prefix('\'') {
        Some(rest) if needs_quote_mark(rest) => rest,
        _ => cell,
    }
}

fn needs_quote_mark(value: &str) -> bool {
    match value.chars().next() {
        Some('=' | '+' | '-' | '@' | '\t' | '\r') => true,
        Some('\'') => needs_quote_mark(&value[1..]),
        _ => false,
    }
}

/// Every polyp's labels as CSV, polyps in code order.
pub fn export_csv(store: &Store) -> Result<String, LabelsError> {
    export_csv_of(store, None)
}

/// [`export_csv`] of the polyps in `only` (ids), or of every polyp.
pub fn export_csv_of(store: &Store, only: Option<&[i64]>) -> Result<String, LabelsError> {
    let mut out = csv::Writer::from_writer(Vec::new());
    let header: Vec<&str> = std::iter::once("polyp").chain(POLYP_KEYS).collect();
    let csv_error = |e: csv::Error| LabelsError::Format(e.to_string());
    out.write_record(&header).map_err(csv_error)?;
    let mut polyps = store.polyps()?;
    polyps.retain(|p| only.is_none_or(|ids| ids.contains(&p.id)));
    polyps.sort_by(|a, b| a.code.cmp(&b.code));
    for p in polyps {
        let mut row = vec![csv_cell_out(&p.code).into_owned()];
        for key in POLYP_KEYS {
            let value = store
                .current_label(TargetKind::Polyp, p.id, key)?
                .unwrap_or_default();
            row.push(csv_cell_out(&value).into_owned());
        }
        out.write_record(&row).map_err(csv_error)?;
    }
    let bytes = out
        .into_inner()
        .map_err(|e| LabelsError::Format(e.to_string()))?;
    Ok(String::from_utf8(bytes).expect("CSV of UTF-8 values"))
}

/// What importing `text` would change, and the rows it cannot use (named by line).
pub fn diff_csv(store: &Store, text: &str) -> Result<(Vec<Change>, Vec<String>), LabelsError> {
    // Windows (CRLF) and old Mac (CR) line ends read as one line end each, so rows are named
    // by the lines an editor shows (round 13 N7: one line too low, or further off).
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let header: Vec<String> = reader
        .headers()
        .map_err(|e| LabelsError::Format(e.to_string()))?
        .iter()
        .map(|h| h.trim().to_string())
        .collect();
    if let Some(twice) = crate::store::duplicate_column(header.iter().map(String::as_str)) {
        return Err(LabelsError::Format(format!(
            "the column `{twice}` is given twice; which one holds the label is unclear, so nothing is imported"
        )));
    }
    if header.first().map(String::as_str) != Some("polyp") {
        return Err(LabelsError::Format(
            "the first column must be `polyp` (the polyp's code)".into(),
        ));
    }
    for h in &header[1..] {
        if !POLYP_KEYS.contains(&h.as_str()) {
            return Err(LabelsError::Format(format!(
                "unknown column `{h}`; the columns are polyp, {}",
                POLYP_KEYS.join(", ")
            )));
        }
    }
    let mut rows = Vec::new();
    let mut problems = Vec::new();
    for (n, record) in reader.records().enumerate() {
        // The line the record starts on in the file (blank lines are skipped by the reader:
        // counting records gave wrong line numbers, round 7 N66).
        let position = match &record {
            Ok(r) => r.position().cloned(),
            Err(e) => e.position().cloned(),
        };
        let line = position.map_or(n + 2, |p| p.line() as usize);
        match record {
            Ok(r) => rows.push(Row {
                line,
                polyp: csv_cell_in(r.get(0).unwrap_or("").trim()).to_string(),
                cells: header[1..]
                    .iter()
                    .zip(r.iter().skip(1))
                    .map(|(k, c)| {
                        (
                            k.clone(),
                            Some(csv_cell_in(c.trim()).to_string()).filter(|v| !v.is_empty()),
                        )
                    })
                    .collect(),
            }),
            Err(e) => {
                // The reader's own words without its record and byte count (the line is above).
                let why = match e.kind() {
                    csv::ErrorKind::UnequalLengths {
                        expected_len, len, ..
                    } => format!(
                        "{len} fields where the header has {expected_len}; the line is not used"
                    ),
                    _ => e.to_string(),
                };
                problems.push(format!("line {line}: {why}"))
            }
        }
    }
    let (changes, more) = diff_rows(store, rows)?;
    problems.extend(more);
    Ok((changes, problems))
}

/// One polyp's labels as a file gives them: (key, value or none) for the keys it carries.
struct Row {
    line: usize,
    polyp: String,
    cells: Vec<(String, Option<String>)>,
}

/// The changes `rows` would make, and the rows or cells they cannot use (named by line).
fn diff_rows(store: &Store, rows: Vec<Row>) -> Result<(Vec<Change>, Vec<String>), LabelsError> {
    let by_code: std::collections::HashMap<String, i64> = store
        .polyps()?
        .into_iter()
        .map(|p| (p.code, p.id))
        .collect();
    let (mut changes, mut problems) = (Vec::new(), Vec::new());
    // A polyp on two lines: which one holds its labels is unclear, so neither is used (the
    // first line used to win with a warning, MINOR 6), as the importers refuse such a polyp.
    let mut lines_of: std::collections::HashMap<&str, Vec<usize>> = Default::default();
    for r in &rows {
        lines_of.entry(r.polyp.as_str()).or_default().push(r.line);
    }
    let twice: std::collections::HashMap<String, Vec<usize>> = lines_of
        .into_iter()
        .filter(|(_, lines)| lines.len() > 1)
        .map(|(code, lines)| (code.to_string(), lines))
        .collect();
    let mut told = std::collections::HashSet::new();
    for Row {
        line,
        polyp: code,
        cells,
    } in rows
    {
        let Some(&id) = by_code.get(&code) else {
            problems.push(format!("line {line}: no polyp `{code}` in the library"));
            continue;
        };
        if let Some(lines) = twice.get(&code) {
            if told.insert(code.clone()) {
                let lines: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
                problems.push(format!(
                    "polyp `{code}` is on lines {}: which one holds its labels is unclear, so none of them is used",
                    lines.join(", ")
                ));
            }
            continue;
        }
        // A line with one value that cannot be used is not used at all (round 6 N68: the
        // size of a line whose histology was refused was applied): the line is one record
        // of one polyp, and half of it is not what its author wrote.
        let refused: Vec<String> = cells
            .iter()
            .filter_map(|(key, new)| {
                let reason = new.as_deref().and_then(|v| invalid(key, v))?;
                Some(format!("{key}: {reason}"))
            })
            .collect();
        if !refused.is_empty() {
            problems.push(format!(
                "line {line}, polyp `{code}`, {}; the line is not used (none of its labels)",
                refused.join("; ")
            ));
            continue;
        }
        if let Some(why) = contradiction(store, id, &cells)? {
            problems.push(format!(
                "line {line}, polyp `{code}`, {why}; the line is not used (none of its labels)"
            ));
            continue;
        }
        for (key, new) in cells {
            // Tags in any order or spacing are the same tags; a vocabulary term in any case
            // is the vocabulary's term.
            let new = if key == tags::KEY {
                new.as_deref().and_then(|v| tags::with(Some(v), "", false))
            } else {
                new.map(|v| crate::store::canonical_label_value(&key, &v))
            };
            let old = store.current_label(TargetKind::Polyp, id, &key)?;
            if old != new {
                changes.push(Change {
                    kind: ChangeKind::Polyp,
                    polyp_id: id,
                    polyp: code.clone(),
                    key,
                    old,
                    new,
                });
            }
        }
    }
    Ok((changes, problems))
}

/// Every polyp's labels and views as JSONL, one polyp per line in code order.
pub fn export_jsonl(store: &Store) -> Result<String, LabelsError> {
    let mut polyps = store.polyps()?;
    polyps.sort_by(|a, b| a.code.cmp(&b.code));
    let mut out = String::new();
    for p in polyps {
        let mut labels = serde_json::Map::new();
        for key in POLYP_KEYS {
            let value = store.current_label(TargetKind::Polyp, p.id, key)?;
            labels.insert(
                key.to_string(),
                value.map_or(serde_json::Value::Null, Into::into),
            );
        }
        let views: Vec<String> = store
            .polyp_views(p.id)?
            .into_iter()
            .map(|m| m.rel_path)
            .collect();
        let line = serde_json::json!({ "polyp": p.code, "views": views, "labels": labels });
        out.push_str(&line.to_string());
        out.push('\n');
    }
    Ok(out)
}

/// What importing JSONL `text` would change, and the lines it cannot use (named by line).
pub fn diff_jsonl(store: &Store, text: &str) -> Result<(Vec<Change>, Vec<String>), LabelsError> {
    let (mut rows, mut problems) = (Vec::new(), Vec::new());
    let ids: std::collections::HashMap<String, i64> = store
        .polyps()?
        .into_iter()
        .map(|p| (p.code, p.id))
        .collect();
    // Each polyp's views (sorted) -> its code, made at the first line whose views differ.
    let mut owners: Option<std::collections::HashMap<Vec<String>, String>> = None;
    for (n, raw) in text.lines().enumerate() {
        let line = n + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value = match serde_json::from_str(raw) {
            Ok(v) => v,
            Err(e) => {
                // serde says "at line 1 column C" of the one line it read: the column alone.
                let why = e.to_string();
                let why = why.split(" at line ").next().unwrap_or(&why);
                problems.push(format!("line {line}, column {}: {why}", e.column()));
                continue;
            }
        };
        // A label given twice in one object: JSON keeps the last without a word, as a CSV
        // with a doubled column would not (it is refused as unclear).
        if let Some(what) = twice_given_label(raw) {
            problems.push(format!(
                "line {line}: {what} is given twice; the line is not used"
            ));
            continue;
        }
        let Some(polyp) = value.get("polyp").and_then(|p| p.as_str()) else {
            problems.push(format!("line {line}: no \"polyp\" code"));
            continue;
        };
        // A key beside "polyp", "views" and "labels" is not read: a label put there would be
        // dropped without a word (round 8 N19).
        if let Some(key) = value.as_object().and_then(|o| {
            o.keys()
                .find(|k| !["polyp", "views", "labels"].contains(&k.as_str()))
        }) {
            let hint = match POLYP_KEYS.contains(&key.as_str()) {
                true => format!(" (a label goes under \"labels\": {{\"{key}\": ...}})"),
                false => String::new(),
            };
            return Err(LabelsError::Jsonl(format!(
                "line {line}: the key `{key}` is not read{hint}; a line holds \"polyp\", \
                 \"views\" and \"labels\"; nothing was changed"
            )));
        }
        // "views" is what the export wrote, for the reader: labels import never changes a
        // polyp's views. Something else there is a line edited by hand (round 9 N36).
        if let Some(views) = value.get("views")
            && !views
                .as_array()
                .is_some_and(|v| v.iter().all(serde_json::Value::is_string))
        {
            problems.push(format!(
                "line {line}, polyp `{}`: \"views\" is not a list of file names (it lists the \
                 views the export found; labels import never changes a polyp's views); the line \
                 is not used",
                polyp.trim()
            ));
            continue;
        }
        // Views that are not the library's make the line another polyp's, or of an older
        // export, or edited by hand: not used, and said (round 14 N16: "no changes" made a
        // user who moved views between polyps believe the library matched the file; round 17
        // N10: two lines whose codes were swapped were applied, each with the other's views).
        if let Some(views) = value.get("views").and_then(|v| v.as_array())
            && let Some(id) = ids.get(polyp.trim())
        {
            let given: Vec<&str> = views.iter().filter_map(|v| v.as_str()).collect();
            let views_of = |id: i64| -> Result<Vec<String>, LabelsError> {
                Ok(store
                    .polyp_views(id)?
                    .into_iter()
                    .map(|m| m.rel_path)
                    .collect())
            };
            let held = views_of(*id)?;
            if given != held.iter().map(String::as_str).collect::<Vec<_>>() {
                let mut sorted: Vec<String> = given.iter().map(|v| v.to_string()).collect();
                sorted.sort_unstable();
                // Every polyp's views, read once at the first line that differs.
                if owners.is_none() {
                    let mut map = std::collections::HashMap::new();
                    for (code, other) in &ids {
                        let mut theirs = views_of(*other)?;
                        theirs.sort_unstable();
                        if !theirs.is_empty() {
                            map.insert(theirs, code.clone());
                        }
                    }
                    owners = Some(map);
                }
                let owner = owners
                    .as_ref()
                    .and_then(|m| m.get(&sorted))
                    .filter(|code| code.as_str() != polyp.trim());
                let whose = match owner {
                    Some(code) => {
                        format!("; the views listed are polyp `{code}`'s: were the codes swapped?")
                    }
                    None => String::new(),
                };
                problems.push(format!(
                    "line {line}, polyp `{}`: \"views\" differs from the library's ({} listed, \
                     {} held){whose}; the line is not used (none of its labels: labels import \
                     never changes a polyp's views; export again for the library's)",
                    polyp.trim(),
                    given.len(),
                    held.len()
                ));
                continue;
            }
        }
        let mut cells = Vec::new();
        let mut unusable = false;
        if let Some(labels) = value.get("labels").and_then(|l| l.as_object()) {
            for (key, v) in labels {
                if !POLYP_KEYS.contains(&key.as_str()) {
                    return Err(LabelsError::Jsonl(format!(
                        "line {line}: unknown label `{key}`; the labels are {}",
                        POLYP_KEYS.join(", ")
                    )));
                }
                let v = match v {
                    serde_json::Value::Null => None,
                    serde_json::Value::String(s) => Some(s.trim().to_string()),
                    serde_json::Value::Number(n) => Some(n.to_string()),
                    other => {
                        unusable = true;
                        problems.push(format!(
                            "line {line}, polyp `{}`, {key}: {} is not a label value (text, a number or null); the line is not used (none of its labels)",
                            polyp.trim(),
                            match other {
                                serde_json::Value::Object(_) => "a JSON object",
                                serde_json::Value::Array(_) => "a JSON list",
                                _ => "true or false",
                            }
                        ));
                        continue;
                    }
                };
                cells.push((key.clone(), v.filter(|s| !s.is_empty())));
            }
        }
        if unusable {
            continue;
        }
        rows.push(Row {
            line,
            polyp: polyp.trim().to_string(),
            cells,
        });
    }
    if rows.is_empty() && !problems.is_empty() {
        return Err(LabelsError::Jsonl(problems.remove(0)));
    }
    let (changes, more) = diff_rows(store, rows)?;
    problems.extend(more);
    Ok((changes, problems))
}

/// The first key given twice in the `labels` object of one JSONL line, if any.
fn twice_given_label(raw: &str) -> Option<String> {
    struct Keys(Vec<String>);
    impl<'de> serde::Deserialize<'de> for Keys {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Keys, D::Error> {
            struct Visit;
            impl<'de> serde::de::Visitor<'de> for Visit {
                type Value = Keys;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut m: A,
                ) -> Result<Keys, A::Error> {
                    let mut keys = Vec::new();
                    while let Some((k, _)) = m.next_entry::<String, serde::de::IgnoredAny>()? {
                        keys.push(k);
                    }
                    Ok(Keys(keys))
                }
            }
            d.deserialize_map(Visit)
        }
    }
    #[derive(serde::Deserialize)]
    struct Line {
        labels: Option<Keys>,
    }
    let twice = |keys: &[String]| {
        keys.iter()
            .enumerate()
            .find(|(i, k)| keys[..*i].contains(k))
            .map(|(_, k)| k.clone())
    };
    // The line's own keys first (round 11 N12: two "polyp" codes, the last one changed).
    let top = serde_json::from_str::<Keys>(raw).ok()?.0;
    if let Some(key) = twice(&top) {
        return Some(format!("the key `{key}`"));
    }
    let keys = serde_json::from_str::<Line>(raw).ok()?.labels?.0;
    twice(&keys).map(|k| format!("the label `{k}`"))
}

/// [`coco::diff`] for a COCO JSON file (a single object with `images`), [`diff_jsonl`] for a
/// JSONL file (its first non-blank character `{`, one object a line), else [`diff_csv`].
pub fn diff_file(store: &Store, text: &str) -> Result<(Vec<Change>, Vec<String>), LabelsError> {
    // A byte order mark (as some editors save UTF-8) is no content (MINOR 7: a JSONL file
    // that began with one was read as a CSV and refused).
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    let trimmed = text.trim_start();
    let first_line_is_object = trimmed
        .lines()
        .next()
        .is_some_and(|l| serde_json::from_str::<serde_json::Value>(l).is_ok_and(|v| v.is_object()));
    if trimmed.starts_with('{') && coco::looks_like(trimmed) {
        coco::diff(store, text)
    } else if trimmed.starts_with('{') && !first_line_is_object && !every_line_an_object(trimmed) {
        // One JSON document (not one object a line) that does not parse: a broken COCO file.
        let why = serde_json::from_str::<serde_json::Value>(trimmed)
            .err()
            .map_or("a JSON object without `images`".into(), |e| e.to_string());
        Err(LabelsError::Coco(why))
    } else if trimmed.starts_with('{') {
        diff_jsonl(store, text)
    } else {
        diff_csv(store, text)
    }
}

/// Whether every non-blank line starts with `{` and ends with `}` (one object a line): a
/// JSONL file whose first line is broken, not a broken COCO document.
fn every_line_an_object(text: &str) -> bool {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    lines.all(|l| l.starts_with('{') && l.ends_with('}'))
}

/// Why `value` cannot be label `key`, if it cannot (checked before anything is applied):
/// the store's rule for every label value ([`crate::store::check_label_value`]), and the
/// tags' own.
fn invalid(key: &str, value: &str) -> Option<String> {
    crate::store::check_label_value(key, value).or_else(|| match key {
        tags::KEY => tags::parse(Some(value))
            .iter()
            .find_map(|t| tags::check(t).err()),
        _ => None,
    })
}

/// The values of `a` and `b` a polyp would have after a line, when the line changes either
/// (a cell the line leaves out is the stored value), each with whether the line gave it;
/// `None` when it changes neither or one of the two would be unset.
fn pair_after_line(
    store: &Store,
    id: i64,
    cells: &[(String, Option<String>)],
    (a, b): (&str, &str),
) -> Result<Option<(Given, Given)>, LabelsError> {
    let cell = |key: &str| cells.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
    let (a_cell, b_cell) = (cell(a), cell(b));
    let stored_a = store.current_label(TargetKind::Polyp, id, a)?;
    let stored_b = store.current_label(TargetKind::Polyp, id, b)?;
    let same = |new: &Option<Option<String>>, old: &Option<String>, key: &str| match new {
        None => true,
        Some(v) => {
            v.as_deref()
                .map(|v| crate::store::canonical_label_value(key, v))
                == *old
        }
    };
    if same(&a_cell, &stored_a, a) && same(&b_cell, &stored_b, b) {
        return Ok(None);
    }
    let after = |cell: Option<Option<String>>, stored: Option<String>| match cell {
        Some(v) => v.map(|v| Given {
            value: v,
            on_line: true,
        }),
        None => stored.map(|v| Given {
            value: v,
            on_line: false,
        }),
    };
    Ok(after(a_cell, stored_a).zip(after(b_cell, stored_b)))
}

/// A label's value after a line, and whether the line gave it (else the library holds it).
struct Given {
    value: String,
    on_line: bool,
}

impl Given {
    /// `key value` as a refusal names it: "the stored ..." when the line left it out (round 17
    /// R9: a stored Vienna class read as if the file gave it).
    fn named(&self, key: &str, shown: &str) -> String {
        match self.on_line {
            true => format!("{key} {shown}"),
            false => format!("the stored {key} {shown}"),
        }
    }
}

/// Why a line cannot be used, when it changes two labels that would then contradict each
/// other: a size and its size class (round 13 N18: `small` beside 25 mm was stored without a
/// word), a histology and its Vienna class (round 16 N4: carcinoma beside Vienna 1). Both ways
/// (round 15 N2: a size alone that contradicted the stored class was applied, a 3 mm polyp
/// left "large"): the line gives the two together.
fn contradiction(
    store: &Store,
    id: i64,
    cells: &[(String, Option<String>)],
) -> Result<Option<String>, LabelsError> {
    if let Some((mm, class)) = pair_after_line(store, id, cells, ("size_mm", "size class"))?
        && let Ok(size) = mm.value.trim().parse::<f64>()
    {
        let fits = crate::store::size_class_of(size);
        if !fits.eq_ignore_ascii_case(class.value.trim()) {
            let (m, c) = (mm.value.trim(), class.value.trim());
            return Ok(Some(format!(
                "{} contradicts {} (a polyp of {m} mm is {fits}; give the two together)",
                class.named("size class", &format!("'{c}'")),
                mm.named("size_mm", m),
            )));
        }
    }
    if let Some((histology, vienna)) =
        pair_after_line(store, id, cells, ("histology", "vienna_class"))?
        && let Ok(v) = vienna.value.trim().parse::<i64>()
        && let Some(misfit) = crate::store::vienna_misfit(&histology.value, v)
    {
        let term = crate::store::canonical_label_value("histology", &histology.value);
        return Ok(Some(format!(
            "{} and {} contradict each other ({misfit}; give the two together)",
            histology.named("histology", &format!("'{term}'")),
            vienna.named("vienna_class", &v.to_string()),
        )));
    }
    Ok(None)
}

/// A video box's place as a change carries it (`x,y,w,h`).
fn parse_box(text: &str) -> Option<[f64; 4]> {
    let p: Vec<f64> = text.split(',').filter_map(|x| x.parse().ok()).collect();
    p.try_into().ok()
}

/// Applies `changes` (from a diff, so already checked), each one audited transaction
/// signed `who`.
pub fn apply(store: &mut Store, who: &str, changes: &[Change]) -> Result<usize, LabelsError> {
    let codes: std::collections::HashMap<String, i64> = store
        .polyps()?
        .into_iter()
        .map(|p| (p.code, p.id))
        .collect();
    // A label someone else changed since the preview was read is not written over: every
    // change (labels, captions, tracklets' polyps, video boxes) is checked against the value
    // the preview showed first (nothing is applied when one differs), then written only if
    // its version is still the one read (#46: captions, tracklets and boxes were not).
    let box_text = |b: [f64; 4]| format!("{},{},{},{}", b[0], b[1], b[2], b[3]);
    let mut read = Vec::with_capacity(changes.len());
    let mut moved = Vec::new();
    for c in changes {
        let (version, now) = match c.kind {
            ChangeKind::Polyp | ChangeKind::Frame => {
                let target = match c.kind {
                    ChangeKind::Polyp => TargetKind::Polyp,
                    _ => TargetKind::Media,
                };
                (
                    store.label_version(target, c.polyp_id, &c.key)?,
                    store.current_label(target, c.polyp_id, &c.key)?,
                )
            }
            ChangeKind::Caption => (
                store.label_version(TargetKind::Media, c.polyp_id, "caption")?,
                store.caption(c.polyp_id)?,
            ),
            ChangeKind::Tracklet => (
                store.tracklet_version(c.polyp_id)?,
                store.tracklet_polyp_code(c.polyp_id)?,
            ),
            // A box has no version of its own: its place is checked again under the lock.
            ChangeKind::VideoBox => (0, store.box_place(c.polyp_id)?.map(box_text)),
        };
        let same = match c.kind {
            ChangeKind::VideoBox => {
                let place = |v: &Option<String>| v.as_deref().and_then(parse_box);
                match (place(&now), place(&c.old)) {
                    (Some(a), Some(b)) => a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 1e-3),
                    (a, b) => a == b,
                }
            }
            _ => now == c.old,
        };
        if !same {
            let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "(none)".into());
            moved.push(format!(
                "{} {}: the preview read {}, it is now {}",
                c.polyp,
                c.key,
                show(&c.old),
                show(&now)
            ));
        }
        read.push(Some(version));
    }
    if !moved.is_empty() {
        return Err(LabelsError::Store(StoreError::Conflict {
            target: format!("{} label(s)", moved.len()),
            key: "of this import".into(),
            changes: format!("another writer ({})", moved.join("; ")),
        }));
    }
    for (c, read) in changes.iter().zip(read) {
        match c.kind {
            ChangeKind::Polyp => {
                store.set_label_as_read(
                    who,
                    TargetKind::Polyp,
                    c.polyp_id,
                    &c.key,
                    c.new.as_deref(),
                    read,
                )?;
            }
            ChangeKind::Frame => {
                store.set_label_as_read(
                    who,
                    TargetKind::Media,
                    c.polyp_id,
                    &c.key,
                    c.new.as_deref(),
                    read,
                )?;
            }
            ChangeKind::Tracklet => {
                let polyp = c.new.as_ref().and_then(|code| codes.get(code).copied());
                store.assign_tracklet_as_read(who, c.polyp_id, polyp, read)?;
            }
            ChangeKind::VideoBox => {
                let Some(b) = c.new.as_deref().and_then(parse_box) else {
                    return Err(LabelsError::Format(format!("{c}: not x,y,w,h")));
                };
                let was = c.old.as_deref().and_then(parse_box);
                store.move_box_as_read(who, c.polyp_id, b, was)?;
            }
            ChangeKind::Caption => {
                let refined = c
                    .new
                    .as_deref()
                    .map(|text| crate::data::refine::Refiner::shipped().refine(text));
                let caption = c.new.as_deref().map(|text| {
                    (
                        text,
                        refined
                            .as_ref()
                            .map(|r| (r.caption.as_str(), r.category.as_str())),
                    )
                });
                store.correct_caption_as_read(who, c.polyp_id, caption, read)?;
            }
        }
    }
    Ok(changes.len())
}
