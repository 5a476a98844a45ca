//! Hostile round 9 (issue 43): each finding through the command line, refused or said by
//! name, with nothing changed where something was refused.

use crate::common::{self, png};
use crate::hostile::library_with_cases;
use crate::round7::caption_run;
use crate::store_safety::{files, run_within};

use crate::common::et;

/// N12: `model demote ../captions` moved the active model out of models/, and a name with
/// more `../` moved and replaced files outside the library.
#[test]
fn model_demote_takes_a_promoted_models_name_never_a_path() {
    let (lib, _src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    for version in ["test-a", "test-b"] {
        let run = caption_run(lib.path(), dir.path(), version);
        let r = run_within(et(lib.path(), &["model", "promote", &run.to_string()]), 120);
        assert!(r.ok(), "{}", r.text());
    }
    let before = files(lib.path());
    let around = files(dir.path());
    for name in ["../captions", "../../victim/important", "nosuch"] {
        let r = run_within(et(lib.path(), &["model", "demote", name]), 60);
        assert!(
            !r.ok()
                && r.says("no promoted model of that name (it has: captions)")
                && r.says("nothing was changed"),
            "{name}: {}",
            r.text()
        );
    }
    assert_eq!(files(lib.path()), before);
    assert_eq!(files(dir.path()), around);
    // The name it has still demotes.
    let r = run_within(et(lib.path(), &["model", "demote", "captions"]), 60);
    assert!(r.ok(), "{}", r.text());
}

/// N18: a huge ENDOTWIN_TOOL_TIMEOUT_S panicked ("overflow when adding duration to instant").
#[test]
fn a_huge_tool_timeout_is_said_and_the_default_taken() {
    let (lib, src) = library_with_cases();
    let video = src.path().join("v.mp4");
    std::fs::write(&video, b"\0\0\0\x18ftypmp42 not really").unwrap();
    let mut c = et(lib.path(), &["import", "video"]);
    c.arg(&video)
        .env("ENDOTWIN_TOOL_TIMEOUT_S", "9223372036854775807");
    let r = run_within(c, 120);
    assert!(
        !r.says("panicked")
            && !r.says("overflow")
            && r.says("not a whole number of seconds from 1 to 86400"),
        "{}",
        r.text()
    );
}

/// N23, N24, N25: `--dim 0`, `--lr inf`, `--tau 0`, `--jitter NaN` were taken (a model of NaN
/// weights saved, every twin "similarity 1.000"), or refused after the data was read with the
/// wrong advice.
#[test]
fn training_numbers_outside_their_meaning_are_refused_before_any_data_is_read() {
    let (lib, _src) = library_with_cases();
    let out = tempfile::tempdir().unwrap();
    let out_s = out.path().to_str().unwrap();
    // The numbers are checked before the backbone is read: any file stands in for it.
    let backbone = tempfile::NamedTempFile::new().unwrap();
    let backbone = backbone.path().to_str().unwrap();
    for (flag, value, says) in [
        ("--dim", "0", "--dim 0: an embedding width from 8 to 4096"),
        ("--dim", "100000", "an embedding width from 8 to 4096"),
        ("--lr", "inf", "--lr inf: not a learning rate above 0"),
        ("--lr", "0", "not a learning rate above 0"),
        ("--tau", "0", "--tau 0: not a temperature above 0"),
        (
            "--jitter",
            "NaN",
            "--jitter NaN: not a fraction from 0 to 1",
        ),
        ("--entropy", "NaN", "not a weight from 0 to 1000"),
    ] {
        let r = run_within(
            et(
                lib.path(),
                &[
                    "train",
                    "twin-backbone",
                    "--out",
                    out_s,
                    "--name",
                    "x",
                    "--epochs",
                    "1",
                    "--backbone",
                    backbone,
                    flag,
                    value,
                ],
            ),
            60,
        );
        assert!(!r.ok() && r.says(says), "{flag} {value}: {}", r.text());
        assert_eq!(
            std::fs::read_dir(out.path()).unwrap().count(),
            0,
            "{flag} {value}"
        );
    }
}

/// N26: `--json` naming the command's own input image (or prompts file) replaced it with
/// --force, which the refusal itself advised.
#[test]
fn an_output_never_replaces_the_commands_own_input_even_with_force() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("in.png");
    png(&img, 40, 30, 7);
    let prompts = dir.path().join("p.txt");
    std::fs::write(&prompts, "a polyp\nnormal mucosa\n").unwrap();
    let before = files(dir.path());
    let (lib, _src) = library_with_cases();
    for json in [&img, &prompts] {
        let mut c = et(lib.path(), &["--force", "prompts", "score", "--image"]);
        c.arg(&img)
            .arg("--prompts")
            .arg(&prompts)
            .arg("--json")
            .arg(json);
        let r = run_within(c, 120);
        assert!(
            !r.ok() && r.says("an input of this command") && r.says("nothing was run"),
            "{}",
            r.text()
        );
    }
    assert_eq!(files(dir.path()), before);
}

/// N32: `train --force` over an existing model (the shipped folder's, by default) kept no copy
/// of the model it replaced.
#[test]
fn a_forced_training_run_keeps_the_model_it_replaces() {
    let lib = tempfile::tempdir().unwrap();
    let lib = lib.path().join("lib");
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_endotwin"));
    c.env("ENDOTWIN_BACKEND", "cpu")
        .args(["demo", "--seed", "1", "--polyps", "2", "--videos", "0"])
        .args(["--capsule", "8", "--background", "0", "--out"])
        .arg(&lib);
    let r = run_within(c, 120);
    assert!(r.ok(), "{}", r.text());
    let out = tempfile::tempdir().unwrap();
    let shipped = crate::hostile::copy_shipped_captions(out.path());
    let old_card = std::fs::read(&shipped).unwrap();
    let out_s = out.path().to_str().unwrap();
    let r = run_within(
        et(
            &lib,
            &[
                "--force", "train", "captions", "--out", out_s, "--name", "captions", "--epochs",
                "1",
            ],
        ),
        300,
    );
    assert!(r.ok(), "{}", r.text());
    let kept = out.path().join("replaced/captions.json");
    assert_eq!(std::fs::read(&kept).unwrap(), old_card);
    assert!(endotwin::model::weights::record_path(&kept).is_file());
    assert_ne!(std::fs::read(&shipped).unwrap(), old_card);
}

/// N1: an output written over a run's checkpoint state (with --force), after which a plain
/// run of the same --out/--name threw the interrupted run's epochs away.
#[test]
fn a_runs_checkpoints_are_never_an_output_and_unreadable_ones_still_guard_the_run() {
    let (lib, _src) = library_with_cases();
    let out = tempfile::tempdir().unwrap();
    let checkpoints = out.path().join("kt.checkpoints");
    std::fs::create_dir_all(checkpoints.join("epoch-003")).unwrap();
    std::fs::write(checkpoints.join("state.json"), b"not json").unwrap();
    let before = files(out.path());
    let mut c = et(lib.path(), &["--force", "labels", "export", "--out"]);
    c.arg(checkpoints.join("state.json"));
    let r = run_within(c, 60);
    assert!(
        !r.ok() && r.says("inside a training run's checkpoints"),
        "{}",
        r.text()
    );
    let out_s = out.path().to_str().unwrap();
    let r = run_within(
        et(
            lib.path(),
            &[
                "train", "captions", "--out", out_s, "--name", "kt", "--epochs", "10",
            ],
        ),
        60,
    );
    assert!(
        !r.ok()
            && r.says("holds the checkpoints of an unfinished run")
            && r.says("its state file unreadable"),
        "{}",
        r.text()
    );
    assert_eq!(files(out.path()), before);
}

/// N33: a folder named with a space at its end made a code that looks like another's, and a
/// labels CSV (read trimmed) labelled the other polyp.
#[test]
fn a_code_with_a_space_at_its_end_is_refused_at_import() {
    let lib = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    let base = src.path().join("mv");
    png(&base.join("P1/1.png"), 24, 16, 1);
    png(&base.join("P1/2.png"), 24, 16, 2);
    png(&base.join("P1 /1.png"), 24, 16, 3);
    png(&base.join("P1 /2.png"), 24, 16, 4);
    let r = common::import(lib.path(), "multiview", &base, &[]);
    assert!(r.says("begins or ends with a space"), "{}", r.text());
    let r = run_within(et(lib.path(), &["labels", "export", "--out", "-"]), 60);
    assert!(r.ok(), "{}", r.text());
    assert!(!r.stdout.contains("P1 ,"), "{}", r.stdout);
}

/// N3, N6: no command listed the run numbers the advice pointed at (`endotwin info`), and
/// `labels history` cut the trail at its limit without a word.
#[test]
fn info_lists_the_runs_and_history_says_when_it_shows_only_the_latest() {
    let (lib, _src) = library_with_cases();
    let dir = tempfile::tempdir().unwrap();
    let run = caption_run(lib.path(), dir.path(), "test-a");
    let r = run_within(et(lib.path(), &["info"]), 120);
    assert!(
        r.ok() && r.says(&format!("#{run} captions finished")),
        "{}",
        r.text()
    );
    // Two audited changes of one polyp's histology.
    let r = run_within(et(lib.path(), &["labels", "export", "--out", "-"]), 60);
    let code = r
        .stdout
        .lines()
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .to_string();
    for (i, (histology, vienna)) in [("hyperplastic", 1), ("carcinoma", 5)].iter().enumerate() {
        let csv = dir.path().join(format!("h{i}.csv"));
        let text = format!("polyp,histology,vienna_class\n{code},{histology},{vienna}\n");
        std::fs::write(&csv, text).unwrap();
        let mut c = et(lib.path(), &["labels", "import"]);
        c.arg(&csv).args(["--apply", "--who", "dr. test"]);
        let r = run_within(c, 60);
        assert!(r.ok(), "{}", r.text());
    }
    let r = run_within(et(lib.path(), &["labels", "history"]), 60);
    let all = r.stdout.lines().count();
    assert!(all >= 2, "{}", r.text());
    let r = run_within(et(lib.path(), &["labels", "history", "--limit", "1"]), 60);
    assert!(
        r.ok() && r.stdout.lines().count() == 1 && r.says("more match: --limit 0 shows them all"),
        "{}",
        r.text()
    );
}

/// N5, N15, N37: one image given twice counted as two views; unknown prompt words were
/// dropped without a word; an output that is a link was replaced with --force.
#[test]
fn repeated_views_unknown_words_and_output_links_are_said() {
    let (lib, src) = library_with_cases();
    let img = src.path().join("base/A/1.png");
    let dot = src.path().join("base/A/./1.png");
    let mut c = et(lib.path(), &["twins"]);
    c.arg(&img).arg(&dot);
    let r = run_within(c, 120);
    assert!(!r.ok() && r.says("are one image"), "{}", r.text());

    let prompts = src.path().join("p.txt");
    std::fs::write(&prompts, "a pollyp with qqblood\nnormal mucosa\n").unwrap();
    let mut c = et(lib.path(), &["prompts", "score", "--image"]);
    c.arg(&img).arg("--prompts").arg(&prompts);
    let r = run_within(c, 120);
    assert!(
        r.ok() && r.says("pollyp, qqblood unknown to"),
        "{}",
        r.text()
    );

    let target = src.path().join("target.txt");
    std::fs::write(&target, "mine").unwrap();
    let link = src.path().join("link.csv");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let mut c = et(lib.path(), &["--force", "labels", "export", "--out"]);
    c.arg(&link);
    let r = run_within(c, 60);
    assert!(!r.ok() && r.says("a symbolic link"), "{}", r.text());
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read(&target).unwrap(), b"mine");
}

/// N2: `--library` naming a file without an extension was "no library here (no
/// library.sqlite)", and a write gave the raw "File exists (os error 17)".
#[test]
fn a_library_named_by_a_plain_file_is_called_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let readme = dir.path().join("README");
    std::fs::write(&readme, "text").unwrap();
    let images = dir.path().join("imgs");
    png(&images.join("a.png"), 16, 16, 3);
    for args in [
        vec!["info"],
        vec!["import", "images", images.to_str().unwrap()],
    ] {
        let r = run_within(et(&readme, &args), 60);
        assert!(
            !r.ok() && r.says("a file, not a library folder") && !r.says("os error"),
            "{args:?}: {}",
            r.text()
        );
    }
    assert_eq!(std::fs::read(&readme).unwrap(), b"text");
}

/// A zlib stream of `1 + 258 * k` zero bytes, written by hand (one fixed-Huffman block: a
/// literal zero, then copies of length 258 at distance 1): a few bytes per 258 inflated.
fn zeros_zlib(k: usize) -> Vec<u8> {
    let mut out = vec![0x78, 0x01];
    let (mut acc, mut bits) = (0u64, 0u32);
    let mut put = |out: &mut Vec<u8>, value: u64, count: u32| {
        acc |= value << bits;
        bits += count;
        while bits >= 8 {
            out.push(acc as u8);
            acc >>= 8;
            bits -= 8;
        }
    };
    // Huffman codes go most significant bit first.
    let code = |c: u64, len: u32| (c.reverse_bits() >> (64 - len), len);
    put(&mut out, 0b011, 3); // the last block, fixed Huffman codes
    let (lit0, lit_len) = code(0x30, 8);
    let (len258, len_len) = code(0xC5, 8);
    put(&mut out, lit0, lit_len);
    for _ in 0..k {
        put(&mut out, len258, len_len);
        put(&mut out, 0, 5); // distance 1
    }
    put(&mut out, 0, 7); // end of block
    put(&mut out, 0, 7); // to a whole byte
    let n = 1 + 258 * k as u64;
    let adler = ((n % 65521) << 16) | 1;
    out.extend_from_slice(&(adler as u32).to_be_bytes());
    out
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

/// N11: a small PNG whose colour profile chunk inflates to hundreds of megabytes cost that
/// much memory (an abort where memory was short); EndoTwin does not use the profile.
#[test]
fn a_png_colour_profile_is_never_inflated() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain.png");
    png(&plain, 16, 12, 5);
    let bytes = std::fs::read(&plain).unwrap();
    // The profile goes right after IHDR (8 bytes of signature, 25 of IHDR).
    let mut data = b"prof\0\0".to_vec();
    data.extend(zeros_zlib(300_000_000 / 258));
    let mut chunk = (data.len() as u32).to_be_bytes().to_vec();
    let mut typed = b"iCCP".to_vec();
    typed.extend(&data);
    chunk.extend(&typed);
    chunk.extend(crc32(&typed).to_be_bytes());
    let mut bomb = bytes[..33].to_vec();
    bomb.extend(chunk);
    bomb.extend(&bytes[33..]);
    let img = dir.path().join("profile.png");
    std::fs::write(&img, bomb).unwrap();
    let r = crate::round8::score_under_memory_limit(&img, 500_000);
    assert!(r.ok() && r.says("a polyp"), "{}", r.text());
}
