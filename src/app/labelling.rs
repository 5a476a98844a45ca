//! The Labelling panel's logic: the choices of each field, the selected polyp's current
//! values, and moving through the library's polyps. Labels are set through the same audited,
//! undoable path as the details panel (`Command::SetPolypLabel`).

use super::App;
use super::state::{LabelField, Selection, ToastLevel};
use crate::store::TargetKind;

impl App {
    /// Fills the panel's choices (vocabulary terms, the library's histologies) and the
    /// selected polyp's values. Called whenever the selection or a label changes.
    pub(super) fn refresh_labelling(&mut self) {
        let vocabulary = crate::prompts::Vocabulary::default();
        let terms = |aspect: &str| -> Vec<String> {
            vocabulary
                .terms()
                .iter()
                .filter(|t| t.aspect == aspect)
                .map(|t| t.name.clone())
                .collect()
        };
        let Some(lib) = &self.state.library else {
            self.state.labelling.current.clear();
            return;
        };
        let mut histologies = lib.histologies.clone();
        for standard in [
            "hyperplastic",
            "sessile serrated",
            "tubular adenoma LG",
            "tubular adenoma HG",
            "carcinoma",
        ] {
            if !histologies.iter().any(|h| h == standard) {
                histologies.push(standard.to_string());
            }
        }
        histologies.retain(|h| h != "unknown");
        let mut locations = terms("location");
        for l in &lib.locations {
            if !locations.contains(l) {
                locations.push(l.clone());
            }
        }
        // Surface patterns as the library already words them, else the vocabulary's terms.
        let mut surfaces = lib.store.attribute_values("surface").unwrap_or_default();
        if surfaces.is_empty() {
            surfaces = terms("surface pattern");
        }
        let panel = &mut self.state.labelling;
        panel.options = vec![
            histologies,
            terms("Paris morphology"),
            surfaces,
            locations,
            Vec::new(),
        ];
        let polyps: Vec<i64> = lib
            .tree
            .iter()
            .flat_map(|n| n.polyps.iter().map(|p| p.id))
            .collect();
        match self.state.selection {
            Selection::Polyp(id) => {
                panel.position = polyps
                    .iter()
                    .position(|&p| p == id)
                    .map(|i| (i, polyps.len()));
                panel.current = LabelField::ALL
                    .iter()
                    .map(|f| {
                        lib.store
                            .current_label(TargetKind::Polyp, id, f.key())
                            .ok()
                            .flatten()
                    })
                    .collect();
            }
            _ => {
                panel.position = None;
                panel.current.clear();
            }
        }
    }

    /// The library's polyps in browser order.
    fn polyp_order(&self) -> Vec<i64> {
        self.state
            .library
            .as_ref()
            .map(|lib| {
                lib.tree
                    .iter()
                    .flat_map(|n| n.polyps.iter().map(|p| p.id))
                    .collect()
            })
            .unwrap_or_default()
    }

    pub(super) fn step_polyp(&mut self, delta: i32) {
        let polyps = self.polyp_order();
        if polyps.is_empty() {
            return;
        }
        let next = match self.state.selection {
            Selection::Polyp(id) => match polyps.iter().position(|&p| p == id) {
                Some(i) => (i as i64 + delta as i64).clamp(0, polyps.len() as i64 - 1) as usize,
                None => 0,
            },
            _ => 0,
        };
        self.select(Selection::Polyp(polyps[next]));
    }

    /// Selects the next polyp (after the selected one, wrapping) without a value in the
    /// focused field.
    pub(super) fn next_unlabelled(&mut self) {
        let polyps = self.polyp_order();
        let key = self.state.labelling.field.key();
        let Some(lib) = &self.state.library else {
            return;
        };
        let start = match self.state.selection {
            Selection::Polyp(id) => polyps.iter().position(|&p| p == id).map_or(0, |i| i + 1),
            _ => 0,
        };
        let found = (0..polyps.len())
            .map(|k| polyps[(start + k) % polyps.len()])
            .find(|&p| {
                lib.store
                    .current_label(TargetKind::Polyp, p, key)
                    .ok()
                    .flatten()
                    .is_none()
            });
        match found {
            Some(p) => self.select(Selection::Polyp(p)),
            None => self.state.toast(
                ToastLevel::Info,
                format!(
                    "every polyp has a {}",
                    self.state.labelling.field.title().to_lowercase()
                ),
            ),
        }
    }
}
