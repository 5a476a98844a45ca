//! Tracklets from per-frame boxes (METHODS §3), shared by the importers and the phantom.

/// Groups boxes into tracklets as METHODS §3 defines them: consecutive detections of one
/// polyp; a new tracklet starts after a frame gap or when the box overlaps the previous one
/// by IoU < 0.1. Returns (polyp index, box indices) per tracklet.
pub fn tracklets_from_boxes(boxes: &[(usize, usize, [f32; 4])]) -> Vec<(usize, Vec<usize>)> {
    let mut out: Vec<(usize, Vec<usize>)> = Vec::new();
    let mut open: std::collections::HashMap<usize, usize> = std::collections::HashMap::new();
    for (bi, (frame, polyp, b)) in boxes.iter().enumerate() {
        let continues = open.get(polyp).and_then(|&t| {
            let last = *out[t].1.last().expect("tracklets are never empty");
            let (lf, _, lb) = boxes[last];
            (frame - lf == 1 && iou(&lb, b) >= 0.1).then_some(t)
        });
        match continues {
            Some(t) => out[t].1.push(bi),
            None => {
                out.push((*polyp, vec![bi]));
                open.insert(*polyp, out.len() - 1);
            }
        }
    }
    out
}

pub fn iou(a: &[f32; 4], b: &[f32; 4]) -> f32 {
    let x0 = a[0].max(b[0]);
    let y0 = a[1].max(b[1]);
    let x1 = (a[0] + a[2]).min(b[0] + b[2]);
    let y1 = (a[1] + a[3]).min(b[1] + b[3]);
    let inter = (x1 - x0).max(0.0) * (y1 - y0).max(0.0);
    let union = a[2] * a[3] + b[2] * b[3] - inter;
    if union <= 0.0 { 0.0 } else { inter / union }
}
