//! Exact k-nearest-neighbour search: Hamming distance over packed `u64` sign codes
//! (popcount) and cosine similarity over unit float vectors. Results are ordered by distance
//! (or score), ties by the lower entry index, so every search here returns the same list for
//! the same data: the sublinear index is tested against these.

/// One neighbour by Hamming distance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit {
    pub index: u32,
    pub distance: u32,
}

/// One neighbour by cosine similarity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scored {
    pub index: u32,
    pub score: f32,
}

/// Packed binary codes, `words` u64 per entry, entries back to back.
#[derive(Debug, Clone, Default)]
pub struct Codes {
    pub words: usize,
    pub data: Vec<u64>,
}

impl Codes {
    pub fn new(words: usize) -> Codes {
        Codes {
            words,
            data: Vec::new(),
        }
    }

    pub fn from_rows(words: usize, rows: &[Vec<u64>]) -> Codes {
        let mut codes = Codes::new(words);
        for r in rows {
            codes.push(r);
        }
        codes
    }

    pub fn push(&mut self, code: &[u64]) {
        assert_eq!(
            code.len(),
            self.words,
            "code of {} words, index holds {}",
            code.len(),
            self.words
        );
        self.data.extend_from_slice(code);
    }

    pub fn len(&self) -> usize {
        self.data.len().checked_div(self.words).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    pub fn get(&self, i: usize) -> &[u64] {
        &self.data[i * self.words..(i + 1) * self.words]
    }

    pub fn bits(&self) -> usize {
        self.words * 64
    }
}

/// The k best so far, kept sorted; `worst` is the bar a new entry must beat.
pub(crate) struct TopK {
    k: usize,
    pub(crate) hits: Vec<Hit>,
}

impl TopK {
    pub(crate) fn new(k: usize) -> TopK {
        TopK {
            k,
            hits: Vec::with_capacity(k + 1),
        }
    }

    /// Distance a candidate must be below (or equal to, with a lower index) to enter.
    #[inline]
    pub(crate) fn bar(&self) -> u32 {
        if self.hits.len() < self.k {
            u32::MAX
        } else {
            self.hits[self.k - 1].distance
        }
    }

    #[inline]
    pub(crate) fn offer(&mut self, index: u32, distance: u32) {
        if self.k == 0 {
            return;
        }
        let full = self.hits.len() == self.k;
        if full {
            let last = self.hits[self.k - 1];
            if (distance, index) >= (last.distance, last.index) {
                return;
            }
        }
        let at = self
            .hits
            .partition_point(|h| (h.distance, h.index) < (distance, index));
        self.hits.insert(at, Hit { index, distance });
        self.hits.truncate(self.k);
    }
}

/// The `k` codes nearest `query` by Hamming distance (fewer when the library is smaller).
pub fn hamming_knn(codes: &Codes, query: &[u64], k: usize) -> Vec<Hit> {
    assert_eq!(query.len(), codes.words, "query code length");
    let mut top = TopK::new(k.min(codes.len()));
    if top.k == 0 {
        return Vec::new();
    }
    scan_block(codes.words, &codes.data, 0, query, &mut top);
    top.hits
}

/// Scans `data` (codes of `words` u64, the first one numbered `base`) into `top`, with the
/// CPU's popcount instruction when it has one: the portable build targets baseline x86-64,
/// whose software popcount is about three times slower.
fn scan_block(words: usize, data: &[u64], base: u32, query: &[u64], top: &mut TopK) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt") {
        // SAFETY: the CPU supports POPCNT, checked just above.
        unsafe { scan_block_popcnt(words, data, base, query, top) };
        return;
    }
    scan_block_portable(words, data, base, query, top);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
fn scan_block_popcnt(words: usize, data: &[u64], base: u32, query: &[u64], top: &mut TopK) {
    scan_block_portable(words, data, base, query, top);
}

#[inline(always)]
fn scan_block_portable(words: usize, data: &[u64], base: u32, query: &[u64], top: &mut TopK) {
    match words {
        4 => scan::<4>(data, base, query, top),
        16 => scan::<16>(data, base, query, top),
        _ => {
            for (i, code) in data.chunks_exact(words).enumerate() {
                let d: u32 = code
                    .iter()
                    .zip(query)
                    .map(|(a, b)| (a ^ b).count_ones())
                    .sum();
                if d <= top.bar() {
                    top.offer(base + i as u32, d);
                }
            }
        }
    }
}

/// The scan unrolled for a fixed code length: the distance is a handful of XOR + popcount
/// instructions and the branch into the top-k is rarely taken.
#[inline(always)]
fn scan<const W: usize>(data: &[u64], base: u32, query: &[u64], top: &mut TopK) {
    let q: [u64; W] = query.try_into().expect("code length");
    let mut bar = top.bar();
    for (i, code) in data.chunks_exact(W).enumerate() {
        let mut d = 0u32;
        for w in 0..W {
            d += (code[w] ^ q[w]).count_ones();
        }
        // Equal distances arrive in index order, so an equal one never beats a kept one.
        if d < bar {
            top.offer(base + i as u32, d);
            bar = top.bar();
        }
    }
}

/// Several queries in one pass over the library, in blocks that stay in cache: the library
/// is read once per block of queries instead of once per query.
pub fn hamming_knn_batch(codes: &Codes, queries: &[Vec<u64>], k: usize) -> Vec<Vec<Hit>> {
    const BLOCK: usize = 2048;
    let k = k.min(codes.len());
    let mut tops: Vec<TopK> = queries.iter().map(|_| TopK::new(k)).collect();
    if k == 0 {
        return tops.into_iter().map(|t| t.hits).collect();
    }
    let w = codes.words;
    for (b, block) in codes.data.chunks(BLOCK * w).enumerate() {
        let base = (b * BLOCK) as u32;
        for (q, top) in queries.iter().zip(tops.iter_mut()) {
            scan_block(w, block, base, q, top);
        }
    }
    tops.into_iter().map(|t| t.hits).collect()
}

/// The `k` unit vectors most similar to `query` (cosine = dot product), best first, ties by
/// the lower index. `vectors`: entries of `dim` floats back to back.
pub fn cosine_knn(vectors: &[f32], dim: usize, query: &[f32], k: usize) -> Vec<Scored> {
    assert_eq!(query.len(), dim, "query dimension");
    let n = vectors.len() / dim.max(1);
    let k = k.min(n);
    let mut best: Vec<Scored> = Vec::with_capacity(k + 1);
    if k == 0 {
        return best;
    }
    let mut bar = f32::NEG_INFINITY;
    for (i, v) in vectors.chunks_exact(dim).enumerate() {
        let s = dot(v, query);
        if best.len() < k || s > bar {
            let at = best.partition_point(|h| h.score >= s);
            best.insert(
                at,
                Scored {
                    index: i as u32,
                    score: s,
                },
            );
            best.truncate(k);
            if best.len() == k {
                bar = best[k - 1].score;
            }
        }
    }
    best
}

/// Eight independent sums so the compiler vectorises the loop.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (ca, ra) = a.as_chunks::<8>();
    let (cb, rb) = b.as_chunks::<8>();
    for (x, y) in ca.iter().zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    let mut s: f32 = acc.iter().sum();
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}
