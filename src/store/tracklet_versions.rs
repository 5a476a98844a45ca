//! A tracklet's version as a station reads it, and the check that an edit made on what it
//! read is not made over another station's change since (issue #46): tracklet edits were
//! last writer wins.

use super::db::{Connection, params};
use super::{Result, StoreError};

/// A tracklet's version as a reviewer reads it: the id of its latest audit row under any key
/// (its polyp, a split or join, a link decision stored on it); 0 when never edited.
pub(super) fn version_of(conn: &Connection, tracklet: i64) -> Result<i64> {
    conn.query_row(
        "SELECT coalesce(max(id), 0) FROM label_audit
         WHERE target_kind = 'tracklet' AND target_id = ?1",
        [tracklet],
        |r| r.get(0),
    )
}

/// Refuses an edit made on what a station read when another changed a tracklet since (each
/// (tracklet, version read); `None`: unchecked), naming who changed what and when. Runs under
/// the write lock, in the edit's transaction (#46: tracklet edits were last writer wins).
pub(super) fn check_read(conn: &Connection, reads: &[(i64, Option<i64>)]) -> Result<()> {
    for &(tracklet, read) in reads {
        let Some(read) = read else { continue };
        if version_of(conn, tracklet)? == read {
            continue;
        }
        let shown = |v: Option<String>| v.map_or("none".to_string(), |v| format!("'{v}'"));
        let changes: Vec<String> = conn
            .rows(
                "SELECT who, at, key, old_value, new_value FROM label_audit
                 WHERE target_kind = 'tracklet' AND target_id = ?1 AND id > ?2 ORDER BY id",
                params![tracklet, read],
            )?
            .iter()
            .map(|r| {
                Ok(format!(
                    "{} at {} ({}: {} -> {})",
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    shown(r.get(3)?),
                    shown(r.get(4)?)
                ))
            })
            .collect::<Result<_>>()?;
        return Err(StoreError::Conflict {
            target: format!("tracklet T{tracklet}"),
            key: "(its polyp, splits or links)".into(),
            changes: changes.join("; "),
        });
    }
    Ok(())
}

/// What a checked tracklet edit gives back: its result and the version of each tracklet it
/// changed once written (what the station holds after its own edit).
#[derive(Debug, Clone, PartialEq)]
pub struct TrackletWritten<T> {
    pub value: T,
    pub versions: Vec<(i64, i64)>,
}

pub(super) fn written<T>(
    conn: &Connection,
    value: T,
    tracklets: &[i64],
) -> Result<TrackletWritten<T>> {
    let versions = tracklets
        .iter()
        .map(|&t| Ok((t, version_of(conn, t)?)))
        .collect::<Result<_>>()?;
    Ok(TrackletWritten { value, versions })
}
