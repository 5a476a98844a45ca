//! Twin search near the data: on a PostgreSQL library the server finds the codes nearest a
//! query by Hamming distance (`bit_count` of the XOR of bit strings, PostgreSQL 14+), so a
//! station does not load a large shared library's codes to search them. An SQLite library
//! is searched in process (`retrieval`), as before.

use super::db::params;
use super::{EmbeddingTarget, EngineKind, Result, Store};

impl Store {
    /// The `k` items of `target` kind whose stored code (of `model_id`) is nearest `query` by
    /// Hamming distance, nearest first, ties by target id: (target id, distance). The same
    /// answer as `retrieval::hamming_knn` over [`Store::embeddings`]. `None` when the library's
    /// engine has no such search (SQLite): search in process.
    pub fn nearest_codes(
        &self,
        model_id: i64,
        target: EmbeddingTarget,
        query: &[u64],
        k: usize,
    ) -> Result<Option<Vec<(i64, u32)>>> {
        if self.engine() != EngineKind::Postgres {
            return Ok(None);
        }
        // Codes are stored as their words' little-endian bytes; the query is written the same
        // way, so bit i of one faces bit i of the other.
        let hex: String = query
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .map(|b| format!("{b:02x}"))
            .collect();
        let rows = self.conn().rows(
            "SELECT target_id,
                    bit_count(CAST('x' || encode(code, 'hex') AS bit varying)
                              # CAST(CAST(?3 AS TEXT) AS bit varying)) AS d
             FROM embeddings
             WHERE model_id = ?1 AND target_kind = ?2 AND octet_length(code) = ?4
             ORDER BY d, target_id LIMIT ?5",
            params![
                model_id,
                target.as_str(),
                format!("x{hex}"),
                (query.len() * 8) as i64,
                k as i64
            ],
        )?;
        rows.iter()
            .map(|r| Ok((r.get(0)?, r.get(1)?)))
            .collect::<Result<_>>()
            .map(Some)
    }

    /// The models with stored codes for `target` items, newest first.
    pub fn models_with_codes(&self, target: EmbeddingTarget) -> Result<Vec<i64>> {
        self.conn()
            .rows(
                "SELECT DISTINCT model_id FROM embeddings
                 WHERE target_kind = ?1 AND code IS NOT NULL ORDER BY model_id DESC",
                [target.as_str()],
            )?
            .iter()
            .map(|r| r.get(0))
            .collect()
    }
}
