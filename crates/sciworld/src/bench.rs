//! The benchmark behind `rlvmr sciworld bench`: this crate beside the official Python client on
//! the same action sequences, both fetching the valid-action list every step. Figures are
//! reported as ratios against the reference measured in the same run.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Barrier;
use std::time::Instant;

use crate::env::{EnvConfig, SciWorldEnv};
use crate::error::{Result, SciError};
use crate::pool::start_envs;

/// One action sequence to replay.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Episode {
    pub task: String,
    pub variation: usize,
    pub commands: Vec<String>,
}

/// What to run.
pub struct BenchOptions {
    pub episodes: Vec<Episode>,
    /// Environments for the throughput figure.
    pub parallel_envs: usize,
    /// The official client: a Python with `scienceworld==1.2.3` and psutil, and the script
    /// `tools/sciworld_ref_bench.py`. None skips it.
    pub reference: Option<(PathBuf, PathBuf)>,
}

/// One side's figures.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Figures {
    pub steps: usize,
    /// Each timed step.
    pub step_seconds: Vec<f64>,
    /// Resident memory of one environment (the JVM, plus the Python process for the reference).
    pub rss_bytes: u64,
    pub parallel_envs: usize,
    pub parallel_steps: usize,
    pub parallel_seconds: f64,
}

impl Figures {
    fn mean_ms(&self) -> f64 {
        1000.0 * self.step_seconds.iter().sum::<f64>() / self.step_seconds.len().max(1) as f64
    }

    fn median_ms(&self) -> f64 {
        let mut sorted = self.step_seconds.clone();
        sorted.sort_by(f64::total_cmp);
        sorted.get(sorted.len() / 2).map_or(0.0, |s| 1000.0 * s)
    }

    fn throughput(&self) -> f64 {
        self.parallel_steps as f64 / self.parallel_seconds.max(1e-9)
    }
}

/// Both sides' figures.
pub struct BenchReport {
    pub ours: Figures,
    pub reference: Option<Figures>,
    /// This process's own resident memory after the latency run (shared by all environments).
    pub driver_rss_bytes: u64,
}

/// The gold episodes of a transcript file (`.jsonl.gz` as `tools/record_sciworld.py` writes),
/// at most `limit` of them.
pub fn episodes_from_transcripts(path: &std::path::Path, limit: usize) -> Result<Vec<Episode>> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| SciError::io(path, e))?;
    let mut text = String::new();
    flate2::read::GzDecoder::new(file)
        .read_to_string(&mut text)
        .map_err(|e| SciError::io(path, e))?;
    let mut episodes = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let value: serde_json::Value = serde_json::from_str(line).map_err(|e| {
            SciError::BadCommand(format!("{}:{}: not JSON: {e}", path.display(), n + 1))
        })?;
        if value["kind"] != "gold" {
            continue;
        }
        let episode: Episode = serde_json::from_value(value).map_err(|e| {
            SciError::BadCommand(format!("{}:{}: not an episode: {e}", path.display(), n + 1))
        })?;
        episodes.push(episode);
    }
    episodes.truncate(limit);
    Ok(episodes)
}

/// Replay every episode in one environment, timing each step (valid actions fetched).
fn latency(env: &mut SciWorldEnv, episodes: &[Episode], timings: &mut Vec<f64>) -> Result<()> {
    for episode in episodes {
        env.reset_to(&episode.task, episode.variation)?;
        for command in &episode.commands {
            let started = Instant::now();
            env.step_command(command)?;
            timings.push(started.elapsed().as_secs_f64());
        }
    }
    Ok(())
}

/// Resident set size of a process, from /proc.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn measure_ours(config: &EnvConfig, options: &BenchOptions) -> Result<Figures> {
    let mut env = SciWorldEnv::new(config.clone())?;
    let mut timings = Vec::new();
    latency(&mut env, &options.episodes, &mut timings)?;
    let pid = env.jvm_pid().ok_or(SciError::NoTask)?;
    let rss = rss_bytes(pid).unwrap_or(0);
    drop(env);

    let n = options.parallel_envs.max(1);
    let mut envs = start_envs(n, config)?;
    let barrier = Barrier::new(n + 1);
    let mut began = Instant::now();
    let counts: Vec<Result<(usize, Instant)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = envs
            .iter_mut()
            .enumerate()
            .map(|(i, env)| {
                let share: Vec<Episode> = options
                    .episodes
                    .iter()
                    .skip(i)
                    .step_by(n)
                    .cloned()
                    .collect();
                let barrier = &barrier;
                scope.spawn(move || {
                    barrier.wait();
                    let mut timings = Vec::new();
                    latency(env, &share, &mut timings)?;
                    Ok((timings.len(), Instant::now()))
                })
            })
            .collect();
        barrier.wait();
        began = Instant::now();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(SciError::Start("a bench thread panicked".into())))
            })
            .collect()
    });
    let mut parallel_steps = 0;
    let mut last = began;
    for count in counts {
        let (steps, finished) = count?;
        parallel_steps += steps;
        last = last.max(finished);
    }
    Ok(Figures {
        steps: timings.len(),
        step_seconds: timings,
        rss_bytes: rss,
        parallel_envs: n,
        parallel_steps,
        parallel_seconds: (last - began).as_secs_f64(),
    })
}

fn measure_reference(
    python: &PathBuf,
    script: &PathBuf,
    options: &BenchOptions,
) -> Result<Figures> {
    let mut child = Command::new(python)
        .arg(script)
        .arg("--envs")
        .arg(options.parallel_envs.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            SciError::Start(format!(
                "cannot run the reference {}: {e}",
                python.display()
            ))
        })?;
    let mut input = String::new();
    for episode in &options.episodes {
        input.push_str(&serde_json::to_string(episode).unwrap_or_default());
        input.push('\n');
    }
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(input.as_bytes())
            .map_err(|e| SciError::StartIo { what: "writing to the reference".into(), source: e })?;
    }
    let output = child
        .wait_with_output()
        .map_err(|e| SciError::StartIo { what: "waiting for the reference".into(), source: e })?;
    if !output.status.success() {
        return Err(SciError::Start(format!(
            "the reference bench failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    serde_json::from_slice(&output.stdout).map_err(|e| SciError::Protocol {
        method: "reference bench".to_string(),
        detail: format!("bad JSON from the reference: {e}"),
    })
}

/// Run both sides (the reference first, so our side is not favoured by a warm page cache).
pub fn run(config: &EnvConfig, options: &BenchOptions) -> Result<BenchReport> {
    let mut config = config.clone();
    config.valid_actions = true;
    let reference = match &options.reference {
        Some((python, script)) => Some(measure_reference(python, script, options)?),
        None => None,
    };
    let ours = measure_ours(&config, options)?;
    let driver_rss_bytes = rss_bytes(std::process::id()).unwrap_or(0);
    Ok(BenchReport {
        ours,
        reference,
        driver_rss_bytes,
    })
}

impl BenchReport {
    /// A Markdown table: our figures, the reference's, and the ratio (reference / ours for
    /// time, ours / reference for throughput and memory).
    pub fn table(&self) -> String {
        let o = &self.ours;
        let mb = |b: u64| b as f64 / (1024.0 * 1024.0);
        let mut rows = vec![
            (
                "step latency, mean (ms)",
                o.mean_ms(),
                self.reference.as_ref().map(Figures::mean_ms),
                true,
            ),
            (
                "step latency, median (ms)",
                o.median_ms(),
                self.reference.as_ref().map(Figures::median_ms),
                true,
            ),
            (
                "memory per environment (MB RSS)",
                mb(o.rss_bytes),
                self.reference.as_ref().map(|r| mb(r.rss_bytes)),
                true,
            ),
        ];
        rows.push((
            "throughput, parallel envs (steps/s)",
            o.throughput(),
            self.reference.as_ref().map(Figures::throughput),
            false,
        ));
        let mut out = format!(
            "{} steps per side; {} environments in parallel; ours: JVM RSS per environment (the Rust \
             process, {:.0} MB, is shared by all); reference: Python process + its JVM\n\n| measure | rlvmr sciworld | official Python client | advantage (>1: ours better) |\n|---|---|---|---|\n",
            o.steps,
            o.parallel_envs,
            mb(self.driver_rss_bytes)
        );
        for (name, ours, theirs, lower_is_better) in rows {
            let (theirs_text, ratio) = match theirs {
                Some(t) if lower_is_better => {
                    (format!("{t:.1}"), format!("{:.2}x", t / ours.max(1e-9)))
                }
                Some(t) => (format!("{t:.1}"), format!("{:.2}x", ours / t.max(1e-9))),
                None => ("-".to_string(), "-".to_string()),
            };
            out.push_str(&format!(
                "| {name} | {ours:.1} | {theirs_text} | {ratio} |\n"
            ));
        }
        out
    }
}
