//! Behaviour metrics of episodes, defined precisely.
//!
//! Over a set of episodes (each a list of steps):
//! - **success rate** = won episodes / episodes; also per task type and per split
//!   when episodes carry them.
//! - **format-invalid rate** = steps whose output breaks the format rule / steps.
//! - **inadmissible-action rate** = steps whose executed action is not in that
//!   step's admissible list / steps. An invalid step with no single action block
//!   executes the empty command, which is never admissible, so it counts here too.
//!   Environments without an admissible list (unknown) are left out of both counts.
//! - **repetitive-action rate** = steps whose (observation, action) pair already
//!   occurred at an earlier step of the same episode / steps. Repeating an action
//!   in an unchanged situation is what makes no progress; repeating it after the
//!   world changed (going back to a receptacle to put something down) is not
//!   counted, which a plain "same action as before" rate would wrongly punish.
//! - **average actions** = steps per episode.
//! - **tag mix** = share of steps per tag, `none` for invalid-format steps.
//! - **per-tag reward statistics** = count, mean and population standard
//!   deviation of the meta-reasoning reward of the steps carrying each tag.
//!
//! Rates over zero steps or zero episodes are 0.

use std::collections::{BTreeMap, HashSet};

use crate::tag::Tag;

/// What the metrics need of one step.
#[derive(Debug, Clone, PartialEq)]
pub struct StepMetricsInput<'a> {
    pub observation: &'a str,
    pub action: &'a str,
    pub format_valid: bool,
    /// `None` when the format is invalid.
    pub tag: Option<Tag>,
    /// `None` when the environment has no admissible list.
    pub admissible: Option<bool>,
    pub mr_reward: f64,
}

/// What the metrics need of one episode.
#[derive(Debug, Clone, PartialEq)]
pub struct EpisodeMetricsInput<'a> {
    pub won: bool,
    pub task_type: Option<&'a str>,
    pub split: Option<&'a str>,
    pub steps: Vec<StepMetricsInput<'a>>,
}

#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct TagRewardStats {
    pub count: usize,
    pub mean: f64,
    pub std: f64,
}

/// Metrics of a set of episodes.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Metrics {
    pub episodes: usize,
    pub steps: usize,
    pub success_rate: f64,
    pub invalid_rate: f64,
    pub inadmissible_rate: f64,
    pub repetitive_rate: f64,
    pub avg_actions: f64,
    /// Share of steps per tag name (`planning`, `explore`, `reflection`, `monitor`, `none`).
    pub tag_mix: BTreeMap<String, f64>,
    pub tag_rewards: BTreeMap<String, TagRewardStats>,
    /// Success rate per task type, for episodes that name one.
    pub success_by_type: BTreeMap<String, f64>,
    /// Success rate per split, for episodes that name one.
    pub success_by_split: BTreeMap<String, f64>,
}

fn rate(count: usize, total: usize) -> f64 {
    if total == 0 { 0.0 } else { count as f64 / total as f64 }
}

fn tag_name(tag: Option<Tag>) -> &'static str {
    tag.map_or("none", Tag::name)
}

/// Steps of an episode whose (observation, action) pair occurred before in it.
pub fn repeated_steps(steps: &[StepMetricsInput]) -> usize {
    repeated_pairs(steps.iter().map(|s| (s.observation, s.action)))
}

/// How many (observation, action) pairs, in order, occurred before.
pub fn repeated_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> usize {
    let mut seen: HashSet<(&str, &str)> = HashSet::new();
    pairs.into_iter().filter(|&pair| !seen.insert(pair)).count()
}

fn success_by<'a>(episodes: &[EpisodeMetricsInput<'a>], key: impl Fn(&EpisodeMetricsInput<'a>) -> Option<&'a str>) -> BTreeMap<String, f64> {
    let mut counts: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for e in episodes {
        if let Some(k) = key(e) {
            let c = counts.entry(k.to_string()).or_default();
            c.0 += usize::from(e.won);
            c.1 += 1;
        }
    }
    counts.into_iter().map(|(k, (won, n))| (k, rate(won, n))).collect()
}

pub fn compute(episodes: &[EpisodeMetricsInput]) -> Metrics {
    let steps: Vec<&StepMetricsInput> = episodes.iter().flat_map(|e| &e.steps).collect();
    let n = steps.len();
    let with_list: Vec<bool> = steps.iter().filter_map(|s| s.admissible).collect();
    let mut tag_counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut tag_rewards: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for s in &steps {
        *tag_counts.entry(tag_name(s.tag).to_string()).or_default() += 1;
        tag_rewards.entry(tag_name(s.tag).to_string()).or_default().push(s.mr_reward);
    }
    Metrics {
        episodes: episodes.len(),
        steps: n,
        success_rate: rate(episodes.iter().filter(|e| e.won).count(), episodes.len()),
        invalid_rate: rate(steps.iter().filter(|s| !s.format_valid).count(), n),
        inadmissible_rate: rate(with_list.iter().filter(|&&a| !a).count(), with_list.len()),
        repetitive_rate: rate(episodes.iter().map(|e| repeated_steps(&e.steps)).sum(), n),
        avg_actions: if episodes.is_empty() { 0.0 } else { n as f64 / episodes.len() as f64 },
        tag_mix: tag_counts.into_iter().map(|(k, c)| (k, rate(c, n))).collect(),
        tag_rewards: tag_rewards
            .into_iter()
            .map(|(k, v)| {
                let mean = v.iter().sum::<f64>() / v.len() as f64;
                let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64;
                (k, TagRewardStats { count: v.len(), mean, std: var.sqrt() })
            })
            .collect(),
        success_by_type: success_by(episodes, |e| e.task_type),
        success_by_split: success_by(episodes, |e| e.split),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step<'a>(obs: &'a str, action: &'a str, tag: Option<Tag>, admissible: bool, mr: f64) -> StepMetricsInput<'a> {
        StepMetricsInput { observation: obs, action, format_valid: tag.is_some(), tag, admissible: Some(admissible), mr_reward: mr }
    }

    #[test]
    fn the_numbers() {
        let a = EpisodeMetricsInput {
            won: true,
            task_type: Some("pick"),
            split: Some("valid_seen"),
            steps: vec![
                step("o1", "go to desk 1", Some(Tag::Planning), true, 1.0),
                step("o2", "take pen 1 from desk 1", Some(Tag::Monitor), true, 0.0),
                step("o3", "", None, false, 0.0),
                step("o3", "", None, false, 0.0), // same observation and action as before: repetitive
            ],
        };
        let b = EpisodeMetricsInput { won: false, task_type: Some("cool"), split: Some("valid_seen"), steps: vec![step("o1", "look", Some(Tag::Explore), true, 1.0), step("o2", "look", Some(Tag::Explore), true, 0.0)] };
        let m = compute(&[a, b]);
        assert_eq!((m.episodes, m.steps), (2, 6));
        assert_eq!(m.success_rate, 0.5);
        assert_eq!(m.invalid_rate, 2.0 / 6.0);
        assert_eq!(m.inadmissible_rate, 2.0 / 6.0);
        assert_eq!(m.repetitive_rate, 1.0 / 6.0, "look in o2 differs from look in o1");
        assert_eq!(m.avg_actions, 3.0);
        assert_eq!(m.tag_mix["none"], 2.0 / 6.0);
        assert_eq!(m.tag_mix["explore"], 2.0 / 6.0);
        assert_eq!(m.tag_rewards["explore"], TagRewardStats { count: 2, mean: 0.5, std: 0.5 });
        assert_eq!(m.success_by_type["pick"], 1.0);
        assert_eq!(m.success_by_type["cool"], 0.0);
        assert_eq!(m.success_by_split["valid_seen"], 0.5);
    }

    #[test]
    fn empty_input_is_all_zero() {
        let m = compute(&[]);
        assert_eq!((m.success_rate, m.invalid_rate, m.avg_actions), (0.0, 0.0, 0.0));
    }
}
