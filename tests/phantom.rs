//! The phantom: deterministic, complete ground truth, disjoint held-out split.

use endotwin::data::phantom::{self, PhantomConfig, Split};
use endotwin::engine::Progress;
use endotwin::store::{OpenMode, Store};

fn tiny(seed: u64, split: Split) -> PhantomConfig {
    PhantomConfig {
        seed,
        split,
        polyps: 3,
        views_per_polyp: 4,
        videos: 1,
        frames_per_video: 8,
        background_frames: 1,
        frames_per_exam: 0,
        capsule_images: 2,
        image_size: 48,
        video_size: 48,
    }
}

fn generate(cfg: &PhantomConfig) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path(), OpenMode::CreateIfMissing).unwrap();
    phantom::generate(&mut store, cfg, &Progress::new()).unwrap();
    (dir, store)
}

fn hashes(store: &Store) -> Vec<String> {
    let mut out = Vec::new();
    for p in store.polyps().unwrap() {
        out.push(format!("{} {:?} {:?}", p.code, p.histology, p.size_mm));
        for v in store.polyp_views(p.id).unwrap() {
            out.push(v.hash);
        }
    }
    for v in store.videos().unwrap() {
        for (i, m) in store.video_frames(v.id).unwrap() {
            out.push(format!("{i} {}", m.hash));
        }
    }
    out
}

#[test]
fn the_same_seed_gives_the_same_content_hashes() {
    let (_a, first) = generate(&tiny(11, Split::Train));
    let (_b, second) = generate(&tiny(11, Split::Train));
    let h = hashes(&first);
    assert!(h.len() > 10);
    assert_eq!(h, hashes(&second));
    let (_c, other) = generate(&tiny(12, Split::Train));
    assert_ne!(h, hashes(&other));
}

#[test]
fn the_phantom_carries_ground_truth_for_every_method() {
    let (_d, store) = generate(&tiny(5, Split::Train));
    let polyps = store.polyps().unwrap();
    assert_eq!(polyps.len(), 3);
    for p in &polyps {
        assert!(p.histology.is_some() && p.vienna_class.is_some() && p.paris.is_some());
        let views = store.polyp_views(p.id).unwrap();
        assert_eq!(views.len(), 4, "multi-view set of {}", p.code);
        assert!(
            views.iter().all(|v| v.mask_media_id.is_some()),
            "every view has a mask"
        );
        let sentences = store.report_sentences(p.examination_id).unwrap();
        assert!(
            sentences.iter().any(|s| s.polyp_id == Some(p.id)),
            "report names {}",
            p.code
        );
    }
    let videos = store.videos().unwrap();
    assert_eq!(videos.len(), 1);
    assert_eq!(videos[0].frame_count, 8);
    // Capsule images carry captions.
    let capsule = store
        .examinations()
        .unwrap()
        .into_iter()
        .find(|e| e.kind == "capsule")
        .unwrap();
    let frames = store.loose_frames(capsule.id).unwrap();
    assert_eq!(frames.len(), 2);
    let raw = store.caption(frames[0].id).unwrap().unwrap();
    let refined = endotwin::captions::Refiner::shipped().refine(&raw);
    assert_eq!(
        store.caption_refinement(frames[0].id).unwrap(),
        Some((refined.caption, refined.category)),
        "the refinement is stored beside the finding"
    );
}

#[test]
fn the_test_split_is_disjoint_from_training() {
    let (_a, train) = generate(&tiny(5, Split::Train));
    let (_b, test) = generate(&tiny(5, Split::Test));
    let train_codes: Vec<String> = train
        .polyps()
        .unwrap()
        .into_iter()
        .map(|p| p.code)
        .collect();
    let test_hashes = hashes(&test);
    for code in &train_codes {
        assert!(!test_hashes.iter().any(|h| h.starts_with(code.as_str())));
    }
    let train_hashes = hashes(&train);
    assert!(
        test_hashes
            .iter()
            .all(|h| !train_hashes.contains(h) || h.contains(' '))
    );
}

#[test]
fn tracklets_split_on_gaps_and_low_overlap() {
    let b = |f: usize, p: usize, x: f32| (f, p, [x, 0.0, 10.0, 10.0]);
    // Polyp 0 seen on frames 0-2, gap, again on 5; polyp 1 jumps far at frame 2.
    let boxes = vec![
        b(0, 0, 0.0),
        b(1, 0, 1.0),
        b(1, 1, 50.0),
        b(2, 0, 2.0),
        b(2, 1, 90.0),
        b(5, 0, 2.0),
    ];
    let t = endotwin::data::tracklets::tracklets_from_boxes(&boxes);
    let shapes: Vec<(usize, usize)> = t.iter().map(|(p, m)| (*p, m.len())).collect();
    assert_eq!(shapes, vec![(0, 3), (1, 1), (1, 1), (0, 1)]);
}

/// Per view of each polyp, the mean chromaticity (red and green shares) of its mask's pixels.
fn polyp_colours(store: &Store) -> Vec<Vec<[f64; 2]>> {
    use endotwin::data::images::decode_media;
    store
        .polyps()
        .unwrap()
        .iter()
        .map(|p| {
            store
                .polyp_views(p.id)
                .unwrap()
                .iter()
                .map(|v| {
                    let rgb = decode_media(store, v).unwrap().image.to_rgb8();
                    let mask = store.media(v.mask_media_id.unwrap()).unwrap().unwrap();
                    let mask = decode_media(store, &mask).unwrap().image.to_luma8();
                    let (mut sum, mut n) = ([0.0f64; 3], 0.0);
                    for (px, m) in rgb.pixels().zip(mask.pixels()) {
                        if m.0[0] >= 128 {
                            for (total, &value) in sum.iter_mut().zip(&px.0) {
                                *total += value as f64;
                            }
                            n += 1.0;
                        }
                    }
                    let total = (sum[0] + sum[1] + sum[2]).max(1.0);
                    assert!(n > 0.0, "{} shows its polyp", p.code);
                    [sum[0] / total, sum[1] / total]
                })
                .collect()
        })
        .collect()
}

/// #44 item 5: a polyp keeps its colour across the views of one examination (the light of an
/// examination is drawn once; each view strays from it only a little), so the phantom no
/// longer teaches that a polyp's colour means nothing. Measured as the chromaticity (red and
/// green shares of the polyp's pixels, which shading and exposure do not move): the views of
/// one polyp lie much closer together than two polyps do.
#[test]
fn a_polyp_keeps_its_colour_across_its_views() {
    let cfg = PhantomConfig {
        polyps: 16,
        videos: 0,
        capsule_images: 0,
        background_frames: 0,
        image_size: 96,
        ..tiny(31, Split::Train)
    };
    let (_d, store) = generate(&cfg);
    let colours = polyp_colours(&store);
    let distance =
        |a: &[f64; 2], b: &[f64; 2]| ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2)).sqrt();
    let mean = |v: &[[f64; 2]]| {
        let n = v.len() as f64;
        [
            v.iter().map(|c| c[0]).sum::<f64>() / n,
            v.iter().map(|c| c[1]).sum::<f64>() / n,
        ]
    };
    // Within: each view from its polyp's mean colour; between: polyps' means from each other.
    let within: Vec<f64> = colours
        .iter()
        .flat_map(|views| {
            let m = mean(views);
            views
                .iter()
                .map(move |v| distance(v, &m))
                .collect::<Vec<_>>()
        })
        .collect();
    let means: Vec<[f64; 2]> = colours.iter().map(|v| mean(v)).collect();
    let mut between = Vec::new();
    for i in 0..means.len() {
        for j in i + 1..means.len() {
            between.push(distance(&means[i], &means[j]));
        }
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let (within, between) = (median(within), median(between));
    eprintln!("chromaticity: a view from its polyp's mean {within:.4}, two polyps {between:.4}");
    // Measured: 0.0036 against 0.0364 (a tenth); with a new light for every view, as the
    // phantom drew it before, 0.0073 against 0.0346 (a fifth), which fails here.
    assert!(
        within * 7.0 < between,
        "a polyp's views differ in colour ({within:.4}) nearly as much as two polyps ({between:.4})"
    );
}
