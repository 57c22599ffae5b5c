//! The engine benchmark: reset and step latency replaying recorded transcripts,
//! memory per live game, and the reference engine measured in the same run.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use serde::Deserialize;
use textworld::Session;

use crate::data::AlfworldData;
use crate::env::load_game;

#[derive(Debug, Deserialize)]
struct TranscriptStep {
    command: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Transcript {
    game: String,
    steps: Vec<TranscriptStep>,
}

/// Latency statistics in microseconds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Latency {
    pub count: usize,
    pub mean_us: f64,
    pub median_us: f64,
    pub p99_us: f64,
}

impl Latency {
    fn of(mut samples: Vec<f64>) -> Latency {
        if samples.is_empty() {
            return Latency::default();
        }
        samples.sort_by(|a, b| a.total_cmp(b));
        let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
        Latency { count: samples.len(), mean_us: samples.iter().sum::<f64>() / samples.len() as f64, median_us: at(0.5), p99_us: at(0.99) }
    }
}

/// The reference engine's figures (from tools/ref_bench.py).
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct ReferenceFigures {
    pub games: usize,
    pub steps: usize,
    pub reset_ms_mean: f64,
    pub reset_ms_median: f64,
    pub step_us_mean: f64,
    pub step_us_median: f64,
    pub mb_per_game: f64,
    #[serde(default)]
    pub mismatches: usize,
}

#[derive(Debug, Clone)]
pub struct BenchReport {
    pub games: usize,
    pub reset: Latency,
    pub step: Latency,
    pub live_games: usize,
    pub kb_per_live_game: f64,
    pub peak_rss_mb: f64,
    /// The same measurement restricted to the games the reference replayed.
    pub sample_reset: Latency,
    pub sample_step: Latency,
    pub reference: Option<ReferenceFigures>,
    pub reference_error: Option<String>,
}

#[derive(Debug, Clone)]
pub struct BenchOptions {
    pub transcripts: Vec<PathBuf>,
    /// Live sessions kept at once for the memory figure.
    pub live_games: usize,
    /// Python of a venv with alfworld==0.4.2, and tools/ref_bench.py; `None` skips the reference.
    pub reference: Option<(PathBuf, PathBuf)>,
    pub reference_games: usize,
    /// Where to unpack the sample games for the reference when the data is a zip.
    pub scratch: PathBuf,
}

fn read_transcripts(files: &[PathBuf]) -> Result<Vec<Transcript>, String> {
    let mut out = Vec::new();
    for file in files {
        let f = std::fs::File::open(file).map_err(|e| format!("cannot open {}: {e}", file.display()))?;
        let reader: Box<dyn Read> = if file.to_string_lossy().ends_with(".gz") { Box::new(flate2::read::GzDecoder::new(f)) } else { Box::new(f) };
        for (i, line) in BufReader::new(reader).lines().enumerate() {
            let line = line.map_err(|e| format!("{}: {e}", file.display()))?;
            out.push(serde_json::from_str(&line).map_err(|e| format!("{} line {}: {e}", file.display(), i + 1))?);
        }
    }
    Ok(out)
}

/// Current and peak resident memory in bytes (Linux; zeros elsewhere).
pub fn rss_bytes() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status.lines().find(|l| l.starts_with(name)).and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0) * 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn time_replays(data: &AlfworldData, transcripts: &[&Transcript]) -> Result<(Vec<f64>, Vec<f64>), String> {
    let (mut resets, mut steps) = (Vec::new(), Vec::new());
    for t in transcripts {
        let text = data.read(&t.game).map_err(|e| e.to_string())?;
        let start = Instant::now();
        let game = Arc::new(load_game(&text).map_err(|e| format!("{}: {e}", t.game))?);
        let (mut session, _) = Session::start(game).map_err(|e| format!("{}: {e}", t.game))?;
        resets.push(start.elapsed().as_secs_f64() * 1e6);
        for step in &t.steps[1..] {
            let command = step.command.as_deref().unwrap_or("");
            let start = Instant::now();
            session.step(command).map_err(|e| format!("{}: {e}", t.game))?;
            steps.push(start.elapsed().as_secs_f64() * 1e6);
        }
    }
    Ok((resets, steps))
}

fn unpack_sample(data: &AlfworldData, games: &[&str], scratch: &Path) -> Result<PathBuf, String> {
    if data.location().is_dir() {
        return Ok(data.location().to_path_buf());
    }
    for game in games {
        let path = scratch.join(game);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        std::fs::write(&path, data.read(game).map_err(|e| e.to_string())?).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(scratch.to_path_buf())
}

fn run_reference(python: &Path, script: &Path, data_dir: &Path, files: &[PathBuf], games: usize) -> Result<ReferenceFigures, String> {
    let output = Command::new(python)
        .arg(script)
        .arg("--games")
        .arg(games.to_string())
        .arg("--data")
        .arg(data_dir)
        .args(files)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    if !output.status.success() {
        let err = String::from_utf8_lossy(&output.stderr);
        return Err(format!("reference benchmark failed: {}", err.lines().last().unwrap_or("")));
    }
    serde_json::from_slice(&output.stdout).map_err(|e| format!("unreadable reference output: {e}"))
}

/// Runs the benchmark over the transcripts' games.
pub fn run(data: &AlfworldData, opts: &BenchOptions) -> Result<BenchReport, String> {
    let transcripts = read_transcripts(&opts.transcripts)?;
    let all: Vec<&Transcript> = transcripts.iter().collect();
    let (resets, steps) = time_replays(data, &all)?;
    let mut game_paths: Vec<&str> = transcripts.iter().map(|t| t.game.as_str()).collect();
    game_paths.sort_unstable();
    game_paths.dedup();

    // The reference replays the walkthroughs of the first N games in file order;
    // time our engine on exactly those for a like-for-like ratio.
    let mut sample_games: Vec<&str> = Vec::new();
    for t in &transcripts {
        if !sample_games.contains(&t.game.as_str()) && sample_games.len() < opts.reference_games {
            sample_games.push(&t.game);
        }
    }
    let sample: Vec<&Transcript> = sample_games
        .iter()
        .filter_map(|g| transcripts.iter().find(|t| t.game == *g && t.steps.len() > 1 && is_walkthrough(t, data)))
        .collect();
    let (sample_resets, sample_steps) = time_replays(data, &sample)?;

    let (reference, reference_error) = match &opts.reference {
        None => (None, Some("not run (no reference python given)".to_string())),
        Some((python, script)) => match unpack_sample(data, &sample_games, &opts.scratch).and_then(|dir| run_reference(python, script, &dir, &opts.transcripts, opts.reference_games)) {
            Ok(r) => (Some(r), None),
            Err(e) => (None, Some(e)),
        },
    };

    let texts: Vec<String> = game_paths.iter().map(|g| data.read(g).map_err(|e| e.to_string())).collect::<Result<_, _>>()?;
    let (rss_before, _) = rss_bytes();
    let mut live = Vec::with_capacity(opts.live_games);
    for i in 0..opts.live_games {
        let text = &texts[i % texts.len()];
        // Each live game loads its own copy: no sharing flatters the figure.
        let game = Arc::new(load_game(text).map_err(|e| e.to_string())?);
        live.push(Session::start(game).map_err(|e| e.to_string())?.0);
    }
    let (rss_after, peak) = rss_bytes();
    let kb_per_live_game = rss_after.saturating_sub(rss_before) as f64 / 1024.0 / opts.live_games.max(1) as f64;
    drop(live);

    Ok(BenchReport {
        games: game_paths.len(),
        reset: Latency::of(resets),
        step: Latency::of(steps),
        live_games: opts.live_games,
        kb_per_live_game,
        peak_rss_mb: peak as f64 / 1048576.0,
        sample_reset: Latency::of(sample_resets),
        sample_step: Latency::of(sample_steps),
        reference,
        reference_error,
    })
}

fn is_walkthrough(t: &Transcript, data: &AlfworldData) -> bool {
    // Walkthrough episodes play exactly the file's walkthrough.
    let Ok(text) = data.read(&t.game) else { return false };
    let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) else { return false };
    let walk: Vec<&str> = value.get("walkthrough").and_then(|w| w.as_array()).map(|w| w.iter().filter_map(|c| c.as_str()).collect()).unwrap_or_default();
    let cmds: Vec<&str> = t.steps[1..].iter().filter_map(|s| s.command.as_deref()).collect();
    walk == cmds
}

impl BenchReport {
    /// A markdown table.
    pub fn table(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!(
            "Native engine, {} games, {} resets, {} steps (all recorded episodes):\n\n",
            self.games, self.reset.count, self.step.count
        ));
        s.push_str("| measure | mean | median | p99 |\n|---|---|---|---|\n");
        s.push_str(&format!("| reset (load + intro) | {:.2} ms | {:.2} ms | {:.2} ms |\n", self.reset.mean_us / 1e3, self.reset.median_us / 1e3, self.reset.p99_us / 1e3));
        s.push_str(&format!("| step | {:.1} µs | {:.1} µs | {:.1} µs |\n", self.step.mean_us, self.step.median_us, self.step.p99_us));
        s.push_str(&format!(
            "\nMemory: {:.0} KB per live game ({} live games, each loaded separately); peak RSS {:.0} MB.\n",
            self.kb_per_live_game, self.live_games, self.peak_rss_mb
        ));
        match &self.reference {
            Some(r) => {
                s.push_str(&format!(
                    "\nSame run, the {} sampled games' walkthroughs ({} steps), reference = alfworld 0.4.2 / textworld 1.7.0:\n\n",
                    r.games, r.steps
                ));
                s.push_str("| measure | reference | native | speed-up |\n|---|---|---|---|\n");
                let ratio = |a: f64, b: f64| if b > 0.0 { format!("{:.0}x", a / b) } else { "-".into() };
                s.push_str(&format!(
                    "| reset, mean | {:.1} ms | {:.2} ms | {} |\n",
                    r.reset_ms_mean,
                    self.sample_reset.mean_us / 1e3,
                    ratio(r.reset_ms_mean * 1e3, self.sample_reset.mean_us)
                ));
                s.push_str(&format!(
                    "| reset, median | {:.1} ms | {:.2} ms | {} |\n",
                    r.reset_ms_median,
                    self.sample_reset.median_us / 1e3,
                    ratio(r.reset_ms_median * 1e3, self.sample_reset.median_us)
                ));
                s.push_str(&format!("| step, mean | {:.0} µs | {:.1} µs | {} |\n", r.step_us_mean, self.sample_step.mean_us, ratio(r.step_us_mean, self.sample_step.mean_us)));
                s.push_str(&format!(
                    "| step, median | {:.0} µs | {:.1} µs | {} |\n",
                    r.step_us_median,
                    self.sample_step.median_us,
                    ratio(r.step_us_median, self.sample_step.median_us)
                ));
                s.push_str(&format!(
                    "| memory per live game | {:.1} MB | {:.2} MB | {} |\n",
                    r.mb_per_game,
                    self.kb_per_live_game / 1024.0,
                    ratio(r.mb_per_game * 1024.0, self.kb_per_live_game)
                ));
                if r.mismatches > 0 {
                    s.push_str(&format!("\nWarning: the reference saw {} observation mismatches against the transcripts.\n", r.mismatches));
                }
            }
            None => s.push_str(&format!("\nReference: {}\n", self.reference_error.as_deref().unwrap_or("not run"))),
        }
        s
    }
}
