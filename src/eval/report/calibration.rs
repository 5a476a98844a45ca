//! The calibration part of a model report: for a model whose card stores a calibration of
//! the confidence it shows (the twin vote's `vote`, the caption category's `category`, the
//! detector's `detector`), the expected calibration error of that confidence before and
//! after the map, on the report's own held-out data, with bootstrap intervals (as `eval
//! trust` computes them) and the reliability bins its diagram draws. A model with none says
//! so: its numbers are not confidences.

use super::ReportError;
use crate::eval::trust::{self, Item};
use crate::model::weights::ModelCard;
use crate::trust::CalibrationMap;
use crate::trust::calibration::{BINS, Bin};
use serde::{Deserialize, Serialize};

/// What a report says of a model whose card stores no calibration.
pub const NOT_STORED: &str = "no calibration stored: its numbers are not confidences";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReportCalibration {
    /// The card stores no calibration of the confidence this capability shows ([`NOT_STORED`]).
    NotStored(String),
    Stored(CalibrationFigures),
}

/// The expected calibration error of a stored calibration on held-out answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibrationFigures {
    /// The card's calibration ("vote", "category", "detector").
    pub name: String,
    /// Its map ("temperature 0.55", "isotonic, 14 points") and what it was fitted on.
    pub map: String,
    pub fitted_on: String,
    /// The confidence calibrated.
    pub of: String,
    /// Held-out answers it was measured on.
    pub answers: usize,
    /// Equal-width bins of the error and the diagram.
    pub bins: usize,
    pub ece_raw: f64,
    pub ece_raw_ci: [f64; 2],
    pub ece_calibrated: f64,
    pub ece_calibrated_ci: [f64; 2],
    pub bins_raw: Vec<Bin>,
    pub bins_calibrated: Vec<Bin>,
}

impl ReportCalibration {
    /// The figures of `card`'s calibration `name` (of the confidence `of`) on the answers
    /// `items` gives (asked for only when the card stores it); intervals from
    /// [`trust::RESAMPLES`] bootstrap resamples of the answers, drawn from `seed`.
    pub fn measure(
        card: &ModelCard,
        name: &str,
        of: &str,
        seed: u64,
        items: impl FnOnce() -> Result<Vec<Item>, ReportError>,
    ) -> Result<ReportCalibration, ReportError> {
        let Some(stored) = card.calibration.get(name) else {
            return Ok(ReportCalibration::NotStored(NOT_STORED.into()));
        };
        let items = items()?;
        let row = trust::row("", "", &items, seed);
        // Every item carries its calibrated confidence when the card has the map.
        let calibrated = row.ece_calibrated.unwrap_or_else(|| row.ece_raw.clone());
        let map = match &stored.map {
            CalibrationMap::Temperature { temperature } => format!("temperature {temperature:.3}"),
            CalibrationMap::Isotonic { raw, .. } => format!("isotonic, {} points", raw.len()),
        };
        Ok(ReportCalibration::Stored(CalibrationFigures {
            name: name.into(),
            map,
            fitted_on: stored.fitted_on.clone(),
            of: of.into(),
            answers: row.answers,
            bins: BINS,
            ece_raw: row.ece_raw.value,
            ece_raw_ci: row.ece_raw.ci,
            ece_calibrated: calibrated.value,
            ece_calibrated_ci: calibrated.ci,
            bins_calibrated: row.bins_calibrated.unwrap_or_else(|| row.bins_raw.clone()),
            bins_raw: row.bins_raw,
        }))
    }

    /// The report's lines about it (the CLI prints them; each starts with two spaces).
    pub fn text(&self) -> String {
        match self {
            ReportCalibration::NotStored(line) => format!("  {line}\n"),
            ReportCalibration::Stored(c) if c.answers == 0 => format!(
                "  calibration `{}` ({}) of {}: no held-out answers to measure it on\n",
                c.name, c.map, c.of
            ),
            ReportCalibration::Stored(c) => format!(
                "  calibration `{}` ({}) of {}, on {} held-out answers\n  \
                 expected calibration error ({} bins): raw {:.3} [{:.3}, {:.3}], calibrated \
                 {:.3} [{:.3}, {:.3}]\n",
                c.name,
                c.map,
                c.of,
                c.answers,
                c.bins,
                c.ece_raw,
                c.ece_raw_ci[0],
                c.ece_raw_ci[1],
                c.ece_calibrated,
                c.ece_calibrated_ci[0],
                c.ece_calibrated_ci[1]
            ),
        }
    }

    /// The figures to draw a reliability diagram of: stored and measured on some answers.
    pub fn figures(&self) -> Option<&CalibrationFigures> {
        match self {
            ReportCalibration::Stored(c) if c.answers > 0 => Some(c),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::weights::{ModelCard, ModelKind};
    use crate::trust::Calibration;

    fn card(calibrated: bool) -> ModelCard {
        let mut card = ModelCard::new("m", ModelKind::PromptModel, "t", "test", &());
        if calibrated {
            card.calibration.insert(
                crate::trust::DETECTOR.into(),
                Calibration {
                    map: CalibrationMap::Temperature { temperature: 2.0 },
                    fitted_on: "v".into(),
                    answers: 4,
                    ece_raw: 0.0,
                    ece_fitted: 0.0,
                },
            );
        }
        card
    }

    #[test]
    fn a_card_without_the_calibration_says_its_numbers_are_not_confidences() {
        let c = ReportCalibration::measure(&card(false), "detector", "p", 1, || {
            panic!("no answers are needed")
        })
        .unwrap();
        assert_eq!(c.text(), format!("  {NOT_STORED}\n"));
        assert!(c.figures().is_none());
    }

    #[test]
    fn the_figures_are_the_expected_calibration_errors_of_the_answers() {
        // Raw 0.9 on a half-right set: ECE 0.4; calibrated 1 / 0 exactly: 0.
        let item = |right| Item {
            marked: false,
            right,
            raw: 0.9,
            calibrated: Some(if right { 1.0 } else { 0.0 }),
        };
        let c = ReportCalibration::measure(&card(true), "detector", "p", 1, || {
            Ok(vec![item(true), item(false), item(true), item(false)])
        })
        .unwrap();
        let f = c.figures().unwrap();
        assert!((f.ece_raw - 0.4).abs() < 1e-12 && f.ece_calibrated.abs() < 1e-12);
        assert!(f.ece_raw_ci[0] <= f.ece_raw && f.ece_raw <= f.ece_raw_ci[1]);
        assert_eq!((f.answers, f.bins, f.bins_raw.len()), (4, 15, 15));
        assert_eq!(f.map, "temperature 2.000");
        assert!(c.text().contains("raw 0.400"), "{}", c.text());
    }
}
