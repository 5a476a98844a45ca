//! `endotwin train <recipe> [options]` and `endotwin train --list`: every recipe of the
//! registry, its flags built from the recipe's own options (the training panel builds its form
//! from the same list). A progress bar, one line per epoch, the saved model at the end.

use anyhow::Result;
use clap::{Arg, ArgAction};
use endotwin::compute::BackendPref;
use endotwin::train::recipe::{OptionKind, Recipe, RecipeContext, Settings, TrainObserver};
use endotwin::train::{EpochReport, recipe, recipes};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct TrainArgs {
    /// List the recipes, one a line: name, then description.
    #[arg(long)]
    list: bool,
    /// Print help (with a recipe: the recipe's options).
    #[arg(short, long)]
    help: bool,
    /// The recipe to run (see --list).
    recipe: Option<String>,
    /// The recipe's options (`endotwin train <recipe> --help` lists them).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    options: Vec<String>,
}

impl TrainArgs {
    /// Whether it only lists or explains (`--list`, `--help`): nothing is trained.
    pub fn lists_only(&self) -> bool {
        self.list
            || self.help
            || self.recipe.is_none()
            || self.options.iter().any(|o| o == "--help" || o == "-h")
    }
}

/// The recipes, for `train --help`.
pub fn recipes_help() -> String {
    let mut text = String::from("Recipes (`endotwin train <recipe> --help` for its options):\n");
    for r in recipes() {
        text.push_str(&format!("  {:<16} {}\n", r.name(), r.description()));
    }
    text
}

pub fn run(library: PathBuf, pref: BackendPref, force: bool, args: TrainArgs) -> Result<()> {
    if args.list {
        for r in recipes() {
            println!("{}\t{}", r.name(), r.description());
        }
        return Ok(());
    }
    let Some(name) = args.recipe else {
        if args.help {
            print!("{}", train_help());
            return Ok(());
        }
        anyhow::bail!("name a recipe: {}", names().join(", "));
    };
    let Some(chosen) = recipe(&name) else {
        anyhow::bail!("unknown recipe `{name}`; known: {}", names().join(", "));
    };
    // Global flags may also follow the recipe's name.
    let matches = command_of(chosen)
        .arg(
            Arg::new("library")
                .long("library")
                .value_parser(clap::value_parser!(PathBuf)),
        )
        .arg(
            Arg::new("backend")
                .long("backend")
                .value_parser(clap::builder::EnumValueParser::<BackendPref>::new()),
        )
        .arg(
            Arg::new("force")
                .long("force")
                .action(ArgAction::SetTrue)
                .help("Replace an existing model of this --out and --name (the replaced one is kept in <out>/replaced/)"),
        )
        .try_get_matches_from(
            std::iter::once(name.clone())
                .chain(args.options)
                .chain(args.help.then(|| "--help".to_string())),
        )
        .unwrap_or_else(|e| e.exit());
    let library = matches
        .get_one::<PathBuf>("library")
        .cloned()
        .unwrap_or(library);
    let pref = match matches.get_one::<BackendPref>("backend") {
        Some(p) => *p,
        None => pref,
    };
    let settings = settings_of(chosen, &matches);
    let given = |id: &str| {
        chosen.options().iter().any(|o| o.name == id)
            && matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine)
    };
    let writes_to_models = chosen
        .options()
        .iter()
        .any(|o| o.name == "out" && o.default.is_none());
    if writes_to_models
        && !given("out")
        && !given("models")
        && endotwin::models_is_source_tree_fallback()
    {
        anyhow::bail!(
            "no --out given, no $ENDOTWIN_MODELS and no models/ in this folder or beside the \
             executable; the model would go into the source tree's {} (nothing was trained): pass --out FOLDER",
            endotwin::default_models_dir().display()
        );
    }
    let compute = super::compute(pref)?;
    let mut observer = CliObserver::new();
    let mut ctx = RecipeContext {
        library,
        models: endotwin::default_models_dir(),
        memory: compute.training_memory(),
        replace: force || matches.get_flag("force"),
        device: compute.device,
        command_line: super::command_line(),
        observer: &mut observer,
    };
    let result = endotwin::train::recipe::run_recipe(chosen, &settings, &mut ctx);
    observer.bar.finish_and_clear();
    let trained = result?;
    println!(
        "saved {} ({:.0} s)",
        trained.card.display(),
        trained.seconds
    );
    Ok(())
}

/// `endotwin train --help`.
fn train_help() -> String {
    format!(
        "Train a model on the library's data with one of the recipes; checkpoints every epoch, \
         --resume continues.\n\nUsage: endotwin train [--list] <RECIPE> [RECIPE OPTIONS]\n\n{}",
        recipes_help()
    )
}

fn names() -> Vec<&'static str> {
    recipes().iter().map(|r| r.name()).collect()
}

/// The recipe's options as clap flags.
fn command_of(r: &dyn Recipe) -> clap::Command {
    let mut cmd = clap::Command::new(r.name())
        .bin_name(format!("endotwin train {}", r.name()))
        .about(r.description());
    for o in r.options() {
        let mut arg = Arg::new(o.name).long(o.name).help(o.help);
        arg = match o.kind {
            OptionKind::Flag => arg.action(ArgAction::SetTrue),
            OptionKind::Count => arg.value_parser(clap::value_parser!(u64)),
            OptionKind::Number => arg.value_parser(clap::value_parser!(f64)),
            OptionKind::Text | OptionKind::Path => arg,
        };
        if let (Some(d), false) = (o.default, o.kind == OptionKind::Flag) {
            arg = arg.default_value(d);
        }
        cmd = cmd.arg(arg);
    }
    cmd
}

fn settings_of(r: &dyn Recipe, m: &clap::ArgMatches) -> Settings {
    let mut s = Settings::default();
    for o in r.options() {
        let value = match o.kind {
            OptionKind::Flag => Some(m.get_flag(o.name).to_string()),
            OptionKind::Count => m.get_one::<u64>(o.name).map(u64::to_string),
            OptionKind::Number => m.get_one::<f64>(o.name).map(f64::to_string),
            OptionKind::Text | OptionKind::Path => m.get_one::<String>(o.name).cloned(),
        };
        if let Some(v) = value {
            s.set(o.name, v);
        }
    }
    s
}

/// A progress bar over all steps and one line per epoch.
struct CliObserver {
    bar: ProgressBar,
}

impl CliObserver {
    fn new() -> CliObserver {
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} steps {msg} [{elapsed} < {eta}]")
                .expect("template"),
        );
        CliObserver { bar }
    }
}

impl TrainObserver for CliObserver {
    fn message(&mut self, line: &str) {
        self.bar.suspend(|| eprintln!("{line}"));
    }

    fn step(&mut self, epoch: usize, epochs: usize, step: usize, steps: usize, loss: f64) {
        self.bar.set_length((epochs * steps) as u64);
        self.bar.set_position((epoch * steps + step + 1) as u64);
        self.bar
            .set_message(format!("epoch {} loss {loss:.3}", epoch + 1));
    }

    fn epoch(&mut self, report: &EpochReport, epochs: usize) {
        let line = report
            .metrics
            .iter()
            .map(|(n, v)| format!("{n} {v:.4}"))
            .collect::<Vec<_>>()
            .join(", ");
        // Printed even when stderr is not a terminal (the bar then hides itself).
        self.bar.suspend(|| {
            eprintln!(
                "epoch {}/{}: {line} ({:.0} s)",
                report.epoch, epochs, report.seconds
            )
        });
    }
}
