//! What `metrics.jsonl` holds: one [`IterationLine`] per iteration and one [`EvalLine`] per
//! evaluation, and the progress shown while a run goes (a bar on a terminal, plain lines
//! otherwise). Everything that depends on the machine's speed sits under `time`, so two runs
//! of one config compare equal without it.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;

use serde::Serialize;

use super::score::ScoredStep;
use super::update::{Sample, UpdateStats};
use crate::collector::Collection;
use crate::config::RunConfig;
use crate::eval::{metrics_of, rates_row, Rates, Summary};

/// Seconds spent in each phase of an iteration.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Seconds {
    pub rollout: f64,
    pub scoring: f64,
    pub logprobs: f64,
    pub update: f64,
}

/// Speeds and times: the only part of a line that differs between identical runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Timing {
    pub seconds: Seconds,
    pub rollout_env_steps_per_s: f64,
    pub rollout_tokens_per_s: f64,
    /// Tokens the update ran through the model (prompt and reply, every PPO epoch counted)
    /// per second of update: the figure comparable with SFT's training speed.
    pub update_tokens_per_s: f64,
    /// Reply tokens (those with a loss) per second of update.
    pub update_reply_tokens_per_s: f64,
    /// Prompt and reply tokens per second of the log-prob passes (old and reference).
    pub logprob_tokens_per_s: f64,
}

/// Mean reward of each kind per episode.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RewardMeans {
    /// The environment's: `success_reward` for a won episode.
    pub outcome: f64,
    /// The format penalties (negative).
    pub format: f64,
    pub planning: f64,
    pub exploration: f64,
    pub reflection: f64,
    pub monitor: f64,
}

/// The step samples' facts an iteration line reports.
pub struct SampleFacts<'a> {
    pub samples: &'a [Sample],
    /// Steps left out because prompt and reply overflow the context.
    pub too_long: usize,
    /// Mean and max of `|sampled - recomputed|` (`None`: the sampler's were used as they are).
    pub gap: Option<(f64, f64)>,
}

/// One iteration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IterationLine {
    pub iteration: usize,
    pub episodes: usize,
    pub failed_episodes: usize,
    pub success: f64,
    pub success_by_type: BTreeMap<String, f64>,
    pub rewards: RewardMeans,
    pub tag_mix: BTreeMap<String, f64>,
    pub invalid_rate: f64,
    pub inadmissible_rate: f64,
    pub repetitive_rate: f64,
    pub avg_actions: f64,
    /// Mean reply length in tokens.
    pub response_length: f64,
    pub samples: usize,
    pub samples_too_long: usize,
    /// Reply tokens of the samples (once, not per PPO epoch).
    pub tokens: usize,
    /// Mean absolute advantage over the samples.
    pub advantage_abs_mean: f64,
    /// Token means over the update's mini-batches.
    pub pg_loss: f64,
    pub kl: f64,
    pub entropy: f64,
    pub clip_fraction: f64,
    /// Mean `|ratio - 1|`.
    pub ratio_deviation: f64,
    /// Sampled against recomputed old log-probs (absent when none were recomputed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logprob_gap_mean: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logprob_gap_max: Option<f64>,
    pub grad_norm: f64,
    pub grad_norm_max: f64,
    pub updates: usize,
    pub skipped_updates: usize,
    pub lr: f64,
    pub time: Timing,
}

fn mean(sum: f64, n: usize) -> f64 {
    if n == 0 {
        0.0
    } else {
        sum / n as f64
    }
}

fn reward_means(scores: &[Vec<ScoredStep>]) -> RewardMeans {
    let mut r = RewardMeans::default();
    for s in scores.iter().flatten() {
        r.outcome += s.outcome;
        r.format += s.format;
        let slot = match s.score.tag.as_str() {
            "planning" => &mut r.planning,
            "explore" => &mut r.exploration,
            "reflection" => &mut r.reflection,
            "monitor" => &mut r.monitor,
            _ => continue,
        };
        *slot += s.score.mr_reward;
    }
    let n = scores.len();
    RewardMeans {
        outcome: mean(r.outcome, n),
        format: mean(r.format, n),
        planning: mean(r.planning, n),
        exploration: mean(r.exploration, n),
        reflection: mean(r.reflection, n),
        monitor: mean(r.monitor, n),
    }
}

impl IterationLine {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        iteration: usize,
        config: &RunConfig,
        collection: &Collection,
        scores: &[Vec<ScoredStep>],
        facts: SampleFacts,
        update: &UpdateStats,
        lr: f64,
        seconds: Seconds,
    ) -> IterationLine {
        let episodes: Vec<_> = collection.episodes.iter().collect();
        let m = metrics_of(&episodes);
        let steps: usize = episodes.iter().map(|e| e.steps.len()).sum();
        let tokens: usize = facts.samples.iter().map(|s| s.response.len()).sum();
        let terms = &update.terms;
        let sequence_tokens: usize = facts.samples.iter().map(|s| s.prompt.len() + s.response.len()).sum();
        let epochs = config.rl.ppo_epochs;
        // The old log-probs, and the reference ones where the samples carry them.
        let passes = 1 + usize::from(facts.samples.iter().any(|s| !s.reference.is_empty()));
        IterationLine {
            iteration,
            episodes: episodes.len(),
            failed_episodes: episodes.iter().filter(|e| e.error.is_some()).count(),
            success: m.success_rate,
            success_by_type: m.success_by_type,
            rewards: reward_means(scores),
            tag_mix: m.tag_mix,
            invalid_rate: m.invalid_rate,
            inadmissible_rate: m.inadmissible_rate,
            repetitive_rate: m.repetitive_rate,
            avg_actions: m.avg_actions,
            response_length: mean(
                episodes.iter().map(|e| e.generated_tokens()).sum::<usize>() as f64,
                steps,
            ),
            samples: facts.samples.len(),
            samples_too_long: facts.too_long,
            tokens,
            advantage_abs_mean: mean(
                facts.samples.iter().map(|s| (s.advantage as f64).abs()).sum(),
                facts.samples.len(),
            ),
            pg_loss: terms.mean(terms.pg_loss),
            kl: terms.mean(terms.kl),
            entropy: terms.mean(terms.entropy),
            clip_fraction: terms.mean(terms.clipped),
            ratio_deviation: terms.mean(terms.ratio_dev),
            logprob_gap_mean: facts.gap.map(|g| g.0),
            logprob_gap_max: facts.gap.map(|g| g.1),
            grad_norm: update.grad_norm_mean,
            grad_norm_max: update.grad_norm_max,
            updates: update.updates,
            skipped_updates: update.skipped,
            lr,
            time: Timing {
                rollout_env_steps_per_s: collection.throughput.env_steps_per_s,
                rollout_tokens_per_s: collection.throughput.tokens_per_s,
                update_tokens_per_s: (sequence_tokens * epochs) as f64 / seconds.update.max(1e-9),
                update_reply_tokens_per_s: (tokens * epochs) as f64 / seconds.update.max(1e-9),
                logprob_tokens_per_s: (sequence_tokens * passes) as f64 / seconds.logprobs.max(1e-9),
                seconds,
            },
        }
    }
}

/// An evaluation during training.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvalLine {
    /// The iteration after which the weights were evaluated.
    pub iteration: usize,
    pub eval: EvalResult,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvalResult {
    pub split: String,
    #[serde(flatten)]
    pub overall: Rates,
    pub failed_episodes: usize,
    pub success_by_type: BTreeMap<String, f64>,
    pub time: EvalTiming,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvalTiming {
    pub seconds: f64,
}

impl EvalLine {
    pub fn new(iteration: usize, summary: &Summary, seconds: f64) -> EvalLine {
        EvalLine {
            iteration,
            eval: EvalResult {
                split: summary.split.clone(),
                overall: summary.overall.clone(),
                failed_episodes: summary.failed_episodes,
                success_by_type: summary
                    .per_type
                    .iter()
                    .map(|(t, r)| (t.clone(), r.success_rate))
                    .collect(),
                time: EvalTiming { seconds },
            },
        }
    }
}

/// Progress on stderr: an indicatif bar on a terminal, a plain line per event otherwise.
pub struct Progress {
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    pub fn new(iterations: usize, done: usize) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new(iterations as u64);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{bar:30} {pos}/{len} iterations [{elapsed_precise} < {eta_precise}] {msg}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            bar.set_position(done as u64);
            bar
        });
        Progress { bar }
    }

    fn say(&self, text: String) {
        match &self.bar {
            Some(bar) => bar.println(text),
            None => eprintln!("{text}"),
        }
    }

    pub fn iteration(&self, line: &IterationLine) {
        let s = &line.time.seconds;
        self.say(format!(
            "iteration {}: success {:.1}% invalid {:.1}% kl {:.4} entropy {:.3} clip {:.3} grad {:.3} \
             ({:.0} s rollout, {:.0} s log-probs, {:.0} s update)",
            line.iteration,
            100.0 * line.success,
            100.0 * line.invalid_rate,
            line.kl,
            line.entropy,
            line.clip_fraction,
            line.grad_norm,
            s.rollout,
            s.logprobs,
            s.update
        ));
        if let Some(bar) = &self.bar {
            bar.set_position(line.iteration as u64);
            bar.set_message(format!("success {:.1}%", 100.0 * line.success));
        }
    }

    pub fn eval(&self, line: &EvalLine) {
        self.say(format!(
            "evaluation after iteration {} on {}: success {:.1}% of {} episodes",
            line.iteration,
            line.eval.split,
            100.0 * line.eval.overall.success_rate,
            line.eval.overall.episodes
        ));
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// What a finished run did.
#[derive(Debug, Clone)]
pub struct RlReport {
    pub dir: PathBuf,
    pub iterations: usize,
    pub lines: Vec<IterationLine>,
    pub evals: Vec<EvalLine>,
    pub final_dir: PathBuf,
    /// The protocol the run trained under, and its environment.
    pub protocol: Option<crate::envs::Protocol>,
    pub env: String,
    /// The final model on every test game of each `rl.final_eval` level.
    pub final_evals: Vec<crate::eval::Summary>,
}

/// The run's result in Markdown: the last iteration's training figures and the last
/// evaluation, if any.
pub fn final_table(report: &RlReport) -> String {
    let mut out = String::new();
    if let Some(protocol) = report.protocol {
        out.push_str(&format!("{}\n\n", protocol.describe(&report.env)));
    }
    out.push_str(crate::eval::RATES_HEADER);
    if let Some(l) = report.lines.last() {
        let rates = Rates {
            episodes: l.episodes,
            success_rate: l.success,
            invalid_rate: l.invalid_rate,
            inadmissible_rate: l.inadmissible_rate,
            repetitive_rate: l.repetitive_rate,
            avg_actions: l.avg_actions,
            tag_mix: l.tag_mix.clone(),
        };
        out.push_str(&rates_row(&format!("training, iteration {}", l.iteration), &rates));
    }
    // The last evaluation: one line per level it played.
    let last_eval = report.evals.last().map(|e| e.iteration);
    for e in report.evals.iter().filter(|e| Some(e.iteration) == last_eval) {
        let name = format!("eval {}, iteration {}", e.eval.split, e.iteration);
        out.push_str(&rates_row(&name, &e.eval.overall));
    }
    for summary in &report.final_evals {
        out.push_str(&rates_row(&format!("final model, {} test games", summary.split), &summary.overall));
    }
    out.push_str(&format!("\nfinal model: {}\n", report.final_dir.display()));
    out
}
