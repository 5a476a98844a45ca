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

/// The size class of a polyp `mm` millimetres across: diminutive up to 5 mm, small under 10,
/// large under 20, giant from 20 (the phantom's reports and the labels' rule alike).
pub fn size_class_of(mm: f64) -> &'static str {
    if mm <= 5.0 {
        "diminutive"
    } else if mm < 10.0 {
        "small"
    } else if mm < 20.0 {
        "large"
    } else {
        "giant"
    }
}

/// The Vienna classes a polyp of `histology` can have, where the histology decides them:
/// carcinoma is 4 (intramucosal) or 5 (invasive), an adenoma 3 or 4 (low- or high-grade, and
/// the grade when the term names it), a non-neoplastic lesion 1 or 2. `None` for terms the
/// class does not follow from (serrated lesions with or without dysplasia, hamartomas,
/// neuroendocrine tumours, other, unknown) and for terms outside the vocabulary.
pub fn vienna_classes_of(histology: &str) -> Option<&'static [i64]> {
    let h = histology.trim().to_ascii_lowercase();
    Some(match h.as_str() {
        "carcinoma" | "adenocarcinoma" => &[4, 5],
        "tubular adenoma lg" => &[3],
        "tubular adenoma hg" => &[4],
        "adenoma"
        | "tubular adenoma"
        | "tubulovillous adenoma"
        | "villous adenoma"
        | "traditional serrated adenoma" => &[3, 4],
        "hyperplastic" | "inflammatory" | "normal mucosa" | "lipoma" => &[1, 2],
        _ => return None,
    })
}

/// What a refusal says of a Vienna class `vienna` that `histology` does not fit: "Vienna 4 or
/// 5 fits carcinoma" (the term in the vocabulary's spelling); `None` when it fits or the
/// histology does not decide the class. One wording for `labels import` and every importer.
pub fn vienna_misfit(histology: &str, vienna: i64) -> Option<String> {
    let fits = vienna_classes_of(histology)?;
    if fits.contains(&vienna) {
        return None;
    }
    let classes: Vec<String> = fits.iter().map(i64::to_string).collect();
    Some(format!(
        "Vienna {} fits {}",
        classes.join(" or "),
        canonical_label_value("histology", histology)
    ))
}

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

/// Whether `c` is a default-ignorable code point (Unicode's `Default_Ignorable_Code_Point`):
/// shown as nothing, so two names that differ by one look the same (a soft hyphen, the
/// Hangul fillers, variation selectors, zero-width characters, tags).
pub fn is_default_ignorable(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}'
        | '\u{FFA0}' | '\u{FFF0}'..='\u{FFF8}' | '\u{1BCA0}'..='\u{1BCA3}'
        | '\u{1D173}'..='\u{1D17A}' | '\u{E0000}'..='\u{E0FFF}')
}

/// `text` folded as NFKC and then lower case would fold it, as far as the importers' prefix
/// `import:` goes: every character whose NFKC form is made of the prefix's letters and `:`
/// (fullwidth, circled, mathematical, superscript and subscript letters, roman numerals, the
/// fullwidth and small colons) becomes that form; everything else is lower-cased.
pub fn fold_like_nfkc(text: &str) -> String {
    text.chars()
        .map(
            |c| match NFKC_TO_PREFIX.binary_search_by_key(&(c as u32), |(cp, _)| *cp) {
                Ok(i) => NFKC_TO_PREFIX[i].1.to_string(),
                Err(_) => c.to_lowercase().collect(),
            },
        )
        .collect()
}

/// Every code point whose NFKC form, lower-cased, begins with `i`, `m`, `p`, `o`, `r`, `t`
/// or `:` and could continue `import:` (made with Python's `unicodedata`, Unicode 14), sorted.
#[rustfmt::skip]
const NFKC_TO_PREFIX: &[(u32, &str)] = &[
    (0xBA, "o"), (0x2B3, "r"), (0x1D35, "i"), (0x1D39, "m"), (0x1D3C, "o"), (0x1D3E, "p"),
    (0x1D3F, "r"), (0x1D40, "t"), (0x1D50, "m"), (0x1D52, "o"), (0x1D56, "p"), (0x1D57, "t"),
    (0x1D62, "i"), (0x1D63, "r"), (0x2071, "i"), (0x2092, "o"), (0x2098, "m"), (0x209A, "p"),
    (0x209C, "t"), (0x2110, "i"), (0x2111, "i"), (0x2119, "p"), (0x211B, "r"), (0x211C, "r"),
    (0x211D, "r"), (0x2122, "tm"), (0x2133, "m"), (0x2134, "o"), (0x2139, "i"), (0x2148, "i"),
    (0x2160, "i"), (0x2161, "ii"), (0x2162, "iii"), (0x216F, "m"), (0x2170, "i"), (0x2171, "ii"),
    (0x2172, "iii"), (0x217F, "m"), (0x24BE, "i"), (0x24C2, "m"), (0x24C4, "o"), (0x24C5, "p"),
    (0x24C7, "r"), (0x24C9, "t"), (0x24D8, "i"), (0x24DC, "m"), (0x24DE, "o"), (0x24DF, "p"),
    (0x24E1, "r"), (0x24E3, "t"), (0x2A74, "::="), (0x339C, "mm"), (0x33D9, "ppm"), (0x33DA, "pr"),
    (0xFE13, ":"), (0xFE55, ":"), (0xFF1A, ":"), (0xFF29, "i"), (0xFF2D, "m"), (0xFF2F, "o"),
    (0xFF30, "p"), (0xFF32, "r"), (0xFF34, "t"), (0xFF49, "i"), (0xFF4D, "m"), (0xFF4F, "o"),
    (0xFF50, "p"), (0xFF52, "r"), (0xFF54, "t"), (0x1D408, "i"), (0x1D40C, "m"), (0x1D40E, "o"),
    (0x1D40F, "p"), (0x1D411, "r"), (0x1D413, "t"), (0x1D422, "i"), (0x1D426, "m"), (0x1D428, "o"),
    (0x1D429, "p"), (0x1D42B, "r"), (0x1D42D, "t"), (0x1D43C, "i"), (0x1D440, "m"), (0x1D442, "o"),
    (0x1D443, "p"), (0x1D445, "r"), (0x1D447, "t"), (0x1D456, "i"), (0x1D45A, "m"), (0x1D45C, "o"),
    (0x1D45D, "p"), (0x1D45F, "r"), (0x1D461, "t"), (0x1D470, "i"), (0x1D474, "m"), (0x1D476, "o"),
    (0x1D477, "p"), (0x1D479, "r"), (0x1D47B, "t"), (0x1D48A, "i"), (0x1D48E, "m"), (0x1D490, "o"),
    (0x1D491, "p"), (0x1D493, "r"), (0x1D495, "t"), (0x1D4AA, "o"), (0x1D4AB, "p"), (0x1D4AF, "t"),
    (0x1D4BE, "i"), (0x1D4C2, "m"), (0x1D4C5, "p"), (0x1D4C7, "r"), (0x1D4C9, "t"), (0x1D4D8, "i"),
    (0x1D4DC, "m"), (0x1D4DE, "o"), (0x1D4DF, "p"), (0x1D4E1, "r"), (0x1D4E3, "t"), (0x1D4F2, "i"),
    (0x1D4F6, "m"), (0x1D4F8, "o"), (0x1D4F9, "p"), (0x1D4FB, "r"), (0x1D4FD, "t"), (0x1D510, "m"),
    (0x1D512, "o"), (0x1D513, "p"), (0x1D517, "t"), (0x1D526, "i"), (0x1D52A, "m"), (0x1D52C, "o"),
    (0x1D52D, "p"), (0x1D52F, "r"), (0x1D531, "t"), (0x1D540, "i"), (0x1D544, "m"), (0x1D546, "o"),
    (0x1D54B, "t"), (0x1D55A, "i"), (0x1D55E, "m"), (0x1D560, "o"), (0x1D561, "p"), (0x1D563, "r"),
    (0x1D565, "t"), (0x1D574, "i"), (0x1D578, "m"), (0x1D57A, "o"), (0x1D57B, "p"), (0x1D57D, "r"),
    (0x1D57F, "t"), (0x1D58E, "i"), (0x1D592, "m"), (0x1D594, "o"), (0x1D595, "p"), (0x1D597, "r"),
    (0x1D599, "t"), (0x1D5A8, "i"), (0x1D5AC, "m"), (0x1D5AE, "o"), (0x1D5AF, "p"), (0x1D5B1, "r"),
    (0x1D5B3, "t"), (0x1D5C2, "i"), (0x1D5C6, "m"), (0x1D5C8, "o"), (0x1D5C9, "p"), (0x1D5CB, "r"),
    (0x1D5CD, "t"), (0x1D5DC, "i"), (0x1D5E0, "m"), (0x1D5E2, "o"), (0x1D5E3, "p"), (0x1D5E5, "r"),
    (0x1D5E7, "t"), (0x1D5F6, "i"), (0x1D5FA, "m"), (0x1D5FC, "o"), (0x1D5FD, "p"), (0x1D5FF, "r"),
    (0x1D601, "t"), (0x1D610, "i"), (0x1D614, "m"), (0x1D616, "o"), (0x1D617, "p"), (0x1D619, "r"),
    (0x1D61B, "t"), (0x1D62A, "i"), (0x1D62E, "m"), (0x1D630, "o"), (0x1D631, "p"), (0x1D633, "r"),
    (0x1D635, "t"), (0x1D644, "i"), (0x1D648, "m"), (0x1D64A, "o"), (0x1D64B, "p"), (0x1D64D, "r"),
    (0x1D64F, "t"), (0x1D65E, "i"), (0x1D662, "m"), (0x1D664, "o"), (0x1D665, "p"), (0x1D667, "r"),
    (0x1D669, "t"), (0x1D678, "i"), (0x1D67C, "m"), (0x1D67E, "o"), (0x1D67F, "p"), (0x1D681, "r"),
    (0x1D683, "t"), (0x1D692, "i"), (0x1D696, "m"), (0x1D698, "o"), (0x1D699, "p"), (0x1D69B, "r"),
    (0x1D69D, "t"), (0x1F12C, "r"), (0x1F138, "i"), (0x1F13C, "m"), (0x1F13E, "o"), (0x1F13F, "p"),
    (0x1F141, "r"), (0x1F143, "t"), (0x1F16C, "mr"),
];

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
            _ => Some(format!("'{t}' is not a size in millimetres (more than 0, at most 300)")),
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

/// `value` as label `key` is stored: a term of the field's controlled vocabulary in the
/// vocabulary's own spelling (`TUBULAR ADENOMA HG` is `tubular adenoma HG`, not a new class),
/// trimmed; any other value as given.
pub fn canonical_label_value(key: &str, value: &str) -> String {
    // Numbers as numbers (MINOR 11: `04` and `4` were two values, `1e2` stayed `1e2`).
    match key {
        // As SQLite writes the REAL column back as text (`CAST(6 AS REAL)` reads "6.0").
        "size_mm" => {
            if let Ok(mm) = value.trim().parse::<f64>().map(|mm| format!("{mm:?}"))
                && check_label_value(key, value).is_none()
            {
                return mm;
            }
        }
        "vienna_class" => {
            if let Ok(v) = value.trim().parse::<i64>() {
                return v.to_string();
            }
        }
        _ => {}
    }
    let terms: &[&str] = match key {
        "histology" => HISTOLOGY,
        "location" => LOCATIONS,
        "morphology" => MORPHOLOGY,
        "size class" => SIZE_CLASSES,
        _ => return value.to_string(),
    };
    let t = value.trim();
    terms
        .iter()
        .find(|x| x.eq_ignore_ascii_case(t))
        .map_or_else(|| value.to_string(), |x| x.to_string())
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
        assert_eq!(
            canonical_label_value("histology", " TUBULAR ADENOMA hg "),
            "tubular adenoma HG"
        );
        assert_eq!(canonical_label_value("colour", "RED"), "RED");
        // Numbers are stored as numbers: one value, one spelling.
        assert_eq!(canonical_label_value("size_mm", "1e2"), "100.0");
        assert_eq!(canonical_label_value("size_mm", "+7"), "7.0");
        assert_eq!(canonical_label_value("size_mm", " 7.50 "), "7.5");
        assert_eq!(canonical_label_value("vienna_class", "04"), "4");
        // What the rules refuse is left as typed, for the refusal to quote.
        assert_eq!(canonical_label_value("size_mm", "lots"), "lots");
        assert!(NFKC_TO_PREFIX.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(
            fold_like_nfkc("\u{FF29}\u{1D426}\u{24DF}or\u{1D42D}\u{FE55}Bob"),
            "import:bob"
        );
    }
}
