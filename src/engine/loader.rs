//! Decodes images for the UI on a thread of its own, so neither a large JPEG nor a library
//! read ever stalls a frame or waits behind a long engine job: full-size views from their
//! files, and thumbnails from the library (the UI never reads the library itself).

use crate::data::images;
use crate::store::{OpenMode, Store};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};

/// Which image: a library media item, its thumbnail, or a file opened from disk.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ImageKey {
    Media(i64),
    Thumbnail(i64),
    File(PathBuf),
}

/// Where the loader reads an image from.
#[derive(Debug, Clone)]
pub enum Source {
    /// An image file opened from disk.
    File(PathBuf),
    /// Media `id` of the library at `library`, read through the store's hash-checked read
    /// (the one every command and engine job decodes media with): a file swapped or damaged
    /// on disk is refused by name, never shown as the view.
    Media { library: PathBuf, id: i64 },
    /// The stored thumbnail of media `id` in the library at `library`.
    Thumbnail { library: PathBuf, id: i64 },
}

pub struct Loaded {
    pub key: ImageKey,
    pub result: Result<image::RgbaImage, String>,
}

pub struct ImageLoader {
    requests: SyncSender<(ImageKey, Source)>,
    loaded: Receiver<Loaded>,
}

impl ImageLoader {
    pub fn start(notify: Option<Arc<dyn Fn() + Send + Sync>>) -> ImageLoader {
        let (req_tx, req_rx) = sync_channel::<(ImageKey, Source)>(64);
        let (out_tx, out_rx) = sync_channel::<Loaded>(64);
        std::thread::Builder::new()
            .name("endotwin-image-loader".into())
            .spawn(move || {
                // One connection, kept while requests name the same library.
                let mut library: Option<(PathBuf, Store)> = None;
                for (key, source) in req_rx {
                    let result = match source {
                        Source::File(path) => images::decode_file(&path)
                            .map(|d| d.image.to_rgba8())
                            .map_err(|e| format!("{}: {e}", path.display())),
                        Source::Media { library: path, id } => {
                            if library.as_ref().is_none_or(|(p, _)| *p != path) {
                                library = Store::open(&path, OpenMode::Existing)
                                    .ok()
                                    .map(|s| (path.clone(), s));
                            }
                            media(library.as_ref().map(|(_, s)| s), id)
                        }
                        Source::Thumbnail { library: path, id } => {
                            if library.as_ref().is_none_or(|(p, _)| *p != path) {
                                library = Store::open(&path, OpenMode::Existing)
                                    .ok()
                                    .map(|s| (path.clone(), s));
                            }
                            thumbnail(library.as_ref().map(|(_, s)| s), id)
                        }
                    };
                    if out_tx.send(Loaded { key, result }).is_err() {
                        break;
                    }
                    if let Some(n) = &notify {
                        n();
                    }
                }
            })
            .expect("spawning the image loader thread");
        ImageLoader {
            requests: req_tx,
            loaded: out_rx,
        }
    }

    /// Asks for an image; returns false when the queue is full (ask again next frame).
    pub fn request(&self, key: ImageKey, source: Source) -> bool {
        !matches!(
            self.requests.try_send((key, source)),
            Err(TrySendError::Full(_))
        )
    }

    pub fn poll(&self) -> Vec<Loaded> {
        self.loaded.try_iter().collect()
    }
}

fn media(store: Option<&Store>, id: i64) -> Result<image::RgbaImage, String> {
    let store = store.ok_or("the library cannot be read")?;
    let row = store
        .media(id)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("media {id} is not in the library"))?;
    images::decode_media(store, &row)
        .map(|d| d.image.to_rgba8())
        .map_err(|e| e.to_string())
}

fn thumbnail(store: Option<&Store>, id: i64) -> Result<image::RgbaImage, String> {
    let store = store.ok_or("the library cannot be read")?;
    let bytes = store
        .thumbnail(id)
        .map_err(|e| e.to_string())?
        .ok_or("no thumbnail")?;
    image::load_from_memory(&bytes)
        .map(|i| i.to_rgba8())
        .map_err(|e| e.to_string())
}
