//! `rlvmr sft`: supervised fine-tuning on cold-start samples (a thin wrapper over
//! `trainer::sft::run`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use crate::eval_cmd::load_config;

#[derive(clap::Args)]
pub struct SftArgs {
    /// A TOML run config (see configs/): [model], [sft], [eval], [env].
    #[arg(long)]
    config: PathBuf,
    /// The sft.jsonl to train on (default: the config's sft.data).
    #[arg(long)]
    data: Option<PathBuf>,
    /// Run directory (default: <run.out_dir>/<run.name>/sft).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Continue from a checkpoint folder this run wrote (<out>/checkpoints/step-N).
    #[arg(long)]
    resume: Option<PathBuf>,
}

pub fn run(args: SftArgs) -> Result<ExitCode> {
    let mut config = load_config(Some(&args.config))?;
    if let Some(data) = args.data {
        config.sft.data = data;
    }
    config.validate()?;
    let out = args
        .out
        .unwrap_or_else(|| trainer::runner::default_sft_dir(&config));
    let (report, summary) = trainer::sft::run(&config, &out, args.resume.as_deref())?;
    println!(
        "trained on {} samples ({} too long, left out) for {} optimizer steps",
        report.samples, report.skipped, report.steps
    );
    if let (Some(first), Some(last)) = (report.log.first(), report.log.last()) {
        println!(
            "loss {:.4} (step {}) -> {:.4} (step {})",
            first.loss, first.step, last.loss, last.step
        );
    }
    println!("final model: {}", report.final_dir.display());
    if let Some(summary) = summary {
        println!("{}", trainer::eval::table(&summary));
    }
    Ok(ExitCode::SUCCESS)
}
