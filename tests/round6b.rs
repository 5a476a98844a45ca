//! Hostile round 6, the findings left after its first fixes (issue 43): each through the
//! command line, refused by name with nothing changed, or said as it is.

use crate::common;
use crate::hostile::library_with_cases;
use crate::store_safety::{files, run_within};

use std::path::Path;

/// `endotwin --library LIB ARGS...` on the CPU.
fn et(lib: &Path, args: &[&str]) -> std::process::Command {
    let mut c = common::endotwin(lib);
    c.args(args);
    c
}

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

/// Runs `c` to its end and returns what it printed and its peak resident memory in KiB
/// (the child's own, from wait4: other tests' children do not count).
fn peak_memory_kib(mut c: std::process::Command) -> (bool, String, i64) {
    let out = tempfile::NamedTempFile::new().unwrap();
    c.stdout(out.reopen().unwrap())
        .stderr(out.reopen().unwrap());
    #[allow(clippy::zombie_processes)] // reaped by wait4 below
    let child = c.spawn().unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child; `child` is never waited on again.
    let got = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(got, pid);
    let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    let text = std::fs::read_to_string(out.path()).unwrap();
    (ok, text, usage.ru_maxrss)
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
    record.set_len(3 << 30).unwrap(); // sparse: no disk used
    let mut c = et(lib.path(), &["twins", "--models"]);
    c.arg(models.path()).arg(src.path().join("base/A/1.png"));
    let (ok, text, kib) = peak_memory_kib(c);
    assert!(
        !ok && text.contains("does not match its model card"),
        "{text}"
    );
    assert!(kib < 1 << 20, "peak {kib} KiB for a refused 3 GiB record");
}
