//! `rlvmr coldstart`: annotated expert demonstrations and SFT samples (a thin wrapper over
//! `trainer::coldstart::run`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use crate::eval_cmd::load_config;

#[derive(clap::Args)]
pub struct ColdstartArgs {
    /// alfworld or sciworld (default: the config's, else alfworld).
    #[arg(long)]
    env: Option<String>,
    /// L0, L1 or L2: the level whose training the demonstrations prepare.
    #[arg(long)]
    split: Option<String>,
    /// published (ALFWorld: demonstrations from the training games of all six task types,
    /// as the authors' code) or strict (the level's training games only); overrides
    /// [env] protocol (default published).
    #[arg(long, value_parser = crate::train_cmd::parse_protocol)]
    protocol: Option<trainer::envs::Protocol>,
    /// Demonstrations to keep (default 200).
    #[arg(short = 'n', long = "episodes")]
    episodes: Option<usize>,
    /// Share of demonstrations with one recoverable mistake (default 0.25).
    #[arg(long)]
    mistake_fraction: Option<f64>,
    /// Share of ALFWorld demonstrations whose expert searches for the heat, cool or clean
    /// appliance instead of knowing it (default 0).
    #[arg(long)]
    appliance_search: Option<f64>,
    /// Run directory (default: <run.out_dir>/coldstart-<env>-<split>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// A TOML run config (see configs/).
    #[arg(long)]
    config: Option<PathBuf>,
    /// ALFWorld data: a folder holding json_2.1.1/, or json_2.1.1.zip.
    #[arg(long)]
    data: Option<PathBuf>,
    #[arg(long)]
    seed: Option<u64>,
    /// Who writes each step's tag and reason: builtin, or openai:BASE_URL (a served teacher,
    /// with --model-name; its rejected steps keep the built-in annotation).
    #[arg(long)]
    annotator: Option<String>,
    /// The served teacher's model name, with --annotator openai:...
    #[arg(long)]
    model_name: Option<String>,
}

pub fn run(args: ColdstartArgs) -> Result<ExitCode> {
    let mut config = load_config(args.config.as_deref())?;
    if let Some(env) = args.env {
        config.env.name = env;
    }
    if let Some(split) = args.split {
        config.env.split = split;
    }
    if let Some(protocol) = args.protocol {
        config.env.protocol = protocol;
    }
    if let Some(n) = args.episodes {
        config.coldstart.episodes = n;
    }
    if let Some(f) = args.mistake_fraction {
        config.coldstart.mistake_fraction = f;
    }
    if let Some(f) = args.appliance_search {
        config.coldstart.appliance_search = f;
    }
    if args.data.is_some() {
        config.env.data = args.data;
    }
    if let Some(seed) = args.seed {
        config.run.seed = seed;
    }
    if let Some(annotator) = args.annotator {
        match annotator.strip_prefix(trainer::runner::SERVED_PREFIX) {
            Some(url) => {
                config.coldstart.annotator = "openai".into();
                config.coldstart.teacher.base_url = url.to_string();
            }
            None => config.coldstart.annotator = annotator,
        }
    }
    if let Some(name) = args.model_name {
        config.coldstart.teacher.model_name = name;
    }
    config.validate()?;
    let out = args.out.unwrap_or_else(|| {
        config.run.out_dir.join(format!(
            "coldstart-{}-{}",
            config.env.name, config.env.split
        ))
    });
    let result = trainer::coldstart::run(&config, &out)?;
    println!("{}", config.env.protocol.describe(&config.env.name));
    println!("{}", result.summary());
    if let Some(t) = &result.teacher {
        let rejections: Vec<String> = t.rejections.iter().map(|(k, n)| format!("{k} {n}")).collect();
        println!(
            "teacher {}: {} steps annotated, {} kept the built-in annotation ({} whole trajectories rejected; {}); {} requests, {} retries, {} failed",
            t.teacher,
            t.teacher_steps,
            t.fallback_steps,
            t.rejected_trajectories,
            if rejections.is_empty() { "no rejections".to_string() } else { rejections.join(", ") },
            t.requests.requests,
            t.requests.retries,
            t.requests.failed
        );
    }
    let won = result.episodes.len() - result.openings;
    if won < config.coldstart.episodes {
        eprintln!("warning: only {won} won demonstrations; the cold start's training games ran out");
    }
    let report = if result.teacher.is_some() { ",annotation.json" } else { "" };
    eprintln!(
        "wrote {}/{{config.toml,trajectories.jsonl,sft.jsonl{report}}}",
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}
