//! Metrics used everywhere (METHODS.md, "Metric definitions"): average precision without
//! interpolation, mAP, hit rate, accuracy, macro-F1, AUROC with average ranks for ties.

/// Average precision of one ranked list: the mean of precision at each relevant item.
/// `relevant[i]` says whether the i-th ranked item is relevant; `total_relevant` counts
/// relevant items in the whole collection (those never retrieved count as misses).
pub fn average_precision(relevant: &[bool], total_relevant: usize) -> f64 {
    if total_relevant == 0 {
        return 0.0;
    }
    let mut hits = 0usize;
    let mut sum = 0.0;
    for (i, &r) in relevant.iter().enumerate() {
        if r {
            hits += 1;
            sum += hits as f64 / (i + 1) as f64;
        }
    }
    sum / total_relevant as f64
}

/// Share of queries with a relevant item in their top `k`.
pub fn hit_rate(ranked_relevance: &[Vec<bool>], k: usize) -> f64 {
    if ranked_relevance.is_empty() {
        return 0.0;
    }
    let hits = ranked_relevance
        .iter()
        .filter(|r| r.iter().take(k).any(|&x| x))
        .count();
    hits as f64 / ranked_relevance.len() as f64
}

pub fn accuracy(truth: &[usize], predicted: &[usize]) -> f64 {
    if truth.is_empty() {
        return 0.0;
    }
    truth.iter().zip(predicted).filter(|(a, b)| a == b).count() as f64 / truth.len() as f64
}

/// Unweighted mean of per-class F1 over the classes that occur in truth or prediction.
pub fn macro_f1(truth: &[usize], predicted: &[usize], classes: usize) -> f64 {
    let mut f1s = Vec::new();
    for c in 0..classes {
        let tp = truth
            .iter()
            .zip(predicted)
            .filter(|(t, p)| **t == c && **p == c)
            .count() as f64;
        let fp = truth
            .iter()
            .zip(predicted)
            .filter(|(t, p)| **t != c && **p == c)
            .count() as f64;
        let fn_ = truth
            .iter()
            .zip(predicted)
            .filter(|(t, p)| **t == c && **p != c)
            .count() as f64;
        if tp + fp + fn_ == 0.0 {
            continue;
        }
        f1s.push(2.0 * tp / (2.0 * tp + fp + fn_));
    }
    if f1s.is_empty() {
        0.0
    } else {
        f1s.iter().sum::<f64>() / f1s.len() as f64
    }
}

/// Area under the ROC curve via the rank-sum statistic, ties at their average rank.
pub fn auroc(scores: &[f64], positive: &[bool]) -> f64 {
    let mut idx: Vec<usize> = (0..scores.len()).collect();
    idx.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]));
    let mut ranks = vec![0.0; scores.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && scores[idx[j + 1]] == scores[idx[i]] {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0 + 1.0;
        for k in i..=j {
            ranks[idx[k]] = avg;
        }
        i = j + 1;
    }
    let n_pos = positive.iter().filter(|&&p| p).count() as f64;
    let n_neg = positive.len() as f64 - n_pos;
    if n_pos == 0.0 || n_neg == 0.0 {
        return f64::NAN;
    }
    let rank_sum: f64 = ranks
        .iter()
        .zip(positive)
        .filter(|(_, p)| **p)
        .map(|(r, _)| r)
        .sum();
    (rank_sum - n_pos * (n_pos + 1.0) / 2.0) / (n_pos * n_neg)
}

/// Micro-average precision (ISC2021 uAP): every query contributes its top-1 prediction
/// (score, correct); predictions are pooled, sorted by score (ties: wrong ones first, the
/// pessimistic order) and AP is taken over `queries_with_truth` relevant items.
pub fn micro_ap(predictions: &[(f64, bool)], queries_with_truth: usize) -> f64 {
    let sorted = sort_pessimistic(predictions);
    let relevant: Vec<bool> = sorted.iter().map(|p| p.1).collect();
    average_precision(&relevant, queries_with_truth)
}

/// Recall at the loosest score threshold whose precision is still >= `precision`
/// (0 when no threshold reaches it). Same pooling and tie order as [`micro_ap`].
pub fn recall_at_precision(
    predictions: &[(f64, bool)],
    queries_with_truth: usize,
    precision: f64,
) -> f64 {
    if queries_with_truth == 0 {
        return 0.0;
    }
    let sorted = sort_pessimistic(predictions);
    let mut hits = 0usize;
    let mut best = 0.0f64;
    for (i, p) in sorted.iter().enumerate() {
        hits += p.1 as usize;
        // Only cut between distinct scores: a threshold cannot split a tie.
        let cut_here = sorted.get(i + 1).is_none_or(|next| next.0 != p.0);
        if cut_here && hits as f64 / (i + 1) as f64 >= precision {
            best = best.max(hits as f64 / queries_with_truth as f64);
        }
    }
    best
}

fn sort_pessimistic(predictions: &[(f64, bool)]) -> Vec<(f64, bool)> {
    let mut sorted = predictions.to_vec();
    sorted.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    sorted
}

/// The percentile 95 % interval of bootstrap figures (non-finite ones left out).
pub fn interval(mut v: Vec<f64>) -> [f64; 2] {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return [f64::NAN, f64::NAN];
    }
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    [at(0.025), at(0.975)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn average_precision_matches_hand_computation() {
        // Relevant at ranks 1 and 3 of 2 relevant: (1/1 + 2/3) / 2.
        assert!(
            (average_precision(&[true, false, true], 2) - (1.0 + 2.0 / 3.0) / 2.0).abs() < 1e-12
        );
        // A relevant item never retrieved halves the score.
        assert!((average_precision(&[true], 2) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn auroc_handles_ties_like_scikit_learn() {
        // sklearn.metrics.roc_auc_score([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) == 0.75
        assert!((auroc(&[0.1, 0.4, 0.35, 0.8], &[false, false, true, true]) - 0.75).abs() < 1e-12);
        // All tied: 0.5.
        assert!((auroc(&[1.0, 1.0, 1.0, 1.0], &[false, true, false, true]) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn macro_f1_and_accuracy_match_hand_computation() {
        let truth = [0, 0, 1, 1, 2];
        let pred = [0, 1, 1, 1, 0];
        assert!((accuracy(&truth, &pred) - 0.6).abs() < 1e-12);
        // F1: class 0 = 2*1/(2+1+1) = 0.5, class 1 = 2*2/(4+1+0) = 0.8, class 2 = 0.
        assert!((macro_f1(&truth, &pred, 3) - (0.5 + 0.8 + 0.0) / 3.0).abs() < 1e-12);
        assert!((hit_rate(&[vec![false, true], vec![false, false]], 2) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn micro_ap_and_recall_at_precision_pool_top_1_predictions() {
        // Scores 0.9 (right), 0.8 (wrong), 0.7 (right) of 4 queries with a true match:
        // AP = (1/1 + 2/3) / 4.
        let preds = [(0.9, true), (0.8, false), (0.7, true)];
        assert!((micro_ap(&preds, 4) - (1.0 + 2.0 / 3.0) / 4.0).abs() < 1e-12);
        // Precision >= 0.9 holds only above 0.8: recall 1/4.
        assert!((recall_at_precision(&preds, 4, 0.9) - 0.25).abs() < 1e-12);
        // Ties are pessimistic: the wrong one of a tied pair ranks first.
        let tied = [(0.5, true), (0.5, false)];
        assert!((micro_ap(&tied, 1) - 0.5).abs() < 1e-12);
        assert_eq!(recall_at_precision(&tied, 1, 0.9), 0.0);
    }
}
