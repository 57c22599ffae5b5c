//! `rlvmr sciworld ...`: replay command lists, play at the terminal, check and record gold
//! paths, list tasks, benchmark against the official Python client.

use std::io::{self, BufRead, Write};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Subcommand;

use sciworld::replay::{replay, ReplayRequest};
use sciworld::{EnvConfig, GoldOracle, Level, OfficialSplit, Phase, SciWorldEnv};

use crate::jsonl;

#[derive(clap::Args, Clone)]
pub struct EnvArgs {
    /// Simplifications passed to load ("easy", "" for none, or a comma-separated list).
    #[arg(long, default_value = sciworld::DEFAULT_SIMPLIFICATIONS)]
    simplifications: String,
    /// Done once the simulator's move count exceeds this.
    #[arg(long, default_value_t = sciworld::DEFAULT_STEP_LIMIT)]
    step_limit: i64,
}

impl EnvArgs {
    fn config(&self, valid_actions: bool) -> Result<EnvConfig> {
        let mut config = EnvConfig::from_default_jar()?;
        config.simplifications = self.simplifications.clone();
        config.step_limit = self.step_limit;
        config.valid_actions = valid_actions;
        Ok(config)
    }
}

/// What a recording of gold paths covers and where it goes.
#[derive(clap::Args, Clone)]
pub struct RecordArgs {
    /// Tasks (names or indices); default all 30.
    #[arg(long = "task")]
    tasks: Vec<String>,
    /// train, dev or test.
    #[arg(long, default_value = "train")]
    split: String,
    /// Gold-path JVMs working side by side.
    #[arg(long, default_value_t = 2)]
    jobs: usize,
    /// The file to write (and to resume from).
    #[arg(long)]
    out: PathBuf,
    #[command(flatten)]
    env: EnvArgs,
}

#[derive(Subcommand)]
pub enum SciworldCommand {
    /// Read JSON lines {"task": name or index, "variation": int, "commands": [..]} on stdin;
    /// write {"task", "variation", "task_description", "steps": [{"command", "observation",
    /// "score", "done"}, ..]} per line (the first step is the reset, command null).
    Replay {
        #[command(flatten)]
        env: EnvArgs,
    },
    /// Play a task at the terminal; `quit` or end of input leaves.
    Play {
        /// Task name or index.
        task: String,
        #[arg(long, default_value_t = 0)]
        variation: usize,
        /// Print the valid actions after each step.
        #[arg(long)]
        valid: bool,
        #[command(flatten)]
        env: EnvArgs,
    },
    /// Replay gold paths and report their final scores (exit status 1 unless all reach 100).
    Gold {
        /// Tasks (names or indices); default all 30.
        #[arg(long = "task")]
        tasks: Vec<String>,
        /// train, dev or test.
        #[arg(long, default_value = "test")]
        split: String,
        /// The first N variations of the split, per task.
        #[arg(long, default_value_t = 1)]
        per_task: usize,
        #[command(flatten)]
        env: EnvArgs,
    },
    /// Record the playable length (door openings left out) of every gold path of a split into
    /// a tab-separated file (`task`, `variation`, `actions`), sorted; run again, it goes on
    /// from the rows the file holds. The committed crates/sciworld/data/gold_lengths_train.tsv.gz
    /// is `--split train` gzipped.
    GoldLengths {
        #[command(flatten)]
        record: RecordArgs,
    },
    /// Record the gold path of every variation of a split as an agent plays it (door
    /// openings left out, walks made teleports, objects named as the room shows them; a
    /// path longer than --cut-at cut to its opening) as JSON lines, sorted; run again, it
    /// goes on from the lines the file holds. The cold start reads the committed
    /// crates/sciworld/data/gold_paths_train.jsonl.gz (`--split train`, gzipped) before it
    /// asks a JVM.
    GoldPaths {
        /// Longer paths are recorded as their first this many actions (the step limit).
        #[arg(long, default_value_t = 30)]
        cut_at: usize,
        #[command(flatten)]
        record: RecordArgs,
    },
    /// List tasks with their variations per official split, or the games of an RLVMR level.
    Tasks {
        /// L0, L1 or L2: list that level's (task, variation) games instead.
        #[arg(long)]
        level: Option<String>,
        /// With --level: train or test.
        #[arg(long, default_value = "test")]
        phase: String,
    },
    /// Benchmark beside the official Python client on the same action sequences (the gold
    /// episodes of the transcripts), both fetching the valid actions every step.
    Bench {
        /// Transcripts (.jsonl.gz); default: the committed official-client transcripts.
        #[arg(long)]
        transcripts: Option<PathBuf>,
        /// Use at most this many episodes.
        #[arg(long, default_value_t = 30)]
        episodes: usize,
        /// Environments for the throughput figure.
        #[arg(long, default_value_t = 8)]
        envs: usize,
        /// Python with scienceworld==1.2.3 and psutil (default: the venv tools/record_sciworld.sh makes).
        #[arg(long)]
        reference_python: Option<PathBuf>,
        /// Skip the official client.
        #[arg(long)]
        no_reference: bool,
    },
}

pub fn run(command: SciworldCommand) -> Result<ExitCode> {
    match command {
        SciworldCommand::Replay { env } => replay_stdin(&env),
        SciworldCommand::Play { task, variation, valid, env } => play(&task, variation, valid, &env),
        SciworldCommand::Gold { tasks, split, per_task, env } => gold(&tasks, &split, per_task, &env),
        SciworldCommand::GoldLengths { record } => gold_lengths(&record),
        SciworldCommand::GoldPaths { cut_at, record } => gold_paths(cut_at, &record),
        SciworldCommand::Tasks { level, phase } => list_tasks(level.as_deref(), &phase),
        SciworldCommand::Bench { transcripts, episodes, envs, reference_python, no_reference } => {
            bench(transcripts, episodes, envs, reference_python, no_reference)
        }
    }
}

fn error_line(line: usize, message: &str) -> String {
    serde_json::json!({ "line": line, "error": message }).to_string()
}

fn replay_stdin(args: &EnvArgs) -> Result<ExitCode> {
    let mut env = SciWorldEnv::new(args.config(false)?)?;
    let mut out = io::BufWriter::new(io::stdout().lock());
    let (mut games, mut failed) = (0usize, 0usize);
    jsonl::for_each_line(io::stdin().lock(), |n, line| {
        games += 1;
        let result = line
            .map_err(|e| e.to_string())
            .and_then(|text| serde_json::from_str::<ReplayRequest>(text).map_err(|e| format!("bad request: {e}")))
            .and_then(|request| replay(&mut env, &request).map_err(|e| e.to_string()));
        match result {
            Ok(record) => writeln!(out, "{}", serde_json::to_string(&record)?)?,
            Err(message) => {
                failed += 1;
                eprintln!("line {n}: {message}");
                writeln!(out, "{}", error_line(n, &message))?;
            }
        }
        out.flush()?;
        Ok(())
    })?;
    if failed > 0 {
        eprintln!("{failed} of {games} games failed");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn play(task: &str, variation: usize, show_valid: bool, args: &EnvArgs) -> Result<ExitCode> {
    let mut env = SciWorldEnv::new(args.config(show_valid)?)?;
    let first = env.reset_to(task, variation)?;
    let mut out = io::stdout().lock();
    writeln!(out, "{}\n\n{}", env.task_description().unwrap_or_default(), first.observation)?;
    let show = |out: &mut dyn Write, step: &sciworld::SciStep| -> io::Result<()> {
        writeln!(out, "[score {}, moves {}{}]", step.score, step.moves, if step.done { ", done" } else { "" })?;
        if let Some(valid) = &step.valid_actions {
            writeln!(out, "[valid: {}]", valid.join(", "))?;
        }
        Ok(())
    };
    show(&mut out, &first)?;
    let mut input = io::stdin().lock();
    let mut buf = Vec::new();
    loop {
        write!(out, "\n> ")?;
        out.flush()?;
        buf.clear();
        if input.read_until(b'\n', &mut buf)? == 0 {
            writeln!(out)?;
            break;
        }
        let Ok(line) = std::str::from_utf8(&buf) else {
            writeln!(out, "(that line is not valid UTF-8; type again)")?;
            continue;
        };
        let command = line.trim_end_matches(['\n', '\r']);
        if matches!(command.trim(), "quit" | "exit") {
            break;
        }
        let step = env.step_command(command)?;
        writeln!(out, "{}", step.observation)?;
        show(&mut out, &step)?;
        if step.won {
            writeln!(out, "\n*** Task completed ({} moves) ***", step.moves)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn gold(task_args: &[String], split: &str, per_task: usize, args: &EnvArgs) -> Result<ExitCode> {
    let Some(split) = OfficialSplit::from_name(split) else {
        bail!("unknown split '{split}': use train, dev or test");
    };
    let tasks = if task_args.is_empty() {
        sciworld::tasks()
    } else {
        task_args.iter().map(|t| sciworld::resolve_task(t)).collect::<Result<_, _>>()?
    };
    let config = args.config(false)?;
    let mut oracle = GoldOracle::new(&config)?;
    let mut env = SciWorldEnv::new(config)?;
    let mut out = io::stdout().lock();
    writeln!(out, "{:<50} {:>9} {:>7} {:>5} {:>5}", "task", "variation", "actions", "score", "done")?;
    let (mut checked, mut perfect) = (0, 0);
    for task in &tasks {
        for variation in task.split(split).take(per_task) {
            checked += 1;
            match sciworld::replay_gold(&mut oracle, &mut env, task.name, variation) {
                Ok(check) => {
                    perfect += usize::from(check.score == 100);
                    writeln!(out, "{:<50} {:>9} {:>7} {:>5} {:>5}", task.name, variation, check.actions, check.score, check.done)?;
                }
                Err(e) => writeln!(out, "{:<50} {:>9} error: {e}", task.name, variation)?,
            }
        }
    }
    writeln!(out, "{perfect} of {checked} gold paths reach 100")?;
    Ok(if perfect == checked { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

fn gold_lengths(record: &RecordArgs) -> Result<ExitCode> {
    let (tasks, split) = tasks_of_split(record)?;
    let (out, jobs) = (record.out.as_path(), record.jobs);
    let mut rows: BTreeMap<(usize, usize), usize> = BTreeMap::new();
    if out.is_file() {
        let text = std::fs::read_to_string(out).with_context(|| format!("reading {}", out.display()))?;
        let done = sciworld::GoldLengths::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", out.display()))?;
        rows.extend(done.entries());
    }
    let todo: Vec<(usize, usize)> = tasks
        .iter()
        .flat_map(|t| t.split(split).map(move |v| (t.index, v)))
        .filter(|key| !rows.contains_key(key))
        .collect();
    eprintln!("{} gold paths to generate ({} already in {})", todo.len(), rows.len(), out.display());
    let config = record.env.config(false)?;
    let found = generate_in_jvms(todo, jobs, &config, out, Some(sciworld::GOLD_LENGTHS_HEADER), |oracle, name, variation| {
        let actions = sciworld::without_door_openings(oracle.gold_actions(name, variation)?).len();
        Ok((format!("{name}\t{variation}\t{actions}"), actions))
    })?;
    rows.extend(found.into_iter().map(|(task, variation, actions)| ((task, variation), actions)));
    let mut text = format!("{}\n", sciworld::GOLD_LENGTHS_HEADER);
    for ((task, variation), actions) in &rows {
        text.push_str(&format!("{}\t{variation}\t{actions}\n", sciworld::tasks()[*task].name));
    }
    write_by_rename(out, &text)?;
    eprintln!("wrote {} rows to {}", rows.len(), out.display());
    Ok(ExitCode::SUCCESS)
}

fn gold_paths(cut_at: usize, record: &RecordArgs) -> Result<ExitCode> {
    if cut_at == 0 {
        bail!("--cut-at must be at least 1");
    }
    let (tasks, split) = tasks_of_split(record)?;
    let (out, jobs) = (record.out.as_path(), record.jobs);
    let mut recorded = sciworld::GoldPaths::default();
    if out.is_file() {
        let text = std::fs::read_to_string(out).with_context(|| format!("reading {}", out.display()))?;
        recorded = sciworld::GoldPaths::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", out.display()))?;
    }
    let config = record.env.config(false)?;
    let cut = Some(cut_at);
    let todo: Vec<(usize, usize)> = tasks
        .iter()
        .flat_map(|t| t.split(split).map(move |v| (t.index, v)))
        .filter(|&(task, v)| !recorded.contains(&config.simplifications, &task.to_string(), v, cut))
        .collect();
    eprintln!("{} gold paths to generate ({} already in {})", todo.len(), recorded.len(), out.display());
    let found = generate_in_jvms(todo, jobs, &config, out, None, |oracle, name, variation| {
        let path = sciworld::GoldPathRecord::generate(oracle, name, variation, cut)
            .with_context(|| format!("the gold path of {name} {variation}"))?;
        Ok((serde_json::to_string(&path)?, path))
    })?;
    for (task, _, record) in found {
        recorded.insert(task, record);
    }
    let mut text = String::new();
    for record in recorded.sorted_records() {
        text.push_str(&serde_json::to_string(record)?);
        text.push('\n');
    }
    write_by_rename(out, &text)?;
    eprintln!("wrote {} paths to {}", recorded.len(), out.display());
    Ok(ExitCode::SUCCESS)
}

/// Generates each (task index, variation) of `todo` in one of `jobs` gold-path JVMs side by
/// side; each result's line is appended to `out` as soon as it is found, so an interrupted
/// run loses nothing (`header` first, if `out` is new). The results, in no particular order.
fn generate_in_jvms<T: Send>(
    todo: Vec<(usize, usize)>,
    jobs: usize,
    config: &EnvConfig,
    out: &Path,
    header: Option<&str>,
    generate: impl Fn(&mut GoldOracle, &'static str, usize) -> Result<(String, T)> + Sync,
) -> Result<Vec<(usize, usize, T)>> {
    let queue = std::sync::Mutex::new(todo.into_iter());
    let found = std::sync::Mutex::new(Vec::new());
    let fresh = std::fs::metadata(out).map_or(true, |m| m.len() == 0);
    let mut log = std::fs::OpenOptions::new().create(true).append(true).open(out)
        .with_context(|| format!("opening {}", out.display()))?;
    if let Some(header) = header.filter(|_| fresh) {
        writeln!(log, "{header}")?;
    }
    let log = std::sync::Mutex::new(log);
    std::thread::scope(|scope| -> Result<()> {
        let workers: Vec<_> = (0..jobs.min(8))
            .map(|_| {
                scope.spawn(|| -> Result<()> {
                    let mut oracle = GoldOracle::new(config)?;
                    loop {
                        let Some((task, variation)) = queue.lock().unwrap().next() else { return Ok(()) };
                        let (line, result) = generate(&mut oracle, sciworld::tasks()[task].name, variation)?;
                        writeln!(log.lock().unwrap(), "{line}")?;
                        found.lock().unwrap().push((task, variation, result));
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.join().map_err(|_| anyhow::anyhow!("a gold-path worker panicked"))??;
        }
        Ok(())
    })?;
    Ok(found.into_inner().unwrap())
}

/// Writes `text` to a temporary name beside `out`, then renames it to `out`.
fn write_by_rename(out: &Path, text: &str) -> Result<()> {
    let tmp = out.with_extension("tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, out)?;
    Ok(())
}

/// The tasks a recording covers (all 30 if none is named) and its split.
fn tasks_of_split(record: &RecordArgs) -> Result<(Vec<sciworld::TaskInfo>, OfficialSplit)> {
    let Some(split) = OfficialSplit::from_name(&record.split) else {
        bail!("unknown split '{}': use train, dev or test", record.split);
    };
    if record.jobs == 0 {
        bail!("--jobs must be at least 1");
    }
    let tasks = if record.tasks.is_empty() {
        sciworld::tasks()
    } else {
        record.tasks.iter().map(|t| sciworld::resolve_task(t)).collect::<Result<_, _>>()?
    };
    Ok((tasks, split))
}

fn list_tasks(level: Option<&str>, phase: &str) -> Result<ExitCode> {
    let mut out = io::BufWriter::new(io::stdout().lock());
    let Some(level) = level else {
        writeln!(out, "index\ttask\tvariations\ttrain\tdev\ttest")?;
        for t in sciworld::tasks() {
            let range = |s| {
                let r = t.split(s);
                format!("{}-{}", r.start, r.end.saturating_sub(1))
            };
            writeln!(
                out,
                "{}\t{}\t{}\t{}\t{}\t{}",
                t.index,
                t.name,
                t.variations,
                range(OfficialSplit::Train),
                range(OfficialSplit::Dev),
                range(OfficialSplit::Test)
            )?;
        }
        return Ok(ExitCode::SUCCESS);
    };
    let level = Level::from_name(level).with_context(|| format!("unknown level '{level}': use L0, L1 or L2"))?;
    let phase = match phase {
        "train" => Phase::Train,
        "test" => Phase::Test,
        other => bail!("unknown phase '{other}': use train or test"),
    };
    for game in level.games(phase) {
        writeln!(out, "{}\t{}", game.task.name, game.variation)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The committed transcripts, relative to the repository root.
const DEFAULT_TRANSCRIPTS: &str = "crates/sciworld/tests/transcripts/official.jsonl.gz";
const REFERENCE_SCRIPT: &str = "tools/sciworld_ref_bench.py";

fn bench(
    transcripts: Option<PathBuf>,
    episodes: usize,
    envs: usize,
    reference_python: Option<PathBuf>,
    no_reference: bool,
) -> Result<ExitCode> {
    let transcripts = transcripts.unwrap_or_else(|| PathBuf::from(DEFAULT_TRANSCRIPTS));
    let episodes = sciworld::bench::episodes_from_transcripts(&transcripts, episodes)
        .with_context(|| format!("reading {} (run from the repository root, or pass --transcripts)", transcripts.display()))?;
    let reference = if no_reference {
        None
    } else {
        let python = match reference_python {
            Some(p) => p,
            None => sciworld::assets::cache_dir()?.join("sciworld-ref-venv").join("bin").join("python"),
        };
        if !python.is_file() {
            bail!(
                "no reference python at {} (run tools/record_sciworld.sh once to make the venv, pass --reference-python, or --no-reference)",
                python.display()
            );
        }
        Some((python, PathBuf::from(REFERENCE_SCRIPT)))
    };
    let steps: usize = episodes.iter().map(|e| e.commands.len()).sum();
    eprintln!("bench: {} episodes, {steps} steps per side, {envs} environments in parallel", episodes.len());
    let options = sciworld::bench::BenchOptions { episodes, parallel_envs: envs, reference };
    let report = sciworld::bench::run(&EnvConfig::from_default_jar()?, &options)?;
    println!("{}", report.table());
    Ok(ExitCode::SUCCESS)
}
