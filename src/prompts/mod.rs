//! Text prompts (Endo-CLIP, METHODS §1): the clinical attribute vocabulary
//! (`assets/vocabulary.toml`), examination records ([`records`]), the dual-encoder model with
//! its unifier ([`model`]), and what the prompt panel and the CLI ask of it ([`query`]):
//! scores of a prompt set for images, text-to-image search, the polyp probability of frames.
//! Training is `train::prompts` (three stages), evaluation `eval::prompts`.

pub mod model;
pub mod query;
pub mod records;
pub mod trust;

pub use crate::data::vocabulary::{Term, Vocabulary, VocabularyError};

/// The prompt sets shipped in `assets/prompt_sets.toml`.
pub const DEFAULT_PROMPT_SETS: &str = include_str!("../../assets/prompt_sets.toml");

/// A named list of prompts; `classes` (when given, one per prompt) groups them.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PromptSet {
    pub name: String,
    pub prompts: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<String>,
    /// The model the set is for, by its card's name in the models folder (`prompts-detect`
    /// for polyp vs background, `prompts` for the pathology and attribute sets); none: the
    /// stage-3 model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// The model a set names when it names none: the stage-3 model.
pub const DEFAULT_SET_MODEL: &str = "prompts";

impl PromptSet {
    /// The card name of the model this set is for.
    pub fn model_name(&self) -> &str {
        self.model.as_deref().unwrap_or(DEFAULT_SET_MODEL)
    }
}

impl PromptSet {
    /// The indices of the prompts of `class`.
    pub fn class(&self, class: &str) -> Vec<usize> {
        (0..self.prompts.len())
            .filter(|&i| self.classes.get(i).is_some_and(|c| c == class))
            .collect()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PromptSetError {
    #[error("{path}: not a prompt set file: {why}")]
    Parse { path: String, why: String },
    #[error("{path}: {why}")]
    Invalid { path: String, why: String },
    #[error("{path}: {}", crate::plumbing::input::plain_io(.io))]
    Io { path: String, io: std::io::Error },
    #[error(transparent)]
    Input(#[from] crate::plumbing::input::InputError),
}

#[derive(serde::Serialize, serde::Deserialize)]
struct SetFile {
    #[serde(default)]
    set: Vec<PromptSet>,
}

/// Prompt sets from TOML text (`[[set]] name, prompts, classes`); `path` names it in errors.
pub fn parse_prompt_sets(text: &str, path: &str) -> Result<Vec<PromptSet>, PromptSetError> {
    let file: SetFile = toml::from_str(text).map_err(|e| PromptSetError::Parse {
        path: path.into(),
        why: e.message().to_string(),
    })?;
    for s in &file.set {
        let bad = |why: String| PromptSetError::Invalid {
            path: path.into(),
            why,
        };
        if s.prompts.iter().all(|p| p.trim().is_empty()) {
            return Err(bad(format!("set `{}` has no prompts", s.name)));
        }
        if let Some(m) = &s.model
            && (m.is_empty() || m.contains(['/', '\\']) || m.starts_with('.'))
        {
            return Err(bad(format!(
                "set `{}` names model `{m}`: a card name in the models folder, not a path",
                s.name
            )));
        }
        if !s.classes.is_empty() && s.classes.len() != s.prompts.len() {
            return Err(bad(format!(
                "set `{}` has {} prompts but {} classes (one per prompt, or none)",
                s.name,
                s.prompts.len(),
                s.classes.len()
            )));
        }
    }
    if file.set.is_empty() {
        return Err(PromptSetError::Invalid {
            path: path.into(),
            why: "no `[[set]]` in the file".into(),
        });
    }
    check_prompt_count(file.set.iter().map(|s| s.prompts.len()).sum(), path)?;
    Ok(file.set)
}

/// The most prompts one file may hold: each prompt scored costs about 200 KB of memory, so
/// 1000 prompts stay near 200 MB (a set is a handful; the shipped file has a few dozen).
pub const MAX_PROMPTS: usize = 1_000;

/// Refuses a file of more than [`MAX_PROMPTS`] prompts by name, before any is encoded.
fn check_prompt_count(count: usize, path: &str) -> Result<(), PromptSetError> {
    if count > MAX_PROMPTS {
        return Err(PromptSetError::Invalid {
            path: path.into(),
            why: format!(
                "{count} prompts; a prompt file holds at most {MAX_PROMPTS} (split it into \
                 several files); nothing was scored"
            ),
        });
    }
    Ok(())
}

/// The shipped prompt sets.
pub fn default_prompt_sets() -> Vec<PromptSet> {
    parse_prompt_sets(DEFAULT_PROMPT_SETS, "assets/prompt_sets.toml").expect("shipped sets parse")
}

/// The set called `name` among the shipped ones.
pub fn default_set(name: &str) -> PromptSet {
    default_prompt_sets()
        .into_iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("assets/prompt_sets.toml has no set `{name}`"))
}

/// The largest prompt set file read (a set is a few lines; a thousand sets are kilobytes).
const MAX_PROMPT_FILE: u64 = 16 << 20;

/// Refuses a prompt given twice in one set, compared as the text tower reads them (case and
/// spacing aside): the scores are shares of one whole, and a prompt twice would split its
/// share in two without a word (round 11 N16, round 12 N3; TOML sets too: round 13 R4).
fn check_no_repeats(prompts: &[String], shown: &str) -> Result<(), PromptSetError> {
    let read_as = |p: &str| {
        p.to_lowercase()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    let keys: Vec<String> = prompts.iter().map(|p| read_as(p)).collect();
    if let Some((i, twice)) = prompts
        .iter()
        .enumerate()
        .find(|(i, _)| keys[..*i].contains(&keys[*i]))
    {
        let first = keys.iter().position(|k| *k == keys[i]).unwrap_or_default();
        return Err(PromptSetError::Invalid {
            path: shown.to_string(),
            why: format!(
                "the prompt '{twice}' is given twice (prompts {} and {}, read alike whatever \
                 their case and spacing): the scores are shares of one whole, so each prompt \
                 is scored once; nothing was scored",
                first + 1,
                i + 1
            ),
        });
    }
    Ok(())
}

/// Prompt sets from a file (a prompt set TOML, or plain text: one prompt per line).
pub fn read_prompt_sets(path: &std::path::Path) -> Result<Vec<PromptSet>, PromptSetError> {
    let shown = path.display().to_string();
    let text = crate::plumbing::input::read_text(path, MAX_PROMPT_FILE, "a prompt set file")?;
    // A byte-order mark (as Windows Notepad saves) is no part of the first prompt (round 18 N4:
    // it defeated the repeated-prompt check and was printed with the score).
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text).to_string();
    let is_toml = path.extension().is_some_and(|e| e == "toml") || text.contains("[[set]]");
    if is_toml {
        let sets = parse_prompt_sets(&text, &shown)?;
        for set in &sets {
            check_no_repeats(&set.prompts, &format!("{shown} (set '{}')", set.name))?;
        }
        for prompt in sets.iter().flat_map(|s| &s.prompts) {
            if let Some(what) = crate::plumbing::input::control_character(prompt) {
                return Err(PromptSetError::Invalid {
                    path: shown,
                    why: format!(
                        "the prompt {prompt:?} {what} (a control character: it shows as nothing or moves the terminal)"
                    ),
                });
            }
        }
        return Ok(sets);
    }
    // Each prompt is echoed back with its score: an escape sequence would clear or recolour
    // the terminal (round 10 N26).
    if let Some((n, what)) = text.lines().enumerate().find_map(|(n, l)| {
        crate::plumbing::input::control_character(l.trim_end_matches('\r')).map(|w| (n + 1, w))
    }) {
        return Err(PromptSetError::Invalid {
            path: shown,
            why: format!(
                "line {n} {what} (a control character: it shows as nothing or moves the terminal); a prompt is one line of plain text"
            ),
        });
    }
    let prompts: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect();
    if prompts.is_empty() {
        return Err(PromptSetError::Invalid {
            path: shown,
            why: "no prompts (one per line)".into(),
        });
    }
    check_no_repeats(&prompts, &shown)?;
    check_prompt_count(prompts.len(), &shown)?;
    Ok(vec![PromptSet {
        name: path
            .file_stem()
            .map_or("prompts".into(), |s| s.to_string_lossy().into_owned()),
        prompts,
        classes: Vec::new(),
        model: None,
    }])
}

/// Writes `sets` to `path` as prompt set TOML (atomically: a temporary file, then a rename).
pub fn write_prompt_sets(path: &std::path::Path, sets: &[PromptSet]) -> Result<(), PromptSetError> {
    let text = toml::to_string(&SetFile { set: sets.to_vec() }).expect("prompt sets serialise");
    let tmp = path.with_extension("toml.tmp");
    let io = |io| PromptSetError::Io {
        path: path.display().to_string(),
        io,
    };
    std::fs::write(&tmp, text).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}
