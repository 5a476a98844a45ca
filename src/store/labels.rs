//! Labels with an append-only audit log: each change is one transaction writing the new value
//! and one audit row (who, when, old value, new value).

use super::db::{Connection, OptionalExtension, Transaction, Value, params};
use super::{Result, Store, StoreError, now_utc};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TargetKind {
    Polyp,
    Media,
    Tracklet,
    Video,
}

impl TargetKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TargetKind::Polyp => "polyp",
            TargetKind::Media => "media",
            TargetKind::Tracklet => "tracklet",
            TargetKind::Video => "video",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Label {
    pub key: String,
    pub value: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AuditEntry {
    pub id: i64,
    pub key: String,
    pub who: String,
    pub at: String,
    pub old_value: Option<String>,
    pub new_value: Option<String>,
}

/// Which audit rows of the whole library to list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AuditFilter {
    /// Only this reviewer's changes.
    pub who: Option<String>,
    /// Only changes at or after this UTC time (`2026-11-25` or `2026-11-25T10:00:00Z`).
    pub since: Option<String>,
    /// Only changes before this UTC time (a bare date means before that day ends).
    pub until: Option<String>,
    /// At most this many rows, newest first.
    pub limit: usize,
}

/// A label change as written: the value it replaced and the label's version now.
#[derive(Debug, Clone, PartialEq)]
pub struct LabelWritten {
    pub old: Option<String>,
    /// The id of the label's latest audit row ([`Store::label_version`]).
    pub version: i64,
}

/// One change anywhere in the library, with what it changed.
#[derive(Debug, Clone, PartialEq)]
pub struct LibraryAudit {
    pub entry: AuditEntry,
    pub target: TargetKind,
    pub target_id: i64,
    /// The polyp's or video's code, the medium's file, or the tracklet's number.
    pub target_name: String,
}

/// The media label key of a polyp box drawn on a library view (`x,y,w,h` in pixels of the
/// full-size image): the twin encoders crop around it instead of the mask's box.
pub const VIEW_BOX_KEY: &str = "polyp_box";

/// A view box as its label value: `x,y,w,h`, whole pixels.
pub fn format_view_box(b: [f32; 4]) -> String {
    format!(
        "{},{},{},{}",
        b[0].round(),
        b[1].round(),
        b[2].round(),
        b[3].round()
    )
}

/// A view box label value back (`None` when it is not four numbers with a positive size).
pub fn parse_view_box(value: &str) -> Option<[f32; 4]> {
    let parts: Vec<f32> = value
        .split(',')
        .map(|p| p.trim().parse::<f32>())
        .collect::<std::result::Result<_, _>>()
        .ok()?;
    let b: [f32; 4] = parts.try_into().ok()?;
    (b.iter().all(|v| v.is_finite()) && b[0] >= 0.0 && b[1] >= 0.0 && b[2] >= 1.0 && b[3] >= 1.0)
        .then_some(b)
}

/// Polyp label keys that are the polyp's pathology: writing them updates the pathology table
/// too, so filters and votes see the corrected value.
const PATHOLOGY_KEYS: [&str; 2] = ["histology", "vienna_class"];

/// Polyp label keys that are columns of the polyp itself: writing them updates the column
/// too, so the browser, filters and details see the corrected value.
const POLYP_COLUMN_KEYS: [&str; 3] = ["paris", "location", "size_mm"];

/// Polyp label keys that are clinical attributes (the `attributes` table, which the details
/// panel shows and the importers fill): writing them updates the attribute too.
const ATTRIBUTE_KEYS: [&str; 4] = ["surface", "colour", "morphology", "size class"];

impl Store {
    /// Sets (or, with `None`, clears) a label and appends its audit row, in one transaction.
    /// Returns the previous value. Setting the value it already has writes nothing.
    pub fn set_label(
        &mut self,
        who: &str,
        target: TargetKind,
        target_id: i64,
        key: &str,
        value: Option<&str>,
    ) -> Result<Option<String>> {
        self.set_label_as_read(who, target, target_id, key, value, None)
    }

    /// [`Store::set_label`] by a reviewer who read the label at version `read`
    /// ([`Store::label_version`]): when someone else changed it since, nothing is written and
    /// [`StoreError::Conflict`] says who changed it, when, and from what to what. `None`
    /// changes it whatever happened since.
    pub fn set_label_as_read(
        &mut self,
        who: &str,
        target: TargetKind,
        target_id: i64,
        key: &str,
        value: Option<&str>,
        read: Option<i64>,
    ) -> Result<Option<String>> {
        self.change_label(who, target, target_id, key, value, read)
            .map(|w| w.old)
    }

    /// [`Store::set_label_as_read`], also saying the label's version once it is written (the
    /// id of this change's audit row, or the version it had when nothing changed): the version
    /// a station holds after its own edit, e.g. to undo it without overwriting a later one.
    pub fn change_label(
        &mut self,
        who: &str,
        target: TargetKind,
        target_id: i64,
        key: &str,
        value: Option<&str>,
        read: Option<i64>,
    ) -> Result<LabelWritten> {
        check_reviewer(who)?;
        // A vocabulary term in any case is stored as the vocabulary spells it.
        let canonical = value.map(|v| super::values::canonical_label_value(key, v));
        let value = canonical.as_deref();
        let old = self.current_label(target, target_id, key)?;
        if old.as_deref() == value && read.is_none() {
            let version = self.label_version(target, target_id, key)?;
            return Ok(LabelWritten { old, version });
        }
        if let Some(v) = value
            && key != VIEW_BOX_KEY
            && let Some(why) = super::values::check_label_value(key, v)
        {
            return Err(StoreError::Invalid(format!("{key}: {why}")));
        }
        if target == TargetKind::Media
            && key == VIEW_BOX_KEY
            && let Some(v) = value
            && parse_view_box(v).is_none()
        {
            return Err(StoreError::Invalid(format!(
                "polyp box '{v}' is not x,y,w,h in pixels with a positive width and height"
            )));
        }
        let column = target == TargetKind::Polyp && POLYP_COLUMN_KEYS.contains(&key);
        if column
            && key == "size_mm"
            && let Some(v) = value
        {
            match v.trim().parse::<f64>() {
                Ok(mm) if mm > 0.0 && mm <= 300.0 => {}
                _ => {
                    return Err(StoreError::Invalid(format!(
                        "size '{v}' is not a size in millimetres (more than 0, at most 300)"
                    )));
                }
            }
        }
        self.write(|tx| -> Result<LabelWritten> {
            // Read again under the write lock: the audit row's old value is the one replaced.
            if let Some(read) = read {
                super::audit::check_unchanged(tx, target, target_id, key, read)?;
            }
            let old = label_value(tx, target, target_id, key)?;
            if old.as_deref() == value {
                let version = super::audit::label_version(tx, target, target_id, key)?;
                return Ok(LabelWritten { old, version });
            }
            match value {
                Some(v) => tx.execute(
                    "INSERT INTO labels(target_kind, target_id, key, value) VALUES (?1, ?2, ?3, ?4) ON CONFLICT (target_kind, target_id, key) DO UPDATE SET value = excluded.value",
                    params![target.as_str(), target_id, key, v],
                )?,
                None => tx.execute(
                    "DELETE FROM labels WHERE target_kind = ?1 AND target_id = ?2 AND key = ?3",
                    params![target.as_str(), target_id, key],
                )?,
            };
            if target == TargetKind::Polyp && PATHOLOGY_KEYS.contains(&key) {
                let histology = if key == "histology" { value } else { None };
                tx.execute(
                    "INSERT INTO pathology(polyp_id, histology) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                    params![target_id, histology.unwrap_or("unknown")],
                )?;
                match key {
                    "histology" => tx.execute(
                        "UPDATE pathology SET histology = ?2 WHERE polyp_id = ?1",
                        params![target_id, value.unwrap_or("unknown")],
                    )?,
                    _ => {
                        let vienna = value.and_then(|v| v.parse::<i64>().ok());
                        tx.execute(
                            "UPDATE pathology SET vienna_class = ?2 WHERE polyp_id = ?1",
                            params![target_id, vienna],
                        )?
                    }
                };
            }
            if column {
                // `key` is one of three fixed column names, never user text.
                let sql = format!("UPDATE polyps SET {key} = ?2 WHERE id = ?1");
                match (key, value) {
                    ("size_mm", Some(v)) => tx.execute(
                        &sql,
                        params![target_id, v.trim().parse::<f64>().unwrap_or_default()],
                    )?,
                    _ => tx.execute(&sql, params![target_id, value])?,
                };
                // The pathology row's copy of the size follows (round 12 N17: a cleared size
                // came back from it in the twins table).
                if key == "size_mm" {
                    let mm = value.and_then(|v| v.trim().parse::<f64>().ok());
                    tx.execute(
                        "UPDATE pathology SET size_mm = ?2 WHERE polyp_id = ?1",
                        params![target_id, mm],
                    )?;
                }
            }
            if target == TargetKind::Polyp && ATTRIBUTE_KEYS.contains(&key) {
                match value {
                    Some(v) => tx.execute(
                        "INSERT INTO attributes(polyp_id, key, value) VALUES (?1, ?2, ?3) ON CONFLICT (polyp_id, key) DO UPDATE SET value = excluded.value",
                        params![target_id, key, v],
                    )?,
                    None => tx.execute(
                        "DELETE FROM attributes WHERE polyp_id = ?1 AND key = ?2",
                        params![target_id, key],
                    )?,
                };
            }
            audit(tx, target, target_id, key, who, old.as_deref(), value)?;
            let version = super::audit::label_version(tx, target, target_id, key)?;
            Ok(LabelWritten { old, version })
        })
    }

    /// The label's current value; for pathology keys of a polyp without a label, the imported
    /// pathology.
    pub fn current_label(
        &self,
        target: TargetKind,
        target_id: i64,
        key: &str,
    ) -> Result<Option<String>> {
        label_value(self.conn(), target, target_id, key)
    }

    pub fn labels(&self, target: TargetKind, target_id: i64) -> Result<Vec<Label>> {
        let mut stmt = self.conn().prepare(
            "SELECT key, value FROM labels WHERE target_kind = ?1 AND target_id = ?2 ORDER BY key",
        )?;
        let rows = stmt.query_map(params![target.as_str(), target_id], |r| {
            Ok(Label {
                key: r.get(0)?,
                value: r.get(1)?,
            })
        })?;
        rows.collect::<Result<_>>()
    }

    /// Every target of `target` kind with label `key`: (target id, value), by id.
    pub fn labels_with_key(&self, target: TargetKind, key: &str) -> Result<Vec<(i64, String)>> {
        let mut stmt = self.conn().prepare(
            "SELECT target_id, value FROM labels WHERE target_kind = ?1 AND key = ?2
             ORDER BY target_id",
        )?;
        let rows = stmt.query_map(params![target.as_str(), key], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
        rows.collect::<Result<_>>()
    }

    /// Corrects (or, with `None`, removes) the caption of image `media_id`: the raw finding
    /// with its refinement (caption label, category) and one audit row (key `caption`), in
    /// one transaction. Returns the previous finding. The same finding writes nothing.
    pub fn correct_caption(
        &mut self,
        who: &str,
        media_id: i64,
        caption: Option<(&str, Option<(&str, &str)>)>,
    ) -> Result<Option<String>> {
        self.correct_caption_as_read(who, media_id, caption, None)
    }

    /// [`Store::correct_caption`] by a reviewer who read the caption at version `read` (its
    /// [`Store::label_version`] under the key `caption`): when another station changed it
    /// since, nothing is written and [`StoreError::Conflict`] says who changed what.
    pub fn correct_caption_as_read(
        &mut self,
        who: &str,
        media_id: i64,
        caption: Option<(&str, Option<(&str, &str)>)>,
        read: Option<i64>,
    ) -> Result<Option<String>> {
        check_reviewer(who)?;
        if let Some((text, _)) = caption
            && text.trim().is_empty()
        {
            return Err(StoreError::Invalid(
                "an empty caption: remove it instead".into(),
            ));
        }
        let old = self.caption(media_id)?;
        let new = caption.map(|c| c.0);
        if old.as_deref() == new && read.is_none() {
            return Ok(old);
        }
        self.write(|tx| -> Result<()> {
            if let Some(read) = read {
                super::audit::check_unchanged(tx, TargetKind::Media, media_id, "caption", read)?;
            }
            let old: Option<String> = super::cases::caption_of(tx, media_id)?;
            if old.as_deref() == new {
                return Ok(());
            }
            match caption {
                Some((text, refined)) => super::set_caption(tx, media_id, text, refined)?,
                None => {
                    tx.execute("DELETE FROM captions WHERE media_id = ?1", [media_id])?;
                }
            }
            audit(
                tx,
                TargetKind::Media,
                media_id,
                "caption",
                who,
                old.as_deref(),
                new,
            )
        })?;
        Ok(old)
    }

    /// Every polyp box drawn on a library view, by media id.
    pub fn view_boxes(&self) -> Result<std::collections::HashMap<i64, [f32; 4]>> {
        Ok(self
            .labels_with_key(TargetKind::Media, VIEW_BOX_KEY)?
            .into_iter()
            .filter_map(|(id, v)| parse_view_box(&v).map(|b| (id, b)))
            .collect())
    }

    /// The polyp box drawn on view `media_id`, if any.
    pub fn view_box(&self, media_id: i64) -> Result<Option<[f32; 4]>> {
        Ok(self
            .current_label(TargetKind::Media, media_id, VIEW_BOX_KEY)?
            .and_then(|v| parse_view_box(&v)))
    }
}

/// The most characters a reviewer's name may have.
pub const MAX_REVIEWER_CHARS: usize = 64;

/// The prefix that marks an importer's audit rows; no person signs with it.
pub const IMPORTER_PREFIX: &str = "import:";

/// Refuses a reviewer name that could forge the audit trail or pass for another signer: it
/// must be one line of printable text (no control, line-breaking or bidirectional-override
/// characters, nothing invisible such as a soft hyphen or a Hangul filler), words separated
/// by single plain spaces with none before or after, at most [`MAX_REVIEWER_CHARS`]
/// characters, not blank, and not start with the importers' prefix in any form (NFKC and
/// case: `import：bob` with a fullwidth colon is `import:bob`).
pub fn check_reviewer(who: &str) -> Result<()> {
    let refuse = |why: &str| {
        Err(StoreError::Invalid(format!(
            "reviewer name {who:?}: {why}; a reviewer signs with one line of printable text"
        )))
    };
    if who.trim().is_empty() {
        return Err(StoreError::Invalid(
            "a label change needs the name of who makes it".into(),
        ));
    }
    if let Some(c) = who
        .chars()
        .find(|&c| !super::values::is_printable(c) || super::values::is_default_ignorable(c))
    {
        return refuse(&format!(
            "it holds the character U+{:04X}, which shows as nothing or breaks the line",
            c as u32
        ));
    }
    // Look-alikes of a plain name: `Ａlice` (fullwidth) for `Alice`, `al\u{301}ice` (a
    // combining accent) for a letter that has its own code point.
    if let Some(c) = who.chars().find(|&c| {
        let u = c as u32;
        (0xFF01..=0xFFEE).contains(&u)
            || (0x0300..=0x036F).contains(&u)
            || (0x1AB0..=0x1AFF).contains(&u)
            || (0x1DC0..=0x1DFF).contains(&u)
            || (0x20D0..=0x20FF).contains(&u)
            || (0xFE20..=0xFE2F).contains(&u)
    }) {
        return refuse(&format!(
            "it holds U+{:04X}, a full-width form or a combining mark that makes it look like \
             another name: write each letter as its plain (or precomposed) character",
            c as u32
        ));
    }
    if who.chars().count() > MAX_REVIEWER_CHARS {
        return refuse(&format!("longer than {MAX_REVIEWER_CHARS} characters"));
    }
    if who.trim() != who {
        return refuse("it starts or ends with a space (another signer's name with a space)");
    }
    if let Some(c) = who.chars().find(|&c| c.is_whitespace() && c != ' ') {
        return refuse(&format!(
            "it holds the space U+{:04X}; words are separated by plain spaces",
            c as u32
        ));
    }
    if who.contains("  ") {
        return refuse("it holds two spaces in a row; words are separated by one space");
    }
    if let Some(word) = who.split(' ').find(|w| mixed_script(w)) {
        return refuse(&format!(
            "the word {word:?} mixes Latin, Greek or Cyrillic letters (a Cyrillic `а` looks \
             like a Latin `a`): write each word in one script"
        ));
    }
    let folded: String = super::values::fold_like_nfkc(who)
        .chars()
        .filter(|c| !c.is_whitespace() && !super::values::is_default_ignorable(*c))
        .collect();
    if folded.starts_with(IMPORTER_PREFIX) {
        return refuse(&format!(
            "`{IMPORTER_PREFIX}` (in any form or case) marks the importers' own audit rows"
        ));
    }
    Ok(())
}

/// Whether `word` holds letters of more than one of the Latin, Greek and Cyrillic scripts:
/// the lookalikes that let one signer pass for another.
fn mixed_script(word: &str) -> bool {
    let script = |c: char| -> Option<u8> {
        let u = c as u32;
        if !c.is_alphabetic() {
            None
        } else if c.is_ascii_alphabetic()
            || (0x00C0..=0x024F).contains(&u)
            || (0x1E00..=0x1EFF).contains(&u)
        {
            Some(0)
        } else if (0x0370..=0x03FF).contains(&u) || (0x1F00..=0x1FFF).contains(&u) {
            Some(1)
        } else if (0x0400..=0x052F).contains(&u) {
            Some(2)
        } else {
            None
        }
    };
    let mut seen = word.chars().filter_map(script);
    let first = seen.next();
    seen.any(|s| Some(s) != first)
}

/// Writes a label that arrives with imported data, and its audit row (old value none), inside
/// the import's transaction.
pub fn import_label(
    tx: &Transaction<'_>,
    target: TargetKind,
    target_id: i64,
    key: &str,
    value: &str,
    who: &str,
) -> Result<()> {
    tx.execute(
        "INSERT INTO labels(target_kind, target_id, key, value) VALUES (?1, ?2, ?3, ?4) ON CONFLICT (target_kind, target_id, key) DO UPDATE SET value = excluded.value",
        params![target.as_str(), target_id, key, value],
    )?;
    audit(tx, target, target_id, key, who, None, Some(value))
}

/// Appends one audit row: who changed which label of what, when, from what to what.
pub(super) fn audit(
    tx: &Transaction<'_>,
    target: TargetKind,
    target_id: i64,
    key: &str,
    who: &str,
    old: Option<&str>,
    new: Option<&str>,
) -> Result<()> {
    tx.execute(
        "INSERT INTO label_audit(target_kind, target_id, key, who, at, old_value, new_value)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![target.as_str(), target_id, key, who, now_utc(), old, new],
    )?;
    Ok(())
}

/// A column's value as label text: numbers as SQLite writes them back (`4.0`, `12`).
fn value_text(v: Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::Int(i) => Some(i.to_string()),
        Value::Real(f) => Some(format!("{f:?}")),
        Value::Text(t) => Some(t),
        Value::Blob(b) => Some(String::from_utf8_lossy(&b).into_owned()),
    }
}

/// A label's current value read through `conn` (the store's connection, or a write's
/// transaction); for a polyp without the label, the imported column, attribute or pathology.
pub(super) fn label_value(
    conn: &Connection,
    target: TargetKind,
    target_id: i64,
    key: &str,
) -> Result<Option<String>> {
    let label: Option<String> = conn
        .query_row(
            "SELECT value FROM labels WHERE target_kind = ?1 AND target_id = ?2 AND key = ?3",
            params![target.as_str(), target_id, key],
            |r| r.get(0),
        )
        .optional()?;
    if label.is_some() || target != TargetKind::Polyp {
        return Ok(label);
    }
    if POLYP_COLUMN_KEYS.contains(&key) {
        // Read as stored and written as text here: the engines cast numbers differently.
        let sql = format!("SELECT {key} FROM polyps WHERE id = ?1");
        let column: Option<Value> = conn.query_row(&sql, [target_id], |r| r.get(0)).optional()?;
        return Ok(column.and_then(value_text));
    }
    if ATTRIBUTE_KEYS.contains(&key) {
        let attribute: Option<String> = conn
            .query_row(
                "SELECT value FROM attributes WHERE polyp_id = ?1 AND key = ?2",
                params![target_id, key],
                |r| r.get(0),
            )
            .optional()?;
        return Ok(attribute);
    }
    if !PATHOLOGY_KEYS.contains(&key) {
        return Ok(label);
    }
    let imported: Option<Option<String>> = conn
        .query_row(
            "SELECT histology, vienna_class FROM pathology WHERE polyp_id = ?1",
            [target_id],
            |r| {
                Ok(if key == "histology" {
                    r.get(0)?
                } else {
                    r.get::<_, Option<i64>>(1)?.map(|v| v.to_string())
                })
            },
        )
        .optional()?;
    Ok(imported.flatten())
}
