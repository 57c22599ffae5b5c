//! Scoring finished rollouts: parse every step's output, compute the verifiable
//! rewards, the advantages of the chosen algorithm over groups of episodes that
//! share a `uid`, and each episode's metrics. This is what `rlvmr score` runs, so
//! rollouts produced by other frameworks can be scored the same way.

use std::collections::BTreeMap;

use crate::advantage::{compute_advantages, AdvantageConfig, AdvantageError, Algo};
use crate::format::{parse_output, OutputStyle, ParsedOutput, Validity};
use crate::metrics::{self, EpisodeMetricsInput, Metrics, StepMetricsInput};
use crate::reward::{compute_rewards, EpisodeFacts, RewardConfig, RewardConfigError, StepFacts};

/// How step outputs are parsed.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FormatConfig {
    pub validity: Validity,
    /// `None`: `think` for GRPO and GiGPO (the published baselines), `tagged` otherwise.
    pub style: Option<OutputStyle>,
}

/// Everything `rlvmr score` can be told; `Default` is the reference code's RLVMR.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScoreConfig {
    pub format: FormatConfig,
    pub reward: RewardConfig,
    pub advantage: AdvantageConfig,
}

impl ScoreConfig {
    pub fn style(&self) -> OutputStyle {
        self.format.style.unwrap_or(match self.advantage.algo {
            Algo::Grpo | Algo::Gigpo => OutputStyle::Think,
            Algo::GrpoMr | Algo::Rloo => OutputStyle::Tagged,
        })
    }

    pub fn validate(&self) -> Result<(), ScoreError> {
        self.reward.validate().map_err(ScoreError::Reward)?;
        self.advantage.validate().map_err(ScoreError::Advantage)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum ScoreError {
    Reward(RewardConfigError),
    Advantage(AdvantageError),
}

impl std::fmt::Display for ScoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScoreError::Reward(e) => write!(f, "reward.{} = {} is not a finite number", e.key, e.value),
            ScoreError::Advantage(e) => write!(f, "advantage: {e}"),
        }
    }
}

impl std::error::Error for ScoreError {}

/// One step as rollouts record it.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct StepIn {
    pub observation: String,
    #[serde(default)]
    pub admissible_actions: Vec<String>,
    /// The raw model output.
    pub output: String,
}

/// One episode; episodes with the same `uid` form a group. `task_type` and `split`, when
/// given, break the success rate down in the metrics.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct EpisodeIn {
    pub uid: String,
    pub won: bool,
    pub steps: Vec<StepIn>,
    #[serde(default)]
    pub task_type: Option<String>,
    #[serde(default)]
    pub split: Option<String>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StepScore {
    pub format_valid: bool,
    /// `planning|explore|reflection|monitor`, or `none` when the format is invalid.
    pub tag: String,
    pub action: String,
    pub admissible: bool,
    /// The step's outcome term: success reward x won, minus the format penalty.
    pub reward: f64,
    pub mr_reward: f64,
    pub advantage: f64,
    /// Why the format is invalid (empty when valid).
    pub invalid_reasons: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EpisodeScore {
    pub steps: Vec<StepScore>,
    pub metrics: Metrics,
}

/// Scores a batch: groups are formed over the whole batch by `uid`.
pub fn score(config: &ScoreConfig, episodes: &[EpisodeIn]) -> Result<Vec<EpisodeScore>, ScoreError> {
    config.validate()?;
    let style = config.style();
    let parsed: Vec<Vec<ParsedOutput>> = episodes.iter().map(|e| e.steps.iter().map(|s| parse_output(&s.output, style, config.format.validity)).collect()).collect();
    let facts: Vec<EpisodeFacts> = episodes
        .iter()
        .zip(&parsed)
        .map(|(e, ps)| EpisodeFacts {
            uid: &e.uid,
            won: e.won,
            steps: e
                .steps
                .iter()
                .zip(ps)
                .map(|(s, p)| StepFacts {
                    format_valid: p.format_valid(),
                    tag: p.step_tag(),
                    action: &p.action,
                    admissible: s.admissible_actions.contains(&p.action),
                    observation: &s.observation,
                    output: &s.output,
                })
                .collect(),
        })
        .collect();
    let rewards: Vec<_> = facts.iter().map(|f| compute_rewards(&config.reward, f)).collect();
    let advantages = compute_advantages(&config.advantage, &rewards).map_err(ScoreError::Advantage)?;

    Ok(episodes
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let steps: Vec<StepScore> = e
                .steps
                .iter()
                .enumerate()
                .map(|(j, _)| {
                    let (p, f, r) = (&parsed[i][j], &facts[i].steps[j], &rewards[i].steps[j]);
                    StepScore {
                        format_valid: f.format_valid,
                        tag: r.tag.map_or("none", |t| t.name()).to_string(),
                        action: p.action.clone(),
                        admissible: f.admissible,
                        reward: r.outcome_reward,
                        mr_reward: r.mr_reward,
                        advantage: advantages[i][j],
                        invalid_reasons: p.invalid.iter().map(ToString::to_string).collect(),
                    }
                })
                .collect();
            EpisodeScore { metrics: metrics::compute(&[metrics_input(e, &steps)]), steps }
        })
        .collect())
}

/// The metrics of a whole batch (success, invalid, inadmissible and repetitive rates, tag mix,
/// meta-reasoning rewards by tag, success by task type and split), as one set of episodes.
pub fn batch_metrics(config: &ScoreConfig, episodes: &[EpisodeIn]) -> Result<Metrics, ScoreError> {
    let scored = score(config, episodes)?;
    let inputs: Vec<EpisodeMetricsInput> = episodes.iter().zip(&scored).map(|(e, s)| metrics_input(e, &s.steps)).collect();
    Ok(metrics::compute(&inputs))
}

/// What the metrics need of an episode and its step scores.
fn metrics_input<'a>(episode: &'a EpisodeIn, steps: &'a [StepScore]) -> EpisodeMetricsInput<'a> {
    EpisodeMetricsInput {
        won: episode.won,
        task_type: episode.task_type.as_deref(),
        split: episode.split.as_deref(),
        steps: episode
            .steps
            .iter()
            .zip(steps)
            .map(|(s, sc)| StepMetricsInput {
                observation: &s.observation,
                action: &sc.action,
                format_valid: sc.format_valid,
                tag: crate::tag::Tag::from_name(&sc.tag),
                admissible: Some(sc.admissible),
                mr_reward: sc.mr_reward,
            })
            .collect(),
    }
}

/// Scores episodes given as JSON objects (`rlvmr score`'s input schema) and returns each
/// one back with its scores merged in: every step gains `format_valid`, `tag`, `action`,
/// `admissible`, `reward`, `mr_reward`, `advantage` and `invalid_reasons`, the episode a
/// `metrics` object. An entry that is not an episode comes back as `Err(why)` and leaves the
/// groups; the others are scored together (groups by `uid` over the whole batch).
pub fn score_json(
    config: &ScoreConfig,
    values: Vec<serde_json::Value>,
) -> Result<Vec<Result<serde_json::Value, String>>, ScoreError> {
    use serde_json::Value;
    // Each entry: the object as given and the episode read from it, or why it is not one.
    type Read = Result<(serde_json::Map<String, Value>, EpisodeIn), String>;
    let read: Vec<Read> = values
        .into_iter()
        .map(|value| {
            let Value::Object(map) = value else { return Err("expected a JSON object".to_string()) };
            match serde_json::from_value::<EpisodeIn>(Value::Object(map.clone())) {
                Ok(episode) => Ok((map, episode)),
                Err(e) => Err(format!("not an episode: {e}")),
            }
        })
        .collect();
    let episodes: Vec<EpisodeIn> = read.iter().filter_map(|r| r.as_ref().ok().map(|(_, e)| e.clone())).collect();
    let mut scored = score(config, &episodes)?.into_iter();
    Ok(read
        .into_iter()
        .map(|entry| {
            let (original, _) = entry?;
            let episode = scored.next().expect("one score per episode read");
            Ok(merge(original, &episode))
        })
        .collect())
}

/// `original` with `scored`'s step fields and metrics merged in.
fn merge(mut original: serde_json::Map<String, serde_json::Value>, scored: &EpisodeScore) -> serde_json::Value {
    use serde_json::Value;
    if let Some(Value::Array(steps)) = original.get_mut("steps") {
        for (step, score) in steps.iter_mut().zip(&scored.steps) {
            if let (Value::Object(step), Ok(Value::Object(add))) = (step, serde_json::to_value(score)) {
                step.extend(add);
            }
        }
    }
    if let Ok(metrics) = serde_json::to_value(&scored.metrics) {
        original.insert("metrics".into(), metrics);
    }
    Value::Object(original)
}

/// Groups' sizes by uid, for reporting.
pub fn group_sizes(episodes: &[EpisodeIn]) -> BTreeMap<&str, usize> {
    let mut sizes = BTreeMap::new();
    for e in episodes {
        *sizes.entry(e.uid.as_str()).or_default() += 1;
    }
    sizes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(observation: &str, output: &str) -> StepIn {
        StepIn { observation: observation.into(), admissible_actions: vec!["look".into(), "go to desk 1".into()], output: output.into() }
    }

    #[test]
    fn scores_a_group_with_the_reference_defaults() {
        let won = EpisodeIn {
            uid: "g".into(),
            won: true,
            steps: vec![step("o", "<planning>find it</planning><action>go to desk 1</action>"), step("o2", "<explore>where</explore><action>look</action>")],
            task_type: Some("pick".into()),
            split: None,
        };
        let lost = EpisodeIn { uid: "g".into(), won: false, steps: vec![step("o", "garbage <action>jump</action>")], task_type: Some("heat".into()), split: None };
        let scored = score(&ScoreConfig::default(), &[won.clone(), lost.clone()]).unwrap();
        let (a, b) = (&scored[0].steps, &scored[1].steps);
        assert_eq!((a[0].tag.as_str(), a[1].tag.as_str(), b[0].tag.as_str()), ("planning", "explore", "none"));
        assert_eq!((a[0].reward, a[1].reward, b[0].reward), (10.0, 10.0, -0.1));
        assert_eq!((a[0].mr_reward, a[1].mr_reward, b[0].mr_reward), (1.0, 1.0, 0.0));
        assert_eq!(b[0].action, "jump");
        assert!(!b[0].admissible && a[1].admissible);
        assert_eq!(b[0].invalid_reasons, vec!["no reasoning block".to_string()]);
        // Episode term over the three step samples: rewards 10, 10, -0.1; mean 6.6333,
        // unbiased std 5.8312: a0 = a1 = 0.57735 (+ tag terms of one-sample groups, 1.0 each).
        let ep = (10.0 - 19.9 / 3.0) / (((2.0 * (10.0 - 19.9 / 3.0_f64).powi(2) + (-0.1 - 19.9 / 3.0_f64).powi(2)) / 2.0).sqrt() + 1e-6);
        assert!((a[0].advantage - (ep + 1.0 / (1.0 + 1e-6))).abs() < 1e-9, "{}", a[0].advantage);
        assert_eq!(scored[0].metrics.success_rate, 1.0);
        assert_eq!(scored[1].metrics.invalid_rate, 1.0);
        assert_eq!(scored[0].metrics.success_by_type.get("pick"), Some(&1.0));
        // The batch as one set: success 1 of 2, one invalid step of three, by type.
        let batch = batch_metrics(&ScoreConfig::default(), &[won, lost]).unwrap();
        assert_eq!((batch.episodes, batch.steps, batch.success_rate), (2, 3, 0.5));
        assert!((batch.invalid_rate - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(batch.success_by_type.get("pick"), Some(&1.0));
        assert_eq!(batch.success_by_type.get("heat"), Some(&0.0));
    }

    #[test]
    fn baselines_parse_think_blocks_by_default() {
        let mut cfg = ScoreConfig::default();
        cfg.advantage.algo = Algo::Grpo;
        assert_eq!(cfg.style(), OutputStyle::Think);
        let e = EpisodeIn { uid: "g".into(), won: true, steps: vec![step("o", "<think>hm</think><action>look</action>")], task_type: None, split: None };
        let scored = score(&cfg, &[e]).unwrap();
        assert!(scored[0].steps[0].format_valid);
        assert_eq!(scored[0].steps[0].tag, "none");
    }

    #[test]
    fn bad_config_values_name_the_key() {
        let mut cfg = ScoreConfig::default();
        cfg.reward.format_penalty = f64::NAN;
        assert!(score(&cfg, &[]).unwrap_err().to_string().contains("format_penalty"));
    }
}
