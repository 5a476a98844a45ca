//! Property tests over every manifest parser: random bytes and mutated real manifests never
//! panic an import and never write a row that breaks the library's rules
//! (`Store::invalid_rows`).

use crate::common;

use common::png;
use endotwin::data::import::{self, ImportLayout, ImportOptions};
use endotwin::engine::Progress;
use endotwin::store::Store;
use proptest::prelude::*;
use std::path::PathBuf;

/// A source folder with the images every template names; the manifest is rewritten per case.
struct Fixture {
    dir: tempfile::TempDir,
    layout: ImportLayout,
    /// Where the manifest goes, relative to the folder.
    manifest: &'static str,
    /// What `endotwin import` is pointed at, relative to the folder.
    target: &'static str,
    template: &'static str,
}

impl Fixture {
    fn new(
        layout: ImportLayout,
        manifest: &'static str,
        target: &'static str,
        template: &'static str,
        images: &[&str],
        extra: &[(&str, &str)],
    ) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        for (i, name) in images.iter().enumerate() {
            png(&dir.path().join(name), 24, 20, i as u8 * 17 + 3);
        }
        for (name, text) in extra {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        Fixture {
            dir,
            layout,
            manifest,
            target,
            template,
        }
    }

    /// Imports `manifest` into a fresh library; panics only if the importer does.
    fn import(&self, manifest: &[u8]) -> Vec<String> {
        let path = self.dir.path().join(self.manifest);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, manifest).unwrap();
        let media = tempfile::tempdir().unwrap();
        let mut store = Store::open_in_memory(media.path()).unwrap();
        let target: PathBuf = self.dir.path().join(self.target);
        let _ = import::run(
            self.layout,
            &mut store,
            &target,
            ImportOptions::default(),
            &Progress::new(),
        );
        store.invalid_rows().unwrap()
    }
}

fn fixtures() -> Vec<Fixture> {
    vec![
        Fixture::new(
            ImportLayout::Multiview,
            "pathology.csv",
            ".",
            "polyp,histology,vienna_class,size_mm\nA,adenoma,3,8\nB,hyperplastic,1,4\n",
            &["A/1.png", "A/2.png", "B/1.png"],
            &[],
        ),
        Fixture::new(
            ImportLayout::Endofinder,
            "ef.jsonl",
            "ef.jsonl",
            "{\"id\": \"1\", \"img_paths\": [\"a/1.png\", \"a/2.png\"], \"ground_truth\": \"adenoma\"}\n\
             {\"id\": 2, \"query_paths\": [\"b/1.png\"], \"ref_paths\": [\"b/2.png\"], \"ground_truth\": \"hyperplastic\"}\n",
            &["a/1.png", "a/2.png", "b/1.png", "b/2.png"],
            &[],
        ),
        Fixture::new(
            ImportLayout::Coco,
            "t.json",
            "t.json",
            r#"{"images": [{"id": 0, "file_name": "f/0.png", "frame_id": 0, "sequence_id": "s"},
              {"id": 1, "file_name": "f/1.png", "frame_id": 1, "sequence_id": "s"}],
              "annotations": [{"image_id": 0, "bbox": [2, 3, 10, 8], "identity_id": "p", "size": 5, "histology": "AD"},
              {"image_id": 1, "bbox": [4, 3, 10, 8], "identity_id": "p"}]}"#,
            &["f/0.png", "f/1.png"],
            &[],
        ),
        Fixture::new(
            ImportLayout::RealColon,
            "001-001_annotations/001-001_1.xml",
            ".",
            "<annotation><object><name>lesion</name><unique_id>001-001_1</unique_id><bndbox>\
             <xmin>2</xmin><ymin>2</ymin><xmax>12</xmax><ymax>10</ymax></bndbox></object></annotation>",
            &[
                "001-001_frames/001-001_1.png",
                "001-001_frames/001-001_2.png",
            ],
            &[
                ("video_info.csv", "unique_video_name,fps\n001-001,30\n"),
                (
                    "lesion_info.csv",
                    "unique_object_id,size [mm],histology\n001-001_1,4,AD\n",
                ),
            ],
        ),
        Fixture::new(
            ImportLayout::RealColon,
            "lesion_info.csv",
            ".",
            "unique_object_id,size [mm],site,histology\n001-001_1,4,sigmoid,AD\n001-001_1,4,sigmoid,AD\n",
            &["001-001_frames/001-001_1.png"],
            &[
                ("video_info.csv", "unique_video_name,fps\n001-001,30\n"),
                // The lesion's box: a lesion row no box refers to is named as not imported.
                (
                    "001-001_annotations/001-001_1.xml",
                    "<annotation><object><name>lesion</name><unique_id>001-001_1</unique_id>\
                     <bndbox><xmin>2</xmin><ymin>2</ymin><xmax>12</xmax><ymax>10</ymax></bndbox>\
                     </object></annotation>",
                ),
            ],
        ),
        Fixture::new(
            ImportLayout::Captiv8,
            "p.csv",
            ".",
            "Patient ID,name,capture_time,image_path,video_path,image_label\n\
             1,a,00:00:01,img/1.png,v.mp4,ulcer\n1,b,00:00:02,img/2.png,v.mp4,normal\n",
            &["img/1.png", "img/2.png"],
            &[],
        ),
    ]
}

/// One edit of a manifest: overwrite, insert or delete a byte, or splice in a hostile token.
#[derive(Debug, Clone)]
enum Edit {
    Set(usize, u8),
    Insert(usize, u8),
    Delete(usize),
    Splice(usize, &'static str),
}

const TOKENS: &[&str] = &[
    "-1",
    "0",
    "1e39",
    "-1e308",
    "NaN",
    "\"\"",
    "../",
    "/etc/passwd",
    ",",
    "\n",
    "\r\n",
    "\"",
    "<",
    "&amp;",
    "]]",
    "{}",
    "[]",
    "null",
    "99999999999999999999",
    "\u{feff}",
    "\u{0}",
];

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Set(i, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Insert(i, b)),
        any::<usize>().prop_map(Edit::Delete),
        (any::<usize>(), prop::sample::select(TOKENS)).prop_map(|(i, t)| Edit::Splice(i, t)),
    ]
}

fn apply(template: &str, edits: &[Edit]) -> Vec<u8> {
    let mut b = template.as_bytes().to_vec();
    for e in edits {
        let at = |i: usize, len: usize| if len == 0 { 0 } else { i % (len + 1) };
        match e {
            Edit::Set(i, v) if !b.is_empty() => {
                let n = b.len();
                b[i % n] = *v;
            }
            Edit::Insert(i, v) => {
                let i = at(*i, b.len());
                b.insert(i, *v);
            }
            Edit::Delete(i) if !b.is_empty() => {
                let n = b.len();
                b.remove(i % n);
            }
            Edit::Splice(i, t) => {
                let i = at(*i, b.len());
                b.splice(i..i, t.bytes());
            }
            _ => {}
        }
    }
    b
}

fn check(fixtures: &[Fixture], pick: usize, bytes: &[u8]) -> Result<(), TestCaseError> {
    let f = &fixtures[pick % fixtures.len()];
    let bad = f.import(bytes);
    prop_assert!(
        bad.is_empty(),
        "{:?} wrote rows that break the rules: {bad:?}\nmanifest: {:?}",
        f.layout,
        String::from_utf8_lossy(bytes)
    );
    Ok(())
}

#[test]
fn the_templates_themselves_import_cleanly() {
    for f in fixtures() {
        assert!(f.import(f.template.as_bytes()).is_empty());
        let media = tempfile::tempdir().unwrap();
        let mut store = Store::open_in_memory(media.path()).unwrap();
        let r = import::run(
            f.layout,
            &mut store,
            &f.dir.path().join(f.target),
            ImportOptions::default(),
            &Progress::new(),
        )
        .unwrap();
        assert!(r.skipped.is_empty(), "{:?}: {:?}", f.layout, r.skipped);
        assert!(r.media_added > 0, "{:?}", f.layout);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic_or_write_a_bad_row(
        pick in 0usize..6,
        bytes in prop::collection::vec(any::<u8>(), 0..300),
    ) {
        let fixtures = FIXTURES.with(|f| f.clone());
        check(&fixtures, pick, &bytes)?;
    }

    #[test]
    fn mutated_real_manifests_never_panic_or_write_a_bad_row(
        pick in 0usize..6,
        edits in prop::collection::vec(edit(), 1..10),
    ) {
        let fixtures = FIXTURES.with(|f| f.clone());
        let f = &fixtures[pick % fixtures.len()];
        check(&fixtures, pick, &apply(f.template, &edits))?;
    }

    #[test]
    fn coco_boxes_of_any_numbers_are_stored_only_when_they_can_exist(
        boxes in prop::collection::vec(
            (prop::sample::select(vec![-1e30, -50.0, -2.5, -1.0, 0.0, 0.5, 1.0, 3.0, 12.0, 19.0, 23.0, 25.0, 1e30]), 0usize..4),
            4..16,
        ),
        frames in prop::collection::vec(-2i64..4, 2),
    ) {
        let fixtures = FIXTURES.with(|f| f.clone());
        let values: Vec<f64> = boxes.iter().map(|b| b.0).collect();
        let anns: Vec<String> = values
            .chunks(4)
            .filter(|c| c.len() == 4)
            .enumerate()
            .map(|(i, c)| format!(
                r#"{{"image_id": {}, "bbox": [{:?}, {:?}, {:?}, {:?}], "identity_id": "p{}"}}"#,
                i % 2, c[0], c[1], c[2], c[3], boxes[i].1
            ))
            .collect();
        let json = format!(
            r#"{{"images": [{{"id": 0, "file_name": "f/0.png", "frame_id": {}, "sequence_id": "s"}},
               {{"id": 1, "file_name": "f/1.png", "frame_id": {}, "sequence_id": "s"}}],
               "annotations": [{}]}}"#,
            frames[0], frames[1], anns.join(",")
        );
        check(&fixtures, 2, json.as_bytes())?;
    }
}

thread_local! {
    /// Built once per test thread: writing the fixture images for every case would dominate.
    static FIXTURES: std::rc::Rc<Vec<Fixture>> = std::rc::Rc::new(fixtures());
}
