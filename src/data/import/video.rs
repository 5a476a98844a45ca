//! Video files: a procedure recording (MP4/H.264 as endoscopy recorders write it, and anything
//! else ffmpeg reads) becomes one examination with one video, its frames in decoding order at
//! the file's frame rate.
//!
//! Decoding runs the `ffmpeg` executable found on PATH (or named by `ENDOTWIN_FFMPEG`), the
//! way rerun does: a plain `cargo build` links no codec library, H.264 High profile with
//! B-frames and CABAC decodes exactly as ffmpeg decodes it, and ffmpeg flushes its decoder at
//! the end of the stream, so every frame comes out. Frames arrive as raw RGB on a pipe and are
//! stored as JPEG (quality 92), so a 20-minute 720p recording is a few GB, not tens.
//!
//! Like every importer it reads everything before writing anything: a file that is not a
//! video, is truncated (no `moov` atom) or decodes to fewer frames than its index lists is
//! refused with ffmpeg's own words and nothing is written.

use super::plan::{Plan, PlanExam, PlanImage, PlanVideo};
use super::{ImportError, PreparedImage, check_cancel};
use crate::data::images::{THUMBNAIL_SIDE, thumbnail_jpeg};
use crate::plumbing::Progress;
use crate::store::MediaKind;
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Environment variable naming the ffmpeg executable when it is not on PATH.
pub const FFMPEG_ENV: &str = "ENDOTWIN_FFMPEG";

/// Environment variable: how many seconds ffprobe may take, and ffmpeg may go without
/// giving a frame, before it is stopped (default [`DEFAULT_TOOL_TIMEOUT_S`]).
pub const TOOL_TIMEOUT_ENV: &str = "ENDOTWIN_TOOL_TIMEOUT_S";
/// Two minutes: far longer than any healthy decoder pauses between frames.
pub const DEFAULT_TOOL_TIMEOUT_S: u64 = 120;
/// The longest [`TOOL_TIMEOUT_ENV`] taken: a day.
pub const MAX_TOOL_TIMEOUT_S: u64 = 86_400;
/// The most frames one video import reads: about 2 hours at 25 frames a second.
pub const MAX_VIDEO_FRAMES: u64 = 180_000;

/// The most bytes of prepared frames (encoded image and thumbnail) one video import holds
/// before it writes them.
pub const MAX_HELD_FRAME_BYTES: u64 = 4 << 30;

fn tool_timeout() -> std::time::Duration {
    let given = std::env::var(TOOL_TIMEOUT_ENV).ok();
    let s = given
        .as_deref()
        .and_then(|v| v.trim().parse::<u64>().ok())
        // At most a day: a larger number overflowed the deadline (round 9 N18: a panic).
        .filter(|&s| (1..=MAX_TOOL_TIMEOUT_S).contains(&s));
    if let (Some(v), None) = (&given, s) {
        // Said once a process, where the user looks (MINOR 19: it was replaced silently).
        static TOLD: std::sync::Once = std::sync::Once::new();
        TOLD.call_once(|| {
            eprintln!(
                "note: {TOOL_TIMEOUT_ENV}={v:?} is not a whole number of seconds from 1 to \
                 {MAX_TOOL_TIMEOUT_S}; using {DEFAULT_TOOL_TIMEOUT_S} s"
            )
        });
    }
    std::time::Duration::from_secs(s.unwrap_or(DEFAULT_TOOL_TIMEOUT_S))
}

/// Runs `cmd` to its end, or stops it once `timeout` has passed.
fn output_within(
    mut cmd: Command,
    timeout: std::time::Duration,
) -> Result<std::process::Output, String> {
    let name = cmd.get_program().to_string_lossy().into_owned();
    let mut child = own_group(&mut cmd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("could not run {name}: {e}"))?;
    let _watched = crate::plumbing::children::watch(child.id());
    let drain = |r: Box<dyn Read + Send>| drain(r);
    let out = drain(Box::new(child.stdout.take().expect("piped")));
    let err = drain(Box::new(child.stderr.take().expect("piped")));
    let start = std::time::Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() < timeout => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            Ok(None) => {
                kill_group(&mut child);
                let _ = child.wait();
                return Err(format!(
                    "{name} did not answer within {} s and was stopped ({TOOL_TIMEOUT_ENV} sets the limit)",
                    timeout.as_secs()
                ));
            }
            Err(e) => return Err(format!("waiting for {name}: {e}")),
        }
    };
    Ok(std::process::Output {
        status,
        stdout: out.finish(),
        stderr: err.finish(),
    })
}

/// A pipe read to its end on a thread of its own.
struct Drain {
    read: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    ended: std::sync::mpsc::Receiver<()>,
}

/// How long a finished tool's pipes may take to close: a process it left behind in another
/// session (out of reach of [`kill_group`]) can hold them open for ever.
const PIPE_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// The most bytes of a tool's pipe [`drain`] keeps (its end).
const DRAIN_KEEP: usize = 256 * 1024;

fn drain(mut r: Box<dyn Read + Send>) -> Drain {
    let read = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (tx, ended) = std::sync::mpsc::channel();
    let into = read.clone();
    std::thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        loop {
            match r.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => {
                    // A tool that floods its pipe keeps only its last DRAIN_KEEP bytes (what
                    // a message quotes is the tail): memory stays bounded.
                    let mut kept = into.lock().expect("drain buffer");
                    kept.extend_from_slice(&chunk[..n]);
                    if kept.len() > 2 * DRAIN_KEEP {
                        let cut = kept.len() - DRAIN_KEEP;
                        kept.drain(..cut);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let _ = tx.send(());
    });
    Drain { read, ended }
}

impl Drain {
    /// What the pipe held once it closed, or what had come [`PIPE_GRACE`] after the tool
    /// ended (the reading thread then ends with the process).
    fn finish(self) -> Vec<u8> {
        let _ = self.ended.recv_timeout(PIPE_GRACE);
        self.read.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

use crate::plumbing::children::{kill_group, own_group};

/// File extensions taken for video files (the GUI's file dialog and drops).
pub const VIDEO_EXTENSIONS: &[&str] = &[
    "mp4", "m4v", "mov", "mkv", "avi", "webm", "mpg", "mpeg", "ts", "mts",
];

/// Whether `path` is named like a video file.
pub fn is_video_file(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| VIDEO_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

/// JPEG quality of the stored frames: visually lossless for review and training crops.
const JPEG_QUALITY: u8 = 92;

/// The ffmpeg and ffprobe executables.
#[derive(Debug, Clone)]
pub struct Ffmpeg {
    pub ffmpeg: PathBuf,
    pub ffprobe: PathBuf,
}

/// What ffprobe says about a file's first video stream.
#[derive(Debug, Clone, PartialEq)]
pub struct VideoInfo {
    pub codec: String,
    pub width: u32,
    pub height: u32,
    pub fps: f64,
    /// The frame count the container's index lists, when it lists one.
    pub frames: Option<u64>,
    /// Duration times frame rate, for progress when the index lists no count.
    pub estimated_frames: Option<u64>,
}

fn executable_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// Finds ffmpeg (`ENDOTWIN_FFMPEG`, else PATH) and the ffprobe beside it (else on PATH).
pub fn find_ffmpeg() -> Result<Ffmpeg, String> {
    let ffmpeg = match std::env::var_os(FFMPEG_ENV) {
        Some(p) if !p.is_empty() => {
            let mut p = PathBuf::from(p);
            // A bare program name is looked up on PATH, as a shell would (round 9 N40).
            if p.components().count() == 1
                && !p.is_file()
                && let Some(found) = executable_on_path(&p.to_string_lossy())
            {
                p = found;
            }
            if !p.is_file() {
                return Err(format!(
                    "{FFMPEG_ENV} names {}, which is not a file",
                    p.display()
                ));
            }
            // ffmpeg's companion in its place would fail on every video, and the video be
            // blamed (round 9 N40).
            if p.file_stem()
                .is_some_and(|s| s.to_string_lossy().starts_with("ffprobe"))
            {
                return Err(format!(
                    "{FFMPEG_ENV} names {}, the ffprobe program; it names ffmpeg itself (the \
                     ffprobe beside it is found on its own); nothing was imported",
                    p.display()
                ));
            }
            p
        }
        _ => executable_on_path("ffmpeg").ok_or_else(|| {
            "importing a video file needs the ffmpeg program, and none was found on PATH; \
             install ffmpeg (e.g. `apt install ffmpeg`, `brew install ffmpeg`, or ffmpeg.org \
             builds on Windows) or name it with ENDOTWIN_FFMPEG"
                .to_string()
        })?,
    };
    let beside = ffmpeg.with_file_name(format!("ffprobe{}", std::env::consts::EXE_SUFFIX));
    let ffprobe = if beside.is_file() {
        beside
    } else {
        executable_on_path("ffprobe").ok_or_else(|| {
            format!(
                "found {} but no ffprobe beside it or on PATH (ffmpeg installs both)",
                ffmpeg.display()
            )
        })?
    };
    Ok(Ffmpeg { ffmpeg, ffprobe })
}

/// What a tool wrote to stderr, for a message: its first distinct lines without ffmpeg's
/// `[demuxer @ 0x...]` prefixes, with a plain-words reading of the commonest failure.
fn tail(stderr: &str) -> String {
    let mut lines: Vec<&str> = Vec::new();
    for line in stderr.lines() {
        let line = match line.strip_prefix('[').and_then(|l| l.split_once("] ")) {
            Some((_, rest)) => rest.trim(),
            None => line.trim(),
        };
        // "stream 0, offset 0x14b0: partial file" repeats with other offsets.
        let gist = line.rsplit(": ").next().unwrap_or(line);
        if !line.is_empty() && !lines.iter().any(|l| l.rsplit(": ").next() == Some(gist)) {
            lines.push(line);
        }
    }
    let mut text = lines.into_iter().take(3).collect::<Vec<_>>().join("; ");
    if stderr.contains("moov atom not found") {
        text.push_str(
            "; the file has no index (moov atom): it is not an MP4, or the recording was \
             cut off before the recorder finished writing it",
        );
    }
    text
}

/// `num/den` (ffprobe's rational) as a number.
fn rational(text: &str) -> Option<f64> {
    let (n, d) = text.split_once('/').unwrap_or((text, "1"));
    let (n, d): (f64, f64) = (n.trim().parse().ok()?, d.trim().parse().ok()?);
    (d != 0.0 && n > 0.0).then_some(n / d)
}

/// Reads the first video stream's codec, size, frame rate and frame count.
pub fn probe(tools: &Ffmpeg, path: &Path) -> Result<VideoInfo, String> {
    let mut cmd = Command::new(&tools.ffprobe);
    cmd.args(["-v", "error", "-select_streams", "v:0", "-show_entries"])
        .arg("stream=codec_name,width,height,avg_frame_rate,r_frame_rate,nb_frames,duration:stream_tags=rotate:stream_side_data=rotation:format=duration")
        .args(["-of", "json"])
        .arg(path);
    let out = output_within(cmd, tool_timeout())?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!("not a readable video ({})", tail(&stderr)));
    }
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("ffprobe printed something unexpected: {e}"))?;
    let Some(stream) = json["streams"].get(0) else {
        return Err("the file holds no video stream".into());
    };
    let dim = |k: &str| stream[k].as_u64().filter(|&v| v > 0 && v <= 16_384);
    let (Some(width), Some(height)) = (dim("width"), dim("height")) else {
        // Not a video at all, most often (round 8 N35: a text file named .png).
        return Err(format!(
            "not a video EndoTwin can import: ffprobe reads a '{}' stream without a usable \
             frame size",
            stream["codec_name"].as_str().unwrap_or("?")
        ));
    };
    // A still picture under a video's name (round 11 N8: a PNG renamed .mp4 became a video
    // of one frame): an image codec without several frames is no recording.
    let codec = stream["codec_name"].as_str().unwrap_or("?");
    let listed = stream["nb_frames"]
        .as_str()
        .and_then(|s| s.parse::<u64>().ok());
    const STILL_CODECS: [&str; 8] = [
        "png", "mjpeg", "bmp", "tiff", "webp", "gif", "jpeg2000", "jpegls",
    ];
    if STILL_CODECS.contains(&codec) && listed.is_none_or(|n| n <= 1) {
        return Err(format!(
            "a still image ({codec}), not a recording: import it with `endotwin import images`"
        ));
    }
    let fps = ["avg_frame_rate", "r_frame_rate"]
        .iter()
        .find_map(|k| stream[*k].as_str().and_then(rational))
        .filter(|f| *f <= 1000.0)
        .unwrap_or(25.0);
    // A display matrix (phone and some recorder files) turns the picture; ffmpeg applies it
    // when decoding, so a quarter turn swaps the frame's sides.
    let rotation = stream["side_data_list"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|d| {
            d["rotation"]
                .as_f64()
                .or_else(|| d["rotation"].as_str()?.parse().ok())
        })
        .or_else(|| stream["tags"]["rotate"].as_str()?.parse::<f64>().ok())
        .unwrap_or(0.0);
    let quarter_turn = (rotation.round() as i64).rem_euclid(180) == 90;
    let (width, height) = if quarter_turn {
        (height, width)
    } else {
        (width, height)
    };
    let duration = [&stream["duration"], &json["format"]["duration"]]
        .iter()
        .find_map(|d| d.as_str()?.parse::<f64>().ok())
        .filter(|d| d.is_finite() && *d > 0.0);
    Ok(VideoInfo {
        codec: stream["codec_name"].as_str().unwrap_or("?").to_string(),
        width: width as u32,
        height: height as u32,
        fps,
        frames: stream["nb_frames"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .filter(|&n| n > 0),
        estimated_frames: duration.map(|d| (d * fps).round() as u64),
    })
}

/// The first 8 hex digits of the file's SHA-256: two recordings with one file name stay two
/// videos, and re-importing one file changes nothing.
fn file_tag(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher.finalize()[..4]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// Kills the decoder when the import stops early (cancel, error).
struct Decoder(std::sync::Arc<std::sync::Mutex<Child>>);

impl Drop for Decoder {
    fn drop(&mut self) {
        if let Ok(mut child) = self.0.lock() {
            if matches!(child.try_wait(), Ok(None)) {
                kill_group(&mut child);
            }
            let _ = child.wait();
        }
    }
}

/// Stops a decoder that has given nothing for `timeout` (a hung or never-answering ffmpeg).
struct Watchdog {
    last: std::sync::Arc<std::sync::Mutex<std::time::Instant>>,
    fired: std::sync::Arc<std::sync::atomic::AtomicBool>,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    timeout: std::time::Duration,
}

impl Watchdog {
    fn start(
        child: std::sync::Arc<std::sync::Mutex<Child>>,
        timeout: std::time::Duration,
    ) -> Watchdog {
        use std::sync::atomic::Ordering;
        let dog = Watchdog {
            last: std::sync::Arc::new(std::sync::Mutex::new(std::time::Instant::now())),
            fired: Default::default(),
            done: Default::default(),
            timeout,
        };
        let (last, fired, done) = (dog.last.clone(), dog.fired.clone(), dog.done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(std::time::Duration::from_millis(50));
                let quiet = last.lock().map(|t| t.elapsed()).unwrap_or_default();
                if quiet > timeout && !done.load(Ordering::Relaxed) {
                    fired.store(true, Ordering::Relaxed);
                    if let Ok(mut c) = child.lock() {
                        kill_group(&mut c);
                    }
                    return;
                }
            }
        });
        dog
    }

    /// A frame came.
    fn alive(&self) {
        if let Ok(mut t) = self.last.lock() {
            *t = std::time::Instant::now();
        }
    }

    /// How long it was silent when it stopped the decoder, if it did.
    fn fired(&self) -> Option<std::time::Duration> {
        self.fired
            .load(std::sync::atomic::Ordering::Relaxed)
            .then_some(self.timeout)
    }

    fn stop(&self) {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop();
    }
}

fn prepare_frame(source: &Path, index: u64, rgb: image::RgbImage) -> PreparedImage {
    let (width, height) = rgb.dimensions();
    let image = image::DynamicImage::ImageRgb8(rgb);
    let mut bytes = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut bytes, JPEG_QUALITY)
        .encode_image(&image)
        .expect("JPEG encoding into memory cannot fail");
    PreparedImage {
        source: source.join(format!("frame {index}")),
        thumbnail: thumbnail_jpeg(&image, THUMBNAIL_SIDE),
        bytes,
        extension: "jpg",
        width,
        height,
    }
}

/// The code a video file is imported under: its file stem and the first 8 hex digits of its
/// contents' SHA-256 (the tag, returned second).
pub fn code_of(path: &Path) -> Result<(String, String), ImportError> {
    let fail = |reason: String| ImportError::source_error(path, reason);
    if !path.is_file() {
        return Err(fail("a video import takes one file".into()));
    }
    let tag = file_tag(path).map_err(|e| fail(format!("cannot read the file: {e}")))?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "video".into());
    Ok((format!("{stem}-{tag}"), tag))
}

/// Decodes every frame of `path` into a plan: one examination, one video, under `code`
/// (from [`code_of`]).
pub fn read(path: &Path, code: String, progress: &Progress) -> Result<Plan, ImportError> {
    let fail = |reason: String| ImportError::source_error(path, reason);
    let tools = find_ffmpeg().map_err(fail)?;
    progress.stage("probing the video", 1);
    let info = probe(&tools, path).map_err(fail)?;
    // A decoder that never stops (a damaged stream, a wrong tool) is stopped past what the
    // video announces (half again, for variable frame rates), or past MAX_VIDEO_FRAMES.
    // A frame count far past what the duration and rate give is not believed (round 16 N7:
    // a header announcing 10^11 frames for 2 s at 10 fps let an endless decoder fill memory).
    let announced = match (info.frames, info.estimated_frames) {
        (Some(listed), Some(timed)) if listed > timed.saturating_mul(2) + 300 => Some(timed),
        (listed, timed) => listed.or(timed),
    };
    // A video announcing more than an import reads is refused before any frame (round 17 R3:
    // a header whose duration agreed with its 10^11 frames was decoded for minutes).
    if let Some(n) = announced.filter(|&n| n > MAX_VIDEO_FRAMES) {
        return Err(fail(format!(
            "the video announces {n} frames; an import reads at most {MAX_VIDEO_FRAMES} (about \
             2 hours at 25 frames a second): cut the recording into parts (nothing was written)"
        )));
    }
    progress.stage("decoding frames", announced.unwrap_or(0));

    let mut child = own_group(&mut Command::new(&tools.ffmpeg))
        .args(["-nostdin", "-v", "error", "-i"])
        .arg(path)
        .args(["-map", "0:v:0", "-vsync", "passthrough"])
        .args(["-f", "rawvideo", "-pix_fmt", "rgb24", "pipe:1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| fail(format!("could not run {}: {e}", tools.ffmpeg.display())))?;
    let _watched = crate::plumbing::children::watch(child.id());
    let mut stdout = child.stdout.take().expect("piped stdout");
    let stderr = child.stderr.take().expect("piped stderr");
    let errors = drain(Box::new(stderr));
    let decoder = Decoder(std::sync::Arc::new(std::sync::Mutex::new(child)));
    let watchdog = Watchdog::start(decoder.0.clone(), tool_timeout());

    let frame_bytes = info.width as usize * info.height as usize * 3;
    let mut held = 0u64;
    let mut buf = vec![0u8; frame_bytes];
    let mut frames = Vec::new();
    let most = announced
        .map(|n| n.saturating_mul(3) / 2 + 300)
        .unwrap_or(MAX_VIDEO_FRAMES)
        .min(MAX_VIDEO_FRAMES);
    loop {
        check_cancel(progress)?;
        if frames.len() as u64 >= most {
            // Dropping the decoder stops ffmpeg's whole process group.
            watchdog.stop();
            return Err(fail(format!(
                "ffmpeg gave more than {most} frames for a video that announces {}; stopped \
                 (nothing was written)",
                announced.map_or("no frame count".into(), |n| format!("{n} frames"))
            )));
        }
        // Stops waiting when the watchdog fires or ffmpeg has ended with nothing more in the
        // pipe (a process it left behind may hold the pipe open for ever).
        let read = read_full_until(&mut stdout, &mut buf, || {
            watchdog.fired().is_some()
                || matches!(decoder.0.lock().map(|mut c| c.try_wait()), Ok(Ok(Some(_))))
        });
        if let Some(silent) = watchdog.fired() {
            return Err(fail(format!(
                "ffmpeg gave no frame for {} s after frame {} and was stopped ({TOOL_TIMEOUT_ENV} sets the limit)",
                silent.as_secs(),
                frames.len()
            )));
        }
        watchdog.alive();
        match read {
            Ok(0) => break,
            Ok(n) if n == frame_bytes => {}
            Ok(n) => {
                return Err(fail(format!(
                    "ffmpeg stopped in the middle of frame {} ({n} of {frame_bytes} bytes)",
                    frames.len()
                )));
            }
            Err(e) => return Err(fail(format!("reading ffmpeg's output: {e}"))),
        }
        let rgb = image::RgbImage::from_raw(info.width, info.height, buf.clone())
            .expect("buffer holds one frame");
        let index = frames.len() as u64;
        let prepared = prepare_frame(path, index, rgb);
        held += prepared.bytes.len() as u64 + prepared.thumbnail.len() as u64;
        if held > MAX_HELD_FRAME_BYTES {
            watchdog.stop();
            return Err(fail(format!(
                "the {} frames read so far hold more than {} GB, all of which an import keeps \
                 until it writes; stopped (nothing was written): cut the recording into parts",
                frames.len() + 1,
                MAX_HELD_FRAME_BYTES >> 30
            )));
        }
        frames.push((
            index as i64,
            PlanImage::new(prepared, MediaKind::VideoFrame),
        ));
        progress.inc();
    }
    watchdog.stop();
    // ffmpeg closed its output: it ends now, or within the tool limit (a process that closed
    // the pipe and goes on, e.g. writing errors for ever, is stopped when the decoder drops).
    let limit = tool_timeout();
    let deadline = std::time::Instant::now() + limit;
    let status = loop {
        let ended = decoder
            .0
            .lock()
            .expect("decoder lock")
            .try_wait()
            .map_err(|e| fail(format!("waiting for ffmpeg: {e}")))?;
        if let Some(status) = ended {
            break status;
        }
        if std::time::Instant::now() > deadline {
            return Err(fail(format!(
                "ffmpeg closed its output after frame {} but did not end within {} s and was \
                 stopped ({TOOL_TIMEOUT_ENV} sets the limit)",
                frames.len(),
                limit.as_secs()
            )));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let stderr = String::from_utf8_lossy(&errors.finish()).into_owned();
    if !status.success() {
        // Failing without a word is the program's doing, not the video's (round 12 N1:
        // ENDOTWIN_FFMPEG=/bin/false, "could not decode it ()").
        if stderr.trim().is_empty() {
            return Err(fail(format!(
                "{} failed ({status}) without a message on a video ffprobe reads: is it \
                 ffmpeg? ({FFMPEG_ENV} names the program)",
                tools.ffmpeg.display()
            )));
        }
        return Err(fail(format!(
            "ffmpeg could not decode it ({})",
            tail(&stderr)
        )));
    }
    if frames.is_empty() {
        // ffprobe read frames that the decoder did not give: the program named as ffmpeg is
        // the likelier culprit (round 11 N3: ENDOTWIN_FFMPEG=/bin/true blamed the video).
        if info.frames.is_some_and(|n| n > 0) && stderr.trim().is_empty() {
            return Err(fail(format!(
                "{} gave no frame and no error for a video ffprobe reads as {} frames: is it \
                 ffmpeg? ({FFMPEG_ENV} names the program)",
                tools.ffmpeg.display(),
                info.frames.unwrap_or_default()
            )));
        }
        return Err(fail("the video holds no frames".into()));
    }
    if let Some(listed) = info.frames
        && (frames.len() as u64) < listed
    {
        let why = tail(&stderr);
        return Err(fail(format!(
            "truncated or damaged: its index lists {listed} frames but only {} decode{}",
            frames.len(),
            if why.is_empty() {
                String::new()
            } else {
                format!(" ({why})")
            }
        )));
    }
    let mut exam = PlanExam::new(code.clone(), "colonoscopy", path);
    exam.videos.push(PlanVideo {
        code,
        fps: info.fps,
        frames,
        ..Default::default()
    });
    Ok(Plan {
        exams: vec![exam],
        ..Default::default()
    })
}

/// Fills `buf` unless the stream ends first; returns how many bytes were read.
/// Reads until `buf` is full or the stream ends; while no byte comes, `stop()` is asked every
/// 100 ms and ends the read (with what was filled) when it says so (on Unix; elsewhere a plain
/// blocking read).
fn read_full_until(
    r: &mut std::process::ChildStdout,
    buf: &mut [u8],
    mut stop: impl FnMut() -> bool,
) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            let mut fd = libc::pollfd {
                fd: r.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd for the duration of the call; the fd is open (owned by
            // `r`, borrowed here).
            let ready = unsafe { libc::poll(&mut fd, 1, 100) };
            if ready <= 0 {
                if stop() {
                    break;
                }
                continue;
            }
        }
        match r.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::rational;

    #[test]
    fn frame_rates_read_as_ffprobe_prints_them() {
        assert_eq!(rational("25/1"), Some(25.0));
        assert!((rational("30000/1001").unwrap() - 29.97).abs() < 0.01);
        assert_eq!(rational("0/0"), None);
        assert_eq!(rational("50"), Some(50.0));
    }
}
