//! `rlvmr report`: charts, the final table and the evaluations of `rlvmr train` runs (a thin wrapper over
//! `trainer::report`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

#[derive(clap::Args)]
pub struct ReportArgs {
    /// Run directories of `rlvmr train` (each holds metrics.jsonl; a per-level job's folder
    /// stands for its level runs); overlaid on every chart.
    #[arg(required = true)]
    runs: Vec<PathBuf>,
    /// Where the PNG charts go (default: <first run>/plots).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// The runs `dirs` name, a per-level job's folder standing for its level runs.
fn expand(dirs: &[PathBuf]) -> Vec<PathBuf> {
    dirs.iter().flat_map(|dir| trainer::rl::levels::runs_in(dir)).collect()
}

pub fn run(args: ReportArgs) -> Result<ExitCode> {
    let runs = expand(&args.runs)
        .iter()
        .map(|dir| trainer::report::Run::read(dir))
        .collect::<Result<Vec<_>, _>>()?;
    let out = args.out.unwrap_or_else(|| args.runs[0].join("plots"));
    let written = trainer::report::draw(&runs, &out)?;
    println!("{}", trainer::report::table(&runs));
    let evals = trainer::report::eval_table(&runs);
    if !evals.is_empty() {
        println!("evaluations during training:\n\n{evals}");
    }
    for path in written {
        eprintln!("wrote {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args)]
pub struct CompareArgs {
    /// Run directories: `rlvmr train` runs with `rl.final_eval` (DIR/eval/L0.json ..) or folders
    /// of `rlvmr eval --out DIR/L0` .. (a model without RL). Directories named
    /// `<method>-seed<N>` are seeds of one method: one row, mean ± standard deviation.
    #[arg(required = true)]
    runs: Vec<PathBuf>,
}

/// `rlvmr compare`: the final evaluations of several runs as one Markdown table on stdout.
pub fn compare(args: CompareArgs) -> Result<ExitCode> {
    println!("{}", trainer::report::comparison(&args.runs)?);
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args)]
pub struct AdvantagesArgs {
    /// Run directories of `rlvmr train` (each holds rollouts/NNNN.jsonl.gz; a per-level
    /// job's folder stands for its level runs): one table each.
    #[arg(required = true)]
    runs: Vec<PathBuf>,
    /// The iterations to pool, as `7` or `11-20` (default: every iteration written).
    #[arg(long)]
    iterations: Option<trainer::credit::IterationRange>,
}

/// `rlvmr advantages`: each run's advantages by episode outcome, tag and meta-reasoning reward.
pub fn advantages(args: AdvantagesArgs) -> Result<ExitCode> {
    for run in &expand(&args.runs) {
        let credit = trainer::credit::read(run, args.iterations)?;
        println!("{}", trainer::credit::table(&credit));
    }
    Ok(ExitCode::SUCCESS)
}
