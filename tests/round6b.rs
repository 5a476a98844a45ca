//! Hostile round 6, the findings left after its first fixes (issue 43): each through the
//! command line, refused by name with nothing changed, or said as it is.

use crate::common;
use crate::hostile::library_with_cases;
use crate::store_safety::{files, run_within};

use std::path::Path;

/// `endotwin --library LIB ARGS...` on the CPU.
use crate::common::et;

/// The code of the library's first polyp, as `labels export` writes it.
fn first_polyp(lib: &Path) -> String {
    let r = run_within(et(lib, &["labels", "export", "--out", "-"]), 60);
    assert!(r.ok(), "{}", r.text());
    let text = r.text();
    let mut lines = text.lines().skip_while(|l| !l.starts_with("polyp,"));
    let line = lines.nth(1).unwrap().to_string();
    line.split(',').next().unwrap().to_string()
}

/// N68: a labels line whose histology was refused still had its size applied, and the
/// command ended 0 with nothing to tell a script that lines were skipped.
#[test]
fn a_labels_line_with_a_refused_value_is_not_used_at_all_and_strict_changes_nothing() {
    let (lib, _src) = library_with_cases();
    let code = first_polyp(lib.path());
    let dir = tempfile::tempdir().unwrap();
    let mixed = dir.path().join("mixed.csv");
    std::fs::write(
        &mixed,
        format!("polyp,histology,size_mm\n{code},bogus,4\nnosuch,adenoma,5\n"),
    )
    .unwrap();
    let before = files(lib.path());
    let mut c = et(
        lib.path(),
        &["labels", "import", "--apply", "--who", "alice"],
    );
    c.arg(&mixed);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("line 2") && r.says("the line is not used (none of its labels)"),
        "{}",
        r.text()
    );
    assert!(!r.says("applied"), "{}", r.text());
    assert_eq!(files(lib.path()), before);

    // One good line and one bad one: --strict changes nothing and exits 1; without it the
    // good line is applied and the skip is counted in the last line.
    std::fs::write(
        &mixed,
        format!("polyp,histology,size_mm\n{code},adenoma,4\nnosuch,adenoma,5\n"),
    )
    .unwrap();
    let mut c = et(
        lib.path(),
        &["labels", "import", "--apply", "--who", "alice", "--strict"],
    );
    c.arg(&mixed);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("with --strict nothing was changed"),
        "{}",
        r.text()
    );
    assert_eq!(files(lib.path()), before);
    let mut c = et(
        lib.path(),
        &["labels", "import", "--apply", "--who", "alice"],
    );
    c.arg(&mixed);
    let r = run_within(c, 60);
    assert!(
        r.ok() && r.says("applied 1 changes") && r.says("1 lines or labels were skipped"),
        "{}",
        r.text()
    );
}

/// Runs `c` to its end and returns whether it succeeded, what it printed and the highest
/// resident memory (KiB) it was seen to reach: its own `VmHWM`, read every 10 ms while it
/// runs (a fork's rusage would count the test process's memory from before the exec).
fn peak_memory_kib(mut c: std::process::Command) -> (bool, String, u64) {
    let out = tempfile::NamedTempFile::new().unwrap();
    c.stdout(out.reopen().unwrap())
        .stderr(out.reopen().unwrap());
    let mut child = c.spawn().unwrap();
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    let status = loop {
        let hwm = std::fs::read_to_string(&status_file)
            .ok()
            .and_then(|s| {
                let line = s.lines().find(|l| l.starts_with("VmHWM:"))?.to_string();
                line.split_whitespace().nth(1)?.parse::<u64>().ok()
            })
            .unwrap_or(0);
        peak = peak.max(hwm);
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let text = std::fs::read_to_string(out.path()).unwrap();
    (status.success(), text, peak)
}

/// N78: a wrong weights record just under the 4 GiB cap was read whole (4.2 GB) before its
/// hash was compared with the card's; it is refused in constant memory now.
#[test]
fn a_wrong_multi_gigabyte_record_is_refused_without_reading_it_into_memory() {
    let (lib, src) = library_with_cases();
    let models = tempfile::tempdir().unwrap();
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
    std::fs::copy(
        shipped.join("twin-image.json"),
        models.path().join("twin-image.json"),
    )
    .unwrap();
    let record = std::fs::File::create(models.path().join("twin-image.bpk")).unwrap();
    record.set_len(1 << 30).unwrap(); // sparse: no disk used
    let mut c = et(lib.path(), &["twins", "--models"]);
    c.arg(models.path()).arg(src.path().join("base/A/1.png"));
    let (ok, text, kib) = peak_memory_kib(c);
    assert!(
        !ok && text.contains("does not match its model card"),
        "{text}"
    );
    eprintln!("peak memory refusing a 1 GiB record: {kib} KiB");
    assert!(kib < 512 << 10, "peak {kib} KiB for a refused 1 GiB record");
}

/// N39: a promoted library whose models/ACTIVE marker was deleted (or is a FIFO) answered
/// with the shipped models without a word, `library check` said "whole", `library copy`
/// left its models behind, and `model demote` still acted on the folder.
#[test]
fn a_promoted_library_that_lost_its_models_marker_says_so_and_changes_nothing() {
    let (lib, _src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let card = crate::hostile::copy_shipped_captions(&dir.path().join("run"));
    endotwin::engine::promote::promote(lib.path(), &card, None).unwrap();
    let models = lib.path().join("models");
    assert!(models.join("previous").is_dir());
    std::fs::remove_file(models.join("ACTIVE")).unwrap();
    for lost in ["missing", "not a regular file"] {
        if lost != "missing" {
            crate::hostile::mkfifo(&models.join("ACTIVE"));
        }
        let before = files(lib.path());
        let r = run_within(et(lib.path(), &["info"]), 60);
        assert!(
            r.ok() && r.says("(the library's own") && r.says(lost),
            "{}",
            r.text()
        );
        let r = run_within(et(lib.path(), &["library", "check"]), 60);
        assert!(
            !r.ok() && r.says("models: ") && r.says(lost) && !r.says("is whole"),
            "{}",
            r.text()
        );
        let r = run_within(et(lib.path(), &["model", "demote", "captions"]), 60);
        assert!(
            !r.ok() && r.says(lost) && r.says("nothing was changed"),
            "{}",
            r.text()
        );
        let copy = dir.path().join(format!("copy-{}", lost.len()));
        let mut c = et(lib.path(), &["library", "copy"]);
        c.arg(lib.path()).arg(&copy);
        let r = run_within(c, 60);
        assert!(!r.ok() && r.says(lost), "{}", r.text());
        assert!(!copy.join("models").exists());
        assert_eq!(files(lib.path()), before);
    }
}

/// N47: two `library copy` into one new folder at once: the second failed with raw SQL
/// ("table meta already exists"). A copy in progress holds the folder; a second is refused by
/// name, and two libraries made in one new folder at once both open it.
#[test]
fn a_second_copy_into_the_same_folder_is_refused_by_name_and_two_creators_agree() {
    let (lib, _src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("cc");
    std::fs::create_dir(&target).unwrap();
    let held = std::fs::File::open(&target).unwrap();
    held.lock().unwrap();
    let mut c = et(lib.path(), &["library", "copy"]);
    c.arg(lib.path()).arg(&target);
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("another `library copy` is writing into this folder"),
        "{}",
        r.text()
    );
    assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
    drop(held);

    let fresh = dir.path().join("fresh");
    let opened: Vec<_> = (0..4)
        .map(|_| {
            let fresh = fresh.clone();
            std::thread::spawn(move || {
                endotwin::store::Store::open(&fresh, endotwin::store::OpenMode::CreateIfMissing)
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            })
        })
        .collect();
    for t in opened {
        t.join().unwrap().unwrap();
    }
}

/// Whether process `pid` is gone (or a zombie waiting for its parent).
fn gone(pid: &str) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .next();
    matches!(state, None | Some("Z") | Some("X"))
}

/// N55: a hung decoder's child (`sleep`) kept running after EndoTwin was ended by `timeout`
/// (SIGTERM) or Ctrl-C (SIGINT): its process group was killed only by EndoTwin's own watchdog.
#[cfg(unix)]
#[test]
fn a_hung_decoder_and_its_children_end_when_endotwin_is_interrupted() {
    let (lib, src) = library_with_cases();
    let tools = tempfile::tempdir().unwrap();
    let pid_file = crate::guards::hung_decoder(tools.path());
    let video = src.path().join("rec.mp4");
    std::fs::write(&video, b"\0\0\0\x18ftypmp42 not really").unwrap();
    let before = files(lib.path());
    for signal in [libc::SIGTERM, libc::SIGINT] {
        let _ = std::fs::remove_file(&pid_file);
        let mut c = et(lib.path(), &["import", "video"]);
        c.arg(&video)
            .env("ENDOTWIN_FFMPEG", tools.path().join("ffmpeg"))
            .env("ENDOTWIN_TOOL_TIMEOUT_S", "300")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let mut endotwin = c.spawn().unwrap();
        let started = std::time::Instant::now();
        while !pid_file.is_file() || std::fs::read_to_string(&pid_file).unwrap().is_empty() {
            assert!(
                started.elapsed().as_secs() < 60,
                "the decoder never started"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let child = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .to_string();
        // SAFETY: a signal to our own child.
        unsafe {
            libc::kill(endotwin.id() as libc::pid_t, signal);
        }
        endotwin.wait().unwrap();
        let waited = std::time::Instant::now();
        while !gone(&child) && waited.elapsed().as_secs() < 5 {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        if !gone(&child) {
            let _ = std::process::Command::new("kill").arg(&child).status();
            panic!("signal {signal}: the decoder's child {child} outlived EndoTwin");
        }
    }
    // A killed process leaves SQLite's shared-memory file and an empty WAL; the database
    // and the media are as they were.
    let kept = |f: Vec<(std::path::PathBuf, String)>| -> Vec<_> {
        f.into_iter()
            .filter(|(p, _)| {
                !p.to_string_lossy().ends_with("-shm") && !p.to_string_lossy().ends_with("-wal")
            })
            .collect()
    };
    assert_eq!(kept(files(lib.path())), kept(before));
}

/// N45 and N46: a view whose mask cannot be used (a FIFO, too large to decode) was either
/// imported without it or left out without a word; Kvasir-SEG called a FIFO mask "no mask",
/// an empty image "no mask", and passed over a mask named for no image.
#[test]
fn masks_that_cannot_be_used_are_named_with_the_image_they_keep_out() {
    let dir = tempfile::tempdir().unwrap();
    let mv = dir.path().join("mv");
    common::png(&mv.join("p1/a.png"), 24, 16, 1);
    common::png(&mv.join("p1/b.png"), 24, 16, 2);
    crate::hostile::mkfifo(&mv.join("p1/a_mask.png"));
    common::png(&mv.join("p2/a.png"), 24, 16, 3);
    common::png(&mv.join("p2/b.png"), 24, 16, 4);
    std::fs::write(
        mv.join("p2/a_mask.png"),
        crate::round6::png_header_only(20000, 20000),
    )
    .unwrap();
    let lib = tempfile::tempdir().unwrap();
    let r = common::import(lib.path(), "multiview", &mv, &[]);
    assert!(r.ok(), "{}", r.text());
    for polyp in ["p1", "p2"] {
        let view = mv.join(polyp).join("a.png");
        assert!(
            r.text()
                .lines()
                .any(|l| l.contains(&format!("{polyp}/a_mask.png"))
                    && l.contains(&format!("the view {} is not imported", view.display()))),
            "{}",
            r.text()
        );
    }
    assert!(r.says("2 views"), "{}", r.text());

    let kv = dir.path().join("kv");
    common::png(&kv.join("images/ok.png"), 24, 16, 5);
    common::mask_png(&kv.join("masks/ok.png"), 24, 16);
    common::png(&kv.join("images/piped.png"), 24, 16, 7);
    crate::hostile::mkfifo(&kv.join("masks/piped.png"));
    common::mask_png(&kv.join("masks/extra.png"), 24, 16);
    std::fs::write(kv.join("images/empty.jpg"), b"").unwrap();
    let lib = tempfile::tempdir().unwrap();
    let r = common::import(lib.path(), "kvasir-seg", &kv, &[]);
    assert!(r.ok(), "{}", r.text());
    let line = |name: &str| {
        r.text()
            .lines()
            .find(|l| l.contains(name))
            .unwrap_or_default()
            .to_string()
    };
    assert!(
        line("masks/piped.png").contains("not a regular file")
            && line("masks/piped.png").contains("its image"),
        "{}",
        r.text()
    );
    assert!(
        line("masks/extra.png").contains("a mask named for no image"),
        "{}",
        r.text()
    );
    assert!(
        !line("images/empty.jpg").is_empty() && !line("images/empty.jpg").contains("no mask"),
        "{}",
        r.text()
    );
    assert!(r.says("1 polyps"), "{}", r.text());
}
