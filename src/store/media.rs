//! Media rows and the content-addressed media folder.

use super::db::{Connection, EngineKind, OptionalExtension, Row, Transaction, params};
use super::{Result, Store, StoreError};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// What a media item is, as the browser and the methods see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MediaKind {
    /// A still frame of an examination.
    Frame,
    /// One view of a polyp's multi-view set.
    View,
    /// A frame of a procedure video.
    VideoFrame,
    /// A capsule endoscopy image.
    Capsule,
    /// A segmentation mask (white = polyp).
    Mask,
}

impl MediaKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MediaKind::Frame => "frame",
            MediaKind::View => "view",
            MediaKind::VideoFrame => "video_frame",
            MediaKind::Capsule => "capsule",
            MediaKind::Mask => "mask",
        }
    }

    pub fn parse(s: &str) -> Option<MediaKind> {
        Some(match s {
            "frame" => MediaKind::Frame,
            "view" => MediaKind::View,
            "video_frame" => MediaKind::VideoFrame,
            "capsule" => MediaKind::Capsule,
            "mask" => MediaKind::Mask,
            _ => return None,
        })
    }
}

/// A media item's row, to add once its file is in the media folder.
#[derive(Debug, Clone)]
pub struct NewMedia {
    pub kind: MediaKind,
    pub source_path: String,
    /// Size of the stored file in bytes.
    pub byte_len: u64,
    pub width: u32,
    pub height: u32,
    pub examination_id: Option<i64>,
    pub thumbnail: Option<Vec<u8>>,
    pub captured_at: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MediaRow {
    pub id: i64,
    pub hash: String,
    pub kind: MediaKind,
    pub rel_path: String,
    pub source_path: String,
    pub width: u32,
    pub height: u32,
    pub bytes: u64,
    pub examination_id: Option<i64>,
    pub mask_media_id: Option<i64>,
    /// When it was captured, as the source wrote it (a capsule frame's capture time).
    pub captured_at: Option<String>,
}

/// Hex SHA-256 of a file's bytes: the media item's identity in the library.
pub fn content_hash(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Path of a media file relative to the library root.
pub fn media_rel_path(hash: &str, extension: &str) -> String {
    format!("{}/{}/{}.{}", super::MEDIA_DIR, &hash[..2], hash, extension)
}

/// File (in the library folder, beside `media/`) naming the media files an unfinished write
/// is creating, one path relative to the library a line. Each name is written (and synced)
/// before its file, and the journal goes once the write commits or is undone. After a crash,
/// it is the only list of files the next write may remove: nothing else in `media/` is ever
/// deleted by EndoTwin.
pub const PENDING_JOURNAL: &str = "media-pending.journal";

/// Each write's own pending journal: `media-pending.<pid>-<n>.journal` beside the database (a
/// journal another station's write is still finishing is never this write's to remove). The
/// old single name ([`PENDING_JOURNAL`]) is read and swept as one of them.
fn own_journal_name() -> String {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("media-pending.{}-{n}.journal", std::process::id())
}

/// Whether `name` is a pending journal's file name (this version's or the old one).
fn is_journal_name(name: &str) -> bool {
    name == PENDING_JOURNAL || (name.starts_with("media-pending.") && name.ends_with(".journal"))
}

/// The pending journals in library folder `root`, sorted (none when it cannot be read).
pub fn pending_journals(root: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(root)
        .map(|d| {
            d.flatten()
                .filter(|e| is_journal_name(&e.file_name().to_string_lossy()))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

/// The largest pending journal read: a line of about 80 bytes per file of one write.
const MAX_JOURNAL_BYTES: u64 = 256 << 20;

/// Media files written during one write transaction ([`Store::write_media`]): the ones it
/// created are removed again when the transaction does not commit. On PostgreSQL the bytes
/// go into the database, in the write's own transaction.
pub struct MediaFiles<'a> {
    root: PathBuf,
    created: Vec<PathBuf>,
    /// This write's own journal, once its first file is named in it.
    journal: Option<(PathBuf, std::fs::File)>,
    /// The PostgreSQL library's connection (in the write's transaction); `None` on SQLite.
    database: Option<&'a Connection>,
}

impl std::fmt::Debug for MediaFiles<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MediaFiles")
            .field("root", &self.root)
            .field("created", &self.created)
            .finish()
    }
}

impl<'a> MediaFiles<'a> {
    pub(super) fn new(root: &Path, conn: &'a Connection) -> MediaFiles<'a> {
        MediaFiles {
            root: root.to_path_buf(),
            created: Vec::new(),
            journal: None,
            database: (conn.kind() == EngineKind::Postgres).then_some(conn),
        }
    }

    /// Writes the file under its content hash (if not already there) and returns the hash
    /// and the path relative to the library root. Its name reaches the pending journal
    /// before its bytes reach `media/`.
    pub fn put(&mut self, bytes: &[u8], extension: &str) -> Result<(String, String)> {
        let hash = content_hash(bytes);
        let rel = media_rel_path(&hash, extension);
        if let Some(conn) = self.database {
            super::pg::put_media_bytes(conn, &hash, bytes)?;
            return Ok((hash, rel));
        }
        let full = self.root.join(&rel);
        // A file already under this name is trusted only when it holds these bytes: a stray
        // one (an interrupted copy's, a person's) would otherwise stand for the image imported.
        let holds_these = match std::fs::symlink_metadata(&full) {
            Err(_) => false,
            Ok(m) if !m.is_file() => {
                return Err(StoreError::Io {
                    path: full,
                    source: std::io::Error::other(
                        "exists and is not a regular file (a FIFO, device or link) where this image belongs; remove it; nothing was imported",
                    ),
                });
            }
            Ok(m) => {
                m.len() == bytes.len() as u64
                    && std::fs::read(&full).is_ok_and(|b| content_hash(&b) == hash)
            }
        };
        if !holds_these {
            let media = self.root.join(super::MEDIA_DIR);
            if std::fs::metadata(&media).is_ok_and(|m| !m.is_dir()) {
                return Err(StoreError::Io {
                    path: media,
                    source: std::io::Error::other(
                        "not a folder, where the library keeps its images; nothing was written",
                    ),
                });
            }
            self.journal_line(&rel)?;
            let dir = full.parent().expect("media path has a parent");
            if std::fs::symlink_metadata(dir).is_ok_and(|m| !m.is_dir()) {
                return Err(StoreError::Io {
                    path: dir.to_path_buf(),
                    source: std::io::Error::other(
                        "not a folder, where the library keeps its images; nothing was written",
                    ),
                });
            }
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
                path: dir.to_path_buf(),
                source,
            })?;
            let tmp = full.with_extension("partial");
            // Whatever is under the temporary name goes first: a FIFO left there would block
            // the write for ever (round 7 N63); a crashed copy's half file is no use.
            let _ = std::fs::remove_file(&tmp);
            std::fs::write(&tmp, bytes)
                .and_then(|_| std::fs::rename(&tmp, &full))
                .map_err(|source| {
                    let _ = std::fs::remove_file(&tmp);
                    StoreError::Io {
                        path: full.clone(),
                        source,
                    }
                })?;
            self.created.push(full);
        }
        Ok((hash, rel))
    }

    /// Appends `rel` to the pending journal and syncs it.
    fn journal_line(&mut self, rel: &str) -> Result<()> {
        use std::io::Write;
        if self.journal.is_none() {
            std::fs::create_dir_all(&self.root).map_err(|source| StoreError::Io {
                path: self.root.clone(),
                source,
            })?;
            let path = self.root.join(own_journal_name());
            let file = std::fs::OpenOptions::new()
                .create_new(true)
                .append(true)
                .open(&path)
                .map_err(|source| StoreError::Io {
                    path: path.clone(),
                    source,
                })?;
            self.journal = Some((path, file));
        }
        let (path, file) = self.journal.as_mut().expect("opened above");
        file.write_all(format!("{rel}\n").as_bytes())
            .and_then(|_| file.sync_data())
            .map_err(|source| StoreError::Io {
                path: path.clone(),
                source,
            })
    }

    /// The write committed: its files are named by rows, its own journal is done (another
    /// write's sweep may have removed it already: it named only files rows name).
    pub(super) fn committed(mut self) {
        self.close_journal();
    }

    fn close_journal(&mut self) {
        if let Some((path, _)) = self.journal.take() {
            let _ = std::fs::remove_file(path);
        }
    }

    /// Removes the files this write created (its transaction will not commit; called while
    /// it still holds the write lock, so no other write can have trusted them), then its
    /// journal.
    pub(super) fn discard(mut self) {
        for f in &self.created {
            let _ = std::fs::remove_file(f);
        }
        self.close_journal();
    }
}

/// Finishes what a write killed between writing its files and committing left behind: the
/// files its pending journal names that no row names (and their `.partial` copies) are
/// removed, then the journal. Files the journal does not name are never touched (a restored
/// backup's newer files, anything a person put there). Runs under the write lock, so no
/// other process is between those two steps. Returns how many files went.
pub(super) fn sweep_pending(tx: &Transaction<'_>, root: &Path) -> Result<usize> {
    let mut removed = 0;
    for journal in pending_journals(root) {
        removed += sweep_journal(tx, root, &journal)?;
    }
    Ok(removed)
}

/// [`sweep_pending`] for one journal.
fn sweep_journal(tx: &Transaction<'_>, root: &Path, journal: &Path) -> Result<usize> {
    // Only a regular file of a journal's size is read: a FIFO would block the write for ever
    // and a link to /dev/zero would be read until memory runs out.
    match std::fs::symlink_metadata(journal) {
        Ok(m) if !m.is_file() || m.len() > MAX_JOURNAL_BYTES => {
            return Err(StoreError::Io {
                path: journal.to_path_buf(),
                source: std::io::Error::other(
                    "not the library's pending-media journal (not a regular file, or larger than one is): remove it; nothing was changed",
                ),
            });
        }
        _ => {}
    }
    let text = match std::fs::read_to_string(journal) {
        Ok(t) => t,
        // Its write committed and removed it since the folder was listed.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(source) => {
            return Err(StoreError::Io {
                path: journal.to_path_buf(),
                source,
            });
        }
    };
    let mut removed = 0;
    for rel in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        // Only names this program writes: media/<2 hex>/<64 hex>.<ext>, nothing else.
        if !is_media_rel_path(rel) {
            continue;
        }
        let named: bool = tx
            .query_row(
                "SELECT EXISTS(SELECT 1 FROM media WHERE rel_path = ?1)",
                [rel],
                |r| r.get(0),
            )
            .unwrap_or(true);
        let full = root.join(rel);
        let _ = std::fs::remove_file(full.with_extension("partial"));
        if !named && std::fs::remove_file(&full).is_ok() {
            removed += 1;
        }
    }
    match std::fs::remove_file(journal) {
        Err(source) if source.kind() != std::io::ErrorKind::NotFound => {
            return Err(StoreError::Io {
                path: journal.to_path_buf(),
                source,
            });
        }
        _ => {}
    }
    Ok(removed)
}

/// Whether `rel` has the shape of a path [`media_rel_path`] makes.
pub(crate) fn is_media_rel_path(rel: &str) -> bool {
    let mut parts = rel.split('/');
    let (Some(dir), Some(prefix), Some(name), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let Some((hash, ext)) = name.split_once('.') else {
        return false;
    };
    let hex = |s: &str| {
        s.chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    };
    dir == super::MEDIA_DIR
        && prefix.len() == 2
        && hash.len() == 64
        && hex(hash)
        && hash.starts_with(prefix)
        && !ext.is_empty()
        && ext.chars().all(|c| c.is_ascii_alphanumeric())
}

/// Whether the library's `media/` folder holds any file at all.
pub(crate) fn media_dir_has_files(root: &Path) -> bool {
    let Ok(dirs) = std::fs::read_dir(root.join(super::MEDIA_DIR)) else {
        return false;
    };
    dirs.filter_map(|d| d.ok()).any(|d| {
        d.file_type().is_ok_and(|t| t.is_file())
            || std::fs::read_dir(d.path()).is_ok_and(|mut f| f.next().is_some())
    })
}

impl Store {
    /// The bytes of a media row's file, read only when it is a regular file of the size the
    /// row records, and returned only when they still hash to the row's content hash: a file
    /// swapped or damaged on disk is refused by name, never encoded or shown as the polyp.
    pub fn read_media(&self, media: &MediaRow) -> Result<Vec<u8>> {
        let changed = || StoreError::MediaChanged {
            path: self.root().to_path_buf(),
            id: media.id,
            file: media.rel_path.clone(),
        };
        if !is_media_rel_path(&media.rel_path) {
            // A tampered row (`../../etc/passwd`) names no file of the library: never read.
            return Err(StoreError::MediaOutsideLibrary {
                path: self.root().to_path_buf(),
                id: media.id,
                file: media.rel_path.clone(),
            });
        }
        if self.engine() == EngineKind::Postgres {
            let bytes = super::pg::media_bytes(self.conn(), &media.hash)?.ok_or_else(changed)?;
            if bytes.len() as u64 != media.bytes || content_hash(&bytes) != media.hash {
                return Err(changed());
            }
            return Ok(bytes);
        }
        let path = self.media_path(media);
        // A file gone from media/ said as such (round 16 N18: "No such file or directory (os
        // error 2)" in an index's skip line).
        let meta = std::fs::metadata(&path).map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound => StoreError::MediaFileMissing {
                path: self.root().to_path_buf(),
                id: media.id,
                file: media.rel_path.clone(),
            },
            _ => StoreError::Io {
                path: path.clone(),
                source,
            },
        })?;
        if !meta.is_file() {
            return Err(StoreError::MediaNotAFile {
                path: self.root().to_path_buf(),
                id: media.id,
                file: media.rel_path.clone(),
            });
        }
        if meta.len() != media.bytes {
            return Err(changed());
        }
        let bytes = std::fs::read(&path).map_err(|source| StoreError::Io {
            path: path.clone(),
            source,
        })?;
        if content_hash(&bytes) != media.hash {
            return Err(changed());
        }
        Ok(bytes)
    }

    /// Absolute path of a media row's file. For a PostgreSQL library, a file in this user's
    /// cache folder, written from the database's bytes once they hash to the row (when they
    /// do not, the path names no file and reading it fails).
    pub fn media_path(&self, media: &MediaRow) -> PathBuf {
        let path = self.root().join(&media.rel_path);
        if self.engine() == EngineKind::Postgres
            && is_media_rel_path(&media.rel_path)
            && !path.is_file()
            && let Ok(bytes) = self.read_media(media)
        {
            let _ = super::pg::write_cache_file(&path, &bytes);
        }
        path
    }

    pub fn media(&self, id: i64) -> Result<Option<MediaRow>> {
        self.conn()
            .query_row(
                &format!("SELECT {MEDIA_COLUMNS} FROM media WHERE id = ?1"),
                [id],
                media_from_row,
            )
            .optional()
    }

    pub fn media_by_hash(&self, hash: &str) -> Result<Option<MediaRow>> {
        self.conn()
            .query_row(
                &format!("SELECT {MEDIA_COLUMNS} FROM media WHERE hash = ?1"),
                [hash],
                media_from_row,
            )
            .optional()
    }

    pub fn thumbnail(&self, media_id: i64) -> Result<Option<Vec<u8>>> {
        Ok(self
            .conn()
            .query_row(
                "SELECT thumbnail FROM media WHERE id = ?1",
                [media_id],
                |r| r.get::<_, Option<Vec<u8>>>(0),
            )
            .optional()?
            .flatten())
    }

    pub fn media_count(&self) -> Result<i64> {
        self.conn()
            .query_row("SELECT count(*) FROM media", [], |r| r.get(0))
    }

    /// Media with no thumbnail yet (for the thumbnail job).
    pub fn media_without_thumbnail(&self) -> Result<Vec<MediaRow>> {
        let mut stmt = self.conn().prepare(&format!(
            "SELECT {MEDIA_COLUMNS} FROM media WHERE thumbnail IS NULL AND kind != 'mask' ORDER BY id"
        ))?;
        let rows = stmt.query_map([], media_from_row)?;
        rows.collect::<Result<_>>()
    }

    /// Frames of an examination that belong to no polyp view set and no video.
    pub fn loose_frames(&self, examination_id: i64) -> Result<Vec<MediaRow>> {
        let mut stmt = self.conn().prepare(&format!(
            "SELECT {MEDIA_COLUMNS} FROM media m WHERE examination_id = ?1 AND kind IN ('frame','capsule')
             AND m.id NOT IN (SELECT media_id FROM polyp_views) ORDER BY id"
        ))?;
        let rows = stmt.query_map([examination_id], media_from_row)?;
        rows.collect::<Result<_>>()
    }
}

pub(crate) const MEDIA_COLUMNS: &str = "id, hash, kind, rel_path, source_path, width, height, bytes, examination_id, mask_media_id, captured_at";

pub(crate) fn media_from_row(r: &Row) -> Result<MediaRow> {
    media_from_row_at(r, 0)
}

/// [`MEDIA_COLUMNS`] as `m.<column>`, for joins.
pub(crate) fn media_columns_of(alias: &str) -> String {
    MEDIA_COLUMNS
        .split(", ")
        .map(|c| format!("{alias}.{c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Reads [`MEDIA_COLUMNS`] starting at column `at` (joins put other columns first).
pub(crate) fn media_from_row_at(r: &Row, at: usize) -> Result<MediaRow> {
    let kind: String = r.get(at + 2)?;
    Ok(MediaRow {
        id: r.get(at)?,
        hash: r.get(at + 1)?,
        kind: MediaKind::parse(&kind).unwrap_or(MediaKind::Frame),
        rel_path: r.get(at + 3)?,
        source_path: r.get(at + 4)?,
        width: r.get(at + 5)?,
        height: r.get(at + 6)?,
        bytes: r.get::<_, i64>(at + 7)? as u64,
        examination_id: r.get(at + 8)?,
        mask_media_id: r.get(at + 9)?,
        captured_at: r.get(at + 10)?,
    })
}

/// Inserts a media row (or finds the existing one with the same content) inside `tx`.
/// Returns the id and whether the row is new. The file must already be in place
/// ([`Store::put_media_file`]).
pub fn insert_media(
    tx: &Transaction<'_>,
    hash: &str,
    rel_path: &str,
    media: &NewMedia,
) -> Result<(i64, bool)> {
    if let Some(id) = tx
        .query_row("SELECT id FROM media WHERE hash = ?1", [hash], |r| {
            r.get::<_, i64>(0)
        })
        .optional()?
    {
        return Ok((id, false));
    }
    tx.execute(
        "INSERT INTO media(hash, kind, rel_path, source_path, width, height, bytes, examination_id, thumbnail, captured_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![
            hash,
            media.kind.as_str(),
            rel_path,
            media.source_path,
            media.width,
            media.height,
            media.byte_len as i64,
            media.examination_id,
            media.thumbnail,
            media.captured_at,
        ],
    )?;
    Ok((tx.last_insert_rowid()?, true))
}

/// The examination media `id` belongs to (its id and code), if any: where a duplicate of an
/// import stays.
pub fn media_examination(tx: &Transaction<'_>, id: i64) -> Result<Option<(i64, String)>> {
    tx.query_row(
        "SELECT e.id, e.code FROM media m JOIN examinations e ON e.id = m.examination_id
             WHERE m.id = ?1",
        [id],
        |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)),
    )
    .optional()
}

pub fn set_mask(tx: &Transaction<'_>, media_id: i64, mask_media_id: i64) -> Result<()> {
    tx.execute(
        "UPDATE media SET mask_media_id = ?2 WHERE id = ?1",
        params![media_id, mask_media_id],
    )?;
    Ok(())
}

pub fn set_thumbnail(tx: &Transaction<'_>, media_id: i64, jpeg: &[u8]) -> Result<()> {
    tx.execute(
        "UPDATE media SET thumbnail = ?2 WHERE id = ?1",
        params![media_id, jpeg],
    )?;
    Ok(())
}

/// Whether `path` stays inside `root` once `..` and `.` are resolved lexically.
pub fn path_within(root: &Path, path: &Path) -> bool {
    let mut depth: i64 = 0;
    for comp in path.components() {
        match comp {
            std::path::Component::ParentDir => depth -= 1,
            std::path::Component::Normal(_) => depth += 1,
            std::path::Component::CurDir => {}
            _ => return path.starts_with(root),
        }
        if depth < 0 {
            return false;
        }
    }
    true
}
