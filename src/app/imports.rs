//! Imports from the GUI: a folder or a video file (background jobs), the opened image files,
//! and whatever is dropped on the window.

use super::App;
use super::state::{Selection, ToastLevel};
use crate::data::images;
use crate::data::import::video::is_video_file;
use crate::data::import::{ImportLayout, ImportOptions};
use crate::engine::Job;
use crate::store;
use std::path::PathBuf;

impl App {
    pub(super) fn import(&mut self, layout: ImportLayout, path: PathBuf) {
        let Some(lib) = &self.state.library else {
            self.state
                .toast(ToastLevel::Error, "open a library before importing");
            return;
        };
        if lib.store.is_read_only() {
            self.state.toast(
                ToastLevel::Error,
                format!(
                    "{}: library is read-only; cannot import",
                    lib.path.display()
                ),
            );
            return;
        }
        let db = lib.store.db_path().to_path_buf();
        self.submit(
            &format!("import {}", path.display()),
            db,
            Job::Import {
                layout,
                path,
                options: ImportOptions::default(),
            },
        );
    }

    pub(super) fn import_opened_files(&mut self) {
        let files = self.state.opened_files.clone();
        let Some(lib) = &self.state.library else {
            self.state
                .toast(ToastLevel::Error, "open a library before importing");
            return;
        };
        let db = lib.store.db_path().to_path_buf();
        self.submit(
            &format!("import {} images", files.len()),
            db,
            Job::ImportFiles {
                files,
                options: ImportOptions::default(),
            },
        );
    }

    pub(super) fn dropped(&mut self, paths: Vec<PathBuf>) {
        let mut images_in = Vec::new();
        for path in paths {
            let is_library = path.join(store::DB_FILE).exists()
                || path.extension().is_some_and(|e| e == "sqlite" || e == "db");
            if is_library {
                self.open_library(&path);
            } else if path.is_dir() {
                self.import(ImportLayout::Images, path);
            } else if is_video_file(&path) {
                self.import(ImportLayout::Video, path);
            } else if images::has_image_extension(&path) {
                images_in.push(path);
            } else {
                self.state.toast(
                    ToastLevel::Error,
                    format!(
                        "{}: not an image (png, jpg, bmp, tif), a video (mp4, mov, ...), a folder or a library",
                        path.display()
                    ),
                );
            }
        }
        if !images_in.is_empty() {
            self.state.opened_files = images_in;
            self.select(Selection::OpenedFiles);
        }
    }
}
