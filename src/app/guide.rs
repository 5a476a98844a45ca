//! The user guide, bundled: the pages of `docs/` compiled into the program, so Help > User
//! guide works offline and always matches the build. Each registered panel names its page.

/// One bundled page of `docs/`.
pub struct Page {
    /// Its file name under `docs/`.
    pub file: &'static str,
    /// Its name in the guide's page list.
    pub title: &'static str,
    pub text: &'static str,
}

macro_rules! page {
    ($file:literal, $title:literal) => {
        Page {
            file: $file,
            title: $title,
            text: include_str!(concat!("../../docs/", $file)),
        }
    };
}

pub static PAGES: [Page; 10] = [
    page!("guide.md", "User guide"),
    page!("data.md", "Your data"),
    page!("twins.md", "Digital twins"),
    page!("prompts.md", "Text prompts"),
    page!("captions.md", "Capsule captions"),
    page!("tracklets.md", "Tracklets"),
    page!("phantom.md", "The phantom"),
    page!("models.md", "Models"),
    page!("speed.md", "Speed"),
    page!("develop.md", "Developing"),
];

/// The index of the page `file` (the user guide's when there is none).
pub fn index_of(file: &str) -> usize {
    PAGES.iter().position(|p| p.file == file).unwrap_or(0)
}
