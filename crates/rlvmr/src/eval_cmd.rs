//! `rlvmr eval`: evaluate a policy on a level's test games (a thin wrapper over
//! `trainer::runner::run_eval`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use trainer::RunConfig;

#[derive(clap::Args)]
pub struct EvalArgs {
    /// alfworld or sciworld (default: the config's, else alfworld).
    #[arg(long)]
    env: Option<String>,
    /// L0, L1 or L2 (default: the config's, else L0).
    #[arg(long)]
    split: Option<String>,
    /// expert, random, a GGUF file, a model folder, the embedded default's name, or
    /// openai:BASE_URL (a model behind an OpenAI-compatible server, with --model-name)
    /// [default: the config's model].
    #[arg(long)]
    policy: Option<String>,
    /// The served model's name (the `model` field of each request) with --policy openai:...
    #[arg(long)]
    model_name: Option<String>,
    /// Episodes to play, drawn from the test games (default: every test game once).
    #[arg(long)]
    episodes: Option<usize>,
    /// Sampling temperature (default 0.4, as published).
    #[arg(long)]
    temperature: Option<f64>,
    /// Run directory (default: <run.out_dir>/eval-<env>-<split>-<policy>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// A TOML run config (see configs/); default: the `rlvmr.toml` saved with a model folder.
    #[arg(long)]
    config: Option<PathBuf>,
    /// ALFWorld data: a folder holding json_2.1.1/, or json_2.1.1.zip.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Seed of the evaluation: the test games drawn (unless the config's [eval] draw_seed
    /// fixes them) and the sampling; overrides [run] seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Agent steps per episode (default 30).
    #[arg(long)]
    max_steps: Option<usize>,
    /// Longest reply in tokens.
    #[arg(long)]
    max_new_tokens: Option<usize>,
}

/// The config file, or the defaults without one (each command applies its own flags after).
pub fn load_config(path: Option<&std::path::Path>) -> Result<RunConfig> {
    match path {
        Some(p) => {
            RunConfig::from_file(p).with_context(|| format!("loading config {}", p.display()))
        }
        None => Ok(RunConfig::default()),
    }
}

/// `--config` when given, else the config saved with the model (so the prompts match the
/// ones it learned from), else the defaults.
fn eval_config(args: &EvalArgs) -> Result<RunConfig> {
    let saved = match (&args.config, &args.policy) {
        (None, Some(policy)) => trainer::checkpoints::saved_run_config(policy),
        _ => None,
    };
    if let Some(path) = &saved {
        eprintln!(
            "using the run config saved with the model: {}",
            path.display()
        );
    }
    load_config(args.config.as_deref().or(saved.as_deref()))
}

pub fn run(args: EvalArgs) -> Result<ExitCode> {
    let mut config = eval_config(&args)?;
    if let Some(policy) = &args.policy {
        config = trainer::runner::with_policy(config, policy);
    }
    if let Some(name) = args.model_name {
        config.model.server.model_name = name;
    }
    let policy = args
        .policy
        .unwrap_or_else(|| trainer::runner::config_policy(&config));
    if let Some(env) = args.env {
        config.env.name = env;
    }
    if let Some(split) = args.split {
        config.env.split = split;
    }
    if args.episodes.is_some() {
        config.eval.episodes = args.episodes;
    }
    if let Some(t) = args.temperature {
        config.eval.temperature = t;
    }
    if args.data.is_some() {
        config.env.data = args.data;
    }
    if let Some(seed) = args.seed {
        config.run.seed = seed;
    }
    if let Some(n) = args.max_steps {
        config.env.max_steps = n;
    }
    if let Some(n) = args.max_new_tokens {
        config.rollout.max_new_tokens = n;
    }
    config.validate()?;
    let out = args
        .out
        .unwrap_or_else(|| trainer::runner::default_eval_dir(&config, &policy));
    let evaluation = trainer::runner::run_eval(&config, &policy, &out)?;
    println!("{}", trainer::eval::table(&evaluation.summary));
    eprintln!(
        "wrote {}/{{config.toml,trajectories.jsonl,summary.json}}",
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}
