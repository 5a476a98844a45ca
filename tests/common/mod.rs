//! Helpers shared by the hostile-input suite and the manifest property tests.
#![allow(dead_code)]

use endotwin::store::{OpenMode, Store};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A segmentation mask: black, with a white rectangle in its middle (the polyp).
pub fn mask_png(path: &Path, w: u32, h: u32) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let img = image::GrayImage::from_fn(w, h, |x, y| {
        let inside = x >= w / 4 && x < w - w / 4 && y >= h / 4 && y < h - h / 4;
        image::Luma([if inside { 255 } else { 0 }])
    });
    img.save(path).unwrap();
}

/// A small distinct PNG (the seed makes its content unique).
pub fn png(path: &Path, w: u32, h: u32, seed: u8) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let img = image::RgbImage::from_fn(w, h, |x, y| {
        image::Rgb([seed, (x * 7 + y) as u8, (y * 5) as u8 ^ seed])
    });
    img.save(path).unwrap();
}

pub fn endotwin(library: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_endotwin"));
    // A logged-in user, as on a workstation: `labels import --apply` signs with $USER when no
    // --who is given (and refuses without either).
    c.env("ENDOTWIN_BACKEND", "cpu")
        .env("USER", "tester")
        .arg("--library")
        .arg(library);
    c
}

/// [`endotwin`] on `library` with `args`: the command line of most hostile-round tests.
pub fn et(library: &Path, args: &[&str]) -> Command {
    let mut c = endotwin(library);
    c.args(args);
    c
}

/// What a command did, for assertions and failure messages.
pub struct Ran {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    pub fn text(&self) -> String {
        format!(
            "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }
    pub fn says(&self, needle: &str) -> bool {
        self.stdout.contains(needle) || self.stderr.contains(needle)
    }
}

pub fn run(mut c: Command) -> Ran {
    let Output {
        status,
        stdout,
        stderr,
    } = c.output().unwrap();
    let ran = Ran {
        code: status.code(),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    };
    assert!(
        ran.code != Some(101) && !ran.stderr.contains("panicked"),
        "the command panicked:\n{}",
        ran.text()
    );
    ran
}

/// `endotwin --library LIB import LAYOUT PATH [extra…]`.
pub fn import(library: &Path, layout: &str, path: &Path, extra: &[&str]) -> Ran {
    let mut c = endotwin(library);
    c.arg("import").arg(layout).arg(path).args(extra);
    run(c)
}

/// Every row of the library and every file under its media folder (name, length, bytes'
/// hash): equal before and after means nothing was added, changed or lost.
pub fn state(library: &Path) -> String {
    let mut out = match Store::open(library, OpenMode::Existing) {
        Ok(store) => store.snapshot().unwrap(),
        Err(e) => format!("no library: {e}\n"),
    };
    let mut files = Vec::new();
    walk(&library.join("media"), &mut files);
    files.sort();
    for f in files {
        let bytes = std::fs::read(&f).unwrap();
        out.push_str(&format!(
            "{} {} {}\n",
            f.strip_prefix(library).unwrap().display(),
            bytes.len(),
            endotwin::store::content_hash(&bytes)
        ));
    }
    out
}

/// Every file below `dir` (folders followed), appended to `out`.
pub fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// Rows that break the library's rules (must be none after any import).
pub fn invalid_rows(library: &Path) -> Vec<String> {
    match Store::open(library, OpenMode::Existing) {
        Ok(store) => store.invalid_rows().unwrap(),
        Err(_) => Vec::new(),
    }
}

/// A small phantom library with two 400-frame videos (tracklets, a revisit) and `polyps`
/// polyps of four views each: enough for every training recipe to run a few steps.
pub fn video_library(dir: &Path, polyps: usize) {
    video_library_of_seed(dir, polyps, 5);
}

/// [`video_library`] of another phantom seed (held-out videos for a report).
pub fn video_library_of_seed(dir: &Path, polyps: usize, seed: u64) {
    use endotwin::data::phantom::{self, PhantomConfig};
    let mut store = Store::open(dir, OpenMode::CreateIfMissing).unwrap();
    let cfg = PhantomConfig {
        seed,
        polyps,
        views_per_polyp: 4,
        videos: 2,
        frames_per_video: 400,
        background_frames: 0,
        capsule_images: 12,
        image_size: 48,
        video_size: 64,
        ..PhantomConfig::default()
    };
    phantom::generate(&mut store, &cfg, &endotwin::engine::Progress::new()).unwrap();
}

/// A new library at `dir` holding the phantom made by `cfg`.
pub fn phantom_library(dir: &Path, cfg: &endotwin::data::phantom::PhantomConfig) {
    let mut store =
        endotwin::store::Store::open(dir, endotwin::store::OpenMode::CreateIfMissing).unwrap();
    endotwin::data::phantom::generate(&mut store, cfg, &endotwin::engine::Progress::new()).unwrap();
}

/// Whether the real frames and pretrained weights of `../shared` must be there: the project's
/// own CI says so with `ENDOTWIN_REQUIRE_REALDATA` (set by `.ci/run`); any other CI (a fork's,
/// a packager's) without `../shared` skips those tests like a user's clone does.
pub fn shared_required() -> bool {
    std::env::var_os("ENDOTWIN_REQUIRE_REALDATA").is_some_and(|v| !v.is_empty() && v != "0")
}

/// `../shared/realdata/<sub>` when it is there. A user's clone has no `../shared`: the test
/// says so and is skipped (returns `None`), unless [`shared_required`].
pub fn realdata(sub: &str) -> Option<PathBuf> {
    shared("realdata", sub, "real frames")
}

/// `../shared/pretrained/<file>` when it is there; skipped as [`realdata`] is.
pub fn pretrained(file: &str) -> Option<PathBuf> {
    shared("pretrained", file, "pretrained weights").filter(|p| p.is_file())
}

/// `../shared/<folder>/<item>` when it is there, else a panic when [`shared_required`], else
/// `None` and a line saying which test skipped and why.
fn shared(folder: &str, item: &str, what: &str) -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared")
        .join(folder)
        .join(item);
    if path.exists() {
        return Some(path);
    }
    if shared_required() {
        panic!(
            "ENDOTWIN_REQUIRE_REALDATA is set but {} is not here",
            path.display()
        );
    }
    // Written past the test harness's capture, so `cargo test` shows which tests skipped.
    let test = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!(
            "skipped {test}: {} is not here ({what} live beside the repository, not in it)\n",
            path.display()
        )
        .as_bytes(),
    );
    None
}

/// burn-flex draws every random number of the process from one source, and all tests share
/// one process: every test that initialises, loads (a load initialises first) or trains a
/// model in this process, itself or through the app's engine, holds this lock for as long as
/// it draws, so that no other test's draws interleave with its own and the figures of a test
/// that seeds the device repeat run after run. Taken first thing in a test; a helper may take
/// it too: a thread that holds it already gets it again at once (a guard that releases
/// nothing).
pub fn device_rng() -> DeviceRng {
    static DEVICE_RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());
    if HOLDS_DEVICE_RNG.get() {
        return DeviceRng(None);
    }
    let guard = DEVICE_RNG.lock().unwrap_or_else(|e| e.into_inner());
    HOLDS_DEVICE_RNG.set(true);
    DeviceRng(Some(guard))
}

thread_local! {
    /// Whether this thread holds [`device_rng`]'s lock.
    static HOLDS_DEVICE_RNG: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// [`device_rng`]'s guard: the lock is released when the outermost one is dropped.
pub struct DeviceRng(Option<std::sync::MutexGuard<'static, ()>>);

impl Drop for DeviceRng {
    fn drop(&mut self) {
        if self.0.is_some() {
            HOLDS_DEVICE_RNG.set(false);
        }
    }
}

/// Writes `image` as a JPEG whose EXIF says how to turn it (orientation 1-8).
pub fn jpeg_with_exif_orientation(path: &Path, image: &image::RgbImage, orientation: u16) {
    let mut jpeg = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, 95)
        .encode_image(image)
        .unwrap();
    // APP1 "Exif": a little-endian TIFF header and one IFD entry, Orientation (0x0112).
    let mut tiff = b"II*\0\x08\0\0\0\x01\0\x12\x01\x03\0\x01\0\0\0".to_vec();
    tiff.extend(orientation.to_le_bytes());
    tiff.extend([0, 0, 0, 0, 0, 0]);
    let mut app1 = b"Exif\0\0".to_vec();
    app1.extend(tiff);
    let mut out = jpeg[..2].to_vec();
    out.extend([0xFF, 0xE1]);
    out.extend(((app1.len() + 2) as u16).to_be_bytes());
    out.extend(app1);
    out.extend(&jpeg[2..]);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, out).unwrap();
}

/// Waits (at most 5 minutes) for an in-app training run to end and returns its log, which
/// must say it finished.
pub fn finished_run(
    run: &endotwin::engine::training::TrainingRun,
) -> endotwin::engine::training::TrainingLog {
    let start = std::time::Instant::now();
    while !run.finished() {
        assert!(start.elapsed().as_secs() < 300, "the run did not finish");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let log = run.log().clone();
    assert!(matches!(&log.outcome, Some(Ok(_))), "{:?}", log.outcome);
    log
}

/// The code of the library's first polyp (as the store lists them).
pub fn first_polyp_code(library: &Path) -> String {
    let store = endotwin::store::Store::open(library, endotwin::store::OpenMode::Existing).unwrap();
    store.polyps().unwrap()[0].code.clone()
}

/// The smallest phantom library a model can be promoted into: 2 polyps of 48 px views, no
/// videos, capsule frames or background frames.
pub fn two_polyp_library(dir: &Path) {
    phantom_library(
        dir,
        &endotwin::data::phantom::PhantomConfig {
            polyps: 2,
            videos: 0,
            capsule_images: 0,
            background_frames: 0,
            image_size: 48,
            ..Default::default()
        },
    );
}

/// A multi-view folder in `dir`: one folder per polyp named in `polyps`, two 24x16 views
/// each (distinct pictures), and `pathology` as its pathology.csv.
pub fn multiview_folder(dir: &Path, polyps: &[&str], pathology: &str) {
    for (p, polyp) in polyps.iter().enumerate() {
        for v in 0..2u8 {
            png(
                &dir.join(format!("{polyp}/{v}.png")),
                24,
                16,
                10 * p as u8 + v,
            );
        }
    }
    std::fs::write(dir.join("pathology.csv"), pathology).unwrap();
}
