//! Multi-index hashing (Norouzi, Punjani & Fleet, 2012): a sublinear *exact* Hamming kNN.
//! Each code is cut into 16-bit substrings and every substring position gets a table from
//! substring value to entries. By the pigeonhole principle, a code within distance
//! `m·s + j` of the query (m substrings) agrees with it to within `s` bits on one of the first
//! `j + 1` substrings, or to within `s - 1` on a later one; probing the tables in that order
//! and stopping once the k-th best distance is within that bound returns exactly what the
//! linear scan returns, ties included. Fast when neighbours are near (twins of a polyp);
//! no faster than the scan when every code is far from the query. Codes longer than
//! [`MAX_TABLE_BITS`] are scanned.

use super::exact::{Codes, Hit, TopK};
use crate::model::hash::hamming;
use std::sync::OnceLock;

const SUB_BITS: usize = 16;

/// Longer codes get no tables and are scanned: a table costs 256 KiB of offsets per 16 bits
/// (64 MiB at 4096 bits), and at that length a query's twins sit hundreds of bits away,
/// where probing every table's near buckets costs more than the scan (`bench retrieve`).
pub const MAX_TABLE_BITS: usize = 1024;
const BUCKETS: usize = 1 << SUB_BITS;

pub struct MultiIndex {
    codes: Codes,
    tables: Vec<Table>,
}

/// Entries grouped by one substring's value: `ids[offsets[v]..offsets[v + 1]]`.
struct Table {
    offsets: Vec<u32>,
    ids: Vec<u32>,
}

/// Per-search bookkeeping, reused between searches: which entries were already checked.
#[derive(Default)]
pub struct Scratch {
    seen: Vec<u32>,
    stamp: u32,
}

impl MultiIndex {
    pub fn build(codes: Codes) -> MultiIndex {
        let substrings = if codes.bits() <= MAX_TABLE_BITS {
            codes.bits() / SUB_BITS
        } else {
            0
        };
        let n = codes.len();
        let tables = (0..substrings)
            .map(|j| {
                let mut offsets = vec![0u32; BUCKETS + 1];
                for i in 0..n {
                    offsets[substring(codes.get(i), j) as usize + 1] += 1;
                }
                for v in 0..BUCKETS {
                    offsets[v + 1] += offsets[v];
                }
                let mut fill = offsets.clone();
                let mut ids = vec![0u32; n];
                for i in 0..n {
                    let v = substring(codes.get(i), j) as usize;
                    ids[fill[v] as usize] = i as u32;
                    fill[v] += 1;
                }
                Table { offsets, ids }
            })
            .collect();
        MultiIndex { codes, tables }
    }

    pub fn len(&self) -> usize {
        self.codes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.codes.is_empty()
    }

    pub fn codes(&self) -> &Codes {
        &self.codes
    }

    pub fn knn(&self, query: &[u64], k: usize) -> Vec<Hit> {
        self.knn_with(query, k, &mut Scratch::default())
    }

    pub fn knn_with(&self, query: &[u64], k: usize, scratch: &mut Scratch) -> Vec<Hit> {
        assert_eq!(query.len(), self.codes.words, "query code length");
        if self.tables.is_empty() {
            return super::exact::hamming_knn(&self.codes, query, k);
        }
        let n = self.codes.len();
        let mut top = TopK::new(k.min(n));
        if top.hits.capacity() == 0 || n == 0 || k == 0 {
            return Vec::new();
        }
        if scratch.seen.len() != n {
            scratch.seen = vec![0; n];
            scratch.stamp = 0;
        }
        scratch.stamp = scratch.stamp.wrapping_add(1);
        if scratch.stamp == 0 {
            scratch.seen.fill(0);
            scratch.stamp = 1;
        }
        let stamp = scratch.stamp;
        let m = self.tables.len() as u32;
        let masks = masks_by_weight();
        let k = k.min(n);
        for s in 0..=SUB_BITS as u32 {
            for (j, table) in self.tables.iter().enumerate() {
                let q = substring(query, j);
                for &mask in &masks[s as usize] {
                    let v = (q ^ mask) as usize;
                    let bucket =
                        &table.ids[table.offsets[v] as usize..table.offsets[v + 1] as usize];
                    for &id in bucket {
                        let seen = &mut scratch.seen[id as usize];
                        if *seen == stamp {
                            continue;
                        }
                        *seen = stamp;
                        let d = hamming(self.codes.get(id as usize), query);
                        top.offer(id, d);
                    }
                }
                if top.hits.len() == k && top.bar() <= m * s + j as u32 {
                    return top.hits;
                }
            }
        }
        top.hits
    }
}

#[inline]
fn substring(code: &[u64], j: usize) -> u16 {
    let bit = j * SUB_BITS;
    (code[bit / 64] >> (bit % 64)) as u16
}

/// Every 16-bit mask, grouped by how many bits it sets.
fn masks_by_weight() -> &'static [Vec<u16>] {
    static MASKS: OnceLock<Vec<Vec<u16>>> = OnceLock::new();
    MASKS.get_or_init(|| {
        let mut by = vec![Vec::new(); SUB_BITS + 1];
        for v in 0..BUCKETS {
            by[(v as u16).count_ones() as usize].push(v as u16);
        }
        by
    })
}
