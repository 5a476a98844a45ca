//! `endotwin bench library`: several clients at once on one library, each a station of its
//! own (its own connection), making label edits against the version it read, twin queries
//! and imports; then the library's audit trail and media are checked against every client's
//! own log. It writes label edits and images: run it on a copy (`endotwin library copy`).

use crate::plumbing::Rng;
use crate::retrieval::{Codes, hamming_knn};
use crate::store::{
    EmbeddingTarget, EngineKind, HISTOLOGY, OpenMode, Store, StoreError, TargetKind,
};
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// What `bench library` measured and found.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct LibraryBench {
    pub clients: usize,
    pub seconds: f64,
    /// Label edits the clients made (each told it landed).
    pub edits: usize,
    /// Edits a client was told landed that the audit trail does not hold.
    pub lost: usize,
    /// Edits the audit trail holds more often than their client made them.
    pub duplicated: usize,
    /// Audit rows whose old value is not the value the row before set: a change made over
    /// another without seeing it.
    pub silent_overwrites: usize,
    /// Edits refused because the label changed since the client read it (told who changed it).
    pub conflicts_reported: usize,
    pub p95_edit_ms: Option<f64>,
    pub p95_twin_ms: Option<f64>,
    /// Twin queries made (0 when the library has no indexed codes).
    pub twin_queries: usize,
    /// Where the twin queries ran: "database" (PostgreSQL) or "in process" (SQLite).
    pub twin_search: String,
    /// Imports made (one image each): a client's own image, or the one every client imports.
    pub imports: usize,
    /// Images a client was told were imported that the library does not hold, and images
    /// (or the examinations they go to) it holds more than once (also counted in `lost` and
    /// `duplicated`).
    pub imports_lost: usize,
    pub imports_duplicated: usize,
    pub p95_import_ms: Option<f64>,
}

/// What one client did: its edits (polyp, value) as it was told they landed, its timings.
#[derive(Default)]
struct ClientLog {
    edits: Vec<(i64, String)>,
    edit_ms: Vec<f64>,
    twin_ms: Vec<f64>,
    conflicts: usize,
    /// The content hashes of the images this client imported (told they landed).
    imported: Vec<String>,
    import_ms: Vec<f64>,
}

/// Every IMPORT_EVERY-th step a client imports one image: its own (a PNG no other client
/// makes), or every other time the one image every client imports, which must land once
/// whoever imports it first (the library is content-addressed).
const IMPORT_EVERY: usize = 7;

/// The examination every client's shared image goes to.
const SHARED_EXAM: &str = "bench-shared";

/// A 16x16 PNG made from `seed` (the same seed, the same bytes).
fn bench_png(seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let img = image::RgbImage::from_fn(16, 16, |_, _| {
        image::Rgb([
            rng.below(256) as u8,
            rng.below(256) as u8,
            rng.below(256) as u8,
        ])
    });
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png)
        .expect("PNG encoding into memory cannot fail");
    out.into_inner()
}

/// Imports the image `bytes` as `name` into examination `exam` (a folder of its own in the
/// system's temporary folder, removed after), as a station's `import images` would.
fn import_one(store: &mut Store, exam: &str, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
    // One folder per import, even for two benches in one process.
    static MADE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!(
        "{FOLDER_PREFIX}{}-{n}-{exam}-{name}",
        std::process::id()
    ));
    let root = dir.join(exam);
    let io = |e: std::io::Error| StoreError::Invalid(format!("{}: {e}", root.display()));
    std::fs::create_dir_all(&root).map_err(io)?;
    std::fs::write(root.join(name), bytes).map_err(io)?;
    let result = crate::data::import::run(
        crate::data::import::ImportLayout::Images,
        store,
        &root,
        crate::data::import::ImportOptions::default(),
        &crate::plumbing::Progress::default(),
    );
    let _ = std::fs::remove_dir_all(&dir);
    match result {
        Ok(_) => Ok(()),
        Err(crate::data::import::ImportError::Store(e)) => Err(e),
        Err(e) => Err(StoreError::Invalid(format!("bench import: {e}"))),
    }
}

/// The prefix of every folder [`import_one`] makes: `endotwin-bench-<pid>-...`.
const FOLDER_PREFIX: &str = "endotwin-bench-";

/// Removes the import folders of bench processes no longer running (a bench killed mid-import
/// cannot remove its own: the library kill tests left hundreds in the temporary folder).
fn sweep_dead_folders() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(FOLDER_PREFIX)) else {
            continue;
        };
        let Some(Ok(pid)) = rest.split('-').next().map(str::parse::<u32>) else {
            continue;
        };
        if pid != std::process::id() && crate::plumbing::process_gone(pid) == Some(true) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn who(client: usize) -> String {
    format!("bench client {client}")
}

/// Runs `clients` clients on `library` for `seconds`, then checks the library.
pub fn run(library: &Path, clients: usize, seconds: f64) -> Result<LibraryBench, StoreError> {
    sweep_dead_folders();
    let store = Store::open(library, OpenMode::Existing)?;
    let polyps: Vec<i64> = store.polyps()?.iter().map(|p| p.id).collect();
    if polyps.is_empty() {
        return Err(StoreError::Invalid(
            "the library has no polyps to edit; make one with `endotwin demo`".into(),
        ));
    }
    let model = twin_model(&store)?;
    let engine = store.engine();
    let before = store.audit_high_water()?;
    drop(store);
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let logs: Vec<Result<ClientLog, StoreError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                let polyps = &polyps;
                s.spawn(move || client(library, c, polyps, model, deadline))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a bench client panicked"))
            .collect()
    });
    // A client whose connection was lost mid-change says what the user must know (a change in
    // flight not confirmed); it goes before another client's error (one that never connected
    // while the server restarted says only that it could not reach it).
    let (mut errors, mut done) = (Vec::new(), Vec::new());
    for log in logs {
        match log {
            Ok(l) => done.push(l),
            Err(e) => errors.push(e),
        }
    }
    if let Some(i) = errors
        .iter()
        .position(|e| matches!(e, StoreError::ConnectionLost(_)))
        .or((!errors.is_empty()).then_some(0))
    {
        return Err(errors.swap_remove(i));
    }
    let logs = done;
    let store = Store::open(library, OpenMode::Existing)?;
    let mut report = check(&store, &polyps, &logs, before)?;
    report.clients = clients;
    report.seconds = seconds;
    let mut edit_ms: Vec<f64> = logs.iter().flat_map(|l| l.edit_ms.clone()).collect();
    let mut twin_ms: Vec<f64> = logs.iter().flat_map(|l| l.twin_ms.clone()).collect();
    report.twin_queries = twin_ms.len();
    report.p95_edit_ms = p95(&mut edit_ms);
    report.p95_twin_ms = p95(&mut twin_ms);
    let mut import_ms: Vec<f64> = logs.iter().flat_map(|l| l.import_ms.clone()).collect();
    report.p95_import_ms = p95(&mut import_ms);
    report.twin_search = match engine {
        EngineKind::Postgres => "database".into(),
        EngineKind::Sqlite => "in process".into(),
    };
    Ok(report)
}

/// The newest model with codes for polyps, if the library was indexed.
fn twin_model(store: &Store) -> Result<Option<i64>, StoreError> {
    Ok(store
        .models_with_codes(EmbeddingTarget::Polyp)?
        .first()
        .copied())
}

fn client(
    library: &Path,
    c: usize,
    polyps: &[i64],
    model: Option<i64>,
    deadline: Instant,
) -> Result<ClientLog, StoreError> {
    let mut store = Store::open(library, OpenMode::Existing)?;
    let mut rng = Rng::new(0xBE7C_4000 + c as u64);
    let mut log = ClientLog::default();
    // SQLite searches in process: the codes are loaded once, as a station's index would be.
    let local = match (model, store.engine()) {
        (Some(m), EngineKind::Sqlite) => {
            let rows = store.embeddings(m, EmbeddingTarget::Polyp)?;
            let codes: Vec<Vec<u64>> = rows.iter().filter_map(|r| r.code.clone()).collect();
            let words = codes.first().map_or(0, Vec::len);
            Some(Codes::from_rows(words, &codes))
        }
        _ => None,
    };
    let mut step = 0usize;
    while Instant::now() < deadline {
        step += 1;
        if step.is_multiple_of(IMPORT_EVERY) {
            let shared = (step / IMPORT_EVERY).is_multiple_of(2);
            let (exam, seed) = match shared {
                true => (SHARED_EXAM.to_string(), 0x5EED),
                false => (format!("bench-c{c}"), ((c as u64) << 32) + step as u64),
            };
            let bytes = bench_png(seed);
            let t = Instant::now();
            import_one(&mut store, &exam, &format!("s{step}.png"), &bytes)?;
            log.import_ms.push(t.elapsed().as_secs_f64() * 1e3);
            log.imported.push(crate::store::content_hash(&bytes));
            continue;
        }
        let polyp = polyps[rng.below(polyps.len())];
        if let Some(m) = model
            && step.is_multiple_of(5)
        {
            let query = store
                .embedding(m, EmbeddingTarget::Polyp, polyp)?
                .and_then(|r| r.code);
            if let Some(query) = query {
                let t = Instant::now();
                match &local {
                    Some(codes) => drop(hamming_knn(codes, &query, 10)),
                    None => drop(store.nearest_codes(m, EmbeddingTarget::Polyp, &query, 10)?),
                }
                log.twin_ms.push(t.elapsed().as_secs_f64() * 1e3);
            }
            continue;
        }
        let t = Instant::now();
        let read = store.label_version(TargetKind::Polyp, polyp, "histology")?;
        let now = store.current_label(TargetKind::Polyp, polyp, "histology")?;
        let value = loop {
            let v = HISTOLOGY[rng.below(HISTOLOGY.len())];
            if now.as_deref() != Some(v) {
                break v;
            }
        };
        let edit = store.set_label_as_read(
            &who(c),
            TargetKind::Polyp,
            polyp,
            "histology",
            Some(value),
            Some(read),
        );
        match edit {
            Ok(_) => {
                log.edit_ms.push(t.elapsed().as_secs_f64() * 1e3);
                log.edits.push((polyp, value.to_string()));
            }
            Err(StoreError::Conflict { .. } | StoreError::Locked { .. }) => log.conflicts += 1,
            Err(e) => return Err(e),
        }
    }
    Ok(log)
}

/// The audit trail against the clients' logs: each edit a client was told landed is there
/// once, and each audit row replaced the value the row before it set.
fn check(
    store: &Store,
    polyps: &[i64],
    logs: &[ClientLog],
    before: i64,
) -> Result<LibraryBench, StoreError> {
    let mut report = LibraryBench::default();
    let mut audited: HashMap<(String, i64, String), usize> = HashMap::new();
    for &polyp in polyps {
        let mut rows = store.audit_history(TargetKind::Polyp, polyp)?;
        rows.retain(|r| r.key == "histology");
        rows.reverse();
        report.silent_overwrites += rows
            .windows(2)
            .filter(|w| w[1].id > before && w[1].old_value != w[0].new_value)
            .count();
        for r in rows.into_iter().filter(|r| r.id > before) {
            let value = r.new_value.unwrap_or_default();
            *audited.entry((r.who, polyp, value)).or_default() += 1;
        }
    }
    let mut logged: HashMap<(String, i64, String), usize> = HashMap::new();
    for (c, log) in logs.iter().enumerate() {
        report.edits += log.edits.len();
        report.conflicts_reported += log.conflicts;
        for (polyp, value) in &log.edits {
            *logged.entry((who(c), *polyp, value.clone())).or_default() += 1;
        }
    }
    for (key, n) in &logged {
        let held = audited.get(key).copied().unwrap_or(0);
        report.lost += n.saturating_sub(held);
        report.duplicated += held.saturating_sub(*n);
    }
    // Rows of this run that no client was told about.
    report.duplicated += audited
        .iter()
        .filter(|(key, _)| !logged.contains_key(*key))
        .map(|(_, n)| n)
        .sum::<usize>();
    // Each image a client imported is held once, whoever imported it; each examination the
    // imports went to exists once.
    let mut held: HashMap<String, usize> = HashMap::new();
    for m in store.media_rows()? {
        *held.entry(m.hash).or_default() += 1;
    }
    let imported: std::collections::HashSet<&String> =
        logs.iter().flat_map(|l| l.imported.iter()).collect();
    report.imports = logs.iter().map(|l| l.imported.len()).sum();
    for hash in imported {
        match held.get(hash).copied().unwrap_or(0) {
            0 => report.imports_lost += 1,
            n => report.imports_duplicated += n - 1,
        }
    }
    let mut exams: HashMap<String, usize> = HashMap::new();
    for e in store.examinations()? {
        *exams.entry(e.code).or_default() += 1;
    }
    let bench_exams = (0..logs.len())
        .map(|c| format!("bench-c{c}"))
        .chain([SHARED_EXAM.to_string()]);
    for code in bench_exams {
        report.imports_duplicated += exams.get(&code).copied().unwrap_or(0).saturating_sub(1);
    }
    report.lost += report.imports_lost;
    report.duplicated += report.imports_duplicated;
    Ok(report)
}

/// The 95th percentile of `ms` (nearest rank), `None` when empty.
fn p95(ms: &mut [f64]) -> Option<f64> {
    if ms.is_empty() {
        return None;
    }
    ms.sort_by(f64::total_cmp);
    let rank = ((ms.len() as f64) * 0.95).ceil() as usize;
    Some(ms[rank.clamp(1, ms.len()) - 1])
}
