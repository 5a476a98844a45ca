//! A client killed with SIGKILL (kill -9) in the middle of a write, and a server restarted
//! under its clients (issue #46): nothing is half-written. The library passes `endotwin
//! library check`, every audit row is one label change (its old value the value the row
//! before set, the last one the label's value, the polyp's pathology the same), the next write
//! goes through at once, and a client whose server went away says so, naming the server.
//! SQLite and PostgreSQL alike; the restart runs on a private cluster (`.ci/postgres`).

use crate::common::{self, endotwin, run};
use crate::gui::tiny_library;
use crate::library_engines::{Engine, on_both_engines, test_server};
use endotwin::store::{OpenMode, Store, TargetKind};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

on_both_engines!(
    a_label_edit_loop_killed_mid_write_leaves_every_edit_whole,
    an_import_killed_mid_write_leaves_nothing_and_lands_once_when_run_again,
);

/// A library of its own for one test: a folder, or a database of its own on the test server
/// (its own database, so the writer lock seen in `pg_locks` is this test's client's).
struct Spot {
    location: PathBuf,
    server: Option<(String, String)>,
    /// One connection kept for [`Spot::mid_write`]: a new one a look was too slow to see an
    /// import's short write once tests were built with optimisation.
    watcher: std::cell::RefCell<Option<::postgres::Client>>,
    _dir: tempfile::TempDir,
}

impl Spot {
    fn fresh(engine: Engine) -> Option<Spot> {
        let dir = tempfile::tempdir().unwrap();
        if engine == Engine::Sqlite {
            return Some(Spot {
                location: dir.path().join("lib"),
                server: None,
                watcher: Default::default(),
                _dir: dir,
            });
        }
        let server = test_server()?;
        let name = format!("kill_{}_{}", std::process::id(), next());
        admin(&server, &format!("CREATE DATABASE {name}"));
        let (base, _) = server.rsplit_once('/').unwrap();
        Some(Spot {
            location: PathBuf::from(format!("{base}/{name}")),
            server: Some((server, name)),
            watcher: Default::default(),
            _dir: dir,
        })
    }

    /// Whether a client holds the library's writer lock now (PostgreSQL: a transaction of
    /// a write is open; SQLite: an import's media are staged, its rows not yet committed).
    fn mid_write(&self) -> bool {
        match &self.server {
            Some((server, name)) => {
                let mut watcher = self.watcher.borrow_mut();
                let c = watcher.get_or_insert_with(|| {
                    ::postgres::Client::connect(server, ::postgres::NoTls).unwrap()
                });
                let held: i64 = c
                    .query_one(
                        "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
                         WHERE l.locktype = 'advisory' AND l.granted AND d.datname = $1",
                        &[name],
                    )
                    .unwrap()
                    .get(0);
                held > 0
            }
            None => !endotwin::store::pending_journals(&self.location).is_empty(),
        }
    }
}

impl Drop for Spot {
    fn drop(&mut self) {
        if let Some((server, name)) = &self.server {
            let _ = ::postgres::Client::connect(server, ::postgres::NoTls).and_then(|mut c| {
                c.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            });
        }
    }
}

fn next() -> usize {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    N.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
}

fn admin(server: &str, sql: &str) {
    ::postgres::Client::connect(server, ::postgres::NoTls)
        .unwrap()
        .batch_execute(sql)
        .unwrap();
}

/// Waits until `ready` (true) or until the child has ended without it (false); a guard of
/// minutes against a hang.
fn caught(child: &mut Child, mut ready: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !ready() {
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "no write after 300 s"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

/// Waits (a guard of minutes against a hang, not a measurement) until `ready`, the child
/// still running.
fn wait_for(child: &mut Child, what: &str, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the client ended before {what}"
        );
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "no {what} after 300 s"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Label edits, as several stations make them, until killed.
fn edit_loop(library: &Path) -> Child {
    endotwin(library)
        .args(["bench", "library", "--changes-this-library"])
        .args(["--clients", "2", "--seconds", "3600"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn kill(mut child: Child) {
    child.kill().unwrap(); // SIGKILL on Unix: no chance to finish or clean up
    child.wait().unwrap();
}

/// The library is whole: `library check` passes, and every polyp's histology audit rows are
/// a chain of whole label changes ending at its value, the pathology the same.
pub(crate) fn library_is_whole(library: &Path) -> usize {
    let checked = run({
        let mut c = endotwin(library);
        c.args(["library", "check"]);
        c
    });
    assert!(checked.ok(), "{}", checked.text());
    let store = Store::open(library, OpenMode::Existing).unwrap();
    let mut rows = 0;
    for polyp in store.polyps().unwrap() {
        let mut audit = store.audit_history(TargetKind::Polyp, polyp.id).unwrap();
        audit.retain(|a| a.key == "histology");
        audit.reverse();
        rows += audit.len();
        for pair in audit.windows(2) {
            assert_eq!(
                pair[1].old_value, pair[0].new_value,
                "{}: audit row {} does not follow row {}",
                polyp.code, pair[1].id, pair[0].id
            );
        }
        let label = store
            .current_label(TargetKind::Polyp, polyp.id, "histology")
            .unwrap();
        if let Some(last) = audit.last() {
            assert_eq!(
                label, last.new_value,
                "{}: label and audit differ",
                polyp.code
            );
        }
        assert_eq!(
            polyp.histology, label,
            "{}: pathology and label",
            polyp.code
        );
    }
    rows
}

/// The next station's write goes through (no lock or transaction left behind).
fn next_write_lands(library: &Path) {
    let mut store = Store::open(library, OpenMode::Existing).unwrap();
    let polyp = store.polyps().unwrap()[0].id;
    let now = store
        .current_label(TargetKind::Polyp, polyp, "histology")
        .unwrap();
    let value = match now.as_deref() {
        Some("carcinoma") => "hyperplastic",
        _ => "carcinoma",
    };
    let read = store
        .label_version(TargetKind::Polyp, polyp, "histology")
        .unwrap();
    store
        .set_label_as_read(
            "dr. next",
            TargetKind::Polyp,
            polyp,
            "histology",
            Some(value),
            Some(read),
        )
        .unwrap();
}

fn a_label_edit_loop_killed_mid_write_leaves_every_edit_whole(engine: Engine) {
    let Some(spot) = Spot::fresh(engine) else {
        return;
    };
    tiny_library(&spot.location);
    let mut audited = 0;
    let mut killed: Option<u32> = None;
    // Three kills, each after more edits landed, the last two (on PostgreSQL) while a
    // client holds the writer lock.
    for round in 0..3 {
        let start = Store::open(&spot.location, OpenMode::Existing)
            .unwrap()
            .audit_high_water()
            .unwrap();
        let mut child = edit_loop(&spot.location);
        let watch = Store::open(&spot.location, OpenMode::Existing).unwrap();
        wait_for(&mut child, "20 label edits", || {
            watch.audit_high_water().unwrap() >= start + 20
        });
        drop(watch);
        // The import folders a killed bench could not remove are swept by the next.
        if let Some(pid) = killed {
            assert_eq!(
                bench_folders_of(pid),
                0,
                "the killed bench's folders stayed"
            );
        }
        killed = Some(child.id());
        if engine == Engine::Postgres && round > 0 {
            wait_for(&mut child, "a write in flight", || spot.mid_write());
        }
        kill(child);
        let rows = library_is_whole(&spot.location);
        assert!(rows >= audited + 20, "round {round}: {rows} audit rows");
        audited = rows;
        next_write_lands(&spot.location);
        audited += 1;
    }
    // Not left in the temporary folder by this test either.
    if let Some(pid) = killed {
        for entry in std::fs::read_dir(std::env::temp_dir()).unwrap().flatten() {
            if entry
                .file_name()
                .to_string_lossy()
                .starts_with(&format!("endotwin-bench-{pid}-"))
            {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
}

/// The bench import folders process `pid` made that are still there.
fn bench_folders_of(pid: u32) -> usize {
    let prefix = format!("endotwin-bench-{pid}-");
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .count()
}

fn an_import_killed_mid_write_leaves_nothing_and_lands_once_when_run_again(engine: Engine) {
    let src = tempfile::tempdir().unwrap();
    // Enough images that the one write transaction stays open long enough for the watcher
    // to see it; 150 were too few once tests were built with optimisation.
    let n = 600;
    for i in 0..n {
        // The seed is a byte: the width keeps every image distinct past 256.
        let w = 96 + (i / 256) as u32;
        common::png(&src.path().join(format!("f{i:03}.png")), w, 80, i as u8);
    }
    let import = |location: &Path| {
        let mut c = endotwin(location);
        c.args(["import", "images"]).arg(src.path());
        c
    };
    // An import that ends before any look saw its write (a quick machine, a slow look under
    // load) proves nothing either way: it is run again on a fresh library, up to 5 times.
    let mut attempts = 0;
    let (spot, before, child) = loop {
        attempts += 1;
        let Some(spot) = Spot::fresh(engine) else {
            return;
        };
        tiny_library(&spot.location);
        let before = Store::open(&spot.location, OpenMode::Existing)
            .unwrap()
            .stats()
            .unwrap();
        let mut child = import(&spot.location)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        if caught(&mut child, || spot.mid_write()) {
            break (spot, before, child);
        }
        assert!(
            attempts < 5,
            "5 imports ended before a look saw their write"
        );
    };
    kill(child);
    let store = Store::open(&spot.location, OpenMode::Existing).unwrap();
    assert_eq!(
        store.stats().unwrap(),
        before,
        "a killed import left part of itself"
    );
    drop(store);
    if engine == Engine::Sqlite {
        // Its staged files are named as an unfinished write's, which the next write sweeps.
        let checked = run({
            let mut c = endotwin(&spot.location);
            c.args(["library", "check"]);
            c
        });
        assert!(!checked.ok(), "{}", checked.text());
        assert!(checked.says("a write did not finish"), "{}", checked.text());
        assert!(!checked.says("damaged"), "{}", checked.text());
    }
    next_write_lands(&spot.location);
    library_is_whole(&spot.location);
    // Run again: every image lands, once.
    let again = run(import(&spot.location));
    assert!(again.ok(), "{}", again.text());
    library_is_whole(&spot.location);
    let after = Store::open(&spot.location, OpenMode::Existing)
        .unwrap()
        .stats()
        .unwrap();
    assert_eq!(after.media, before.media + n as i64, "{after:?}");
}

/// A server restarted under a client editing labels: the client stops with a message that
/// names the server and says what happened (no panic), and the library is whole.
#[test]
fn a_server_restart_under_a_client_is_told_by_name_and_leaves_the_library_whole() {
    if test_server().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The cluster runs as the `postgres` user when the tests run as root: it must reach DIR.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let cluster = Cluster::start(&dir.path().join("pg"));
    let library = PathBuf::from(&cluster.url);
    tiny_library(&library);
    let mut child = edit_loop(&library);
    let watch = Store::open(&library, OpenMode::Existing).unwrap();
    wait_for(&mut child, "20 label edits", || {
        watch.audit_high_water().unwrap() >= 20
    });
    drop(watch);
    cluster.restart();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.contains(&format!("library {}", cluster.url))
            && stderr.contains("the connection to the library's database server was lost"),
        "{stderr}"
    );
    assert!(stderr.contains("was not confirmed"), "{stderr}");
    library_is_whole(&library);
    next_write_lands(&library);
}

/// The window on a library whose server restarts: at its next look it says the connection
/// was lost, connects again, and shows what changed meanwhile; the reviewer's next edit lands.
#[test]
fn the_window_connects_again_after_a_server_restart_and_says_so() {
    use crate::gui::{harness, settle, shows_part};
    use crate::gui_input::click_line;
    use egui::accesskit::Role;
    use egui_kittest::kittest::Queryable;
    if test_server().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let cluster = Cluster::start(&dir.path().join("pg"));
    let library = PathBuf::from(&cluster.url);
    tiny_library(&library);
    let mut h = harness(&library);
    h.state_mut().state.sync.every = Duration::from_secs(24 * 3600);
    settle(&mut h);
    let polyp = Store::open(&library, OpenMode::Existing)
        .unwrap()
        .polyps()
        .unwrap()
        .remove(0);
    click_line(&mut h, &format!("{}  ", polyp.code));
    let before = polyp.histology.clone().unwrap();
    let theirs = if before == "carcinoma" {
        "hyperplastic"
    } else {
        "carcinoma"
    };
    cluster.restart();
    let mut other = Store::open(&library, OpenMode::Existing).unwrap();
    other
        .set_label(
            "dr. elsewhere",
            TargetKind::Polyp,
            polyp.id,
            "histology",
            Some(theirs),
        )
        .unwrap();
    h.state_mut().state.sync.every = Duration::ZERO;
    settle(&mut h);
    shows_part(
        &h,
        &format!(
            "{}: the connection to the library's server was lost",
            cluster.url
        ),
    );
    shows_part(
        &h,
        "connected again, the window shows the library as it is now",
    );
    shows_part(
        &h,
        &format!("dr. elsewhere set histology: {before} -> {theirs}"),
    );
    // The reviewer's next edit goes through the new connection.
    h.get_by_role_and_label(Role::ComboBox, "Pathology label")
        .click();
    h.run();
    h.get_by_label("sessile serrated").click();
    settle(&mut h);
    let now = other
        .current_label(TargetKind::Polyp, polyp.id, "histology")
        .unwrap();
    assert_eq!(now.as_deref(), Some("sessile serrated"));
}

/// A private PostgreSQL cluster (`.ci/postgres`), stopped when dropped.
struct Cluster {
    dir: PathBuf,
    url: String,
    _turn: std::sync::MutexGuard<'static, ()>,
}

/// One private cluster at a time: two starting at once could both pick the same free port.
static ONE_CLUSTER: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Cluster {
    fn start(dir: &Path) -> Cluster {
        let turn = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
        let out = std::process::Command::new(script())
            .arg("start")
            .arg(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Cluster {
            dir: dir.to_path_buf(),
            url: String::from_utf8(out.stdout).unwrap().trim().to_string(),
            _turn: turn,
        }
    }

    fn restart(&self) {
        let out = std::process::Command::new(script())
            .arg("restart")
            .arg(&self.dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = std::process::Command::new(script())
            .arg("stop")
            .arg(&self.dir)
            .output();
    }
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/postgres")
}

/// A training run on a PostgreSQL library whose process ended without a word (its session
/// gone, as after kill -9) is marked interrupted when the library is next opened, as on
/// SQLite; a run whose process is alive (on any station) is left running, and so is a run of
/// another library in the same database with the same number.
#[test]
fn a_postgres_run_whose_session_ended_is_marked_interrupted_a_live_one_is_not() {
    use crate::library_engines::Place;
    let (Some(place), Some(beside)) = (
        Place::fresh(Engine::Postgres),
        Place::fresh(Engine::Postgres),
    ) else {
        return;
    };
    let start = |store: &mut Store| {
        store
            .write(|tx| endotwin::store::start_run(tx, None, "captions", "{}"))
            .unwrap()
    };
    let status = |store: &Store, id: i64| {
        store
            .runs()
            .unwrap()
            .into_iter()
            .find(|r| r.0 == id)
            .unwrap()
            .2
    };
    let mut trainer = place.open(OpenMode::CreateIfMissing).unwrap();
    let mut other_library = beside.open(OpenMode::CreateIfMissing).unwrap();
    let live = start(&mut trainer);
    // The same run number in another library of the database: not blocked by this one.
    assert_eq!(start(&mut other_library), live);
    let station = place.open(OpenMode::Existing).unwrap();
    assert_eq!(status(&station, live), "running");
    // The trainer's process ends without finishing its run.
    drop(trainer);
    drop(station);
    let station = place.open(OpenMode::Existing).unwrap();
    assert_eq!(status(&station, live), "interrupted");
    // The other library's run of the same number still has its process.
    let beside_station = beside.open(OpenMode::Existing).unwrap();
    assert_eq!(status(&beside_station, live), "running");
    drop((other_library, beside_station));
    let beside_station = beside.open(OpenMode::Existing).unwrap();
    assert_eq!(status(&beside_station, live), "interrupted");
    // A run finished by its own process lets its lock go and stays finished.
    let mut trainer = place.open(OpenMode::Existing).unwrap();
    let done = start(&mut trainer);
    trainer
        .write(|tx| endotwin::store::finish_run(tx, done, "finished"))
        .unwrap();
    let station = place.open(OpenMode::Existing).unwrap();
    assert_eq!(status(&station, done), "finished");
}
