//! Hostile round 18 (issue 43): each finding through the path a user takes, refused or said
//! by name, with nothing changed where something was refused.

use crate::common::et;
use crate::hostile::library_with_cases;
use crate::store_safety::run_within;

/// R10: a file met inside a folder import whose name holds an escape sequence and a line
/// break was printed raw in the "left out" line.
#[test]
fn a_file_left_out_of_a_folder_import_is_shown_escaped() {
    let lib = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    crate::common::png(&src.path().join("good.png"), 24, 16, 1);
    std::fs::write(src.path().join("v\u{1b}[31mred\nx.mp4"), b"not a picture").unwrap();
    let mut c = et(lib.path(), &["import", "images"]);
    c.arg(src.path());
    let r = run_within(c, 60);
    assert!(
        r.says("left out") && r.says("v\\u{1b}[31mred\\nx.mp4"),
        "{}",
        r.text()
    );
    assert!(!r.text().contains('\u{1b}'), "{}", r.text());
}

/// N2: a server URL with a mistyped scheme was refused as one, printing its password.
#[test]
fn a_mistyped_server_url_keeps_its_password_hidden() {
    let (lib, _src) = library_with_cases();
    for url in [
        "POSTGRES://alice:S3cretPW@127.0.0.1:1/endo",
        "postgres:/alice:S3cretPW@127.0.0.1:1/endo",
    ] {
        for args in [&["--library", url, "info"][..], &["info", "--library", url]] {
            let r = run_within(et(lib.path(), args), 60);
            assert!(
                !r.ok() && !r.says("S3cretPW") && r.says("alice:***@127.0.0.1:1/endo"),
                "{args:?}: {}",
                r.text()
            );
        }
    }
}

/// N4: a prompt file saved with a byte-order mark kept it in its first prompt: the repeated
/// prompt check missed `a polyp` given twice, and the mark was printed with the score.
#[test]
fn a_byte_order_mark_is_no_part_of_the_first_prompt() {
    let (lib, src) = library_with_cases();
    let image = src.path().join("q.png");
    crate::common::png(&image, 64, 64, 5);
    let prompts = src.path().join("bom.txt");
    std::fs::write(&prompts, "\u{feff}a polyp\r\na polyp\r\nnormal mucosa\r\n").unwrap();
    let mut c = et(lib.path(), &["prompts", "score", "--image"]);
    c.arg(&image).arg("--prompts").arg(&prompts);
    let r = run_within(c, 120);
    assert!(
        !r.ok() && r.says("the prompt 'a polyp' is given twice"),
        "{}",
        r.text()
    );
    assert!(!r.text().contains('\u{feff}'), "{}", r.text());
}

/// N20: `eval phantom --held-out` of a library too small for 5 folds and a 6-NN vote printed
/// its figures without a word.
#[test]
fn a_held_out_library_too_small_for_the_pathology_vote_is_said() {
    let (lib, _src) = library_with_cases();
    let mut c = et(lib.path(), &["eval", "phantom", "--held-out"]);
    c.arg(lib.path());
    let r = run_within(c, 120);
    assert!(
        r.ok() && r.says("5 folds and a 6-NN vote need at least 12"),
        "{}",
        r.text()
    );
}

/// N22: `bench retrieve --k` past a library's entries reported recall 1.00 for every method
/// without a word, and a size given twice ran twice.
#[test]
fn a_retrieval_bench_whose_k_reaches_every_entry_says_so_and_runs_a_size_once() {
    let (lib, _src) = library_with_cases();
    let bench = |sizes: &str| {
        let args = [
            "bench",
            "retrieve",
            "--sizes",
            sizes,
            "--bits",
            "64",
            "--dim",
            "64",
            "--k",
            "100",
            "--queries",
            "2",
        ];
        run_within(et(lib.path(), &args), 120)
    };
    let rows_of =
        |r: &crate::common::Ran| r.stdout.lines().filter(|l| l.starts_with("| 100 ")).count();
    let r = bench("100,100");
    assert!(
        r.ok() && r.says("note: --k 100 reaches every entry of the 100-entry library"),
        "{}",
        r.text()
    );
    let once = bench("100");
    let (rows, rows_once) = (rows_of(&r), rows_of(&once));
    assert!(
        rows > 0 && rows == rows_once,
        "{}\n{}",
        r.text(),
        once.text()
    );
}
