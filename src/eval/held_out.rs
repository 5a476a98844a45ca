//! The library an evaluation runs on: one the user names, or the phantom's test split of a
//! seed generated into a temporary folder that is removed when the evaluation is done.

use crate::data::phantom::{self, PhantomConfig, PhantomError, Split};
use crate::plumbing::Progress;
use crate::store::{OpenMode, Store};
use std::path::{Path, PathBuf};

/// How many images (by content) `a` and `b` share: a validation or training library that
/// shares images with the held-out one would tune or fit on the test.
pub fn shared_images(a: &Store, b: &Store) -> Result<usize, crate::store::StoreError> {
    let hashes =
        |s: &Store| -> Result<std::collections::HashSet<String>, crate::store::StoreError> {
            Ok(s.media_rows()?.into_iter().map(|m| m.hash).collect())
        };
    Ok(hashes(a)?.intersection(&hashes(b)?).count())
}

/// An open held-out library; a generated one is deleted on drop.
pub struct HeldOut {
    pub store: Store,
    /// What it is, for reports and model cards.
    pub described: String,
    generated: Option<PathBuf>,
}

impl HeldOut {
    /// `path` when given, else the test split of `seed` (`polyps` x `views` at `size` px).
    pub fn open(
        path: Option<&Path>,
        seed: u64,
        polyps: usize,
        views: usize,
        size: u32,
    ) -> Result<HeldOut, PhantomError> {
        HeldOut::open_split(path, seed, Split::Test, polyps, views, size)
    }

    /// [`HeldOut::open`] with another split of `seed` (a report's validation split).
    pub fn open_split(
        path: Option<&Path>,
        seed: u64,
        split: Split,
        polyps: usize,
        views: usize,
        size: u32,
    ) -> Result<HeldOut, PhantomError> {
        HeldOut::open_split_with(path, seed, split, polyps, views, size, &Progress::new())
    }

    /// [`HeldOut::open_split`], its generation (when it generates) reported to `progress`.
    pub fn open_split_with(
        path: Option<&Path>,
        seed: u64,
        split: Split,
        polyps: usize,
        views: usize,
        size: u32,
        progress: &Progress,
    ) -> Result<HeldOut, PhantomError> {
        if let Some(path) = path {
            let store = Store::open(path, OpenMode::Existing)?;
            // Figures from a damaged database's rows would be reported without a word.
            if let Some(problem) = store.integrity_problems(None)?.first() {
                return Err(crate::store::StoreError::Damaged {
                    path: store.db_path().to_path_buf(),
                    problem: problem.clone(),
                }
                .into());
            }
            // An evaluation of polyps on a library without any would print tables of 0.000
            // (round 7 N39). Capsule and video held-out sets ask for no polyps here.
            if polyps > 0 && store.polyps()?.is_empty() {
                return Err(crate::store::StoreError::Invalid(format!(
                    "{}: the held-out library has no polyps; nothing to evaluate",
                    path.display()
                ))
                .into());
            }
            return Ok(HeldOut {
                store,
                described: path.display().to_string(),
                generated: None,
            });
        }
        let cfg = PhantomConfig {
            seed,
            split,
            polyps,
            views_per_polyp: views,
            videos: 0,
            capsule_images: 0,
            background_frames: 0,
            image_size: size,
            ..PhantomConfig::default()
        };
        HeldOut::generate(
            &cfg,
            format!(
                "phantom {} split of seed {seed}, {polyps} polyps x {views} views, {size} px",
                split.name()
            ),
            progress,
        )
    }

    /// `path` when given, else examination records (METHODS §1) of the test split of `seed`:
    /// `polyps` polyps in examinations of `frames` frames each, at `size` px.
    pub fn open_records(
        path: Option<&Path>,
        seed: u64,
        polyps: usize,
        frames: usize,
        size: u32,
    ) -> Result<HeldOut, PhantomError> {
        HeldOut::open_records_of(path, seed, Split::Test, polyps, frames, size)
    }

    /// [`HeldOut::open_records`] of another split of `seed` (a report's validation split).
    pub fn open_records_of(
        path: Option<&Path>,
        seed: u64,
        split: Split,
        polyps: usize,
        frames: usize,
        size: u32,
    ) -> Result<HeldOut, PhantomError> {
        if path.is_some() {
            return HeldOut::open(path, seed, polyps, 4, size);
        }
        let cfg = PhantomConfig {
            seed,
            split,
            polyps,
            views_per_polyp: 4,
            videos: 0,
            capsule_images: 0,
            background_frames: 2,
            frames_per_exam: frames,
            image_size: size,
            ..PhantomConfig::default()
        };
        HeldOut::generate(
            &cfg,
            format!(
                "phantom {} split of seed {seed}: examination records, {polyps} polyps, {frames} frames per examination, {size} px",
                split.name()
            ),
            &Progress::new(),
        )
    }

    /// Generates `cfg` into a temporary folder, removed on drop.
    fn generate(
        cfg: &PhantomConfig,
        described: String,
        progress: &Progress,
    ) -> Result<HeldOut, PhantomError> {
        phantom::check_size(cfg)?;
        sweep_stale_splits();
        let dir = std::env::temp_dir().join(format!(
            "endotwin-heldout-{}-{}-{}",
            cfg.split.name(),
            cfg.seed,
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let mut store = Store::open(&dir, OpenMode::CreateIfMissing)?;
        if let Err(e) = phantom::generate(&mut store, cfg, progress) {
            // A failed split leaves no folder behind.
            drop(store);
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e);
        }
        Ok(HeldOut {
            store,
            described,
            generated: Some(dir),
        })
    }
}

/// The phantom of a held-out video split ([`HeldOut::open_videos`]): `videos` procedure videos
/// of `frames` frames, three polyps a video, no capsule images or background frames.
pub fn video_split(seed: u64, split: Split, videos: usize, frames: usize) -> PhantomConfig {
    PhantomConfig {
        seed,
        split,
        polyps: videos.saturating_mul(3),
        views_per_polyp: 4,
        videos,
        frames_per_video: frames,
        capsule_images: 0,
        background_frames: 0,
        image_size: 64,
        ..PhantomConfig::default()
    }
}

impl HeldOut {
    /// `path` when given, else `split` of `seed` with `videos` procedure videos of `frames`
    /// frames (and their examinations' polyps; no capsule images).
    pub fn open_videos(
        path: Option<&Path>,
        seed: u64,
        split: Split,
        videos: usize,
        frames: usize,
    ) -> Result<HeldOut, PhantomError> {
        if let Some(path) = path {
            return HeldOut::open(Some(path), seed, 0, 0, 0);
        }
        HeldOut::generate(
            &video_split(seed, split, videos, frames),
            format!(
                "phantom {} split of seed {seed}, {videos} videos x {frames} frames",
                split.name()
            ),
            &Progress::new(),
        )
    }

    /// `path` when given, else `split` of `seed` with `frames` captioned capsule frames at
    /// 96 px (patients of 24 frames; nothing else).
    pub fn open_capsule(
        path: Option<&Path>,
        seed: u64,
        split: Split,
        frames: usize,
    ) -> Result<HeldOut, PhantomError> {
        if let Some(path) = path {
            return HeldOut::open(Some(path), seed, 0, 0, 0);
        }
        let cfg = PhantomConfig {
            seed,
            split,
            polyps: 0,
            views_per_polyp: 4,
            videos: 0,
            frames_per_video: 0,
            capsule_images: frames,
            background_frames: 0,
            image_size: 96,
            ..PhantomConfig::default()
        };
        HeldOut::generate(
            &cfg,
            format!(
                "phantom {} split of seed {seed}, {frames} capsule frames",
                split.name()
            ),
            &Progress::new(),
        )
    }
}

/// Removes the generated splits of evaluations that ended without dropping theirs (killed,
/// interrupted): `endotwin-heldout-<split>-<seed>-<pid>` whose process is gone. Linux only:
/// elsewhere a process's liveness is not read from /proc, and nothing is removed.
fn sweep_stale_splits() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let Some(pid) = name
            .strip_prefix("endotwin-heldout-")
            .and_then(|rest| rest.rsplit('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && crate::plumbing::process_gone(pid) == Some(true) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

impl Drop for HeldOut {
    fn drop(&mut self) {
        if let Some(dir) = &self.generated {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

#[cfg(test)]
mod tests {
    /// MINOR 13: the split of an evaluation that was killed is removed by the next one; a
    /// live process's split stays.
    #[test]
    fn a_dead_evaluations_split_is_swept_and_a_live_ones_kept() {
        let tmp = std::env::temp_dir();
        let dead = tmp.join("endotwin-heldout-unit-0-999999999");
        let live = tmp.join(format!("endotwin-heldout-unit-1-{}", std::process::id()));
        for d in [&dead, &live] {
            std::fs::create_dir_all(d.join("media")).unwrap();
        }
        if std::path::Path::new("/proc/self").exists() {
            super::sweep_stale_splits();
            assert!(!dead.exists());
        }
        assert!(live.exists());
        let _ = std::fs::remove_dir_all(&dead);
        std::fs::remove_dir_all(&live).unwrap();
    }
}
