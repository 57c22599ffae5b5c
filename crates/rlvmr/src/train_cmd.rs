//! `rlvmr train`: reinforcement learning (a thin wrapper over `trainer::rl::train`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use rlvmr_core::advantage::Algo;

use crate::eval_cmd::load_config;

#[derive(clap::Args)]
pub struct TrainArgs {
    /// A TOML run config (see configs/): [rl], [rollout], [reward], [advantage], [model], ...
    #[arg(long)]
    config: Option<PathBuf>,
    /// rlvmr (GRPO-MR), grpo, gigpo or rloo; overrides [advantage] algo.
    #[arg(long)]
    algo: Option<String>,
    /// Where the run starts: a checkpoint or Hugging Face folder, a GGUF file, the embedded
    /// model's name, or `coldstart`; overrides [rl] init.
    #[arg(long)]
    init: Option<String>,
    /// Run directory (default: <run.out_dir>/<run.name>/<algo>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Continue the run in DIR from its last complete checkpoint, with the config it saved.
    #[arg(long, conflicts_with_all = ["config", "algo", "init", "out"])]
    resume: Option<PathBuf>,
}

/// `--algo`'s names.
pub fn parse_algo(name: &str) -> Result<Algo> {
    Ok(match name {
        "rlvmr" | "grpo_mr" => Algo::GrpoMr,
        "grpo" => Algo::Grpo,
        "gigpo" => Algo::Gigpo,
        "rloo" => Algo::Rloo,
        other => bail!("unknown --algo '{other}': use rlvmr, grpo, gigpo or rloo"),
    })
}

fn algo_name(algo: Algo) -> &'static str {
    match algo {
        Algo::GrpoMr => "rlvmr",
        Algo::Grpo => "grpo",
        Algo::Gigpo => "gigpo",
        Algo::Rloo => "rloo",
    }
}

pub fn run(args: TrainArgs) -> Result<ExitCode> {
    let (config, out, resume) = match args.resume {
        Some(dir) => {
            let saved = dir.join("config.toml");
            if !saved.is_file() {
                bail!("{} is not a run directory of rlvmr train (no config.toml)", dir.display());
            }
            (load_config(Some(&saved))?, dir, true)
        }
        None => {
            let mut config = load_config(args.config.as_deref())?;
            if let Some(algo) = &args.algo {
                config.advantage.algo = parse_algo(algo)?;
            }
            if let Some(init) = args.init {
                config.rl.init = init;
            }
            config.validate()?;
            let out = args.out.unwrap_or_else(|| {
                config
                    .run
                    .out_dir
                    .join(&config.run.name)
                    .join(algo_name(config.advantage.algo))
            });
            (config, out, false)
        }
    };
    let report = trainer::rl::train(&config, &out, resume)
        .with_context(|| format!("rlvmr train into {}", out.display()))?;
    println!("{}", trainer::rl::metrics::final_table(&report));
    eprintln!("wrote {}/{{metrics.jsonl,rollouts/,checkpoints/,final/}}", report.dir.display());
    Ok(ExitCode::SUCCESS)
}
