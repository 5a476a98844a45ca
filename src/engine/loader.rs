//! Decodes full-size images for the viewer on a thread of its own, so large JPEGs never stall
//! a frame and never wait behind a long engine job.

use crate::data::images;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};

/// Which image: a library media item, or a file opened from disk.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ImageKey {
    Media(i64),
    File(PathBuf),
}

pub struct Loaded {
    pub key: ImageKey,
    pub result: Result<image::RgbaImage, String>,
}

pub struct ImageLoader {
    requests: SyncSender<(ImageKey, PathBuf)>,
    loaded: Receiver<Loaded>,
}

impl ImageLoader {
    pub fn start(notify: Option<Arc<dyn Fn() + Send + Sync>>) -> ImageLoader {
        let (req_tx, req_rx) = sync_channel::<(ImageKey, PathBuf)>(64);
        let (out_tx, out_rx) = sync_channel::<Loaded>(64);
        std::thread::Builder::new()
            .name("endotwin-image-loader".into())
            .spawn(move || {
                for (key, path) in req_rx {
                    let result = images::decode_file(&path)
                        .map(|d| d.image.to_rgba8())
                        .map_err(|e| format!("{}: {e}", path.display()));
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
    pub fn request(&self, key: ImageKey, path: PathBuf) -> bool {
        !matches!(
            self.requests.try_send((key, path)),
            Err(TrySendError::Full(_))
        )
    }

    pub fn poll(&self) -> Vec<Loaded> {
        self.loaded.try_iter().collect()
    }
}
