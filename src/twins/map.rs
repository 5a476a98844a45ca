//! The 2-D map of the library's polyp embeddings: a PCA (top two principal axes by power
//! iteration), cheap enough to recompute whenever the index changes and deterministic, so
//! the same library always draws the same picture.

/// Whether `p` lies inside `polygon` (a lasso drawn on the map; its last point joins its
/// first), by the even-odd rule.
pub fn inside(polygon: &[[f64; 2]], p: [f64; 2]) -> bool {
    let mut inside = false;
    let n = polygon.len();
    for i in 0..n {
        let (a, b) = (polygon[i], polygon[(i + n - 1) % n]);
        if (a[1] > p[1]) != (b[1] > p[1]) {
            let x = a[0] + (p[1] - a[1]) / (b[1] - a[1]) * (b[0] - a[0]);
            if p[0] < x {
                inside = !inside;
            }
        }
    }
    n >= 3 && inside
}

/// Rows the map's axes are fitted on at most.
pub const PCA_SAMPLE: usize = 2000;

/// Projects `vectors` (n rows of `dim`) onto their top two principal axes: (mean, axes,
/// points).
pub struct Pca {
    mean: Vec<f32>,
    axes: [Vec<f32>; 2],
}

impl Pca {
    /// The axes of `vectors`, or of an even sample of [`PCA_SAMPLE`] of them when there are
    /// more (every n-th row): a 100k-polyp library fits in milliseconds, not seconds, and
    /// the picture is the same up to the sample's noise.
    pub fn fit(vectors: &[f32], dim: usize) -> Pca {
        let rows = vectors.len() / dim.max(1);
        if rows > PCA_SAMPLE {
            let every = rows.div_ceil(PCA_SAMPLE);
            let sample: Vec<f32> = vectors
                .chunks_exact(dim)
                .step_by(every)
                .flatten()
                .copied()
                .collect();
            return Pca::fit_all(&sample, dim);
        }
        Pca::fit_all(vectors, dim)
    }

    fn fit_all(vectors: &[f32], dim: usize) -> Pca {
        let n = vectors.len() / dim.max(1);
        let mut mean = vec![0.0f32; dim];
        for row in vectors.chunks_exact(dim) {
            mean.iter_mut()
                .zip(row)
                .for_each(|(m, x)| *m += x / n.max(1) as f32);
        }
        let centred: Vec<f32> = vectors
            .chunks_exact(dim)
            .flat_map(|r| r.iter().zip(&mean).map(|(x, m)| x - m).collect::<Vec<_>>())
            .collect();
        let mut axes: [Vec<f32>; 2] = [vec![0.0; dim], vec![0.0; dim]];
        for a in 0..2 {
            // Deterministic start, then power iteration on X^T X with deflation.
            let mut v: Vec<f32> = (0..dim)
                .map(|i| ((i * 7 + a * 3) % 11) as f32 - 5.0)
                .collect();
            for _ in 0..100 {
                let mut next = vec![0.0f32; dim];
                for row in centred.chunks_exact(dim) {
                    let mut s: f32 = row.iter().zip(&v).map(|(x, y)| x * y).sum();
                    if a == 1 {
                        // Remove the first axis' component.
                        let p: f32 = row.iter().zip(&axes[0]).map(|(x, y)| x * y).sum();
                        let q: f32 = axes[0].iter().zip(&v).map(|(x, y)| x * y).sum();
                        s -= p * q;
                    }
                    next.iter_mut().zip(row).for_each(|(nx, x)| *nx += s * x);
                }
                if a == 1 {
                    let d: f32 = next.iter().zip(&axes[0]).map(|(x, y)| x * y).sum();
                    next.iter_mut().zip(&axes[0]).for_each(|(x, y)| *x -= d * y);
                }
                let norm = next.iter().map(|x| x * x).sum::<f32>().sqrt();
                if norm < 1e-12 {
                    break;
                }
                let next: Vec<f32> = next.into_iter().map(|x| x / norm).collect();
                // Converged: the axis moved by less than a pixel's worth on any map.
                let moved: f32 = next.iter().zip(&v).map(|(a, b)| (a - b).abs()).sum();
                v = next;
                if moved < 1e-6 {
                    break;
                }
            }
            axes[a] = v;
        }
        Pca { mean, axes }
    }

    pub fn project(&self, v: &[f32]) -> [f32; 2] {
        [0, 1].map(|a| {
            v.iter()
                .zip(&self.mean)
                .zip(&self.axes[a])
                .map(|((x, m), y)| (x - m) * y)
                .sum()
        })
    }
}

#[cfg(test)]
mod lasso_tests {
    use super::inside;

    #[test]
    fn a_point_is_inside_a_lasso_only_when_the_lasso_encloses_it() {
        // An L-shaped lasso: the notch at (3, 3) is outside, the arm at (1, 3) inside.
        let l = [
            [0.0, 0.0],
            [4.0, 0.0],
            [4.0, 2.0],
            [2.0, 2.0],
            [2.0, 4.0],
            [0.0, 4.0],
        ];
        assert!(inside(&l, [1.0, 1.0]));
        assert!(inside(&l, [1.0, 3.0]));
        assert!(!inside(&l, [3.0, 3.0]));
        assert!(!inside(&l, [5.0, 1.0]));
        // Two points are no lasso.
        assert!(!inside(&[[0.0, 0.0], [1.0, 1.0]], [0.5, 0.5]));
    }
}

/// The library's polyps on the map, and what a frame draws of them: every polyp up to
/// [`MAP_DRAWN`], beyond that an even sample (every n-th in index order) per pathology, worked
/// out once per index so a frame never walks a 100k-polyp library.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LibraryMap {
    /// Every indexed polyp: (polyp id, histology, x, y).
    pub points: Vec<(i64, String, [f32; 2])>,
    /// Per pathology (sorted, "" for unknown): the points drawn.
    pub layers: Vec<(String, Vec<[f64; 2]>)>,
    /// How many points the layers hold in all.
    pub drawn: usize,
}

/// The most points a frame draws on the map.
pub const MAP_DRAWN: usize = 5000;

impl LibraryMap {
    pub fn new(points: Vec<(i64, String, [f32; 2])>) -> LibraryMap {
        let every = points.len().div_ceil(MAP_DRAWN).max(1);
        let mut layers: std::collections::BTreeMap<String, Vec<[f64; 2]>> = Default::default();
        for (i, (_, name, xy)) in points.iter().enumerate() {
            let layer = layers.entry(name.clone()).or_default();
            if i % every == 0 {
                layer.push([xy[0] as f64, xy[1] as f64]);
            }
        }
        let drawn = layers.values().map(Vec::len).sum();
        LibraryMap {
            points,
            layers: layers.into_iter().collect(),
            drawn,
        }
    }
}
