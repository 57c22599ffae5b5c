//! The rlvmr command line: parses arguments and calls library functions.

use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};

use alfworld::{AlfworldData, Split};

mod bench_cmd;
mod coldstart_cmd;
mod eval_cmd;
mod model_cmd;
mod view_cmd;
mod sft_cmd;
mod train_cmd;
mod report_cmd;
mod jsonl;
mod score;
mod sciworld_cmd;

#[derive(Parser)]
#[command(name = "rlvmr", version, about = "RLVMR: reinforcement learning with verifiable meta-reasoning rewards")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Score rollouts: read episodes as JSON lines on stdin, write them back with
    /// per-step format validity, tag, action, rewards and advantages, and metrics.
    Score {
        /// grpo_mr (default), grpo, gigpo or rloo; overrides the config file.
        #[arg(long)]
        algo: Option<String>,
        /// A TOML file with [format], [reward] and [advantage] sections.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Score responses: read JSON lines {"prompt", "response"} (raw text, no chat template
    /// added), write {"prompt_ids", "response_ids", "response_logprobs"} per line.
    Logprobs {
        /// A GGUF file, a Hugging Face folder (Llama or Qwen2), or the embedded default's name.
        #[arg(long, default_value = policy::assets::DEFAULT_MODEL_NAME)]
        model: String,
        /// Input file (default: stdin).
        #[arg(long)]
        input: Option<PathBuf>,
    },
    /// Generate a reply to PROMPT (wrapped in the chat template unless --raw), as a JSON line.
    Generate {
        prompt: String,
        /// A GGUF file, a Hugging Face folder (Llama or Qwen2), or the embedded default's name.
        #[arg(long, default_value = policy::assets::DEFAULT_MODEL_NAME)]
        model: String,
        /// Use PROMPT as is, without the chat template.
        #[arg(long)]
        raw: bool,
        /// A system message (chat mode only).
        #[arg(long)]
        system: Option<String>,
        #[arg(long, default_value_t = 128)]
        max_new_tokens: usize,
        /// 0 = greedy.
        #[arg(long, default_value_t = 0.0)]
        temperature: f64,
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// Evaluate a policy (expert, random or a model) on a level's test games.
    Eval(eval_cmd::EvalArgs),
    /// Annotated expert demonstrations and SFT samples for the cold start.
    Coldstart(coldstart_cmd::ColdstartArgs),
    /// Supervised fine-tuning on cold-start samples (loss on the replies, and on the prompts
    /// weighted by sft.prompt_loss_weight).
    Sft(sft_cmd::SftArgs),
    /// Reinforcement learning: GRPO-MR (RLVMR) or a baseline, with checkpoints and resume.
    Train(train_cmd::TrainArgs),
    /// Charts (PNG) and the final table of one or more `rlvmr train` runs, overlaid.
    Report(report_cmd::ReportArgs),
    /// One self-contained HTML page to read episodes: filters, each step's tag, reply, action
    /// and observation, and several runs side by side on the same game.
    View(view_cmd::ViewArgs),
    /// The final L0/L1/L2 evaluations of several runs as one table, seeds of a method pooled
    /// (mean ± standard deviation).
    Compare(report_cmd::CompareArgs),
    /// Where a run's advantages went: its training steps pooled over iterations by the
    /// episode's outcome, the step's tag and its meta-reasoning reward, with each cell's mean
    /// advantage and the share the update made more likely.
    Advantages(report_cmd::AdvantagesArgs),
    /// Time the policy's update, log-probs and sampling on one device (random weights of a
    /// model's shape), as JSON; tools/cuda/bench.sh pairs it with PyTorch on a GPU.
    BenchPolicy(bench_cmd::BenchArgs),
    /// ALFWorld: replay, play, expert, benchmark.
    Alfworld {
        #[command(subcommand)]
        command: AlfworldCommand,
    },
    /// ScienceWorld: replay, play, gold paths, tasks, benchmark.
    Sciworld {
        #[command(subcommand)]
        command: sciworld_cmd::SciworldCommand,
    },
}

#[derive(clap::Args)]
struct DataArg {
    /// ALFWorld data: a folder holding json_2.1.1/, or json_2.1.1.zip.
    /// Default: $ALFWORLD_DATA, else ~/.cache/alfworld, else ../shared/alfworld/json_2.1.1.zip.
    #[arg(long)]
    data: Option<PathBuf>,
}

#[derive(Subcommand)]
enum AlfworldCommand {
    /// Read JSON lines {"game": <path relative to --data>, "commands": [..]} on stdin,
    /// write one JSON line per game with every step's observation.
    Replay {
        #[command(flatten)]
        data: DataArg,
    },
    /// Play a game at the terminal (GAME: a game.tw-pddl file, or a path relative to the data).
    Play {
        game: String,
        #[command(flatten)]
        data: DataArg,
        /// Print the admissible commands after each step.
        #[arg(long)]
        admissible: bool,
    },
    /// Run the hand-coded expert on every game of a split; print success per task type.
    Expert {
        #[command(flatten)]
        data: DataArg,
        /// train, valid_seen, valid_unseen or valid_train.
        #[arg(long, default_value = "valid_unseen")]
        split: String,
        /// Steps allowed per game.
        #[arg(long, default_value_t = alfworld::DEFAULT_MAX_STEPS)]
        max_steps: usize,
    },
    /// Benchmark the engine on recorded transcripts against the reference engine.
    Bench {
        #[command(flatten)]
        data: DataArg,
        /// Transcript files to replay (default: the committed eval-split transcripts).
        #[arg(long, num_args = 1..)]
        transcripts: Vec<PathBuf>,
        /// Sessions kept alive at once for the memory figure.
        #[arg(long, default_value_t = 2000)]
        live_games: usize,
        /// Python with alfworld==0.4.2 (default: the venv tools/record_alfworld.sh makes).
        #[arg(long)]
        reference_python: Option<PathBuf>,
        /// Games the reference replays (it takes about a second per game).
        #[arg(long, default_value_t = 20)]
        reference_games: usize,
        /// Skip the reference engine.
        #[arg(long)]
        no_reference: bool,
    },
    /// List games: path, split, task type.
    Games {
        #[command(flatten)]
        data: DataArg,
        /// train, valid_seen, valid_unseen or valid_train (default: all).
        #[arg(long)]
        split: Option<String>,
    },
}

fn resolve_data(arg: &DataArg) -> Result<AlfworldData> {
    Ok(match &arg.data {
        Some(path) => AlfworldData::open(path)?,
        None => AlfworldData::open_default()?,
    })
}

fn parse_split(name: &str) -> Result<Split> {
    match Split::from_name(name) {
        Some(s) => Ok(s),
        None => bail!("unknown split '{name}': use train, valid_seen, valid_unseen or valid_train"),
    }
}

fn replay(data: &DataArg) -> Result<ExitCode> {
    let data = resolve_data(data)?;
    let stdin = io::stdin().lock();
    let stdout = io::BufWriter::new(io::stdout().lock());
    let summary = alfworld::replay::replay_stream(&data, stdin, stdout, io::stderr())?;
    if summary.failed > 0 {
        eprintln!("{} of {} games failed", summary.failed, summary.games);
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn load_for_play(game: &str, data: &DataArg) -> Result<textworld::Game> {
    let (_, text) = alfworld::read_game_text(game, || resolve_data(data))
        .with_context(|| format!("{game}: neither a readable file nor a game of the data"))?;
    alfworld::load_game(&text).with_context(|| format!("cannot load {game}"))
}

fn play(game: &str, data: &DataArg, show_admissible: bool) -> Result<ExitCode> {
    let game = Arc::new(load_for_play(game, data)?);
    let (mut session, intro) = textworld::Session::start(game)?;
    let mut out = io::stdout().lock();
    writeln!(out, "{}", intro.feedback)?;
    let show = |out: &mut dyn Write, cmds: &[String]| -> io::Result<()> {
        if show_admissible {
            writeln!(out, "[admissible: {}]", cmds.join(", "))?;
        }
        Ok(())
    };
    show(&mut out, &intro.admissible_commands)?;
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
        let line = String::from_utf8_lossy(&buf);
        let command = line.trim_end_matches(['\n', '\r']);
        if matches!(command.trim(), "quit" | "exit") && !session.admissible_commands().iter().any(|c| c == command.trim()) {
            break;
        }
        let obs = session.step(command)?;
        writeln!(out, "{}", obs.feedback)?;
        show(&mut out, &obs.admissible_commands)?;
        if obs.won {
            writeln!(out, "\n*** You won! ({} moves) ***", session.moves())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn games(data: &DataArg, split: Option<&str>) -> Result<ExitCode> {
    let data = resolve_data(data)?;
    let split = split.map(parse_split).transpose()?;
    let mut out = io::BufWriter::new(io::stdout().lock());
    for g in data.games().iter().filter(|g| split.is_none_or(|s| g.split == s)) {
        writeln!(out, "{}\t{}\t{}", g.path, g.split, g.task_type)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn expert(data: &DataArg, split: &str, max_steps: usize) -> Result<ExitCode> {
    let data = resolve_data(data)?;
    let split = parse_split(split)?;
    eprintln!("expert on {split} ({} games, at most {max_steps} steps each) from {}", data.split(split).len(), data.location().display());
    let report = alfworld::evaluate(&data, split, max_steps)?;
    println!("{}", report.table());
    Ok(ExitCode::SUCCESS)
}

fn reference_venv_python() -> PathBuf {
    let cache = std::env::var_os("RLVMR_CACHE").map(PathBuf::from).unwrap_or_else(|| {
        let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
        home.join(".cache").join("rlvmr")
    });
    cache.join("alfworld-ref-venv").join("bin").join("python")
}

fn bench(data: &DataArg, transcripts: Vec<PathBuf>, live_games: usize, reference_python: Option<PathBuf>, reference_games: usize, no_reference: bool) -> Result<ExitCode> {
    let data = resolve_data(data)?;
    let dir = Path::new("crates/alfworld/tests/transcripts");
    let transcripts = if transcripts.is_empty() { vec![dir.join("valid_seen.jsonl.gz"), dir.join("valid_unseen.jsonl.gz")] } else { transcripts };
    let script = PathBuf::from("tools/ref_bench.py");
    let reference = if no_reference {
        None
    } else {
        let python = reference_python.unwrap_or_else(reference_venv_python);
        if !python.is_file() {
            bail!("no reference python at {} (run tools/record_alfworld.sh once to make the venv, pass --reference-python, or --no-reference)", python.display());
        }
        Some((python, script))
    };
    let scratch = std::env::temp_dir().join(format!("rlvmr-bench-{}", std::process::id()));
    let opts = alfworld::bench::BenchOptions { transcripts, live_games, reference, reference_games, scratch: scratch.clone() };
    let report = alfworld::bench::run(&data, &opts).map_err(anyhow::Error::msg);
    let _ = std::fs::remove_dir_all(&scratch);
    println!("{}", report?.table());
    Ok(ExitCode::SUCCESS)
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Score { algo, config } => score::run(algo.as_deref(), config.as_deref()),
        Command::Logprobs { model, input } => model_cmd::logprobs(&model, input.as_deref()),
        Command::Generate { prompt, model, raw, system, max_new_tokens, temperature, seed } => {
            model_cmd::generate(&model_cmd::GenerateArgs {
                model: &model,
                prompt: &prompt,
                raw,
                system: system.as_deref(),
                max_new_tokens,
                temperature,
                seed,
            })
        }
        Command::Eval(args) => eval_cmd::run(args),
        Command::Coldstart(args) => coldstart_cmd::run(args),
        Command::Sft(args) => sft_cmd::run(args),
        Command::Train(args) => train_cmd::run(args),
        Command::Report(args) => report_cmd::run(args),
        Command::View(args) => view_cmd::run(args),
        Command::Compare(args) => report_cmd::compare(args),
        Command::Advantages(args) => report_cmd::advantages(args),
        Command::BenchPolicy(args) => bench_cmd::run(args),
        Command::Sciworld { command } => sciworld_cmd::run(command),
        Command::Alfworld { command } => match command {
            AlfworldCommand::Replay { data } => replay(&data),
            AlfworldCommand::Play { game, data, admissible } => play(&game, &data, admissible),
            AlfworldCommand::Games { data, split } => games(&data, split.as_deref()),
            AlfworldCommand::Expert { data, split, max_steps } => expert(&data, &split, max_steps),
            AlfworldCommand::Bench { data, transcripts, live_games, reference_python, reference_games, no_reference } => {
                bench(&data, transcripts, live_games, reference_python, reference_games, no_reference)
            }
        },
    }
}

fn main() -> ExitCode {
    policy::malloc::keep_freed_memory();
    // candle asks the OS for the CPU count on every matmul unless this is set
    // (about 25% of batch-1 decode time); set it once, before any thread starts.
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        std::env::set_var("RAYON_NUM_THREADS", threads.to_string());
    }
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", error_text(&e));
            ExitCode::from(2)
        }
    }
}

/// The error and its causes on one line, each cause once: errors that already print their
/// source (`path: reason`) and also expose it as their cause would otherwise repeat it.
fn error_text(e: &anyhow::Error) -> String {
    let mut text = e.to_string();
    for cause in e.chain().skip(1) {
        let cause = cause.to_string();
        if !text.ends_with(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_that_prints_its_source_names_it_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file");
        let e = anyhow::Error::new(trainer::TrainerError::Io { path: "runs/x.jsonl".into(), source: io })
            .context("rlvmr sft");
        assert_eq!(error_text(&e), "rlvmr sft: runs/x.jsonl: No such file");
        let e = anyhow::anyhow!("inner").context("outer");
        assert_eq!(error_text(&e), "outer: inner");
    }
}
