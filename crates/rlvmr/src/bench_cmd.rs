//! `rlvmr bench-policy`: the arguments of [`trainer::bench`], the policy's update, log-probs and
//! sampling timed on one device; tools/cuda/bench.sh pairs it with PyTorch on a GPU.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use trainer::bench::BenchOptions;

#[derive(clap::Args)]
pub struct BenchArgs {
    /// cpu, cuda, cuda:N or auto.
    #[arg(long, default_value = "auto")]
    device: String,
    /// The model's shape, random weights: smollm2 (SmolLM2-135M), qwen2.5-1.5b (Qwen2.5-1.5B),
    /// or tiny (a 64-token model, for tests).
    #[arg(long, default_value = "smollm2")]
    shape: String,
    /// Where the weights and inputs are written (a Hugging Face folder PyTorch can load).
    #[arg(long)]
    weights: PathBuf,
    /// Write config.json and the inputs only, not the weights (PyTorch then draws its own
    /// random weights of the same shape: speed does not depend on the values).
    #[arg(long)]
    config_only: bool,
    /// Step samples in the update's mini-batch.
    #[arg(long, default_value_t = 64)]
    samples: usize,
    /// Mean prompt length of a step sample (lengths vary by up to ±50).
    #[arg(long, default_value_t = 1000)]
    prompt_tokens: usize,
    /// Mean reply length of a step sample (lengths vary by up to ±50).
    #[arg(long, default_value_t = 200)]
    reply_tokens: usize,
    /// Samples per forward pass in the update and the log-probs.
    #[arg(long, default_value_t = 1)]
    micro_batch: usize,
    /// Prompts sampled in one batch.
    #[arg(long, default_value_t = 128)]
    prompts: usize,
    /// Mean length of a sampled prompt (lengths vary by up to ±50).
    #[arg(long, default_value_t = 1000)]
    sample_prompt_tokens: usize,
    /// New tokens per sampled prompt.
    #[arg(long, default_value_t = 200)]
    new_tokens: usize,
    /// Phases, comma-separated: update, parts, logprobs, sample, check.
    #[arg(long, default_value = "update,logprobs,sample")]
    phases: String,
    /// Timed repeats of each phase (median), after one warm-up on a small slice.
    #[arg(long, default_value_t = 2)]
    repeats: usize,
    /// Matrix products of f32 in TF32 (candle's reduced-precision f32 GEMM), off by default.
    #[arg(long)]
    tf32: bool,
    /// Write the JSON here as well as to stdout.
    #[arg(long)]
    out: Option<PathBuf>,
}

pub fn run(a: BenchArgs) -> Result<ExitCode> {
    let device = policy::device::parse(&a.device)?;
    if a.tf32 && !cfg!(feature = "cuda") {
        anyhow::bail!("--tf32 needs a build with the cuda feature");
    }
    policy::device::set_tf32(a.tf32);
    let options = BenchOptions {
        device,
        shape: a.shape,
        weights: a.weights,
        config_only: a.config_only,
        samples: a.samples,
        prompt_tokens: a.prompt_tokens,
        reply_tokens: a.reply_tokens,
        micro_batch: a.micro_batch,
        prompts: a.prompts,
        sample_prompt_tokens: a.sample_prompt_tokens,
        new_tokens: a.new_tokens,
        phases: a.phases.split(',').map(str::trim).filter(|p| !p.is_empty()).map(String::from).collect(),
        repeats: a.repeats,
    };
    let mut report = trainer::bench::run(&options)?;
    report["matmul"] = (if a.tf32 { "tf32" } else { "f32" }).into();
    println!("{report}");
    if let Some(out) = &a.out {
        std::fs::write(out, report.to_string()).with_context(|| format!("writing {}", out.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}
