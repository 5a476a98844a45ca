//! The audit log read back (one target's history, the library's log with its filters) and
//! label edits checked against what the reviewer read: two people changing the same label
//! never overwrite each other silently.

use super::db::{Connection, Row, params};
use super::labels::{AuditEntry, AuditFilter, LibraryAudit, TargetKind};
use super::{Result, Store, StoreError};
use std::collections::HashMap;

impl Store {
    /// The audit history of one target, newest first.
    pub fn audit_history(&self, target: TargetKind, target_id: i64) -> Result<Vec<AuditEntry>> {
        let mut stmt = self.conn().prepare(
            "SELECT id, key, who, at, old_value, new_value FROM label_audit
             WHERE target_kind = ?1 AND target_id = ?2 ORDER BY id DESC",
        )?;
        let rows = stmt.query_map(params![target.as_str(), target_id], |r| {
            Ok(AuditEntry {
                id: r.get(0)?,
                key: r.get(1)?,
                who: r.get(2)?,
                at: r.get(3)?,
                old_value: r.get(4)?,
                new_value: r.get(5)?,
            })
        })?;
        rows.collect::<Result<_>>()
    }
}

impl Store {
    /// Every audited change of the library that `filter` lets through, newest first.
    pub fn audit_log(&self, filter: &AuditFilter) -> Result<Vec<LibraryAudit>> {
        for when in [&filter.since, &filter.until].into_iter().flatten() {
            check_audit_time(when).map_err(StoreError::Invalid)?;
        }
        // A bare date as `until` means up to the end of that day.
        let until = filter.until.as_ref().map(|u| {
            if u.len() == 10 {
                format!("{u}T99")
            } else {
                u.clone()
            }
        });
        let mut stmt = self.conn().prepare(&format!(
            "{AUDIT_SELECT}
             WHERE (CAST(?1 AS TEXT) IS NULL OR a.who = ?1)
               AND (CAST(?2 AS TEXT) IS NULL OR a.at >= ?2)
               AND (CAST(?3 AS TEXT) IS NULL OR a.at < ?3)
             ORDER BY a.id DESC LIMIT ?4"
        ))?;
        let limit = if filter.limit == 0 {
            i64::MAX
        } else {
            filter.limit as i64
        };
        let rows = stmt.query_map(
            params![filter.who, filter.since, until, limit],
            library_audit_from_row,
        )?;
        rows.collect::<Result<_>>()
    }

    /// Every audited change after audit row `after`, oldest first: what other stations
    /// changed since this one last looked. Poll it with the id of the last row seen,
    /// starting from [`Store::audit_high_water`].
    pub fn changes_after(&self, after: i64) -> Result<Vec<LibraryAudit>> {
        self.conn()
            .prepare(&format!("{AUDIT_SELECT} WHERE a.id > ?1 ORDER BY a.id"))?
            .query_map([after], library_audit_from_row)?
            .collect()
    }
}

/// An audit row with what it changed, for [`library_audit_from_row`].
const AUDIT_SELECT: &str = "SELECT a.id, a.key, a.who, a.at, a.old_value, a.new_value,
        a.target_kind, a.target_id,
        CASE a.target_kind
            WHEN 'polyp' THEN (SELECT code FROM polyps WHERE id = a.target_id)
            WHEN 'video' THEN (SELECT code FROM videos WHERE id = a.target_id)
            WHEN 'media' THEN (SELECT rel_path FROM media WHERE id = a.target_id)
            ELSE NULL END
    FROM label_audit a";

fn library_audit_from_row(r: &Row) -> Result<LibraryAudit> {
    let kind: String = r.get(6)?;
    let target_id: i64 = r.get(7)?;
    let target = match kind.as_str() {
        "polyp" => TargetKind::Polyp,
        "media" => TargetKind::Media,
        "video" => TargetKind::Video,
        _ => TargetKind::Tracklet,
    };
    let name: Option<String> = r.get(8)?;
    Ok(LibraryAudit {
        entry: AuditEntry {
            id: r.get(0)?,
            key: r.get(1)?,
            who: r.get(2)?,
            at: r.get(3)?,
            old_value: r.get(4)?,
            new_value: r.get(5)?,
        },
        target,
        target_id,
        target_name: name.unwrap_or_else(|| format!("{kind} {target_id}")),
    })
}

/// Checks a date or time filter of the audit log: a UTC date `2026-11-25` or a UTC time
/// `2026-11-25T10:00:00Z` (minutes or seconds may be left off); anything else (`yesterday`,
/// `25/11/2026`) is refused rather than compared as text and silently matching nothing.
pub fn check_audit_time(text: &str) -> std::result::Result<(), String> {
    let refuse = || {
        Err(format!(
            "'{text}' is not a UTC date or time (write 2026-11-25 or 2026-11-25T10:00:00Z)"
        ))
    };
    let b = text.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    let num = |r: std::ops::Range<usize>| text[r].parse::<u32>().unwrap_or(99);
    if b.len() < 10
        || !digits(0..4)
        || b[4] != b'-'
        || !digits(5..7)
        || b[7] != b'-'
        || !digits(8..10)
    {
        return refuse();
    }
    let (year, month, day) = (num(0..4), num(5..7), num(8..10));
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    // A day the month does not have (2026-02-30) is no date either (W16).
    if !(1..=12).contains(&month) || !(1..=days).contains(&day) {
        return refuse();
    }
    let rest = &text[10..];
    if rest.is_empty() {
        return Ok(());
    }
    let time = rest
        .strip_prefix('T')
        .map(|t| t.strip_suffix('Z').unwrap_or(t));
    let ok = time.is_some_and(|t| {
        let parts: Vec<&str> = t.split(':').collect();
        let limits = [23, 59, 59];
        (1..=3).contains(&parts.len())
            && parts.iter().zip(limits).all(|(p, max)| {
                p.len() == 2
                    && p.bytes().all(|c| c.is_ascii_digit())
                    && p.parse::<u32>().is_ok_and(|v| v <= max)
            })
    });
    if ok { Ok(()) } else { refuse() }
}

/// Where a library stands, in one cheap query: the newest audit row (every label, caption and
/// tracklet edit writes one) and the newest examination, polyp and image (an import adds
/// them). A station that sees it move looks again ([`Store::changes_after`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChangeMark {
    pub audit: i64,
    pub examinations: i64,
    pub polyps: i64,
    pub media: i64,
}

impl Store {
    /// The library's [`ChangeMark`] now.
    pub fn change_mark(&self) -> Result<ChangeMark> {
        self.conn().query_row(
            "SELECT (SELECT coalesce(max(id), 0) FROM label_audit),
                    (SELECT coalesce(max(id), 0) FROM examinations),
                    (SELECT coalesce(max(id), 0) FROM polyps),
                    (SELECT coalesce(max(id), 0) FROM media)",
            [],
            |r| {
                Ok(ChangeMark {
                    audit: r.get(0)?,
                    examinations: r.get(1)?,
                    polyps: r.get(2)?,
                    media: r.get(3)?,
                })
            },
        )
    }

    /// The versions ([`Store::label_version`]) of every label of the `target` kind with one of
    /// `ids`, by id then key; a label never changed is absent (version 0).
    pub fn label_versions(
        &self,
        target: TargetKind,
        ids: &[i64],
    ) -> Result<HashMap<i64, HashMap<String, i64>>> {
        let mut out: HashMap<i64, HashMap<String, i64>> = HashMap::new();
        let (Some(&low), Some(&high)) = (ids.iter().min(), ids.iter().max()) else {
            return Ok(out);
        };
        let rows = self.conn().rows(
            "SELECT target_id, key, max(id) FROM label_audit
             WHERE target_kind = ?1 AND target_id >= ?2 AND target_id <= ?3
             GROUP BY target_id, key",
            params![target.as_str(), low, high],
        )?;
        let wanted: std::collections::HashSet<i64> = ids.iter().copied().collect();
        for r in rows {
            let id: i64 = r.get(0)?;
            if wanted.contains(&id) {
                out.entry(id).or_default().insert(r.get(1)?, r.get(2)?);
            }
        }
        Ok(out)
    }

    /// The id of the newest audit row (0 when there is none): rows after it are newer.
    pub fn audit_high_water(&self) -> Result<i64> {
        self.conn()
            .query_row("SELECT coalesce(max(id), 0) FROM label_audit", [], |r| {
                r.get(0)
            })
    }

    /// The version of a label as a reviewer reads it: the id of its latest audit row (0 when
    /// it was never changed). Pass it to [`Store::set_label_as_read`] with the change.
    pub fn label_version(&self, target: TargetKind, target_id: i64, key: &str) -> Result<i64> {
        label_version(self.conn(), target, target_id, key)
    }
}

pub(super) fn label_version(
    conn: &Connection,
    target: TargetKind,
    target_id: i64,
    key: &str,
) -> Result<i64> {
    conn.query_row(
        "SELECT coalesce(max(id), 0) FROM label_audit
         WHERE target_kind = ?1 AND target_id = ?2 AND key = ?3",
        params![target.as_str(), target_id, key],
        |r| r.get(0),
    )
}

/// Refuses a change to a label that changed after the reviewer read it at version `read`,
/// naming each change since (who, when, from what to what). Runs under the write lock.
pub(super) fn check_unchanged(
    conn: &Connection,
    target: TargetKind,
    target_id: i64,
    key: &str,
    read: i64,
) -> Result<()> {
    if label_version(conn, target, target_id, key)? == read {
        return Ok(());
    }
    let shown = |v: Option<String>| v.map_or("none".to_string(), |v| format!("'{v}'"));
    let changes: Vec<String> = conn
        .rows(
            "SELECT who, at, old_value, new_value FROM label_audit
             WHERE target_kind = ?1 AND target_id = ?2 AND key = ?3 AND id > ?4 ORDER BY id",
            params![target.as_str(), target_id, key, read],
        )?
        .iter()
        .map(|r| {
            Ok(format!(
                "{} at {} ({} -> {})",
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                shown(r.get(2)?),
                shown(r.get(3)?)
            ))
        })
        .collect::<Result<_>>()?;
    Err(StoreError::Conflict {
        target: format!("{} {target_id}", target.as_str()),
        key: key.to_string(),
        changes: changes.join("; "),
    })
}
