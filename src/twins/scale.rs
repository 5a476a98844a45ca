//! A library at a scale no phantom reaches, for speed figures (`endotwin demo --scale`): the
//! indexed polyps of a small library copied into new examinations until there are `polyps` of
//! them, each copy pointing at the same view files (the content-addressed store holds each file
//! once) and carrying its original's embedding with a little noise (so no two are tied) and
//! that embedding's code; the videos copied the same way. Nothing here is clinical data.

use super::{TwinError, TwinModels};
use crate::plumbing::{Progress, Rng};
use crate::store::{
    self, EmbeddingRow, EmbeddingTarget, NewExamination, NewPolyp, Store, add_polyp_view,
    add_video_frame, put_embedding, upsert_examination, upsert_polyp, upsert_video,
};

/// What [`replicate`] added.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScaleStats {
    pub polyps: usize,
    pub examinations: usize,
    pub videos: usize,
}

/// Polyps per copied examination, as in a screening colonoscopy with findings.
const POLYPS_PER_EXAM: usize = 4;

/// Copies the library's indexed polyps until it holds `polyps`, and its videos until it holds
/// `videos`. The library must be indexed with `models` (every polyp); writes in transactions
/// of a few thousand polyps, so progress moves and a cancel stops between them.
pub fn replicate(
    store: &mut Store,
    models: &TwinModels,
    polyps: usize,
    videos: usize,
    seed: u64,
    progress: &Progress,
) -> Result<ScaleStats, TwinError> {
    let version = models.version();
    let model = store
        .model("twin-polyp", &version)?
        .ok_or_else(|| TwinError::EmptyIndex(version.clone()))?;
    let base: Vec<(store::PolypRow, EmbeddingRow, Vec<i64>)> = {
        let embedded: std::collections::HashMap<i64, EmbeddingRow> = store
            .embeddings(model.id, EmbeddingTarget::Polyp)?
            .into_iter()
            .map(|r| (r.target_id, r))
            .collect();
        let mut base = Vec::new();
        for p in store.polyps()? {
            if let Some(e) = embedded.get(&p.id) {
                let views = store.polyp_views(p.id)?.iter().map(|m| m.id).collect();
                base.push((p, e.clone(), views));
            }
        }
        base
    };
    if base.is_empty() {
        return Err(TwinError::EmptyIndex(version));
    }
    let base_videos: Vec<(store::VideoRow, Vec<i64>)> = store
        .videos()?
        .into_iter()
        .map(|v| {
            let frames = store
                .video_frames(v.id)?
                .into_iter()
                .map(|(_, m)| m.id)
                .collect();
            Ok((v, frames))
        })
        .collect::<store::Result<_>>()?;
    let mut stats = ScaleStats::default();
    let have = store.polyps()?.len();
    let wanted = polyps.saturating_sub(have);
    progress.stage("copying polyps", wanted as u64);
    let mut rng = Rng::new(seed);
    let mut made = 0;
    let mut exam_no = 0;
    while made < wanted {
        if progress.is_cancelled() {
            return Err(TwinError::Cancelled);
        }
        let batch = (wanted - made).min(4096);
        let mut rows = Vec::with_capacity(batch);
        for i in 0..batch {
            let (p, e, _) = &base[(made + i) % base.len()];
            let v = noisy(&e.vector, 0.15, &mut rng);
            rows.push((p, e, models.coder.code(&v), v));
        }
        let model_id = model.id;
        let (exams, copied) = store.write(|tx| {
            let mut exams = 0;
            let mut exam_id = 0;
            for (i, (p, e, code, v)) in rows.iter().enumerate() {
                let n = made + i;
                if n.is_multiple_of(POLYPS_PER_EXAM) {
                    exam_no += 1;
                    exam_id = upsert_examination(
                        tx,
                        &NewExamination {
                            code: format!("S{exam_no:06}"),
                            patient_code: Some(format!("SP{:06}", exam_no / 3)),
                            kind: "colonoscopy".into(),
                            date: None,
                            source: "demo --scale".into(),
                        },
                    )?;
                    exams += 1;
                }
                let id = upsert_polyp(
                    tx,
                    &NewPolyp {
                        examination_id: exam_id,
                        code: format!("S{exam_no:06}-{}", n % POLYPS_PER_EXAM + 1),
                        location: p.location.clone(),
                        size_mm: p.size_mm,
                        paris: p.paris.clone(),
                        histology: p.histology.clone(),
                        vienna_class: p.vienna_class,
                        attributes: Vec::new(),
                    },
                )?;
                for (k, m) in base[n % base.len()].2.iter().enumerate() {
                    add_polyp_view(tx, id, *m, k as i64)?;
                }
                put_embedding(
                    tx,
                    model_id,
                    EmbeddingTarget::Polyp,
                    &EmbeddingRow {
                        target_id: id,
                        source_hash: e.source_hash.clone(),
                        vector: v.clone(),
                        code: Some(code.clone()),
                    },
                )?;
            }
            Ok::<_, store::StoreError>((exams, rows.len()))
        })?;
        stats.examinations += exams;
        stats.polyps += copied;
        made += copied;
        progress.add(copied as u64);
    }
    let have = store.videos()?.len();
    if !base_videos.is_empty() && videos > have {
        progress.stage("copying videos", (videos - have) as u64);
        store.write(|tx| {
            for n in 0..videos - have {
                let (v, frames) = &base_videos[n % base_videos.len()];
                let exam = upsert_examination(
                    tx,
                    &NewExamination {
                        code: format!("SV{n:06}"),
                        patient_code: None,
                        kind: "colonoscopy".into(),
                        date: None,
                        source: "demo --scale".into(),
                    },
                )?;
                let id = upsert_video(tx, exam, &format!("SV{n:06}"), v.fps)?;
                for (k, m) in frames.iter().enumerate() {
                    add_video_frame(tx, id, k as i64, *m)?;
                }
                stats.examinations += 1;
                stats.videos += 1;
            }
            Ok::<_, store::StoreError>(())
        })?;
    }
    Ok(stats)
}

/// `v` plus Gaussian noise of `spread` (relative to its unit length), made unit again.
fn noisy(v: &[f32], spread: f32, rng: &mut Rng) -> Vec<f32> {
    let scale = spread / (v.len() as f32).sqrt();
    let out: Vec<f32> = v.iter().map(|x| x + scale * rng.normal()).collect();
    let norm = out.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    out.into_iter().map(|x| x / norm).collect()
}
