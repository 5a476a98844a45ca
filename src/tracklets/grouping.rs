//! Grouping tracklets into polyps: average-linkage agglomerative clustering on cosine
//! similarity, merging while the two closest groups are at least `threshold` alike. The number
//! of groups in a video is its polyp count.

/// Groups of the items whose pairwise similarity is `similarity(i, j)`; each group lists item
/// indices in increasing order, groups ordered by their first item.
pub fn agglomerate(
    n: usize,
    similarity: impl Fn(usize, usize) -> f32,
    threshold: f32,
) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = (0..n).map(|i| vec![i]).collect();
    let s: Vec<Vec<f32>> = (0..n)
        .map(|i| (0..n).map(|j| similarity(i, j)).collect())
        .collect();
    let link = |a: &[usize], b: &[usize]| -> f32 {
        let sum: f32 = a
            .iter()
            .flat_map(|&i| b.iter().map(move |&j| (i, j)))
            .map(|(i, j)| s[i][j])
            .sum();
        sum / (a.len() * b.len()) as f32
    };
    loop {
        let mut best: Option<(usize, usize, f32)> = None;
        for a in 0..groups.len() {
            for b in a + 1..groups.len() {
                let l = link(&groups[a], &groups[b]);
                if l >= threshold && best.is_none_or(|(_, _, v)| l > v) {
                    best = Some((a, b, l));
                }
            }
        }
        let Some((a, b, _)) = best else { break };
        let merged = groups.remove(b);
        groups[a].extend(merged);
        groups[a].sort_unstable();
    }
    groups.sort_by_key(|g| g[0]);
    groups
}

/// Cosine of two unit vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}
