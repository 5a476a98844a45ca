//! The front door holds: every relative link of README.md and docs/ leads to a file (and a
//! heading, when it names one), and every `endotwin` command the README and the user guide
//! show exists (`--help` answers for it).

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every page of docs/.
fn pages() -> Vec<PathBuf> {
    let mut out = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    assert!(docs.len() >= 8, "docs/ has its pages");
    out.extend(docs);
    out
}

/// GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| slug(l.trim_start_matches('#')))
        .collect()
}

/// The targets of `[text](target)` links, outside code blocks.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        let mut rest = line;
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            out.push(after[..end].to_string());
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn every_relative_link_of_the_readme_and_docs_resolves() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for target in links(&text) {
            if target.starts_with("http://") || target.starts_with("https://") {
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let path = if file.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(file)
            };
            if !path.exists() {
                broken.push(format!("{}: {target} (no such file)", page.display()));
                continue;
            }
            if let Some(a) = anchor
                && path.extension().is_some_and(|e| e == "md")
                && !anchors(&std::fs::read_to_string(&path).unwrap()).contains(&a.to_string())
            {
                broken.push(format!("{}: {target} (no such heading)", page.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The subcommand words of an `endotwin ...` line: the words before the first option, value
/// or placeholder.
fn subcommand(line: &str) -> Vec<String> {
    line.split_whitespace()
        .skip(1)
        .take_while(|w| {
            !w.starts_with('-')
                && w.chars().all(|c| c.is_ascii_lowercase() || c == '-')
                && !w.is_empty()
        })
        .map(str::to_string)
        .collect()
}

fn commands(page: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(page).unwrap();
    let mut in_code = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        let line = line.trim();
        if in_code && line.starts_with("endotwin ") {
            let words = subcommand(line);
            if !words.is_empty() && !out.contains(&words) {
                out.push(words);
            }
        }
    }
    out
}

#[test]
fn every_command_the_readme_and_the_guide_show_answers_help() {
    let mut shown = commands(&root().join("README.md"));
    shown.extend(commands(&root().join("docs/guide.md")));
    assert!(shown.len() >= 10, "{shown:?}");
    let mut failed = Vec::new();
    for words in &shown {
        let out = Command::new(env!("CARGO_BIN_EXE_endotwin"))
            .args(words)
            .arg("--help")
            .env("ENDOTWIN_BACKEND", "cpu")
            .output()
            .unwrap();
        if !out.status.success() {
            failed.push(format!(
                "endotwin {} --help: {}",
                words.join(" "),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn the_readme_stays_a_front_door() {
    let text = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = text.lines().count();
    assert!(
        lines <= 300,
        "README.md has {lines} lines; the long reports live in docs/"
    );
    for must in [
        "## Run and test",
        "## How well it works",
        "## Use your own data",
    ] {
        assert!(text.contains(must), "README.md lacks {must}");
    }
}
