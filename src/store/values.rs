//! What a label value may be. Every person's label change passes [`check_label_value`] in
//! the store's audited path ([`Store::set_label`](super::Store::set_label)), and `labels
//! import` names what it refuses with the same rule: one line of printable text of bounded
//! length, never a JSON object or list, and a term of the field's controlled vocabulary where
//! the field has one.

/// The most characters a label value may have.
pub const MAX_VALUE_CHARS: usize = 200;

/// Histology terms a person may set (case as written here, or any other case).
pub const HISTOLOGY: &[&str] = &[
    "adenoma",
    "tubular adenoma",
    "tubular adenoma LG",
    "tubular adenoma HG",
    "tubulovillous adenoma",
    "villous adenoma",
    "hyperplastic",
    "sessile serrated",
    "traditional serrated adenoma",
    "carcinoma",
    "adenocarcinoma",
    "inflammatory",
    "hamartomatous",
    "juvenile",
    "lipoma",
    "neuroendocrine tumour",
    "normal mucosa",
    "other",
    "unknown",
];

/// Where in the colon (and next to it) a polyp can be.
pub const LOCATIONS: &[&str] = &[
    "terminal ileum",
    "ileocaecal valve",
    "caecum",
    "appendiceal orifice",
    "ascending colon",
    "hepatic flexure",
    "transverse colon",
    "splenic flexure",
    "descending colon",
    "sigmoid colon",
    "rectosigmoid junction",
    "rectum",
    "anal canal",
];

/// Gross morphology terms.
pub const MORPHOLOGY: &[&str] = &[
    "pedunculated",
    "semi-pedunculated",
    "sessile",
    "flat elevated",
    "flat",
    "depressed",
    "laterally spreading",
];

/// Size classes.
pub const SIZE_CLASSES: &[&str] = &["diminutive", "small", "large", "giant"];

/// The Paris classes a component may name (`0-IIa+IIc` joins two).
const PARIS_PARTS: &[&str] = &["Ip", "Isp", "Is", "IIa", "IIb", "IIc", "III"];

/// Whether `c` shows as itself on one line: no control characters (line breaks, tabs,
/// escapes), no line or paragraph separators, no invisible formatting or bidirectional
/// overrides that would make a line read differently from what it holds.
pub fn is_printable(c: char) -> bool {
    !(c.is_control()
        || matches!(c,
            '\u{2028}' | '\u{2029}' // line and paragraph separators
            | '\u{200B}'..='\u{200F}' // zero-width spaces and joiners, LRM, RLM
            | '\u{202A}'..='\u{202E}' // bidirectional embeddings and overrides
            | '\u{2060}'..='\u{2069}' // word joiner, invisible operators, isolates
            | '\u{061C}' // Arabic letter mark
            | '\u{FEFF}' // byte order mark
            | '\u{FFF9}'..='\u{FFFB}' // interlinear annotation
        ))
}

/// Why `value` cannot be label `key`, or `None` when it can.
pub fn check_label_value(key: &str, value: &str) -> Option<String> {
    if let Some(c) = value.chars().find(|&c| !is_printable(c)) {
        return Some(format!(
            "holds the character U+{:04X} (a label value is one line of printable text)",
            c as u32
        ));
    }
    let chars = value.chars().count();
    if chars > MAX_VALUE_CHARS {
        return Some(format!(
            "is {chars} characters long; a label value has at most {MAX_VALUE_CHARS}"
        ));
    }
    let t = value.trim();
    if (t.starts_with('{') || t.starts_with('['))
        && serde_json::from_str::<serde_json::Value>(t).is_ok()
    {
        return Some("is a JSON object or list, not a label value".into());
    }
    let one_of = |terms: &[&str], what: &str| {
        (!terms.iter().any(|x| x.eq_ignore_ascii_case(t))).then(|| {
            format!(
                "'{t}' is not a {what} EndoTwin knows ({})",
                terms.join(", ")
            )
        })
    };
    match key {
        "histology" => one_of(HISTOLOGY, "histology"),
        "location" => one_of(LOCATIONS, "location"),
        "morphology" => one_of(MORPHOLOGY, "morphology"),
        "size class" => one_of(SIZE_CLASSES, "size class"),
        "paris" => (!is_paris(t)).then(|| {
            format!("'{t}' is not a Paris class (0-Ip, 0-Isp, 0-Is, 0-IIa, 0-IIb, 0-IIc, 0-III, or two joined: 0-IIa+IIc)")
        }),
        "size_mm" => match t.parse::<f64>() {
            Ok(mm) if mm.is_finite() && mm > 0.0 && mm <= 300.0 => None,
            _ => Some(format!("'{t}' is not a size in millimetres (0-300)")),
        },
        // A polyp's tags: joined by ", ", each at most 40 characters (the labels module's rule).
        "tags" => t
            .split(',')
            .map(str::trim)
            .find(|tag| tag.chars().count() > 40)
            .map(|tag| format!("tag '{tag}': at most 40 characters")),
        "vienna_class" => match t.parse::<i64>() {
            Ok(1..=5) => None,
            _ => Some(format!("'{t}' is not a Vienna class 1 to 5")),
        },
        _ => None,
    }
}

/// `0-` and one or two Paris parts joined by `+`.
fn is_paris(t: &str) -> bool {
    let Some(rest) = t.strip_prefix("0-") else {
        return false;
    };
    let parts: Vec<&str> = rest.split('+').collect();
    parts.len() <= 2 && parts.iter().all(|p| PARIS_PARTS.contains(p))
}

/// The first column name a CSV header gives twice (names compared trimmed, in any case).
pub fn duplicate_column<'a>(headers: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let mut seen = std::collections::HashSet::new();
    headers
        .into_iter()
        .map(|h| h.trim())
        .find(|h| !seen.insert(h.to_lowercase()))
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_a_person_would_type_pass_and_tricks_do_not() {
        assert_eq!(check_label_value("histology", "tubular adenoma LG"), None);
        assert_eq!(check_label_value("histology", "Hyperplastic"), None);
        assert!(check_label_value("histology", "banana").is_some());
        assert_eq!(check_label_value("paris", "0-IIa+IIc"), None);
        assert!(check_label_value("paris", "0-IV").is_some());
        assert!(check_label_value("colour", "red\nhistology: carcinoma").is_some());
        assert!(check_label_value("colour", "red\u{202E}der").is_some());
        assert!(check_label_value("surface", r#"{"a": 1}"#).is_some());
        assert!(check_label_value("surface", &"x".repeat(201)).is_some());
        assert_eq!(check_label_value("surface", "tubular pit pattern"), None);
        assert_eq!(
            duplicate_column(["polyp", "size_mm", " Size_mm "]),
            Some("Size_mm".into())
        );
        assert_eq!(duplicate_column(["polyp", "size_mm"]), None);
    }
}
