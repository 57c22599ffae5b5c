//! `rlvmr train`: reinforcement learning (a thin wrapper over `trainer::rl::train`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use rlvmr_core::advantage::Algo;

use trainer::config::RunConfig;

use crate::eval_cmd::load_config;

/// The main job, `rlvmr train` with no config: configs/cpu-l2.toml, built into the binary.
pub const MAIN_PRESET: &str = include_str!("../../../configs/cpu-l2.toml");

#[derive(clap::Args)]
pub struct TrainArgs {
    /// A TOML run config (see configs/): [rl], [rollout], [reward], [advantage], [model], ...
    /// Without one: the main job, configs/cpu-l2.toml (RLVMR on ALFWorld L2 from nothing on
    /// a CPU: cold start, SFT, RL, then the L0, L1 and L2 test games).
    #[arg(long)]
    config: Option<PathBuf>,
    /// rlvmr (GRPO-MR), grpo, gigpo or rloo; overrides [advantage] algo.
    #[arg(long)]
    algo: Option<String>,
    /// Where the run starts: a checkpoint or Hugging Face folder, a GGUF file, the embedded
    /// model's name, or `coldstart`; overrides [rl] init.
    #[arg(long)]
    init: Option<String>,
    /// published (the cold start draws from all six ALFWorld task types, RL from the level's,
    /// as the authors' code) or strict (the level's types everywhere before the test);
    /// overrides [env] protocol.
    #[arg(long, value_parser = parse_protocol)]
    protocol: Option<trainer::envs::Protocol>,
    /// Seed of every random choice of the run (games, sampling, shuffles; the test games drawn
    /// unless [eval] draw_seed fixes them); overrides [run] seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Run directory (default: <run.out_dir>/<run.name>/<algo>, <algo>-seed<N> for a seed
    /// other than 0). A folder that holds a run of another config is refused.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Continue the run in DIR from its last complete checkpoint, with the config it saved.
    #[arg(long, conflicts_with_all = ["config", "algo", "init", "protocol", "seed", "out"])]
    resume: Option<PathBuf>,
    /// RL iterations in all; overrides [rl] iterations. With --resume it extends (or
    /// shortens, down to the iterations done) a run whose learning rate is constant, as if
    /// it had been planned that long.
    #[arg(long)]
    iterations: Option<usize>,
}

/// `saved` with its iteration count changed to `iterations` for a resumed run: refused when
/// the learning-rate schedule depends on the count (warmup, cosine), since the iterations
/// already done would not be the new schedule's.
fn with_iterations(mut saved: RunConfig, iterations: usize, dir: &Path) -> Result<RunConfig> {
    let rl = &saved.rl;
    let fixed = rl.schedule == trainer::config::LrSchedule::Constant && rl.warmup_ratio == 0.0;
    if iterations != rl.iterations && !fixed {
        bail!(
            "--iterations {iterations}: the run in {} has a learning-rate schedule over its {} iterations \
             (rl.schedule {:?}, rl.warmup_ratio {}); only a constant rate without warmup can be extended",
            dir.display(),
            rl.iterations,
            rl.schedule,
            rl.warmup_ratio
        );
    }
    saved.rl.iterations = iterations;
    saved.validate()?;
    Ok(saved)
}

/// `--protocol`'s names.
pub fn parse_protocol(name: &str) -> Result<trainer::envs::Protocol, String> {
    trainer::envs::Protocol::from_name(name)
        .ok_or_else(|| format!("unknown protocol '{name}': use published or strict"))
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

/// The run folder without `--out`: `<run.out_dir>/<run.name>/<algo>`, `-seed<N>` added for
/// any seed but 0, so a job's second seed never lands in its first seed's folder.
fn default_out(config: &RunConfig) -> PathBuf {
    let algo = algo_name(config.advantage.algo);
    let folder = match config.run.seed {
        0 => algo.to_string(),
        seed => format!("{algo}-seed{seed}"),
    };
    config.run.out_dir.join(&config.run.name).join(folder)
}

/// Refuses a new run into a folder that holds a run of another config: it would take that
/// run's SFT model as its own and write over its RL runs.
fn refuse_another_run(out: &Path, config: &RunConfig) -> Result<()> {
    let saved_path = out.join("config.toml");
    if !saved_path.is_file() {
        return Ok(());
    }
    let saved = RunConfig::from_file(&saved_path)
        .with_context(|| format!("{} holds a run whose config cannot be read", out.display()))?;
    if let Some((key, there, asked)) = saved.first_difference(config)? {
        bail!(
            "{} holds a run made with another config ({key} = {there} there, {asked} asked): \
             give this run its own folder with --out, or continue that one with --resume {}",
            out.display(),
            out.display()
        );
    }
    Ok(())
}

pub fn run(args: TrainArgs) -> Result<ExitCode> {
    let (config, out, resume) = match args.resume {
        Some(dir) => {
            let saved = dir.join("config.toml");
            if !saved.is_file() {
                bail!("{} is not a run directory of rlvmr train (no config.toml)", dir.display());
            }
            let mut config = load_config(Some(&saved))?;
            if let Some(n) = args.iterations {
                config = with_iterations(config, n, &dir)?;
            }
            (config, dir, true)
        }
        None => {
            let mut config = match &args.config {
                Some(path) => load_config(Some(path))?,
                None => RunConfig::from_toml(MAIN_PRESET).context("the built-in main preset (configs/cpu-l2.toml)")?,
            };
            if let Some(algo) = &args.algo {
                config.advantage.algo = parse_algo(algo)?;
            }
            if let Some(init) = args.init {
                config.rl.init = init;
            }
            if let Some(seed) = args.seed {
                config.run.seed = seed;
            }
            if let Some(protocol) = args.protocol {
                config.env.protocol = protocol;
            }
            if let Some(n) = args.iterations {
                config.rl.iterations = n;
            }
            // A config that cannot train at all is named before any folder question.
            config.validate_for_training("rlvmr train")?;
            let out = args.out.unwrap_or_else(|| default_out(&config));
            refuse_another_run(&out, &config)?;
            (config, out, false)
        }
    };
    if config.rl.per_level {
        return train_per_level(&config, &out, resume);
    }
    let report = trainer::rl::train(&config, &out, resume)
        .with_context(|| format!("rlvmr train into {}", out.display()))?;
    report_run(&report);
    Ok(ExitCode::SUCCESS)
}

/// `rl.per_level`: one run per level's training games, each reported as a single run is.
fn train_per_level(config: &RunConfig, out: &Path, resume: bool) -> Result<ExitCode> {
    let outcomes = trainer::rl::levels::train_levels(config, out, resume)
        .with_context(|| format!("rlvmr train (one run per level) into {}", out.display()))?;
    for outcome in &outcomes {
        println!("## RL at {}, its final model on {}\n", outcome.run.levels[0], outcome.run.levels.join(", "));
        match &outcome.report {
            Some(report) => report_run(report),
            None => println!("finished before: {}\n", outcome.run.dir.join("eval").display()),
        }
    }
    // The job's charts: every level's run on one set, each level played by its own model.
    let runs: Vec<_> = outcomes.iter().map(|outcome| outcome.run.dir.clone()).collect();
    write_plots(out, &runs);
    Ok(ExitCode::SUCCESS)
}

/// A finished run's table on stdout, where it wrote, and its charts.
fn report_run(report: &trainer::rl::RlReport) {
    println!("{}", trainer::rl::metrics::final_table(report));
    eprintln!("wrote {}/{{metrics.jsonl,rollouts/,checkpoints/,final/}}", report.dir.display());
    write_plots(&report.dir, std::slice::from_ref(&report.dir));
}

/// The charts of `runs` into `dir/plots` (as `rlvmr report` draws them). A machine without a
/// font gets a warning, not a failed run: the training is done and saved.
fn write_plots(dir: &Path, runs: &[PathBuf]) {
    let drawn = runs
        .iter()
        .map(|run| trainer::report::Run::read(run))
        .collect::<Result<Vec<_>, _>>()
        .and_then(|runs| trainer::report::draw(&runs, &dir.join("plots")));
    match drawn {
        Ok(files) => eprintln!("wrote {} charts into {}", files.len(), dir.join("plots").display()),
        Err(e) => eprintln!("warning: no charts drawn ({e}); `rlvmr report {}` draws them later", dir.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_other_than_0_has_its_own_default_folder() {
        let mut config = RunConfig::from_toml(MAIN_PRESET).unwrap();
        assert_eq!(default_out(&config), PathBuf::from("runs/cpu-l2/rlvmr"));
        config.run.seed = 2;
        config.advantage.algo = Algo::Grpo;
        assert_eq!(default_out(&config), PathBuf::from("runs/cpu-l2/grpo-seed2"));
    }

    #[test]
    fn the_main_preset_is_rlvmr_on_l2_from_nothing_with_the_three_test_levels() {
        let config = RunConfig::from_toml(MAIN_PRESET).unwrap();
        config.validate().unwrap();
        assert_eq!((config.env.name.as_str(), config.env.split.as_str()), ("alfworld", "L2"));
        assert_eq!(config.rl.init, trainer::config::COLDSTART_INIT);
        assert_eq!(config.model.path, trainer::config::SCRATCH_MODEL);
        assert_eq!(config.advantage.algo, Algo::GrpoMr);
        assert_eq!(config.rl.final_eval, ["L0", "L1", "L2"]);
        assert_eq!(config.env.protocol, trainer::envs::Protocol::Published);
    }

    #[test]
    fn the_strict_presets_are_their_main_jobs_with_only_the_name_and_protocol_changed() {
        let pairs = [
            (MAIN_PRESET, include_str!("../../../configs/cpu-l2-strict.toml")),
            (
                include_str!("../../../configs/cpu-sciworld.toml"),
                include_str!("../../../configs/cpu-sciworld-strict.toml"),
            ),
        ];
        for (main, strict) in pairs {
            let strict = RunConfig::from_toml(strict).unwrap();
            assert_eq!(strict.env.protocol, trainer::envs::Protocol::Strict);
            let mut main = RunConfig::from_toml(main).unwrap();
            assert_eq!(main.env.protocol, trainer::envs::Protocol::Published);
            main.run.name = strict.run.name.clone();
            main.env.protocol = strict.env.protocol;
            assert_eq!(main, strict);
        }
    }
}
