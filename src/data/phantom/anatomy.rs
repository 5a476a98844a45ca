//! Clinical attributes of phantom polyps and how each pathology draws them.
//!
//! Every visual trait is drawn from a distribution conditioned on the pathology, and the
//! distributions overlap on purpose: size, shape, colour and surface pattern each carry some
//! signal, none decides the class alone.

use crate::plumbing::Rng;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pathology {
    Hyperplastic,
    SessileSerrated,
    AdenomaLow,
    AdenomaHigh,
    Carcinoma,
}

impl Pathology {
    pub const ALL: [Pathology; 5] = [
        Pathology::Hyperplastic,
        Pathology::SessileSerrated,
        Pathology::AdenomaLow,
        Pathology::AdenomaHigh,
        Pathology::Carcinoma,
    ];

    /// The histology name stored in the library (same vocabulary as the labelling panel).
    pub fn histology(self) -> &'static str {
        match self {
            Pathology::Hyperplastic => "hyperplastic",
            Pathology::SessileSerrated => "sessile serrated",
            Pathology::AdenomaLow => "tubular adenoma LG",
            Pathology::AdenomaHigh => "tubular adenoma HG",
            Pathology::Carcinoma => "carcinoma",
        }
    }

    /// Vienna classification of gastrointestinal neoplasia.
    pub fn vienna(self) -> i64 {
        match self {
            Pathology::Hyperplastic => 1,
            Pathology::SessileSerrated | Pathology::AdenomaLow => 3,
            Pathology::AdenomaHigh => 4,
            Pathology::Carcinoma => 5,
        }
    }

    /// Prior share of each class in the phantom (adenomas dominate, as in screening).
    fn prior() -> [f32; 5] {
        [0.28, 0.14, 0.33, 0.15, 0.10]
    }

    pub fn draw(rng: &mut Rng) -> Pathology {
        Pathology::ALL[rng.weighted(&Pathology::prior())]
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Paris {
    /// 0-Ip, pedunculated.
    Ip,
    /// 0-Is, sessile.
    Is,
    /// 0-IIa, flat elevated.
    IIa,
    /// 0-IIc, depressed.
    IIc,
}

impl Paris {
    pub fn code(self) -> &'static str {
        match self {
            Paris::Ip => "0-Ip",
            Paris::Is => "0-Is",
            Paris::IIa => "0-IIa",
            Paris::IIc => "0-IIc",
        }
    }

    pub fn words(self) -> &'static str {
        match self {
            Paris::Ip => "pedunculated",
            Paris::Is => "sessile",
            Paris::IIa => "flat elevated",
            Paris::IIc => "depressed",
        }
    }
}

pub const LOCATIONS: [&str; 6] = [
    "caecum",
    "ascending colon",
    "transverse colon",
    "descending colon",
    "sigmoid colon",
    "rectum",
];

/// Surface (pit) pattern families.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Surface {
    /// Small round pits (Kudo II-like).
    Dots,
    /// Tubular / branched pits (Kudo IIIL / IV-like).
    Tubular,
    /// Cloud-like surface with a mucus cap.
    Cloudy,
    /// Irregular, partly absent pattern.
    Irregular,
}

impl Surface {
    pub fn words(self) -> &'static str {
        match self {
            Surface::Dots => "regular round pit pattern",
            Surface::Tubular => "tubular pit pattern",
            Surface::Cloudy => "cloud-like surface with a mucus cap",
            Surface::Irregular => "irregular surface pattern",
        }
    }
}

/// Everything that makes one phantom polyp look the way it does.
#[derive(Debug, Clone, PartialEq)]
pub struct PolypSpec {
    pub pathology: Pathology,
    pub paris: Paris,
    pub size_mm: f32,
    pub location: &'static str,
    pub surface: Surface,
    /// Linear RGB albedo of the polyp body.
    pub colour: [f32; 3],
    /// Redness relative to the mucosa, for the report's wording (-1 pale .. +1 red).
    pub redness: f32,
    pub pattern_scale: f32,
    pub pattern_contrast: f32,
    /// Surface lobulation amplitude (share of the radius).
    pub lobulation: f32,
    /// Central ulcer radius as a share of the polyp radius (0 = none).
    pub ulcer: f32,
    /// Mucus cap strength (0 = none).
    pub mucus: f32,
    /// Seed of this polyp's own texture and shape detail.
    pub detail_seed: u32,
}

impl PolypSpec {
    pub fn colour_words(&self) -> &'static str {
        if self.redness > 0.45 {
            "dark red"
        } else if self.redness > 0.15 {
            "reddish"
        } else if self.redness > -0.15 {
            "same colour as the surrounding mucosa"
        } else {
            "pale"
        }
    }

    pub fn size_class(&self) -> &'static str {
        crate::store::size_class_of(f64::from(self.size_mm))
    }

    /// Draws a polyp of the given pathology.
    pub fn draw(pathology: Pathology, rng: &mut Rng) -> PolypSpec {
        use Pathology::*;
        // Log-normal sizes: (median mm, spread).
        let (median, spread) = match pathology {
            Hyperplastic => (4.5, 0.35),
            SessileSerrated => (9.0, 0.35),
            AdenomaLow => (7.0, 0.4),
            AdenomaHigh => (14.0, 0.35),
            Carcinoma => (22.0, 0.3),
        };
        let size_mm = (median * (spread * rng.normal()).exp()).clamp(2.0, 45.0);
        // Paris class weights: Ip, Is, IIa, IIc.
        let paris_w = match pathology {
            Hyperplastic => [0.04, 0.40, 0.52, 0.04],
            SessileSerrated => [0.02, 0.30, 0.63, 0.05],
            AdenomaLow => [0.22, 0.50, 0.25, 0.03],
            AdenomaHigh => [0.30, 0.45, 0.13, 0.12],
            Carcinoma => [0.12, 0.45, 0.08, 0.35],
        };
        let paris = [Paris::Ip, Paris::Is, Paris::IIa, Paris::IIc][rng.weighted(&paris_w)];
        // Location weights from caecum to rectum: serrated lesions sit proximally,
        // hyperplastic ones distally.
        let loc_w = match pathology {
            Hyperplastic => [0.05, 0.08, 0.12, 0.15, 0.33, 0.27],
            SessileSerrated => [0.30, 0.35, 0.20, 0.07, 0.05, 0.03],
            AdenomaLow | AdenomaHigh => [0.12, 0.20, 0.22, 0.14, 0.20, 0.12],
            Carcinoma => [0.15, 0.15, 0.12, 0.12, 0.24, 0.22],
        };
        let location = LOCATIONS[rng.weighted(&loc_w)];
        // Surface weights: Dots, Tubular, Cloudy, Irregular.
        let surf_w = match pathology {
            Hyperplastic => [0.62, 0.15, 0.18, 0.05],
            SessileSerrated => [0.20, 0.10, 0.62, 0.08],
            AdenomaLow => [0.15, 0.68, 0.07, 0.10],
            AdenomaHigh => [0.05, 0.50, 0.05, 0.40],
            Carcinoma => [0.03, 0.17, 0.03, 0.77],
        };
        let surface = [
            Surface::Dots,
            Surface::Tubular,
            Surface::Cloudy,
            Surface::Irregular,
        ][rng.weighted(&surf_w)];
        let red_mean = match pathology {
            Hyperplastic => -0.15,
            SessileSerrated => -0.25,
            AdenomaLow => 0.15,
            AdenomaHigh => 0.3,
            Carcinoma => 0.45,
        };
        let redness = (red_mean + 0.22 * rng.normal()).clamp(-0.8, 0.9);
        // Relative to a typical mucosa albedo: red lesions lose green and blue, pale ones
        // gain them (whitish pink).
        let base = [0.72, 0.22, 0.14];
        let colour = [
            (base[0] - 0.05 * redness + 0.03 * rng.normal()).clamp(0.3, 1.0),
            (base[1] - 0.12 * redness + 0.025 * rng.normal()).clamp(0.03, 0.7),
            (base[2] - 0.07 * redness + 0.025 * rng.normal()).clamp(0.03, 0.7),
        ];
        let ulcer = match pathology {
            Carcinoma if rng.chance(0.6) => rng.range(0.25, 0.5),
            AdenomaHigh if rng.chance(0.12) => rng.range(0.15, 0.3),
            _ => 0.0,
        };
        let mucus = match surface {
            Surface::Cloudy => rng.range(0.4, 0.9),
            _ if pathology == SessileSerrated => rng.range(0.0, 0.4),
            _ => 0.0,
        };
        let lobulation = match pathology {
            Hyperplastic | SessileSerrated => rng.range(0.0, 0.12),
            AdenomaLow => rng.range(0.05, 0.2),
            AdenomaHigh => rng.range(0.1, 0.3),
            Carcinoma => rng.range(0.15, 0.4),
        };
        PolypSpec {
            pathology,
            paris,
            size_mm,
            location,
            surface,
            colour,
            redness,
            pattern_scale: rng.range(0.8, 1.3),
            pattern_contrast: rng.range(0.5, 1.0),
            lobulation,
            ulcer,
            mucus,
            detail_seed: rng.next_u64() as u32,
        }
    }
}
