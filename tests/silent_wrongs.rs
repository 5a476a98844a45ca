//! Wrong without a word (issue 43): each case a command used to get wrong while exiting 0 or
//! saying nothing, now named or refused. Each goes through the command line; the library is
//! checked unchanged where nothing may change.

use crate::common;
use crate::hostile::library_with_cases;
use crate::store_safety::{endotwin_cmd, files, run_within};

use common::{import, png, run};
use endotwin::store::{OpenMode, Store};
use std::path::Path;

/// The first view of polyp `code` in the library at `lib`, with its absolute path.
fn first_view(lib: &Path, code: &str) -> (endotwin::store::MediaRow, std::path::PathBuf) {
    let store = Store::open(lib, OpenMode::Existing).unwrap();
    let polyp = store
        .polyps()
        .unwrap()
        .into_iter()
        .find(|p| p.code == code)
        .unwrap();
    let view = store.polyp_views(polyp.id).unwrap().remove(0);
    let path = store.media_path(&view);
    (view, path)
}

#[test]
fn a_contact_sheet_names_a_swapped_view_and_fails() {
    let (lib, _src) = library_with_cases();
    let (view, path) = first_view(lib.path(), "base-A");
    // Another picture under the view's name: same kind of file, other bytes.
    png(&path, 24, 16, 200);
    let out = tempfile::tempdir().unwrap();
    let sheet = out.path().join("sheet.png");
    let mut c = endotwin_cmd(lib.path(), &["contact-sheet", "--out"]);
    c.arg(&sheet);
    let r = run(c);
    assert!(
        !r.ok() && r.says("polyp base-A view 1") && r.says(&view.rel_path) && r.says("crossed out"),
        "{}",
        r.text()
    );
    // The sheet is written with the tile crossed out in red, and says so.
    let img = image::open(&sheet).unwrap().to_rgb8();
    assert_eq!(
        img.get_pixel(2, 2).0,
        [220, 30, 30],
        "the first tile is crossed out"
    );
}

/// Waits (at most 20 s) until `done` holds for the app, drawing between looks.
fn wait_for_app(
    h: &mut egui_kittest::Harness<'static, endotwin::app::App>,
    what: &str,
    done: &dyn Fn(&endotwin::app::App) -> bool,
) {
    for _ in 0..400 {
        crate::gui::settle(h);
        if done(h.state()) {
            crate::gui::settle(h);
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("{what} never came");
}

#[test]
fn the_captions_and_text_prompts_tabs_name_a_swapped_view_instead_of_answering() {
    use burn::tensor::Device;
    use endotwin::app::{Selection, ToastLevel};
    use endotwin::model::weights::{self, ModelCard, ModelKind};
    let _rng = common::device_rng();
    let lib = tempfile::tempdir().unwrap();
    let models = tempfile::tempdir().unwrap();
    let store = crate::prompts::records_library(lib.path(), 2);
    // Untrained tiny models: the hash check comes before any model sees the view.
    let device = Device::flex();
    let captions = crate::caption_model::tiny_config();
    let card = ModelCard::new(
        "captions",
        ModelKind::CaptionModel,
        "test",
        "a tiny caption model",
        &captions,
    );
    weights::save(&captions.init(&device), &card, models.path()).unwrap();
    let records =
        endotwin::prompts::records::Records::load(&store, 32, &endotwin::plumbing::Progress::new())
            .unwrap();
    let prompts = crate::prompts::tiny_config(&records);
    for name in ["prompts", "prompts-detect", "prompts-round1"] {
        let card = ModelCard::new(
            name,
            ModelKind::PromptModel,
            "test",
            "a tiny prompt model",
            &prompts,
        );
        weights::save(&prompts.init(&device), &card, models.path()).unwrap();
    }
    // The polyp's first view now holds its second view's bytes: a real image, not the view.
    let polyp = store.polyps().unwrap()[0].id;
    let views = store.polyp_views(polyp).unwrap();
    assert!(views.len() >= 2);
    let other = std::fs::read(store.media_path(&views[1])).unwrap();
    std::fs::write(store.media_path(&views[0]), other).unwrap();
    drop(store);

    let mut h = crate::gui::harness(lib.path());
    h.state_mut().state.captions.models_dir = models.path().to_path_buf();
    {
        let panel = &mut h.state_mut().state.prompts;
        panel.models_dir = models.path().to_path_buf();
        panel.models = endotwin::engine::prompt_jobs::available(models.path());
    }
    crate::gui::settle(&mut h);
    crate::gui_input::click_case(&mut h, lib.path(), Selection::Polyp(polyp));
    crate::gui::settle(&mut h);
    let named =
        |text: &str| text.contains(&format!("media {}", views[0].id)) && text.contains("changed");
    let toasted = |a: &endotwin::app::App, tab: &str| {
        a.state
            .toasts
            .iter()
            .any(|t| t.level == ToastLevel::Error && t.text.starts_with(tab) && named(&t.text))
    };

    crate::gui_input::click_tab(&mut h, "Captions");
    wait_for_app(&mut h, "the Captions answer", &|a| {
        a.state.captions.running.is_none() && a.state.captions.problem.is_some()
    });
    let panel = &h.state().state.captions;
    let problem = panel.problem.clone().unwrap();
    assert!(named(&problem), "{problem}");
    assert!(panel.frames.is_empty(), "the swapped view was captioned");
    assert!(
        toasted(h.state(), "Captions:"),
        "no error toast: {:?}",
        h.state().state.toasts
    );
    crate::gui::shows_part(&h, &format!("media {}", views[0].id));

    crate::gui_input::click_tab(&mut h, "Text prompts");
    wait_for_app(&mut h, "the Text prompts answer", &|a| {
        a.state.prompts.running.is_none() && a.state.prompts.problem.is_some()
    });
    let panel = &h.state().state.prompts;
    let problem = panel.problem.clone().unwrap();
    assert!(named(&problem), "{problem}");
    assert!(panel.scores.is_none(), "the swapped view was scored");
    assert!(
        toasted(h.state(), "Text prompts:"),
        "no error toast: {:?}",
        h.state().state.toasts
    );
    crate::gui::shows_part(&h, &format!("media {}", views[0].id));
}

#[test]
fn a_refused_or_failed_import_leaves_no_library_behind() {
    let src = tempfile::tempdir().unwrap();
    // One good polyp and one unreadable view: --strict refuses the whole import.
    png(&src.path().join("set/A/1.png"), 24, 16, 1);
    std::fs::create_dir_all(src.path().join("set/B")).unwrap();
    std::fs::write(src.path().join("set/B/1.png"), b"not a png").unwrap();
    // A folder with nothing to import.
    std::fs::create_dir_all(src.path().join("empty/x")).unwrap();
    std::fs::write(src.path().join("empty/x/notes.png"), b"no picture").unwrap();
    let home = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, &[&str]); 3] = [
        ("multiview", "set", &["--strict"]),
        ("images", "empty", &[]),
        ("kvasir-seg", "set", &[]),
    ];
    for (layout, folder, extra) in cases {
        // A new library folder: gone again; an existing empty folder: left empty.
        let new = home.path().join(format!("new-{layout}"));
        let r = import(&new, layout, &src.path().join(folder), extra);
        assert!(!r.ok(), "{layout}: {}", r.text());
        assert!(!new.exists(), "{layout}: a library was left at {new:?}");
        let existing = home.path().join(format!("existing-{layout}"));
        std::fs::create_dir_all(&existing).unwrap();
        let r = import(&existing, layout, &src.path().join(folder), extra);
        assert!(!r.ok(), "{layout}: {}", r.text());
        assert_eq!(
            std::fs::read_dir(&existing).unwrap().count(),
            0,
            "{layout}: the folder is no longer empty"
        );
    }
    // An import that brings something makes the library as before.
    let made = home.path().join("made");
    let r = import(&made, "multiview", &src.path().join("set"), &[]);
    assert!(r.ok(), "{}", r.text());
    assert!(made.join("library.sqlite").is_file());
    // A refused demo makes nothing either.
    let demo = home.path().join("demo");
    let mut c = common::endotwin(&demo);
    c.args(["demo", "--size", "8", "--out"]).arg(&demo);
    let r = run(c);
    assert!(!r.ok() && r.says("nothing was written"), "{}", r.text());
    assert!(!demo.exists());
}

#[test]
fn multiview_names_masks_of_no_view_and_all_black_masks_per_view() {
    let lib = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    let p = src.path().join("set/P");
    for n in 1..=3u8 {
        png(&p.join(format!("{n}.png")), 24, 16, n);
    }
    let mask = |path: &Path, white: bool| {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        image::GrayImage::from_fn(24, 16, |x, y| {
            image::Luma([if white && (6..18).contains(&x) && (4..12).contains(&y) {
                255
            } else {
                0
            }])
        })
        .save(path)
        .unwrap();
    };
    mask(&p.join("masks/1.png"), true);
    mask(&p.join("masks/2.png"), false);
    mask(&p.join("3_mask.png"), false);
    // Named for views that are not there.
    mask(&p.join("masks/9.png"), true);
    mask(&p.join("7_mask.png"), true);
    let r = import(lib.path(), "multiview", &src.path().join("set"), &[]);
    assert!(r.ok(), "{}", r.text());
    for orphan in ["masks/9.png", "7_mask.png"] {
        let line = r
            .stderr
            .lines()
            .find(|l| l.contains(orphan))
            .unwrap_or_else(|| panic!("{orphan} not named:\n{}", r.text()));
        assert!(line.contains("named for no view"), "{line}");
    }
    for (mask, view) in [("masks/2.png", "2.png"), ("3_mask.png", "3.png")] {
        let line = r
            .stderr
            .lines()
            .find(|l| l.contains(mask))
            .unwrap_or_else(|| panic!("{mask} not named:\n{}", r.text()));
        assert!(line.contains("all black") && line.contains(view), "{line}");
    }
    assert!(r.says("1 views (all with masks)"), "{}", r.text());
    // --strict refuses the set for them, writing nothing.
    let strict = tempfile::tempdir().unwrap();
    let r = import(
        strict.path(),
        "multiview",
        &src.path().join("set"),
        &["--strict"],
    );
    assert!(!r.ok() && r.says("nothing was written"), "{}", r.text());
}

/// A CVC-ClinicDB folder whose sequences have the given frame counts (frames numbered on
/// from `first`, sequence numbers 1, 2, ...), 24 x 16 TIFFs with masks.
fn cvc_folder(root: &Path, frames_per_sequence: &[u32], seed: u8) {
    for d in ["Original", "Ground Truth"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let mut table = String::from("frame,sequence\n");
    let mut n = 1u32;
    for (s, &count) in frames_per_sequence.iter().enumerate() {
        for _ in 0..count {
            let tone = (seed as u32 * 50 + s as u32 * 40 + n) as u8;
            image::RgbImage::from_fn(24, 16, |x, y| {
                image::Rgb([tone, (x * 9) as u8 ^ tone, (y * 13) as u8])
            })
            .save(root.join(format!("Original/{n}.tif")))
            .unwrap();
            image::GrayImage::from_fn(24, 16, |x, y| {
                image::Luma([if (4..20).contains(&x) && (3..13).contains(&y) {
                    255
                } else {
                    0
                }])
            })
            .save(root.join(format!("Ground Truth/{n}.tif")))
            .unwrap();
            table.push_str(&format!("{n},{}\n", s + 1));
            n += 1;
        }
    }
    std::fs::write(root.join("sequences.csv"), table).unwrap();
}

#[test]
fn eval_real_keeps_folders_apart_and_notes_what_it_leaves_out() {
    let data = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(data.path().join("cvc-clinicdb-empty")).unwrap();
    cvc_folder(&data.path().join("cvc-clinicdb-a"), &[4, 4], 1);
    cvc_folder(&data.path().join("cvc-clinicdb-b"), &[4, 4, 3], 2);
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("real.json");
    let lib = tempfile::tempdir().unwrap();
    let mut c = endotwin_cmd(lib.path(), &["eval", "real", "--data"]);
    c.arg(data.path()).arg("--json").arg(&json);
    let r = run_within(c, 600);
    assert!(r.ok(), "{}", r.text());
    let e: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(
        e["twin_polyps"], 4,
        "two folders' sequences 1 and 2 are four polyps"
    );
    let notes: Vec<String> = e["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("cvc-clinicdb-empty") && n.contains("left out")),
        "{notes:?}"
    );
    assert!(
        notes.iter().any(|n| n.contains("cvc-clinicdb-b")
            && n.contains("fewer than 4")
            && n.contains("3 (3 frames)")),
        "{notes:?}"
    );
    // These 24 x 16 frames' polyps (16 x 10, squared to the frame's 16) leave no polyp-free
    // window of their size: every frame left out of detection, and the note says why.
    assert_eq!(
        e["cvc_detection_images"], 0,
        "{}",
        e["cvc_detection_images"]
    );
    assert!(
        notes.iter().any(|n| n.contains(
            "CVC-ClinicDB frames not scored: 19 without a \
                 polyp-free window of the polyp's size"
        )),
        "{notes:?}"
    );
    // Three frames a sequence: nothing can be measured, said with the notes (not a
    // temporary-folder error), and no result (round 9 N31: it exited 0).
    let short = tempfile::tempdir().unwrap();
    cvc_folder(&short.path().join("cvc-clinicdb"), &[3, 3], 3);
    let mut c = endotwin_cmd(lib.path(), &["eval", "real", "--data"]);
    c.arg(short.path());
    let r = run_within(c, 600);
    assert!(
        !r.ok()
            && r.says("nothing could be scored")
            && r.says("fewer than 4")
            && r.says("at least 2 are needed")
            && !r.says("no such file"),
        "{}",
        r.text()
    );
}

#[test]
fn bench_frames_finds_a_polyp_past_a_capsule_examination() {
    let lib = tempfile::tempdir().unwrap();
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample_db");
    let mut c = std::process::Command::new("cp");
    c.arg("-r")
        .arg(sample.join("library.sqlite"))
        .arg(sample.join("media"))
        .arg(lib.path());
    assert!(c.status().unwrap().success());
    let mut c = endotwin_cmd(
        lib.path(),
        &["bench", "frames", "--seconds", "0.1", "--library"],
    );
    c.arg(lib.path());
    let r = run_within(c, 600);
    assert!(!r.says("has no polyps"), "{}", r.text());
    assert!(r.ok(), "{}", r.text());
}

/// Imports `csv` as labels with `--apply --who who`.
fn labels_import(lib: &Path, csv: &str, who: &str) -> common::Ran {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("labels.csv");
    std::fs::write(&file, csv).unwrap();
    let mut c = endotwin_cmd(lib, &["labels", "import"]);
    c.arg(&file).args(["--apply", "--who", who]);
    run(c)
}

#[test]
fn labels_import_stores_a_histology_term_in_the_vocabularys_spelling() {
    let (lib, _src) = library_with_cases();
    let r = labels_import(
        lib.path(),
        "polyp,histology,vienna_class,location\nbase-A,TUBULAR ADENOMA HG,4,  SIGMOID colon\n",
        "alice",
    );
    assert!(r.ok(), "{}", r.text());
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let a = store
        .polyps()
        .unwrap()
        .into_iter()
        .find(|p| p.code == "base-A")
        .unwrap();
    assert_eq!(a.histology.as_deref(), Some("tubular adenoma HG"));
    assert_eq!(a.location.as_deref(), Some("sigmoid colon"));
    // The same term in another case again is no change.
    let r = labels_import(
        lib.path(),
        "polyp,histology\nbase-A,Tubular Adenoma hg\n",
        "alice",
    );
    assert!(r.ok() && r.says("no changes"), "{}", r.text());
}

/// Reviewer names that would pass for another signer (an importer, or a name that looks the
/// same): every audited write refuses them.
const LOOKALIKE_NAMES: [&str; 14] = [
    "import\u{FF1A}bob",
    "IMPORT:bob",
    "\u{FF49}mport:bob",
    "bo\u{00AD}b",
    "\u{3164}",
    "bob\u{3164}",
    "bob ",
    " bob",
    "bob\u{00A0}smith",
    "bob  smith",
    // Hostile round 4 (W3): a Cyrillic і or А among Latin letters.
    "\u{0456}mport:kvasir-seg",
    "Dr. \u{0410}lice",
    // The fourth hostile round of #43: a full-width letter, a combining accent.
    "\u{FF21}lice",
    "al\u{0301}ice",
];

#[test]
fn reviewer_names_that_pass_for_another_signer_are_refused() {
    let (lib, _src) = library_with_cases();
    let bad = LOOKALIKE_NAMES;
    let before = files(lib.path());
    for who in bad {
        let r = labels_import(
            lib.path(),
            "polyp,histology,vienna_class\nbase-A,carcinoma,5\n",
            who,
        );
        assert!(
            !r.ok() && r.says("reviewer name"),
            "{who:?} was accepted:\n{}",
            r.text()
        );
    }
    assert_eq!(files(lib.path()), before, "the library changed");
    // The same rule on a caption correction and a tracklet edit.
    let mut store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let capsule = store
        .examinations()
        .unwrap()
        .into_iter()
        .find_map(|e| store.loose_frames(e.id).unwrap().into_iter().next())
        .unwrap();
    for who in bad {
        let e = store
            .correct_caption(who, capsule.id, Some(("ulcer", None)))
            .unwrap_err();
        assert!(e.to_string().contains("reviewer name"), "{who:?}: {e}");
        let e = store.new_review_polyp(who, 1).unwrap_err();
        assert!(e.to_string().contains("reviewer name"), "{who:?}: {e}");
    }
    drop(store);
    assert_eq!(files(lib.path()), before, "the library changed");
    for who in ["Dr. Anna Müller", "bob", "李 雷", "Иван Петров", "Dr. Иван"] {
        let r = labels_import(
            lib.path(),
            "polyp,histology,vienna_class\nbase-A,carcinoma,5\n",
            who,
        );
        assert!(r.ok(), "{who:?}: {}", r.text());
    }
}

#[test]
fn every_tracklet_edit_refuses_a_lookalike_reviewer_name_and_changes_nothing() {
    let lib = tempfile::tempdir().unwrap();
    // One short phantom video: its tracklets are all the edits need.
    let cfg = endotwin::data::phantom::PhantomConfig {
        seed: 5,
        polyps: 2,
        views_per_polyp: 4,
        videos: 1,
        frames_per_video: 120,
        background_frames: 0,
        capsule_images: 0,
        image_size: 32,
        video_size: 32,
        ..Default::default()
    };
    common::phantom_library(lib.path(), &cfg);
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let video = store.videos().unwrap().remove(0).id;
    let tracklets = store.video_tracklets(video).unwrap();
    assert!(tracklets.len() >= 2, "{tracklets:?}");
    let (a, b) = (&tracklets[0], &tracklets[1]);
    let (box_id, first_box) = store
        .video_boxes_with_ids(video)
        .unwrap()
        .into_iter()
        .find(|(_, r)| r.tracklet_id == Some(a.id))
        .unwrap();
    let polyp = store.video_polyps(video).unwrap()[0].0;
    let all = endotwin::store::AuditFilter {
        limit: 0,
        ..Default::default()
    };
    let snapshot = |store: &Store| {
        (
            store.video_tracklets(video).unwrap(),
            store.video_boxes_with_ids(video).unwrap(),
            store.link_decisions(video).unwrap(),
            store.audit_log(&all).unwrap().len(),
        )
    };
    let before_rows = snapshot(&store);
    drop(store);
    let before = files(lib.path());
    let mut store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let middle = (a.first_frame + a.last_frame) / 2;
    for who in LOOKALIKE_NAMES {
        let refusals: Vec<(&str, endotwin::store::StoreError)> = vec![
            (
                "assign",
                store.assign_tracklet(who, a.id, Some(polyp)).unwrap_err(),
            ),
            (
                "assign none",
                store.assign_tracklet(who, a.id, None).unwrap_err(),
            ),
            (
                "split",
                store.split_tracklet(who, a.id, middle).unwrap_err(),
            ),
            ("join", store.join_tracklets(who, a.id, b.id).unwrap_err()),
            (
                "add",
                store
                    .add_tracklet(
                        who,
                        video,
                        None,
                        &[(first_box.frame_index, [1.0, 1.0, 8.0, 8.0])],
                        "drawn",
                    )
                    .unwrap_err(),
            ),
            ("remove", store.remove_tracklet(who, b.id).unwrap_err()),
            (
                "move box",
                store
                    .move_box(who, box_id, [2.0, 2.0, 9.0, 9.0])
                    .unwrap_err(),
            ),
            (
                "link",
                store
                    .decide_link(
                        who,
                        a.id,
                        b.id,
                        Some(endotwin::store::LinkDecision::Rejected),
                    )
                    .unwrap_err(),
            ),
            ("new polyp", store.new_review_polyp(who, video).unwrap_err()),
        ];
        for (edit, e) in refusals {
            assert!(
                e.to_string().contains("reviewer name"),
                "{edit} as {who:?}: {e}"
            );
        }
    }
    assert_eq!(
        snapshot(&store),
        before_rows,
        "a refused edit changed the rows"
    );
    drop(store);
    assert_eq!(files(lib.path()), before, "the library changed");
    // The same edits signed by a real name go through.
    let mut store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    store
        .move_box("dr. Jane Doe", box_id, [2.0, 2.0, 9.0, 9.0])
        .unwrap();
    store
        .decide_link(
            "dr. Jane Doe",
            a.id,
            b.id,
            Some(endotwin::store::LinkDecision::Rejected),
        )
        .unwrap();
    store.split_tracklet("dr. Jane Doe", a.id, middle).unwrap();
}

#[cfg(unix)]
#[test]
fn library_check_names_a_fifo_a_link_and_a_changed_row_and_reads_none() {
    use crate::store_safety::mkfifo;
    let (lib, _src) = library_with_cases();
    let store = Store::open(lib.path(), OpenMode::Existing).unwrap();
    let a = store
        .polyps()
        .unwrap()
        .into_iter()
        .find(|p| p.code == "base-A")
        .unwrap();
    let views = store.polyp_views(a.id).unwrap();
    let (fifo_view, link_view) = (&views[0], &views[1]);
    let fifo_path = store.media_path(fifo_view);
    let link_path = store.media_path(link_view);
    drop(store);
    std::fs::remove_file(&fifo_path).unwrap();
    mkfifo(&fifo_path);
    std::fs::remove_file(&link_path).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &link_path).unwrap();
    // A row whose file name leads outside the library, to a FIFO that would block a read.
    let outside = tempfile::tempdir().unwrap();
    mkfifo(&outside.path().join("trap"));
    let rel = format!(
        "../{}/trap",
        outside.path().file_name().unwrap().to_string_lossy()
    );
    let capsule_id: i64 = {
        let conn = rusqlite::Connection::open(lib.path().join("library.sqlite")).unwrap();
        let id = conn
            .query_row("SELECT id FROM media WHERE kind = 'capsule'", [], |r| {
                r.get(0)
            })
            .unwrap();
        conn.execute(
            "UPDATE media SET rel_path = ?1 WHERE id = ?2",
            rusqlite::params![rel, id],
        )
        .unwrap();
        id
    };
    let r = run_within(endotwin_cmd(lib.path(), &["library", "check"]), 60);
    assert!(!r.ok(), "{}", r.text());
    let line = |id: i64| {
        r.stdout
            .lines()
            .find(|l| l.contains(&format!("media {id} ")) || l.contains(&format!("media {id}:")))
            .unwrap_or_else(|| panic!("media {id} not named:\n{}", r.text()))
            .to_string()
    };
    assert!(line(fifo_view.id).contains("FIFO"), "{}", r.text());
    let link = line(link_view.id);
    assert!(
        link.contains("symbolic link") && link.contains("/dev/zero"),
        "{link}"
    );
    let tampered = line(capsule_id);
    assert!(
        tampered.contains(&rel) && tampered.contains("not read"),
        "{tampered}"
    );
    assert!(!r.stdout.contains("missing:"), "{}", r.text());
}

#[cfg(unix)]
#[test]
fn a_fifo_database_is_refused_by_name_before_it_is_opened() {
    use crate::store_safety::mkfifo;
    let lib = tempfile::tempdir().unwrap();
    let db = lib.path().join("library.sqlite");
    mkfifo(&db);
    for command in [
        &["library", "check"][..],
        &["info"][..],
        &["labels", "history"][..],
    ] {
        let r = run_within(endotwin_cmd(lib.path(), command), 30);
        assert!(
            !r.ok() && r.says(&db.display().to_string()) && r.says("not a regular file"),
            "{command:?}: {}",
            r.text()
        );
        assert!(!r.says("disk I/O error"), "{}", r.text());
    }
}

#[cfg(unix)]
#[test]
fn links_leading_outside_are_refused_unless_follow_links_and_loops_always() {
    let src = tempfile::tempdir().unwrap();
    let other_disk = tempfile::tempdir().unwrap();
    let pics = src.path().join("pics");
    png(&pics.join("a/1.png"), 16, 16, 1);
    png(&other_disk.path().join("day2/2.png"), 16, 16, 2);
    std::os::unix::fs::symlink(other_disk.path().join("day2"), pics.join("day2")).unwrap();
    // A link back to the folder above the import folder: a loop either way.
    std::os::unix::fs::symlink(src.path(), pics.join("a/up")).unwrap();
    let lib = tempfile::tempdir().unwrap();
    let r = run_within(
        {
            let mut c = endotwin_cmd(lib.path(), &["import", "images"]);
            c.arg(&pics);
            c
        },
        60,
    );
    assert!(
        r.ok() && r.says("day2") && r.says("leads outside") && r.says("--follow-links"),
        "{}",
        r.text()
    );
    assert!(r.says("1 media added"), "{}", r.text());
    let lib = tempfile::tempdir().unwrap();
    let r = run_within(
        {
            let mut c = endotwin_cmd(lib.path(), &["import", "images", "--follow-links"]);
            c.arg(&pics);
            c
        },
        60,
    );
    assert!(r.ok() && r.says("2 media added"), "{}", r.text());
    let up = r
        .stderr
        .lines()
        .find(|l| l.contains("a/up"))
        .unwrap_or_else(|| panic!("the loop is not named:\n{}", r.text()));
    assert!(up.contains("symlink loop"), "{up}");
}

#[test]
fn labels_import_without_who_or_user_is_refused_not_signed_by_the_tool() {
    let (lib, _src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("labels.csv");
    std::fs::write(&file, "polyp,histology\nbase-A,carcinoma\n").unwrap();
    let before = files(lib.path());
    let mut c = endotwin_cmd(lib.path(), &["labels", "import"]);
    c.arg(&file).arg("--apply").env_remove("USER");
    let r = run(c);
    assert!(!r.ok() && r.says("--who"), "{}", r.text());
    assert_eq!(files(lib.path()), before, "the library changed");
}
