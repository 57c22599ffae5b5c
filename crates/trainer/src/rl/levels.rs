//! One RL run per level (`rl.per_level`), as the authors' code trains: its
//! `generalization_level` picks the level's training games for RL and its test games for
//! validation, so each level of their tables comes from a model trained on that level's own
//! training games. ScienceWorld's L0 and L1 train on the same games (29 tasks) and L2 on 19,
//! so the 10 tasks L2 holds out are in L0's test but never in an L2 run's training.
//!
//! The `rl.final_eval` levels are grouped by their training games; each group is one run,
//! named after its first level, that evaluates every level of the group:
//!
//! ```text
//! DIR/config.toml            the config as given (rl.per_level = true)
//! DIR/coldstart/, DIR/sft/   one cold start and SFT, when every run's cold start draws
//!                            the same games (`published`); under `strict` each run has its own
//! DIR/L0/, DIR/L2/           a run directory each (as `rlvmr train` writes one), the first
//!                            playing L0 and L1 at the end, the second L2
//! ```
//!
//! Resumed, each run continues from its own checkpoints, and a run that already wrote its
//! final evaluations is not played again.

use std::path::{Path, PathBuf};

use crate::config::{RunConfig, COLDSTART_INIT};
use crate::error::{Result, TrainerError};
use crate::record::TaskRef;
use crate::rundir::RunDir;

use super::{latest_checkpoint, resolve_init, train, RlReport};

/// One RL run of a per-level job.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelRun {
    /// The levels its final model plays; the first names the run and gives its training games.
    pub levels: Vec<String>,
    /// Its run directory, `DIR/<first level>`.
    pub dir: PathBuf,
}

/// What a per-level job did: each run's report, or `None` for a run finished before.
#[derive(Debug)]
pub struct LevelOutcome {
    pub run: LevelRun,
    pub report: Option<RlReport>,
}

/// The `final_eval` levels grouped by equal training games (`train_games` of each, in
/// order), each group a run under `out`.
pub fn plan(levels: &[String], train_games: &[Vec<TaskRef>], out: &Path) -> Vec<LevelRun> {
    let mut runs: Vec<(usize, LevelRun)> = Vec::new();
    for (i, level) in levels.iter().enumerate() {
        match runs.iter_mut().find(|(first, _)| train_games[*first] == train_games[i]) {
            Some((_, run)) => run.levels.push(level.clone()),
            None => runs.push((i, LevelRun { levels: vec![level.clone()], dir: out.join(level) })),
        }
    }
    runs.into_iter().map(|(_, run)| run).collect()
}

/// The config of `run`: the job's, at the run's first level, playing the run's levels at
/// the end, starting from `init`.
pub fn run_config(job: &RunConfig, run: &LevelRun, init: &str) -> RunConfig {
    let mut config = job.clone();
    config.env.split = run.levels[0].clone();
    config.rl.final_eval = run.levels.clone();
    config.rl.per_level = false;
    config.rl.init = init.to_string();
    if let Some(&iterations) = job.rl.level_iterations.get(&run.levels[0]) {
        config.rl.iterations = iterations;
    }
    config.rl.level_iterations.clear();
    config
}

/// Every `rl.level_iterations` level names one of `runs` (a level that trains in another
/// level's run, as L1 in L0's, would otherwise be ignored without a word).
fn check_level_iterations(config: &RunConfig, runs: &[LevelRun]) -> Result<()> {
    for level in config.rl.level_iterations.keys() {
        if let Some(run) = runs.iter().find(|run| run.levels.contains(level) && &run.levels[0] != level) {
            return Err(TrainerError::value(
                "rl.level_iterations",
                format!(
                    "{level} trains in the {first} run (the same training games), which {first} names: set {first} instead",
                    first = run.levels[0]
                ),
            ));
        }
    }
    Ok(())
}

/// Runs the per-level job `config` into `out` (see the module's doc).
pub fn train_levels(config: &RunConfig, out: &Path, resume: bool) -> Result<Vec<LevelOutcome>> {
    config.validate()?;
    let levels = &config.rl.final_eval;
    let mut train_games = Vec::with_capacity(levels.len());
    let mut coldstart_games = Vec::with_capacity(levels.len());
    for level in levels {
        let provider = config.open_level(level)?;
        train_games.push(provider.train_tasks());
        coldstart_games.push(provider.coldstart_tasks(config.env.protocol));
    }
    let runs = plan(levels, &train_games, out);
    check_level_iterations(config, &runs)?;
    let dir = RunDir::create(out, config)?;
    let init = if config.rl.init == COLDSTART_INIT && !one_coldstart(&coldstart_games) {
        // Each run makes its own cold start from its own games.
        COLDSTART_INIT.to_string()
    } else {
        resolve_init(config, &dir)?
    };
    let mut outcomes = Vec::with_capacity(runs.len());
    for run in runs {
        let run_config = run_config(config, &run, &init);
        if resume && finished(&run_config, &run)? {
            eprintln!("{}: finished before (its final evaluations are in {})", run.dir.display(), run.dir.join("eval").display());
            outcomes.push(LevelOutcome { run, report: None });
            continue;
        }
        eprintln!("RL at {} into {} (its final model plays {})", run.levels[0], run.dir.display(), run.levels.join(", "));
        let report = train(&run_config, &run.dir, resume)
            .map_err(|e| TrainerError::context(format!("the {} run in {}", run.levels[0], run.dir.display()), e))?;
        outcomes.push(LevelOutcome { run, report: Some(report) });
    }
    Ok(outcomes)
}

/// The runs in `dir`: the level runs of a per-level job (`DIR/L0`, `DIR/L1`, `DIR/L2` that
/// hold metrics), or `dir` itself when it is a run (or holds none): what `rlvmr report` and
/// `rlvmr advantages` read when given a job's folder.
pub fn runs_in(dir: &Path) -> Vec<PathBuf> {
    if dir.join(METRICS).is_file() {
        return vec![dir.to_path_buf()];
    }
    let runs: Vec<PathBuf> =
        crate::config::LEVELS.iter().map(|level| dir.join(level)).filter(|run| run.join(METRICS).is_file()).collect();
    if runs.is_empty() {
        vec![dir.to_path_buf()]
    } else {
        runs
    }
}

/// A run's metrics file, which tells a run's folder from a per-level job's.
const METRICS: &str = "metrics.jsonl";

/// Every level's cold start draws the same games.
fn one_coldstart(games: &[Vec<TaskRef>]) -> bool {
    games.windows(2).all(|pair| pair[0] == pair[1])
}

/// `run` has done its iterations and written each of its final evaluations.
fn finished(config: &RunConfig, run: &LevelRun) -> Result<bool> {
    let done = match latest_checkpoint(&run.dir)? {
        Some((_, state)) => state.iteration >= config.rl.iterations,
        None => false,
    };
    Ok(done
        && run.dir.join("final").is_dir()
        && run.levels.iter().all(|level| run.dir.join("eval").join(format!("{level}.json")).is_file()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn games(names: &[&str]) -> Vec<TaskRef> {
        names.iter().map(|n| TaskRef { game: n.to_string(), task_type: "t".into() }).collect()
    }

    fn levels(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn levels_with_the_same_training_games_share_a_run_named_after_the_first() {
        let shared = games(&["a/1", "b/1"]);
        let runs = plan(
            &levels(&["L0", "L1", "L2"]),
            &[shared.clone(), shared, games(&["a/1"])],
            Path::new("out"),
        );
        assert_eq!(
            runs,
            [
                LevelRun { levels: levels(&["L0", "L1"]), dir: PathBuf::from("out/L0") },
                LevelRun { levels: levels(&["L2"]), dir: PathBuf::from("out/L2") },
            ]
        );
        // Order follows the listed levels; every level lands in exactly one run.
        let runs = plan(&levels(&["L2", "L0"]), &[games(&["x"]), games(&["y"])], Path::new("o"));
        assert_eq!(runs.iter().map(|r| r.levels.clone()).collect::<Vec<_>>(), [levels(&["L2"]), levels(&["L0"])]);
    }

    #[test]
    fn a_run_config_trains_at_its_first_level_and_plays_its_levels() {
        let mut job = RunConfig::default();
        job.rl.per_level = true;
        job.rl.final_eval = levels(&["L0", "L1", "L2"]);
        let run = LevelRun { levels: levels(&["L0", "L1"]), dir: PathBuf::from("out/L0") };
        let config = run_config(&job, &run, "out/sft/final");
        assert_eq!(config.env.split, "L0");
        assert_eq!(config.rl.final_eval, ["L0", "L1"]);
        assert!(!config.rl.per_level, "a level's run is an ordinary run");
        assert_eq!(config.rl.init, "out/sft/final");
        // Nothing else changes.
        let mut back = config.clone();
        back.env.split = job.env.split.clone();
        back.rl.final_eval = job.rl.final_eval.clone();
        back.rl.per_level = true;
        back.rl.init = job.rl.init.clone();
        assert_eq!(back, job);
    }

    #[test]
    fn level_iterations_set_the_runs_they_name_and_refuse_a_level_that_shares_a_run() {
        let mut job = RunConfig::default();
        job.rl.per_level = true;
        job.rl.iterations = 2;
        job.rl.final_eval = levels(&["L0", "L1", "L2"]);
        job.rl.level_iterations.insert("L0".into(), 5);
        let l0 = LevelRun { levels: levels(&["L0", "L1"]), dir: PathBuf::from("out/L0") };
        let l2 = LevelRun { levels: levels(&["L2"]), dir: PathBuf::from("out/L2") };
        let l0_config = run_config(&job, &l0, "init");
        assert_eq!(l0_config.rl.iterations, 5);
        assert!(l0_config.rl.level_iterations.is_empty(), "a level's run is an ordinary run");
        assert_eq!(run_config(&job, &l2, "init").rl.iterations, 2);
        let runs = [l0, l2];
        assert!(check_level_iterations(&job, &runs).is_ok());
        job.rl.level_iterations.insert("L1".into(), 3);
        let e = check_level_iterations(&job, &runs).unwrap_err().to_string();
        assert!(e.contains("rl.level_iterations") && e.contains("L1 trains in the L0 run"), "{e}");
    }

    #[test]
    fn a_job_folder_stands_for_its_level_runs_and_a_run_for_itself() {
        let dir = std::env::temp_dir().join(format!("rlvmr-levels-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for run in ["job/L0", "job/L2", "job/sft", "run"] {
            std::fs::create_dir_all(dir.join(run)).unwrap();
        }
        for run in ["job/L0", "job/L2", "run"] {
            std::fs::write(dir.join(run).join(METRICS), "").unwrap();
        }
        assert_eq!(runs_in(&dir.join("job")), [dir.join("job/L0"), dir.join("job/L2")]);
        assert_eq!(runs_in(&dir.join("run")), [dir.join("run")]);
        // A folder that is neither is passed on as it is, for the reader to name.
        assert_eq!(runs_in(&dir.join("job/sft")), [dir.join("job/sft")]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_cold_start_is_shared_only_when_every_level_draws_the_same_games() {
        assert!(one_coldstart(&[games(&["a"]), games(&["a"]), games(&["a"])]));
        assert!(!one_coldstart(&[games(&["a", "b"]), games(&["a"])]));
        assert!(one_coldstart(&[games(&["a"])]));
    }
}
