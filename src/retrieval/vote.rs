//! The diagnosis the twins vote for: k-NN majority vote of their pathology, with the vote
//! shares as confidence, and a similarity-weighted variant.

/// Shares per label, largest first; equal shares are ordered by the nearest twin carrying
/// the label, so the vote is decided the way a reader of the twin list would decide it.
#[derive(Debug, Clone, PartialEq)]
pub struct Vote {
    pub shares: Vec<(String, f64)>,
}

impl Vote {
    pub fn winner(&self) -> Option<&str> {
        self.shares.first().map(|(l, _)| l.as_str())
    }

    pub fn share(&self, label: &str) -> f64 {
        self.shares
            .iter()
            .find(|(l, _)| l == label)
            .map_or(0.0, |(_, s)| *s)
    }
}

/// One vote per neighbour, nearest first.
pub fn majority<'a>(labels: impl IntoIterator<Item = &'a str>) -> Vote {
    weighted(labels.into_iter().map(|l| (l, 1.0)))
}

/// Each neighbour (nearest first) votes with its weight, e.g. its similarity; weights below
/// zero count as zero.
pub fn weighted<'a>(votes: impl IntoIterator<Item = (&'a str, f64)>) -> Vote {
    let mut tally: Vec<(String, f64, usize)> = Vec::new();
    for (rank, (label, w)) in votes.into_iter().enumerate() {
        match tally.iter_mut().find(|(l, _, _)| l == label) {
            Some(t) => t.1 += w.max(0.0),
            None => tally.push((label.to_string(), w.max(0.0), rank)),
        }
    }
    let total: f64 = tally.iter().map(|t| t.1).sum();
    tally.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.2.cmp(&b.2)));
    Vote {
        shares: tally
            .into_iter()
            .map(|(l, w, _)| (l, if total > 0.0 { w / total } else { 0.0 }))
            .collect(),
    }
}
