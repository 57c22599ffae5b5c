//! `rlvmr view`: one self-contained HTML page of episodes (a thin wrapper over
//! `trainer::view`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;

#[derive(clap::Args)]
pub struct ViewArgs {
    /// Episodes files (trajectories.jsonl, eval/L0.jsonl, rollouts/0001.jsonl.gz, rlvmr score
    /// input or output) or run directories (every episodes file inside). Several: the same
    /// game's episodes are shown side by side.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// The HTML file to write (default: DIR/view.html for a directory, FILE.html beside a file).
    #[arg(short = 'o', long)]
    out: Option<PathBuf>,
    /// Leave the prompts out (a smaller page).
    #[arg(long)]
    no_prompts: bool,
}

fn default_out(first: &Path) -> PathBuf {
    if first.is_dir() {
        return first.join("view.html");
    }
    let name = first.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let stem = name.trim_end_matches(".gz").trim_end_matches(".jsonl");
    first.with_file_name(format!("{stem}.html"))
}

pub fn run(args: ViewArgs) -> Result<ExitCode> {
    let files = trainer::view::sources_of(&args.paths)?;
    let sources = files
        .iter()
        .map(|f| trainer::view::read_source(f, !args.no_prompts))
        .collect::<Result<Vec<_>, _>>()?;
    let page = trainer::view::page(&sources)?;
    let out = args.out.unwrap_or_else(|| default_out(&args.paths[0]));
    trainer::rundir::write_file_atomically(&out, page.as_bytes())?;
    let episodes: usize = sources.iter().map(|s| s.episodes.len()).sum();
    eprintln!("wrote {} ({episodes} episodes from {} files)", out.display(), sources.len());
    Ok(ExitCode::SUCCESS)
}
