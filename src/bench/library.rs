//! `endotwin bench library`: several clients at once on one library, each a station of its
//! own (its own connection), making label edits against the version it read and twin
//! queries; then the library's audit trail is checked against every client's own log.
//! It writes label edits: run it on a copy (`endotwin library copy`).

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
}

/// What one client did: its edits (polyp, value) as it was told they landed, its timings.
#[derive(Default)]
struct ClientLog {
    edits: Vec<(i64, String)>,
    edit_ms: Vec<f64>,
    twin_ms: Vec<f64>,
    conflicts: usize,
}

fn who(client: usize) -> String {
    format!("bench client {client}")
}

/// Runs `clients` clients on `library` for `seconds`, then checks the library.
pub fn run(library: &Path, clients: usize, seconds: f64) -> Result<LibraryBench, StoreError> {
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
