//! Model versions, the embeddings (and sign codes) each computed for library items, and
//! training runs with their per-epoch metrics. Embeddings are keyed by model version and
//! remember the content hash they were computed from, so re-indexing skips what is current.

use super::db::{Connection, EngineKind, OptionalExtension, Row, Transaction, params};
use super::{Result, Store, now_utc};

#[derive(Debug, Clone, PartialEq)]
pub struct ModelRow {
    pub id: i64,
    pub name: String,
    pub version: String,
    pub kind: String,
}

/// What an embedding describes: one media item (a view, a frame) or a polyp (a scene).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EmbeddingTarget {
    Media,
    Polyp,
}

impl EmbeddingTarget {
    pub fn as_str(self) -> &'static str {
        match self {
            EmbeddingTarget::Media => "media",
            EmbeddingTarget::Polyp => "polyp",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingRow {
    pub target_id: i64,
    /// What it was computed from (the media hash; for a scene, a hash over its views).
    pub source_hash: String,
    pub vector: Vec<f32>,
    pub code: Option<Vec<u64>>,
}

/// The model's row id, inserted on first sight of (name, version).
pub fn ensure_model(
    tx: &Transaction<'_>,
    name: &str,
    version: &str,
    kind: &str,
    config_json: &str,
    weights_path: &str,
) -> Result<i64> {
    tx.execute(
        "INSERT INTO models (name, version, kind, config_json, weights_path, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (name, version) DO NOTHING",
        params![name, version, kind, config_json, weights_path, now_utc()],
    )?;
    tx.query_row(
        "SELECT id FROM models WHERE name = ?1 AND version = ?2",
        params![name, version],
        |r| r.get(0),
    )
}

pub fn put_embedding(
    tx: &Transaction<'_>,
    model_id: i64,
    target: EmbeddingTarget,
    row: &EmbeddingRow,
) -> Result<()> {
    let vector: Vec<u8> = row.vector.iter().flat_map(|v| v.to_le_bytes()).collect();
    let code: Option<Vec<u8>> = row
        .code
        .as_ref()
        .map(|c| c.iter().flat_map(|w| w.to_le_bytes()).collect());
    tx.prepare_cached(
        "INSERT INTO embeddings(model_id, target_kind, target_id, source_hash, dim, vector, code)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (model_id, target_kind, target_id) DO UPDATE SET source_hash = excluded.source_hash, dim = excluded.dim, vector = excluded.vector, code = excluded.code",
    )?
    .execute(
        params![
            model_id,
            target.as_str(),
            row.target_id,
            row.source_hash,
            row.vector.len() as i64,
            vector,
            code
        ],
    )?;
    Ok(())
}

pub fn start_run(
    tx: &Transaction<'_>,
    model_id: Option<i64>,
    recipe: &str,
    config_json: &str,
) -> Result<i64> {
    tx.execute(
        "INSERT INTO training_runs (model_id, recipe, config_json, status, started_at, pid)
         VALUES (?1, ?2, ?3, 'running', ?4, ?5)",
        params![model_id, recipe, config_json, now_utc(), std::process::id()],
    )?;
    let id = tx.last_insert_rowid()?;
    // On PostgreSQL the run's process holds a session lock of its own while it runs (a
    // session lock outlives this transaction): another station tells a live run from one
    // whose process died by trying it ([`stale_runs`]), where a process id means nothing.
    if tx.kind() == EngineKind::Postgres {
        tx.query_row(
            &format!(
                "SELECT count(*) FROM (SELECT pg_advisory_lock({RUN_LOCK}, ?1::int4)) AS held"
            ),
            params![id],
            |_| Ok(()),
        )?;
    }
    Ok(id)
}

/// The first key of a training run's advisory lock on PostgreSQL, the run id the second:
/// one per library (its schema), since advisory locks are shared by a whole database and two
/// libraries in one database number their runs alike.
const RUN_LOCK: &str = "hashtext('endotwin training run in ' || current_schema())";

/// The `running` runs whose process is gone (a `kill -9` leaves no chance to say so). A run
/// of a live process, or one this machine cannot check, is not among them.
pub(super) fn stale_runs(conn: &Connection) -> Result<Vec<i64>> {
    let mut stmt = conn.prepare("SELECT id, pid FROM training_runs WHERE status = 'running'")?;
    let running: Vec<(i64, Option<i64>)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_>>()?;
    if conn.kind() == EngineKind::Postgres {
        // A run whose lock is free has no process left: its session ended (killed, crashed,
        // or its machine gone once the server noticed). The lock is let go at once.
        let mut stale = Vec::new();
        for (id, _) in running {
            let free: bool = conn.query_row(
                &format!("SELECT pg_try_advisory_lock({RUN_LOCK}, ?1::int4)"),
                params![id],
                |r| r.get(0),
            )?;
            if free {
                conn.query_row(
                    &format!("SELECT pg_advisory_unlock({RUN_LOCK}, ?1::int4)"),
                    params![id],
                    |_| Ok(()),
                )?;
                stale.push(id);
            }
        }
        return Ok(stale);
    }
    Ok(running
        .into_iter()
        .filter(|(_, pid)| match pid {
            // Recorded before runs named their process: nothing can still be writing it.
            None => true,
            Some(pid) => {
                u32::try_from(*pid).is_ok_and(|p| crate::plumbing::process_gone(p) == Some(true))
            }
        })
        .map(|(id, _)| id)
        .collect())
}

/// Marks the runs `ids` (from [`stale_runs`]) as `interrupted`.
pub(super) fn mark_stale_runs(conn: &Connection, ids: &[i64]) -> Result<usize> {
    let mut marked = 0;
    for id in ids {
        marked += conn.execute(
            "UPDATE training_runs SET status = 'interrupted', finished_at = ?2 WHERE id = ?1 AND status = 'running'",
            params![id, now_utc()],
        )?;
    }
    Ok(marked)
}

pub fn log_metric(
    tx: &Transaction<'_>,
    run_id: i64,
    epoch: usize,
    step: usize,
    name: &str,
    value: f64,
) -> Result<()> {
    tx.execute(
        "INSERT INTO run_metrics (run_id, epoch, step, name, value) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![run_id, epoch as i64, step as i64, name, value],
    )?;
    Ok(())
}

/// Records the model card a run saved: its row in `models` (the card's path as its weights
/// path), linked from the run.
pub fn link_run_model(
    tx: &Transaction<'_>,
    run_id: i64,
    (name, version, kind): (&str, &str, &str),
    config_json: &str,
    card_path: &str,
) -> Result<()> {
    let model = ensure_model(tx, name, version, kind, config_json, card_path)?;
    tx.execute(
        "UPDATE training_runs SET model_id = ?2 WHERE id = ?1",
        params![run_id, model],
    )?;
    Ok(())
}

pub fn finish_run(tx: &Transaction<'_>, run_id: i64, status: &str) -> Result<()> {
    tx.execute(
        "UPDATE training_runs SET status = ?2, finished_at = ?3 WHERE id = ?1",
        params![run_id, status, now_utc()],
    )?;
    if tx.kind() == EngineKind::Postgres {
        // The run's own session lets its lock go (another session's unlock is a no-op).
        tx.execute_batch("SET LOCAL client_min_messages = error")?;
        tx.query_row(
            &format!("SELECT pg_advisory_unlock({RUN_LOCK}, ?1::int4)"),
            params![run_id],
            |_| Ok(()),
        )?;
    }
    Ok(())
}

impl Store {
    pub fn model(&self, name: &str, version: &str) -> Result<Option<ModelRow>> {
        self.conn()
            .query_row(
                "SELECT id, name, version, kind FROM models WHERE name = ?1 AND version = ?2",
                params![name, version],
                |r| {
                    Ok(ModelRow {
                        id: r.get(0)?,
                        name: r.get(1)?,
                        version: r.get(2)?,
                        kind: r.get(3)?,
                    })
                },
            )
            .optional()
    }

    /// Versions of `name` that have embeddings, newest first.
    pub fn indexed_versions(&self, name: &str) -> Result<Vec<String>> {
        let mut stmt = self.conn().prepare(
            "SELECT m.version FROM models m WHERE m.name = ?1
             AND EXISTS (SELECT 1 FROM embeddings e WHERE e.model_id = m.id) ORDER BY m.id DESC",
        )?;
        let rows = stmt.query_map(params![name], |r| r.get(0))?;
        rows.collect::<Result<_>>()
    }

    pub fn embeddings(&self, model_id: i64, target: EmbeddingTarget) -> Result<Vec<EmbeddingRow>> {
        let mut stmt = self.conn().prepare(
            "SELECT target_id, source_hash, vector, code FROM embeddings
             WHERE model_id = ?1 AND target_kind = ?2 ORDER BY target_id",
        )?;
        let rows = stmt.query_map(params![model_id, target.as_str()], embedding_from_row)?;
        rows.collect::<Result<_>>()
    }

    /// The stored embedding of one item, if it has one.
    pub fn embedding(
        &self,
        model_id: i64,
        target: EmbeddingTarget,
        target_id: i64,
    ) -> Result<Option<EmbeddingRow>> {
        self.conn()
            .prepare_cached(
                "SELECT target_id, source_hash, vector, code FROM embeddings
                 WHERE model_id = ?1 AND target_kind = ?2 AND target_id = ?3",
            )?
            .query_row(
                params![model_id, target.as_str(), target_id],
                embedding_from_row,
            )
            .optional()
    }

    /// (run id, recipe, status) of every training run, newest first.
    pub fn runs(&self) -> Result<Vec<(i64, String, String)>> {
        let mut stmt = self
            .conn()
            .prepare("SELECT id, recipe, status FROM training_runs ORDER BY id DESC")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        rows.collect::<Result<_>>()
    }

    /// Every training run with its settings and times, newest first.
    pub fn run_list(&self) -> Result<Vec<RunRow>> {
        let mut stmt = self.conn().prepare(
            "SELECT id, recipe, status, started_at, finished_at, config_json
             FROM training_runs ORDER BY id DESC",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(RunRow {
                id: r.get(0)?,
                recipe: r.get(1)?,
                status: r.get(2)?,
                started_at: r.get(3)?,
                finished_at: r.get(4)?,
                config_json: r.get(5)?,
            })
        })?;
        rows.collect::<Result<_>>()
    }

    /// The model card a run saved, when it saved one.
    pub fn run_card(&self, run_id: i64) -> Result<Option<String>> {
        self.conn()
            .query_row(
                "SELECT m.weights_path FROM training_runs r JOIN models m ON m.id = r.model_id
                 WHERE r.id = ?1",
                params![run_id],
                |r| r.get(0),
            )
            .optional()
    }

    /// The version of the model run `run_id` saved (its models row), if it saved one.
    pub fn run_model_version(&self, run_id: i64) -> Result<Option<String>> {
        self.conn()
            .query_row(
                "SELECT m.version FROM training_runs r JOIN models m ON m.id = r.model_id
                 WHERE r.id = ?1",
                params![run_id],
                |r| r.get(0),
            )
            .optional()
    }

    /// Every model version the library knows, with how many embeddings it holds, oldest
    /// first. Embeddings of versions no longer shipped stay until [`Store::drop_embeddings`].
    pub fn embedding_sets(&self) -> Result<Vec<EmbeddingSet>> {
        let mut stmt = self.conn().prepare(
            "SELECT m.id, m.name, m.version,
                    (SELECT COUNT(*) FROM embeddings e WHERE e.model_id = m.id), m.created_at
             FROM models m ORDER BY m.id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(EmbeddingSet {
                model_id: r.get(0)?,
                name: r.get(1)?,
                version: r.get(2)?,
                rows: r.get::<_, i64>(3)? as usize,
                created_at: r.get(4)?,
            })
        })?;
        rows.collect::<Result<_>>()
    }

    /// Deletes every embedding of the model versions `model_ids`, in one transaction; the
    /// version rows stay (training runs name them). Returns the embeddings deleted. On SQLite
    /// the file is then compacted (`VACUUM`), so the space goes back to the disk.
    pub fn drop_embeddings(&mut self, model_ids: &[i64]) -> Result<usize> {
        let deleted = self.write(|tx| {
            let mut n = 0;
            for id in model_ids {
                n += tx.execute("DELETE FROM embeddings WHERE model_id = ?1", params![id])?;
            }
            Ok::<_, super::StoreError>(n)
        })?;
        if deleted > 0
            && let Some(conn) = self.conn().as_sqlite()
        {
            conn.execute_batch("VACUUM")?;
        }
        Ok(deleted)
    }

    /// (epoch, name, value) of one run, in the order logged.
    pub fn run_metrics(&self, run_id: i64) -> Result<Vec<(usize, String, f64)>> {
        let mut stmt = self.conn().prepare(
            "SELECT epoch, name, value FROM run_metrics WHERE run_id = ?1 ORDER BY rowid",
        )?;
        let rows = stmt.query_map(params![run_id], |r| {
            Ok((r.get::<_, i64>(0)? as usize, r.get(1)?, r.get(2)?))
        })?;
        rows.collect::<Result<_>>()
    }
}

/// One model version of the library and the number of embeddings stored under it.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingSet {
    pub model_id: i64,
    pub name: String,
    pub version: String,
    pub rows: usize,
    /// When the library first saw this version (UTC, RFC 3339): its first embedding.
    pub created_at: String,
}

/// One training run as recorded in the library.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRow {
    pub id: i64,
    pub recipe: String,
    /// running, finished, cancelled, failed or interrupted.
    pub status: String,
    pub started_at: String,
    pub finished_at: Option<String>,
    pub config_json: String,
}

fn embedding_from_row(r: &Row) -> Result<EmbeddingRow> {
    let vector: Vec<u8> = r.get(2)?;
    let code: Option<Vec<u8>> = r.get(3)?;
    Ok(EmbeddingRow {
        target_id: r.get(0)?,
        source_hash: r.get(1)?,
        vector: vector
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        code: code.map(|c| {
            c.chunks_exact(8)
                .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
                .collect()
        }),
    })
}
