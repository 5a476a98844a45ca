//! Every path behind the same guards (issue 43): every file a command writes goes through the
//! output guard, whatever the command and whatever name the library was opened under; a
//! damaged database is checked before the first write of an open; files read by name are
//! regular files of bounded size; a tool's watchdog stops the tool's whole process group.
//! Each case goes through the command line and checks the library byte-identical.

use crate::common;
use crate::hostile::library_with_cases;
use crate::store_safety::{endotwin_cmd, files, mkfifo, run_within};

use common::run;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The names of `endotwin <path> --help`'s subcommands (none for a leaf command).
fn subcommands(path: &[String]) -> Vec<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_endotwin"))
        .args(path)
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout).into_owned();
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|name| name != "help")
        .collect()
}

/// Every leaf command of `endotwin` (`["eval", "twins"]`, `["info"]`, ...) with its help.
fn leaf_commands() -> Vec<(Vec<String>, String)> {
    let mut out = Vec::new();
    let mut todo = vec![Vec::<String>::new()];
    while let Some(path) = todo.pop() {
        let subs = subcommands(&path);
        if subs.is_empty() && !path.is_empty() {
            let help = Command::new(env!("CARGO_BIN_EXE_endotwin"))
                .args(&path)
                .arg("--help")
                .output()
                .unwrap();
            out.push((path, String::from_utf8_lossy(&help.stdout).into_owned()));
            continue;
        }
        for s in subs {
            let mut p = path.clone();
            p.push(s);
            todo.push(p);
        }
    }
    out
}

/// Any image file (a screenshot of the repository's).
fn image() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/screenshots/twins.png")
}

/// The arguments a command needs besides the output file to get as far as its output check.
fn required_args(command: &[String], data: &Path) -> Vec<String> {
    let shipped = endotwin::default_models_dir();
    let arg = |p: PathBuf| p.display().to_string();
    match command.join(" ").as_str() {
        "eval real" => vec!["--data".into(), arg(data.to_path_buf())],
        "model report" => vec!["--card".into(), arg(shipped.join("captions.json"))],
        "prompts score" => vec![
            "--image".into(),
            arg(image()),
            "--prompts".into(),
            arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/prompt_sets.toml")),
        ],
        "twins" | "captions describe" => vec![arg(image())],
        _ => Vec::new(),
    }
}

#[test]
fn every_command_that_writes_a_file_refuses_the_library_an_existing_file_and_a_fifo() {
    let (lib, _src) = library_with_cases();
    let before = files(lib.path());
    let dir = tempfile::tempdir().unwrap();
    let existing = dir.path().join("existing.json");
    std::fs::write(&existing, b"keep me").unwrap();
    let fifo = dir.path().join("pipe.json");
    mkfifo(&fifo);
    let media_file = files(lib.path())
        .into_iter()
        .map(|(p, _)| p)
        .find(|p| p.starts_with("media"))
        .unwrap();
    let mut covered = Vec::new();
    for (command, help) in leaf_commands() {
        for flag in ["--json", "--confusion"] {
            if !help.contains(&format!("{flag} <")) {
                continue;
            }
            covered.push(format!("{} {flag}", command.join(" ")));
            let cases: [(&Path, bool, &str); 5] = [
                (
                    &lib.path().join("library.sqlite"),
                    true,
                    "library's own file",
                ),
                (&lib.path().join(&media_file), true, "library's own file"),
                (
                    &lib.path().join("library.sqlite-wal"),
                    true,
                    "library's own file",
                ),
                (&existing, false, "--force"),
                (&fifo, true, "not a regular file"),
            ];
            for (target, force, says) in cases {
                let mut c = endotwin_cmd(lib.path(), &[]);
                if force {
                    c.arg("--force");
                }
                c.args(&command)
                    .args(required_args(&command, dir.path()))
                    .arg(flag)
                    .arg(target);
                let r = run_within(c, 60);
                assert!(
                    !r.ok() && r.says(says) && r.says(&target.display().to_string()),
                    "{} {flag} {}: refused at once, naming the file:\n{}",
                    command.join(" "),
                    target.display(),
                    r.text()
                );
            }
        }
    }
    for expected in [
        "model report --json",
        "eval captions --confusion",
        "eval captions --json",
        "eval twins --json",
        "bench frames --json",
    ] {
        assert!(covered.iter().any(|c| c == expected), "{covered:?}");
    }
    assert_eq!(files(lib.path()), before, "the library changed");
    assert!(!lib.path().join("library.png").exists());
    assert_eq!(std::fs::read(&existing).unwrap(), b"keep me");
}

#[test]
fn a_report_beside_an_existing_picture_is_refused_without_force() {
    let (lib, _src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    std::fs::write(dir.path().join("r.png"), b"keep me").unwrap();
    let card = endotwin::default_models_dir().join("captions.json");
    let mut c = endotwin_cmd(lib.path(), &["model", "report", "--card"]);
    c.arg(&card).arg("--json").arg(&json);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("r.png") && r.says("--force"),
        "{}",
        r.text()
    );
    assert!(!json.exists());
    assert_eq!(std::fs::read(dir.path().join("r.png")).unwrap(), b"keep me");

    // The report beside a card (what the Training tab shows) is an earlier evaluation: a new
    // one replaces it only with --force, refused at once (before the evaluation's minutes).
    let cards = tempfile::tempdir().unwrap();
    for file in ["captions.json", "captions.bpk"] {
        std::fs::copy(
            endotwin::default_models_dir().join(file),
            cards.path().join(file),
        )
        .unwrap();
    }
    let earlier = cards.path().join("captions.report.json");
    std::fs::write(&earlier, b"an earlier report").unwrap();
    let mut c = endotwin_cmd(lib.path(), &["model", "report", "--card"]);
    c.arg(cards.path().join("captions.json"));
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("captions.report.json") && r.says("--force"),
        "{}",
        r.text()
    );
    assert_eq!(std::fs::read(&earlier).unwrap(), b"an earlier report");
}

#[test]
fn a_library_opened_under_another_name_is_never_written_over_even_with_force() {
    let (lib, _src) = library_with_cases();
    let db = lib.path().join("cases.sqlite");
    std::fs::rename(lib.path().join("library.sqlite"), &db).unwrap();
    let before = files(lib.path());
    for target in ["cases.sqlite", "cases.sqlite-wal", "cases.sqlite-shm"] {
        let out = lib.path().join(target);
        for command in [&["labels", "export"][..], &["contact-sheet"][..]] {
            let mut c = common::endotwin(&db);
            c.arg("--force").args(command).arg("--out").arg(&out);
            let r = run(c);
            assert!(
                !r.ok() && r.says("library's own file") && r.says(target),
                "{command:?} --out {target}:\n{}",
                r.text()
            );
        }
    }
    assert_eq!(files(lib.path()), before, "the library changed");
    // Another file beside it is the user's to write.
    let csv = lib.path().join("labels.csv");
    let mut c = common::endotwin(&db);
    c.args(["labels", "export", "--out"]).arg(&csv);
    let r = run(c);
    assert!(r.ok(), "{}", r.text());
}

#[test]
fn a_damaged_database_with_a_stale_run_is_not_written_to_at_open() {
    let (lib, _src) = library_with_cases();
    let db = lib.path().join("library.sqlite");
    {
        // A run whose process is gone (none recorded), left `running`; then an index whose
        // schema text no longer matches its table.
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(
            "INSERT INTO training_runs (recipe, config_json, status, started_at)
              VALUES ('twins', '{}', 'running', '2024-01-01T00:00:00Z');
             PRAGMA writable_schema = ON;
             UPDATE sqlite_master SET sql = 'CREATE INDEX media_examination ON media(width)'
              WHERE name = 'media_examination';
             PRAGMA writable_schema = OFF;",
        )
        .unwrap();
    }
    let before = files(lib.path());
    let out = tempfile::tempdir().unwrap();
    let csv = out.path().join("l.csv");
    let lib_arg = lib.path().display().to_string();
    let commands: [Vec<String>; 4] = [
        vec!["info".into()],
        vec![
            "labels".into(),
            "export".into(),
            "--out".into(),
            csv.display().to_string(),
        ],
        vec!["library".into(), "check".into()],
        vec![
            "bench".into(),
            "frames".into(),
            "--seconds".into(),
            "0.2".into(),
            "--library".into(),
            lib_arg,
        ],
    ];
    for command in commands {
        let mut c = common::endotwin(lib.path());
        c.args(&command);
        let r = run_within(c, 120);
        let name = command[..2.min(command.len())].join(" ");
        assert_eq!(
            files(lib.path()),
            before,
            "{name} wrote to a damaged library:\n{}",
            r.text()
        );
        match name.as_str() {
            "info" => assert!(r.says("DAMAGED"), "{}", r.text()),
            "library check" => assert!(
                !r.ok() && r.stdout.contains("database:") && r.says("nothing was changed"),
                "{}",
                r.text()
            ),
            _ => assert!(
                !r.ok() && r.says("damaged") && r.says("library.sqlite"),
                "{name}: {}",
                r.text()
            ),
        }
    }
    assert!(!csv.exists());
    let status: String =
        rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap()
            .query_row("SELECT status FROM training_runs", [], |r| r.get(0))
            .unwrap();
    assert_eq!(status, "running");
}

#[cfg(unix)]
#[test]
fn a_fifo_or_a_device_named_as_input_is_refused_at_once() {
    let (lib, src) = library_with_cases();
    let before = files(lib.path());
    let fifo = src.path().join("pipe");
    mkfifo(&fifo);
    let image = src.path().join("base/A/1.png");
    for input in [fifo.as_path(), Path::new("/dev/zero")] {
        let mut c = endotwin_cmd(lib.path(), &["prompts", "score", "--image"]);
        c.arg(&image).arg("--prompts").arg(input);
        let r = run_within(c, 60);
        assert!(
            !r.ok() && r.says("not a regular file") && r.says(&input.display().to_string()),
            "prompts score --prompts {}: {}",
            input.display(),
            r.text()
        );
        let models = tempfile::tempdir().unwrap();
        let mut c = endotwin_cmd(lib.path(), &["model", "import-hf-clip"]);
        c.arg(input).arg("--out").arg(models.path());
        let r = run_within(c, 60);
        assert!(
            !r.ok() && r.says("not a regular file") && r.says(&input.display().to_string()),
            "import-hf-clip {}: {}",
            input.display(),
            r.text()
        );
        assert_eq!(std::fs::read_dir(models.path()).unwrap().count(), 0);
    }
    assert_eq!(files(lib.path()), before);
}

/// An executable shell script at `path`.
#[cfg(unix)]
pub(crate) fn script(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// In `tools`: an ffprobe that describes a 3-frame video and an ffmpeg wrapper whose child
/// (`sleep 600`, its pid written to the returned file) holds the pipe and never writes.
pub(crate) fn hung_decoder(tools: &Path) -> std::path::PathBuf {
    let pid_file = tools.join("child.pid");
    script(
        &tools.join("ffprobe"),
        "#!/bin/sh\necho '{\"streams\":[{\"codec_name\":\"h264\",\"width\":16,\"height\":16,\"avg_frame_rate\":\"25/1\",\"nb_frames\":\"3\"}],\"format\":{\"duration\":\"0.12\"}}'\n",
    );
    // Not `exec`: the shell waits on a child that holds ffmpeg's stdout.
    script(
        &tools.join("ffmpeg"),
        &format!(
            "#!/bin/sh\nsleep 600 &\necho $! > '{}'\nwait\n",
            pid_file.display()
        ),
    );
    pid_file
}

#[cfg(unix)]
#[test]
fn a_wrapper_scripts_child_holding_the_pipe_is_stopped_with_it() {
    let (lib, src) = library_with_cases();
    let before = files(lib.path());
    let tools = tempfile::tempdir().unwrap();
    let pid_file = hung_decoder(tools.path());
    let video = src.path().join("rec.mp4");
    std::fs::write(&video, b"\0\0\0\x18ftypmp42 not really").unwrap();
    let mut c = endotwin_cmd(lib.path(), &["import", "video"]);
    c.arg(&video)
        .env("ENDOTWIN_FFMPEG", tools.path().join("ffmpeg"))
        .env("ENDOTWIN_TOOL_TIMEOUT_S", "2");
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("gave no frame for 2 s") && r.says("rec.mp4"),
        "{}",
        r.text()
    );
    assert_eq!(files(lib.path()), before);
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
    let state = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .next();
    assert!(
        matches!(state, None | Some("Z") | Some("X")),
        "the wrapper's child {} still runs: {stat}",
        pid.trim()
    );
}

#[cfg(unix)]
#[test]
fn a_process_the_wrapper_left_in_another_session_does_not_hold_the_import() {
    let (lib, src) = library_with_cases();
    let before = files(lib.path());
    let tools = tempfile::tempdir().unwrap();
    let pid_file = tools.path().join("detached.pid");
    // Both tools leave a process in a session of its own (out of reach of the group kill)
    // holding their stdout and stderr, and end at once.
    let detach = format!("setsid sleep 600 &\necho $! >> '{}'\n", pid_file.display());
    script(
        &tools.path().join("ffprobe"),
        &format!(
            "#!/bin/sh\n{detach}echo '{{\"streams\":[{{\"codec_name\":\"h264\",\"width\":16,\"height\":16,\"avg_frame_rate\":\"25/1\",\"nb_frames\":\"3\"}}],\"format\":{{\"duration\":\"0.12\"}}}}'\n"
        ),
    );
    script(
        &tools.path().join("ffmpeg"),
        &format!("#!/bin/sh\n{detach}exit 0\n"),
    );
    let video = src.path().join("rec.mp4");
    std::fs::write(&video, b"\0\0\0\x18ftypmp42 not really").unwrap();
    let mut c = endotwin_cmd(lib.path(), &["import", "video"]);
    c.arg(&video)
        .env("ENDOTWIN_FFMPEG", tools.path().join("ffmpeg"))
        .env("ENDOTWIN_TOOL_TIMEOUT_S", "30");
    let started = std::time::Instant::now();
    let r = run_within(c, 60);
    let took = started.elapsed();
    for pid in std::fs::read_to_string(&pid_file)
        .unwrap_or_default()
        .lines()
    {
        let _ = std::process::Command::new("kill").arg(pid.trim()).status();
    }
    assert!(
        // The fake decodes nothing and says nothing: named as the program (round 11 N3).
        !r.ok() && r.says("gave no frame and no error") && r.says("rec.mp4"),
        "{}",
        r.text()
    );
    // Ended when the tools did, not when the left-behind process let go of the pipes.
    assert!(took < std::time::Duration::from_secs(20), "took {took:?}");
    assert_eq!(files(lib.path()), before);
}

/// A CVC-ClinicDB folder of three 24 x 16 frames (TIFF, as released) with their masks and
/// `table` as its README.txt.
fn small_cvc(root: &Path, readme: &str) {
    for d in ["Original", "Ground Truth"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    for n in 1..=3u8 {
        let frame = image::RgbImage::from_fn(24, 16, |x, y| {
            image::Rgb([120 + n * 20, (x * 5) as u8, (y * 7) as u8])
        });
        frame.save(root.join(format!("Original/{n}.tif"))).unwrap();
        let mask = image::GrayImage::from_fn(24, 16, |x, y| {
            image::Luma([if (6..18).contains(&x) && (4..12).contains(&y) {
                255
            } else {
                0
            }])
        });
        mask.save(root.join(format!("Ground Truth/{n}.tif")))
            .unwrap();
    }
    std::fs::write(root.join("README.txt"), readme).unwrap();
}

#[test]
fn a_cvc_readme_row_past_every_frame_or_overlapping_another_is_refused_by_line() {
    let (lib, _src) = library_with_cases();
    let before = files(lib.path());
    let src = tempfile::tempdir().unwrap();
    let cases = [
        (
            "       |      0 to 4294967295    |\t 1\t|\n",
            &["line 1", "4294967295"][..],
        ),
        (
            "       |      1 to 2    |\t 1\t|\n       |      2 to 3    |\t 2\t|\n",
            &["line 1", "line 2", "two sequences"][..],
        ),
        // Rows that are no frame range: named by line, never read as another range.
        (
            "       |      451 to 429    |\t 21\t|\n",
            &["line 1", "run backwards"][..],
        ),
        (
            "       |      -5 to 440    |\t 21\t|\n",
            &["line 1", "not a whole number"][..],
        ),
        (
            "       |      429 to 18446744073709551615    |\t 21\t|\n",
            &["line 1", "not a whole number"][..],
        ),
    ];
    for (readme, names) in cases {
        small_cvc(src.path(), readme);
        let mut c = endotwin_cmd(lib.path(), &["import", "cvc-clinicdb"]);
        c.arg(src.path());
        let r = run_within(c, 60);
        assert!(!r.ok(), "{readme}: {}", r.text());
        for name in names {
            assert!(r.says(name), "{readme}: says {name}:\n{}", r.text());
        }
        assert!(r.says("README.txt"), "{}", r.text());
        assert_eq!(files(lib.path()), before, "{readme}: the library changed");
    }
    // A sequences.csv without its header keeps its first row: three frames, one polyp.
    std::fs::write(src.path().join("sequences.csv"), "1,4\n2,4\n3,4\n").unwrap();
    let mut c = endotwin_cmd(lib.path(), &["import", "cvc-clinicdb"]);
    c.arg(src.path());
    let r = run_within(c, 60);
    assert!(r.ok(), "{}", r.text());
    let store =
        endotwin::store::Store::open(lib.path(), endotwin::store::OpenMode::Existing).unwrap();
    let polyp = store
        .polyps()
        .unwrap()
        .into_iter()
        .find(|p| p.code.ends_with("seq04"))
        .expect("sequence 4 imported");
    assert_eq!(
        store.polyp_views(polyp.id).unwrap().len(),
        3,
        "{}",
        r.text()
    );
}

#[test]
fn a_database_server_that_accepts_and_never_answers_is_named_not_waited_on() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming().flatten() {
            held.push(conn); // accepted, never answered
        }
    });
    let url = format!("postgres://someone@127.0.0.1:{port}/cases?connect_timeout=2");
    let mut c = common::endotwin(Path::new(&url));
    c.arg("info");
    let started = std::time::Instant::now();
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("did not answer within 2 s") && r.says(&format!("127.0.0.1:{port}")),
        "{}",
        r.text()
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}

#[test]
fn a_card_in_a_librarys_media_folder_is_never_rewritten_in_place() {
    let (lib, _src) = library_with_cases();
    let inside = lib.path().join("media/00");
    std::fs::create_dir_all(&inside).unwrap();
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
    for ext in ["json", "bpk"] {
        std::fs::copy(
            shipped.join(format!("twin-image.{ext}")),
            inside.join(format!("twin-image.{ext}")),
        )
        .unwrap();
    }
    let card = inside.join("twin-image.json");
    let before = files(lib.path());
    for args in [
        vec!["model", "turns", "--turns", "4"],
        vec!["model", "code-bits", "--bits", "512"],
        vec!["model", "crop-context", "--context", "2"],
    ] {
        let mut c = common::endotwin(lib.path());
        c.args(&args).arg(&card);
        let r = run(c);
        assert!(
            !r.ok() && r.says("the library's own file"),
            "{args:?}: {}",
            r.text()
        );
    }
    assert_eq!(files(lib.path()), before);
}
