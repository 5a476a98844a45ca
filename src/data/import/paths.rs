//! Where an import may read: inside the folder the user named, and nowhere else.
//!
//! Every path an importer meets (named in a manifest, CSV, JSON or XML, or found while
//! walking a folder) is resolved through [`SourceRoot`]: symlinks are followed and the result
//! must lie inside the canonical root; otherwise the item is refused with its name. Walking
//! keeps the canonical folders it has read, so a symlink loop is reported once instead of
//! being read forty times.

use super::{ImportError, Problems};
use crate::data::images;
use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};

/// The largest manifest (CSV, JSON, JSONL, XML) an import reads into memory.
pub const MAX_MANIFEST_BYTES: u64 = 256 << 20;

/// The folder an import was pointed at, canonicalised once.
#[derive(Debug, Clone)]
pub struct SourceRoot {
    named: PathBuf,
    canonical: PathBuf,
    links: Links,
}

/// Whether an import follows symbolic links that lead outside the folder it was given.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Links {
    /// Refused by name (the default: a link must not pull in files from elsewhere unasked).
    #[default]
    Inside,
    /// Followed wherever they lead (`import --follow-links`: data on another disk), except a
    /// link back to a folder above it (a loop), which is refused by name.
    Follow,
}

impl SourceRoot {
    /// `path` is a folder (the root itself) or a manifest file (its folder is the root).
    /// Links leading outside it are refused ([`Links::Inside`]).
    pub fn new(path: &Path) -> Result<SourceRoot, ImportError> {
        SourceRoot::with_links(path, Links::Inside)
    }

    /// [`SourceRoot::new`] with the given rule for links leading outside.
    pub fn with_links(path: &Path, links: Links) -> Result<SourceRoot, ImportError> {
        let folder = if path.is_dir() {
            path.to_path_buf()
        } else {
            match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => PathBuf::from("."),
            }
        };
        let canonical = folder
            .canonicalize()
            .map_err(|e| ImportError::source_error(&folder, e.to_string()))?;
        Ok(SourceRoot {
            named: folder,
            canonical,
            links,
        })
    }

    /// The folder as the user named it.
    pub fn path(&self) -> &Path {
        &self.named
    }

    /// Resolves `path` (symlinks included) and checks it lies inside the root.
    pub fn check(&self, path: &Path) -> Result<PathBuf, String> {
        let real = path
            .canonicalize()
            .map_err(|e| format!("'{}' cannot be resolved: {e}", path.display()))?;
        if real.starts_with(&self.canonical) {
            return Ok(real);
        }
        match self.links {
            Links::Inside => Err(format!(
                "'{}' leads outside the import folder (to {}); refused (`import --follow-links` follows links)",
                path.display(),
                real.display()
            )),
            // A link to a folder holding the import folder (or the link itself) would read
            // everything around it again and again.
            Links::Follow
                if real.is_dir()
                    && (self.canonical.starts_with(&real)
                        || path
                            .parent()
                            .and_then(|p| p.canonicalize().ok())
                            .is_some_and(|p| p.starts_with(&real))) =>
            {
                Err(format!(
                    "symlink loop: '{}' leads back to {}, a folder above it; not read",
                    path.display(),
                    real.display()
                ))
            }
            Links::Follow => Ok(real),
        }
    }

    /// Resolves a path named in a manifest, relative to `base` (a folder inside the root).
    /// Refuses absolute paths, `../` that climbs out, links that lead outside, and names a
    /// missing file.
    pub fn resolve(&self, base: &Path, rel: &str) -> Result<PathBuf, String> {
        let rel_path = Path::new(rel.trim());
        if rel.trim().is_empty() {
            return Err("an empty file name".into());
        }
        if rel_path.is_absolute()
            || rel_path
                .components()
                .any(|c| matches!(c, Component::Prefix(_) | Component::RootDir))
        {
            return Err(format!(
                "'{rel}' is an absolute path; manifests must name files inside the import folder"
            ));
        }
        let full = base.join(rel_path);
        if !full.exists() {
            return Err(format!("'{rel}' is named in the manifest but missing"));
        }
        let real = self
            .check(&full)
            .map_err(|_| format!("'{rel}' leads outside the import folder; refused"))?;
        if !real.is_file() {
            return Err(format!("'{rel}' is not a file"));
        }
        Ok(full)
    }

    /// A folder name read from a manifest (e.g. a REAL-Colon video name): one plain path
    /// component, no separators, no `..`.
    pub fn plain_name(name: &str) -> Result<&str, String> {
        let mut parts = Path::new(name).components();
        match (parts.next(), parts.next()) {
            (Some(Component::Normal(_)), None) if !name.contains(['/', '\\']) => Ok(name),
            _ => Err(format!(
                "'{name}' is not a plain name (no folders, '..' or absolute paths allowed)"
            )),
        }
    }

    /// Every image file below `dir` (a folder inside the root), sorted. Links that lead
    /// outside the root are refused by name; a folder reached twice (a symlink loop) is
    /// reported once and not read again.
    pub fn image_files(
        &self,
        dir: &Path,
        problems: &mut Problems,
    ) -> Result<Vec<PathBuf>, ImportError> {
        let found = self.files_where(dir, problems, &|p: &Path| {
            images::has_image_extension(p)
                || unread_image_kind(p).is_some()
                || extensionless_image(p).is_some()
        })?;
        // Images of a kind EndoTwin does not read are named, not passed over uncounted
        // (round 7 N33: WebP and GIF files were left out without a word).
        let mut images = Vec::with_capacity(found.len());
        for path in found {
            // An image without an extension (a camera's or PACS export's) is named with what
            // its bytes are, not passed over (round 7 N33).
            if let Some(kind) = extensionless_image(&path) {
                let what = match kind {
                    "DICOM" => "EndoTwin reads PNG, JPEG, BMP and TIFF: convert it to PNG to \
                                import it"
                        .to_string(),
                    _ => format!(
                        "give it its extension (.{}) to import it",
                        kind.to_ascii_lowercase()
                    ),
                };
                problems.push(
                    &path,
                    format!("a file without an extension whose bytes are a {kind} image; {what}"),
                );
                continue;
            }
            match unread_image_kind(&path) {
                Some(kind) => problems.push(
                    &path,
                    format!(
                        "a {kind} image: EndoTwin reads PNG, JPEG, BMP and TIFF; convert it \
                         to PNG to import it"
                    ),
                ),
                None => images.push(path),
            }
        }
        Ok(images)
    }

    /// Every regular file below `dir` that is not in `taken` and not already named in
    /// `problems`: what an import of images leaves out without another word.
    pub fn other_files(
        &self,
        dir: &Path,
        taken: &[PathBuf],
        problems: &Problems,
    ) -> Result<Vec<PathBuf>, ImportError> {
        // Links and loops were named when the images were listed: not twice.
        let mut scratch = Problems::default();
        let all = self.files_where(dir, &mut scratch, &|_| true)?;
        let named: HashSet<&Path> = problems.0.iter().map(|p| p.path.as_path()).collect();
        Ok(all
            .into_iter()
            .filter(|f| !taken.contains(f) && !named.contains(f.as_path()))
            .collect())
    }

    /// Every file below `dir` (a folder inside the root) whose extension is `ext`, sorted,
    /// with the same rules as [`SourceRoot::image_files`].
    pub fn files_below(
        &self,
        dir: &Path,
        ext: &str,
        problems: &mut Problems,
    ) -> Result<Vec<PathBuf>, ImportError> {
        let keep = |p: &Path| {
            p.extension()
                .is_some_and(|e| e.to_string_lossy().eq_ignore_ascii_case(ext))
        };
        self.files_where(dir, problems, &keep)
    }

    /// Every file below `dir` that `keep` accepts, sorted (the walk of both above).
    fn files_where(
        &self,
        dir: &Path,
        problems: &mut Problems,
        keep: &dyn Fn(&Path) -> bool,
    ) -> Result<Vec<PathBuf>, ImportError> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        seen.insert(
            self.check(dir)
                .map_err(|r| ImportError::source_error(dir, r))?,
        );
        self.walk(dir, &mut seen, &mut out, problems, keep)
            .map_err(|e| ImportError::source_error(dir, e.to_string()))?;
        out.sort();
        Ok(out)
    }

    fn walk(
        &self,
        dir: &Path,
        seen: &mut HashSet<PathBuf>,
        out: &mut Vec<PathBuf>,
        problems: &mut Problems,
        keep: &dyn Fn(&Path) -> bool,
    ) -> std::io::Result<()> {
        let mut entries: Vec<_> = std::fs::read_dir(dir)?.filter_map(|e| e.ok()).collect();
        entries.sort_by_key(|e| e.path());
        for entry in entries {
            let path = entry.path();
            let Some(real) = self.entry_target(&path, problems) else {
                continue;
            };
            if real.is_dir() {
                if !seen.insert(real.clone()) {
                    problems.push(
                        &path,
                        format!(
                            "symlink loop: {} was already read; not read again",
                            real.display()
                        ),
                    );
                    continue;
                }
                self.walk(&path, seen, out, problems, keep)?;
            } else if real.is_file() && keep(&path) {
                out.push(path);
            } else if !real.is_file() {
                problems.push(&path, NOT_REGULAR.to_string());
            }
        }
        Ok(())
    }

    /// The real path of a folder entry; one that leads outside the root (through a link in
    /// it or above it) or cannot be resolved (a dangling link) is reported.
    fn entry_target(&self, path: &Path, problems: &mut Problems) -> Option<PathBuf> {
        match self.check(path) {
            Ok(real) => Some(real),
            Err(reason) => {
                problems.push(path, reason);
                None
            }
        }
    }

    /// Image files directly in `dir`, sorted; links leading outside are refused by name.
    pub fn images_in(
        &self,
        dir: &Path,
        problems: &mut Problems,
    ) -> Result<Vec<PathBuf>, ImportError> {
        self.entries_where(dir, problems, |p, real| {
            real.is_file() && images::has_image_extension(p)
        })
    }

    /// Folders directly in `dir`, sorted; links leading outside are refused by name.
    pub fn folders_in(
        &self,
        dir: &Path,
        problems: &mut Problems,
    ) -> Result<Vec<PathBuf>, ImportError> {
        self.entries_where(dir, problems, |_, real| real.is_dir())
    }

    /// Files directly in `dir` whose extension is `ext`, sorted.
    pub fn files_in(
        &self,
        dir: &Path,
        ext: &str,
        problems: &mut Problems,
    ) -> Result<Vec<PathBuf>, ImportError> {
        self.entries_where(dir, problems, |p, real| {
            real.is_file()
                && p.extension()
                    .is_some_and(|e| e.to_string_lossy().eq_ignore_ascii_case(ext))
        })
    }

    /// The entries directly in `dir` that resolve inside the root and that `keep` (given the
    /// entry and its real path) accepts, sorted.
    fn entries_where(
        &self,
        dir: &Path,
        problems: &mut Problems,
        keep: impl Fn(&Path, &Path) -> bool,
    ) -> Result<Vec<PathBuf>, ImportError> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir)
            .map_err(|e| ImportError::source_error(dir, e.to_string()))?
            .filter_map(|e| e.ok())
        {
            let path = entry.path();
            match self.entry_target(&path, problems) {
                Some(real) if keep(&path, &real) => out.push(path),
                Some(real) if !real.is_file() && !real.is_dir() => {
                    problems.push(&path, NOT_REGULAR.to_string())
                }
                _ => {}
            }
        }
        out.sort();
        Ok(out)
    }
}

/// Why a folder entry that is neither a file nor a folder is skipped (reading a FIFO would
/// wait forever, a device would never end).
const NOT_REGULAR: &str = "not a regular file (a FIFO, socket or device); skipped";

/// Reads a manifest as text, refusing files larger than [`MAX_MANIFEST_BYTES`] and text that
/// is not UTF-8 (a leading byte-order mark is dropped).
pub fn read_manifest(path: &Path) -> Result<String, String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    // A folder is named as one (round 8 N35: "a FIFO, socket or device").
    if meta.is_dir() {
        return Err("a folder; this layout reads a file (its manifest or JSON)".into());
    }
    if !meta.is_file() {
        return Err(NOT_REGULAR.replace("; skipped", "").to_string());
    }
    let len = meta.len();
    if len > MAX_MANIFEST_BYTES {
        return Err(format!(
            "manifest is {} MiB, more than the {} MiB a manifest may be",
            len >> 20,
            MAX_MANIFEST_BYTES >> 20
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let text = String::from_utf8(bytes).map_err(|e| {
        format!(
            "not UTF-8 text (invalid byte at {})",
            e.utf8_error().valid_up_to()
        )
    })?;
    Ok(text.strip_prefix('\u{feff}').unwrap_or(&text).to_string())
}

/// A CSV reader over a manifest read by [`read_manifest`] (so BOMs and size are handled).
pub fn csv_reader(path: &Path) -> Result<csv::Reader<std::io::Cursor<Vec<u8>>>, String> {
    let text = read_manifest(path)?;
    Ok(csv::Reader::from_reader(std::io::Cursor::new(
        text.into_bytes(),
    )))
}

/// What image a regular file without an extension holds, by its first bytes.
fn extensionless_image(path: &Path) -> Option<&'static str> {
    use std::io::Read;
    if path.extension().is_some() {
        return None;
    }
    let mut head = Vec::with_capacity(132);
    std::fs::File::open(path)
        .ok()?
        .take(132)
        .read_to_end(&mut head)
        .ok()?;
    Some(match &head[..] {
        [0xFF, 0xD8, 0xFF, ..] => "JPEG",
        [0x89, b'P', b'N', b'G', ..] => "PNG",
        [b'I', b'I', 42, 0, ..] | [b'M', b'M', 0, 42, ..] => "TIFF",
        [b'B', b'M', ..] if head.len() >= 26 => "BMP",
        h if h.len() >= 132 && &h[128..132] == b"DICM" => "DICOM",
        _ => return None,
    })
}

/// The kind of image `path` is named as when it is one EndoTwin does not read.
fn unread_image_kind(path: &Path) -> Option<&'static str> {
    let ext = path.extension()?.to_string_lossy().to_ascii_lowercase();
    Some(match ext.as_str() {
        "webp" => "WebP",
        "gif" => "GIF",
        "heic" | "heif" => "HEIC",
        "avif" => "AVIF",
        "jp2" | "j2k" => "JPEG 2000",
        "dcm" => "DICOM",
        "tga" => "Targa",
        "ppm" | "pgm" | "pbm" | "pnm" => "Netpbm",
        "ico" => "icon",
        "exr" => "OpenEXR",
        "hdr" => "Radiance HDR",
        "psd" => "Photoshop",
        "svg" => "SVG",
        "jxl" => "JPEG XL",
        "dng" | "cr2" | "nef" | "arw" => "camera raw",
        _ => return None,
    })
}
