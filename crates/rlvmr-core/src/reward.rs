//! Rewards: the outcome (trajectory) term and the verifiable meta-reasoning rewards of every step.
//!
//! Input: one episode as [`EpisodeFacts`] (its group id, whether it was won, and per step the
//! format validity, the tag, the executed action, its admissibility and the observation it acted
//! on). Output: [`EpisodeRewards`], one [`StepReward`] per step, in the input order. Everything
//! here is a deterministic function of one episode; nothing looks at other episodes.
//!
//! # Notation
//!
//! An episode has steps `t = 0..T`. For step `t`: `valid_t` (format valid), `tag_t` (the reasoning
//! tag; forced to none when `valid_t` is false), `a_t` (the stripped action text, `""` when
//! none), `adm_t` (the action is in the admissible list), `failed_t = !valid_t || !adm_t`.
//! `won` is the episode's success. Weights come from [`RewardConfig`] (defaults in brackets or
//! parentheses, the reference code's values).
//!
//! # Outcome (trajectory) term
//!
//! ```text
//! outcome_t = success_reward [10] * won  -  format_penalty [0.1] * !valid_t
//! ```
//!
//! The reference code puts the episode's outcome on *every* step (each step is one training
//! sample whose reward is the episode reward), and subtracts the invalid-format penalty from the
//! step that broke the format. Two further per-step quantities are recorded for the advantage
//! estimators:
//!
//! * `env_reward_t = success_reward * won * [t == T-1]`: the environment's reward, paid once on
//!   the last step (what GiGPO discounts);
//! * `format_penalty_t = format_penalty * !valid_t` (a non-negative amount).
//!
//! The *episode return* (paper form, RLOO) is `success_reward * won - format_penalty * #invalid`,
//! i.e. `sum_t env_reward_t - sum_t format_penalty_t` ([`EpisodeRewards::episode_return`]):
//! the outcome paid once, as in the spec's table, plus every step's penalty.
//!
//! # Meta-reasoning rewards
//!
//! `mr_t = 0` whenever `valid_t` is false or the step has no tag (the `<think>` baselines).
//! Otherwise, by `tag_t`:
//!
//! | tag | reward | rule |
//! |---|---|---|
//! | planning | `planning_reward` (1) | paid iff `won` |
//! | explore | `exploration_reward` (1) | see [`ExplorationRule`] |
//! | reflection | `reflection_reward` (1) | see [`ReflectionRule`] |
//! | monitor | `monitor_reward` (0) | always (the reward is 0 by default) |
//!
//! Exploration, [`ExplorationRule::NewAction`] (default; the reference code): paid iff no earlier
//! step `j < t` with `valid_j` has `a_j == a_t` (exact string comparison of stripped actions).
//!
//! Exploration, [`ExplorationRule::NewTarget`] (the paper: "reaches a new object or location"):
//! paid iff `adm_t` and some target of `a_t` (see [`action_targets`]) is not a target of any
//! earlier admissible action `a_j` (`j < t`, `adm_j`, format validity of `j` irrelevant since the
//! environment executed it anyway). "Seen" means *acted upon*, not *mentioned in an observation*:
//! in ALFWorld the first observation already lists every receptacle and an object can only be
//! taken after an observation has named it, so an observation-based rule would almost never
//! pay. An inadmissible action reaches nothing, hence `adm_t` is required.
//!
//! Reflection, [`ReflectionRule::PreviousStep`] (default; the reference code): paid iff the
//! previous step failed (`t == 0` counts as following a failure, or `failed_{t-1}`) and the
//! action changed (`t == 0`, or `a_t != a_{t-1}`).
//!
//! Reflection, [`ReflectionRule::AfterConsecutiveFailures`] `{ n }` (the paper: reflect after
//! failures): paid iff `t >= n`, the `n` steps `t-n .. t-1` all failed, and `a_t != a_{t-1}`.
//! The start of the episode is not a failure here, so with `n = 1` this differs from
//! `PreviousStep` only at `t = 0`.

use std::collections::HashSet;
use std::fmt;
use std::num::NonZeroU32;

use crate::tag::Tag;

/// One step of an episode, as the reward rules see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct StepFacts<'a> {
    /// The step's output passed the format check (strict or lenient, as configured by the parser).
    pub format_valid: bool,
    /// The reasoning tag. Ignored (treated as none) when `format_valid` is false; `None` for the
    /// `<think>` baselines.
    pub tag: Option<Tag>,
    /// The stripped action text sent to the environment, `""` when there was none.
    pub action: &'a str,
    /// The action is in the environment's admissible list.
    pub admissible: bool,
    /// The observation the step acted on: the anchor state GiGPO groups by.
    pub observation: &'a str,
    /// The reply as the model wrote it ([`Matching::Reference`] reads tags and actions from it).
    pub output: &'a str,
}

/// One episode: the group it belongs to, its outcome, and its steps in order.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EpisodeFacts<'a> {
    /// The group id: the G rollouts of one task (same game, same seed) share it.
    pub uid: &'a str,
    /// The episode ended in success.
    pub won: bool,
    pub steps: Vec<StepFacts<'a>>,
}

/// How an `explore` step earns its reward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExplorationRule {
    /// The reference code: the stripped action was not taken at an earlier valid-format step.
    #[default]
    NewAction,
    /// The paper: the (admissible) action names an object or location no earlier admissible
    /// action named; see [`action_targets`].
    NewTarget,
}

/// How a `reflection` step earns its reward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ReflectionRule {
    /// The reference code: right after a failed step (step 0 counts), with a changed action.
    #[default]
    PreviousStep,
    /// The paper: after `n >= 1` consecutive failed steps, with a changed action.
    AfterConsecutiveFailures { n: NonZeroU32 },
}

/// How the rules read a step's tag and action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Matching {
    /// The parsed step: the tag of its one reasoning block, its stripped action.
    #[default]
    Parsed,
    /// The reference code's string tests on the raw reply ([`reference_tag`],
    /// [`reference_actions`]): a monitor step, or a reply whose tag is written in capitals,
    /// counts as untagged; a monitor reply that mentions `<planning>` is a planning step;
    /// actions compare unstripped, case-sensitively, and one spanning a line break is no
    /// action at all.
    Reference,
}

/// The tag the reference code gives a valid reply: the first of `<planning>`, `<explore>`,
/// `<reflection>` found as a case-sensitive substring anywhere in it; `None` otherwise
/// (monitor included: its reward is 0 and it groups with the untagged steps).
pub fn reference_tag(output: &str) -> Option<Tag> {
    [Tag::Planning, Tag::Explore, Tag::Reflection].into_iter().find(|t| output.contains(&format!("<{}>", t.name())))
}

/// Every action the reference code's reward rules see in a reply: Python's
/// `re.findall(r'<action>(.*?)</action>', output)`, case-sensitive, raw, and without DOTALL
/// (a block holding a line break is no match; the search goes on from the next character).
pub fn reference_actions(output: &str) -> Vec<&str> {
    const OPEN: &str = "<action>";
    const CLOSE: &str = "</action>";
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(rel) = output[from..].find(OPEN) {
        let start = from + rel;
        let inner_start = start + OPEN.len();
        match output[inner_start..].find(CLOSE) {
            Some(len) if !output[inner_start..inner_start + len].contains('\n') => {
                found.push(&output[inner_start..inner_start + len]);
                from = inner_start + len + CLOSE.len();
            }
            _ => from = start + 1,
        }
    }
    found
}

/// Reward weights and rule variants. `Default` is the reference code's configuration.
///
/// In TOML: `exploration = "new_target"`, `reflection = "previous_step"` or
/// `reflection = { after_consecutive_failures = { n = 2 } }`. Missing keys take their default;
/// unknown keys are rejected.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RewardConfig {
    /// Outcome reward of a won episode, on every step's trajectory term.
    pub success_reward: f64,
    /// Subtracted from the trajectory term of each invalid-format step.
    pub format_penalty: f64,
    pub planning_reward: f64,
    pub exploration_reward: f64,
    pub reflection_reward: f64,
    pub monitor_reward: f64,
    pub exploration: ExplorationRule,
    pub reflection: ReflectionRule,
    /// How the rules read tags and actions: `parsed` or `reference`.
    pub matching: Matching,
}

impl Default for RewardConfig {
    fn default() -> Self {
        RewardConfig {
            success_reward: 10.0,
            format_penalty: 0.1,
            planning_reward: 1.0,
            exploration_reward: 1.0,
            reflection_reward: 1.0,
            monitor_reward: 0.0,
            exploration: ExplorationRule::NewAction,
            reflection: ReflectionRule::PreviousStep,
            matching: Matching::Parsed,
        }
    }
}

/// A reward configuration that cannot be used.
#[derive(Debug, Clone, PartialEq)]
pub struct RewardConfigError {
    /// The offending key.
    pub key: &'static str,
    pub value: f64,
}

impl fmt::Display for RewardConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "reward config: `{}` must be a finite number, got {}", self.key, self.value)
    }
}

impl std::error::Error for RewardConfigError {}

impl RewardConfig {
    /// Checks that every weight is finite (any sign is allowed: a negative weight is a penalty).
    pub fn validate(&self) -> Result<(), RewardConfigError> {
        let weights = [
            ("success_reward", self.success_reward),
            ("format_penalty", self.format_penalty),
            ("planning_reward", self.planning_reward),
            ("exploration_reward", self.exploration_reward),
            ("reflection_reward", self.reflection_reward),
            ("monitor_reward", self.monitor_reward),
        ];
        for (key, value) in weights {
            if !value.is_finite() {
                return Err(RewardConfigError { key, value });
            }
        }
        Ok(())
    }
}

/// The rewards of one step.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct StepReward<'a> {
    /// The tag the step counts as: its tag when the format is valid, else `None`.
    pub tag: Option<Tag>,
    /// The trajectory term: `success_reward * won - format_penalty * !valid`.
    pub outcome_reward: f64,
    /// The meta-reasoning reward (0 for invalid-format and untagged steps).
    pub mr_reward: f64,
    /// The environment's reward: `success_reward * won` on the last step, else 0.
    pub env_reward: f64,
    /// The format penalty this step paid (`format_penalty` or 0).
    pub format_penalty: f64,
    /// The observation the step acted on (GiGPO's anchor state), carried for grouping.
    pub anchor: &'a str,
}

/// The rewards of one episode, step by step in the input order.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EpisodeRewards<'a> {
    /// The group id.
    pub uid: &'a str,
    pub won: bool,
    pub steps: Vec<StepReward<'a>>,
}

impl EpisodeRewards<'_> {
    /// `sum_t env_reward_t - sum_t format_penalty_t` = `success_reward * won - format_penalty *
    /// #invalid`: the outcome paid once plus every step's penalty (0 for an episode without steps).
    pub fn episode_return(&self) -> f64 {
        let env: f64 = self.steps.iter().map(|s| s.env_reward).sum();
        let penalty: f64 = self.steps.iter().map(|s| s.format_penalty).sum();
        env - penalty
    }
}

/// Words that link or decorate the names in an action; they are never part of a target.
pub const TARGET_CONNECTORS: [&str; 14] =
    ["to", "from", "in", "on", "in/on", "into", "onto", "with", "at", "up", "around", "the", "a", "an"];

/// The objects and locations an action names, for [`ExplorationRule::NewTarget`].
///
/// The action is lower-cased and split on whitespace; the first word (the verb) is dropped;
/// the remaining words are cut into maximal runs of words that are not in
/// [`TARGET_CONNECTORS`]; each run, joined with single spaces, is one target. Examples:
/// `go to countertop 1` → `["countertop 1"]`; `take apple 1 from countertop 1` →
/// `["apple 1", "countertop 1"]`; `put apple 1 in/on desk 2` → `["apple 1", "desk 2"]`;
/// `pick up the red box` → `["red box"]`; `look`, `inventory` → `[]` (no target, never new).
pub fn action_targets(action: &str) -> Vec<String> {
    let lower = action.to_lowercase();
    let mut targets = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    for word in lower.split_whitespace().skip(1) {
        if TARGET_CONNECTORS.contains(&word) {
            if !current.is_empty() {
                targets.push(current.join(" "));
                current.clear();
            }
        } else {
            current.push(word);
        }
    }
    if !current.is_empty() {
        targets.push(current.join(" "));
    }
    targets
}

/// Computes every step's rewards for one episode (see the module docs for the rules).
///
/// The configuration is assumed valid ([`RewardConfig::validate`]); non-finite weights give
/// non-finite rewards, which the advantage estimators reject.
pub fn compute_rewards<'a>(config: &RewardConfig, episode: &EpisodeFacts<'a>) -> EpisodeRewards<'a> {
    let steps = &episode.steps;
    let won = if episode.won { 1.0 } else { 0.0 };
    let last = steps.len().checked_sub(1);
    // Targets named by earlier admissible actions (NewTarget only).
    let mut reached: HashSet<String> = HashSet::new();
    let mut out = Vec::with_capacity(steps.len());
    for (t, step) in steps.iter().enumerate() {
        let tag = match (step.format_valid, config.matching) {
            (false, _) => None,
            (true, Matching::Parsed) => step.tag,
            (true, Matching::Reference) => reference_tag(step.output),
        };
        let penalty = if step.format_valid { 0.0 } else { config.format_penalty };
        let mr_reward = match tag {
            None => 0.0,
            Some(Tag::Planning) if episode.won => config.planning_reward,
            Some(Tag::Explore) if exploration_earned(config, steps, t, &reached) => config.exploration_reward,
            Some(Tag::Reflection) if reflection_earned(config, steps, t) => config.reflection_reward,
            Some(Tag::Monitor) => config.monitor_reward,
            Some(_) => 0.0,
        };
        if step.admissible {
            reached.extend(action_targets(step.action));
        }
        out.push(StepReward {
            tag,
            outcome_reward: config.success_reward * won - penalty,
            mr_reward,
            env_reward: if Some(t) == last { config.success_reward * won } else { 0.0 },
            format_penalty: penalty,
            anchor: step.observation,
        });
    }
    EpisodeRewards { uid: episode.uid, won: episode.won, steps: out }
}

/// Whether steps `a` and `b` took the same action, as `matching` reads actions.
fn same_action(matching: Matching, a: &StepFacts<'_>, b: &StepFacts<'_>) -> bool {
    match matching {
        Matching::Parsed => a.action == b.action,
        Matching::Reference => reference_actions(a.output) == reference_actions(b.output),
    }
}

/// Whether the explore step `t` earns its reward under `config.exploration`; `reached` holds
/// the targets of the admissible actions of steps `0..t`.
fn exploration_earned(config: &RewardConfig, steps: &[StepFacts<'_>], t: usize, reached: &HashSet<String>) -> bool {
    let step = &steps[t];
    match config.exploration {
        ExplorationRule::NewAction => !steps[..t].iter().any(|p| p.format_valid && same_action(config.matching, p, step)),
        ExplorationRule::NewTarget => step.admissible && action_targets(step.action).iter().any(|x| !reached.contains(x)),
    }
}

fn failed(step: &StepFacts<'_>) -> bool {
    !step.format_valid || !step.admissible
}

/// Whether the reflection step `t` earns its reward under `config.reflection`.
fn reflection_earned(config: &RewardConfig, steps: &[StepFacts<'_>], t: usize) -> bool {
    let changed = t == 0 || !same_action(config.matching, &steps[t], &steps[t - 1]);
    match config.reflection {
        ReflectionRule::PreviousStep => changed && (t == 0 || failed(&steps[t - 1])),
        ReflectionRule::AfterConsecutiveFailures { n } => {
            let n = n.get() as usize;
            changed && t >= n && steps[t - n..t].iter().all(failed)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::value::{Error as DeError, MapDeserializer, StrDeserializer};
    use serde::Deserialize;

    fn step<'a>(valid: bool, tag: Option<Tag>, action: &'a str, admissible: bool) -> StepFacts<'a> {
        StepFacts { format_valid: valid, tag, action, admissible, observation: "obs", output: "" }
    }

    fn ep<'a>(won: bool, steps: Vec<StepFacts<'a>>) -> EpisodeFacts<'a> {
        EpisodeFacts { uid: "g", won, steps }
    }

    fn mr(r: &EpisodeRewards<'_>) -> Vec<f64> {
        r.steps.iter().map(|s| s.mr_reward).collect()
    }

    fn outcome(r: &EpisodeRewards<'_>) -> Vec<f64> {
        r.steps.iter().map(|s| s.outcome_reward).collect()
    }

    const P: Option<Tag> = Some(Tag::Planning);
    const E: Option<Tag> = Some(Tag::Explore);
    const R: Option<Tag> = Some(Tag::Reflection);
    const M: Option<Tag> = Some(Tag::Monitor);

    #[test]
    fn defaults_are_the_reference_values() {
        let c = RewardConfig::default();
        assert_eq!(
            (c.success_reward, c.format_penalty, c.planning_reward, c.exploration_reward, c.reflection_reward, c.monitor_reward),
            (10.0, 0.1, 1.0, 1.0, 1.0, 0.0)
        );
        assert_eq!(c.exploration, ExplorationRule::NewAction);
        assert_eq!(c.reflection, ReflectionRule::PreviousStep);
        assert!(c.validate().is_ok());
    }

    #[test]
    fn outcome_is_on_every_step_minus_the_format_penalty() {
        let cfg = RewardConfig::default();
        // Won episode, step 1 invalid: every step carries 10, step 1 pays 0.1 → [10, 9.9, 10].
        let e = ep(true, vec![step(true, P, "go to desk 1", true), step(false, None, "", false), step(true, M, "take pen 1 from desk 1", true)]);
        let r = compute_rewards(&cfg, &e);
        assert_eq!(outcome(&r), vec![10.0, 9.9, 10.0]);
        // The environment reward is paid once, on the last step.
        assert_eq!(r.steps.iter().map(|s| s.env_reward).collect::<Vec<_>>(), vec![0.0, 0.0, 10.0]);
        assert_eq!(r.steps.iter().map(|s| s.format_penalty).collect::<Vec<_>>(), vec![0.0, 0.1, 0.0]);
        // Episode return: 10 - 0.1 * 1 invalid step = 9.9.
        assert!((r.episode_return() - 9.9).abs() < 1e-12);
        // Lost: [0, -0.1, 0], return -0.1.
        let e = ep(false, e.steps.clone());
        let r = compute_rewards(&cfg, &e);
        assert_eq!(outcome(&r), vec![0.0, -0.1, 0.0]);
        assert_eq!(r.episode_return(), -0.1);
    }

    #[test]
    fn invalid_steps_have_no_tag_and_no_mr_reward() {
        let cfg = RewardConfig::default();
        // The parser's tag is ignored when the format is invalid.
        let e = ep(true, vec![step(false, P, "go to desk 1", true), step(false, E, "open drawer 1", true)]);
        let r = compute_rewards(&cfg, &e);
        assert_eq!(r.steps.iter().map(|s| s.tag).collect::<Vec<_>>(), vec![None, None]);
        assert_eq!(mr(&r), vec![0.0, 0.0]);
    }

    #[test]
    fn untagged_valid_steps_get_no_mr_reward() {
        // The <think> baselines: valid format, no tag.
        let r = compute_rewards(&RewardConfig::default(), &ep(true, vec![step(true, None, "look", true)]));
        assert_eq!(mr(&r), vec![0.0]);
        assert_eq!(outcome(&r), vec![10.0]);
    }

    #[test]
    fn planning_pays_only_in_won_episodes() {
        let cfg = RewardConfig::default();
        let steps = vec![step(true, P, "go to desk 1", true), step(true, P, "go to desk 1", true)];
        assert_eq!(mr(&compute_rewards(&cfg, &ep(true, steps.clone()))), vec![1.0, 1.0]);
        assert_eq!(mr(&compute_rewards(&cfg, &ep(false, steps))), vec![0.0, 0.0]);
    }

    #[test]
    fn monitor_pays_its_weight() {
        let mut cfg = RewardConfig::default();
        let e = ep(false, vec![step(true, M, "look", true)]);
        assert_eq!(mr(&compute_rewards(&cfg, &e)), vec![0.0]);
        cfg.monitor_reward = 0.5;
        assert_eq!(mr(&compute_rewards(&cfg, &e)), vec![0.5]);
    }

    #[test]
    fn exploration_new_action() {
        let cfg = RewardConfig::default();
        let e = ep(
            false,
            vec![
                step(true, E, "go to desk 1", true),    // new → 1
                step(true, E, "go to desk 1", true),    // taken at step 0 (valid) → 0
                step(false, E, "open drawer 1", true),  // invalid format → 0
                step(true, E, "open drawer 1", true),   // step 2 had invalid format: still new → 1
                step(true, M, "go to shelf 1", true),   // monitor → 0, but records the action
                step(true, E, "go to shelf 1", false),  // taken at valid step 4 → 0
                step(true, E, "go to shelf 2", false),  // new (admissibility irrelevant) → 1
            ],
        );
        assert_eq!(mr(&compute_rewards(&cfg, &e)), vec![1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0]);
    }

    #[test]
    fn action_targets_examples() {
        assert_eq!(action_targets("go to countertop 1"), vec!["countertop 1"]);
        assert_eq!(action_targets("take apple 1 from countertop 1"), vec!["apple 1", "countertop 1"]);
        assert_eq!(action_targets("put apple 1 in/on desk 2"), vec!["apple 1", "desk 2"]);
        assert_eq!(action_targets("Pick  up the Red box"), vec!["red box"]);
        assert_eq!(action_targets("open door to kitchen"), vec!["door", "kitchen"]);
        assert!(action_targets("look").is_empty());
        assert!(action_targets("look around").is_empty());
        assert!(action_targets("").is_empty());
    }

    #[test]
    fn exploration_new_target() {
        let cfg = RewardConfig { exploration: ExplorationRule::NewTarget, ..RewardConfig::default() };
        let e = ep(
            false,
            vec![
                step(true, E, "go to countertop 1", true),              // countertop 1 new → 1
                step(true, E, "take apple 1 from countertop 1", true),  // apple 1 new → 1
                step(true, E, "go to countertop 1", true),              // nothing new → 0
                step(true, E, "go to fridge 1", false),                 // inadmissible → 0 (and not recorded)
                step(true, E, "open fridge 1", true),                   // fridge 1 new (step 3 inadmissible) → 1
                step(true, E, "look", true),                            // no target → 0
                step(false, M, "go to sink 1", true),                   // invalid format, but executed: records sink 1
                step(true, E, "go to sink 1", true),                    // sink 1 already reached → 0
            ],
        );
        assert_eq!(mr(&compute_rewards(&cfg, &e)), vec![1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]);
    }

    #[test]
    fn reflection_previous_step() {
        let cfg = RewardConfig::default();
        let e = ep(
            false,
            vec![
                step(true, R, "go to desk 1", true),     // step 0 follows a "failure", no previous action → 1
                step(true, R, "go to desk 2", true),     // previous step succeeded → 0
                step(true, M, "open box 1", false),      // inadmissible: a failure
                step(true, R, "open box 1", true),       // after a failure but same action → 0
                step(false, None, "xyz", false),         // invalid format: a failure
                step(true, R, "open box 2", true),       // after a failure, action changed → 1
                step(true, M, "go to desk 3", true),
                step(true, R, "go to desk 4", false),    // previous step succeeded → 0
            ],
        );
        assert_eq!(mr(&compute_rewards(&cfg, &e)), vec![1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0]);
    }

    #[test]
    fn reflection_after_consecutive_failures() {
        let n2 = ReflectionRule::AfterConsecutiveFailures { n: NonZeroU32::new(2).unwrap() };
        let cfg = RewardConfig { reflection: n2, ..RewardConfig::default() };
        let steps = vec![
            step(true, R, "a", true),          // t=0 < n → 0
            step(false, None, "b", false),     // failure
            step(true, R, "c", true),          // only 1 failure before (step 0 succeeded) → 0
            step(true, M, "d", false),         // failure
            step(false, None, "e", true),      // failure
            step(true, R, "f", true),          // steps 3, 4 failed, action changed → 1
            step(true, M, "g", false),         // failure
            step(true, M, "g", false),         // failure
            step(true, R, "g", true),          // two failures but same action as step 7 → 0
        ];
        assert_eq!(mr(&compute_rewards(&cfg, &ep(false, steps.clone()))), vec![0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]);
        // n = 1: like PreviousStep except that step 0 earns nothing; step 2 follows failed step 1 → 1.
        let n1 = ReflectionRule::AfterConsecutiveFailures { n: NonZeroU32::new(1).unwrap() };
        let cfg = RewardConfig { reflection: n1, ..RewardConfig::default() };
        assert_eq!(mr(&compute_rewards(&cfg, &ep(false, steps))), vec![0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]);
    }

    #[test]
    fn empty_episode_has_no_rewards() {
        let r = compute_rewards(&RewardConfig::default(), &ep(true, vec![]));
        assert!(r.steps.is_empty());
        assert_eq!(r.episode_return(), 0.0);
    }

    #[test]
    fn anchors_and_uid_are_carried() {
        let e = EpisodeFacts {
            uid: "task-7",
            won: false,
            steps: vec![StepFacts { format_valid: true, tag: M, action: "look", admissible: true, observation: "You are in a room.", output: "" }],
        };
        let r = compute_rewards(&RewardConfig::default(), &e);
        assert_eq!(r.uid, "task-7");
        assert_eq!(r.steps[0].anchor, "You are in a room.");
    }

    #[test]
    fn config_deserialises_with_defaults_and_rejects_unknown_keys() {
        let map = |pairs: Vec<(&'static str, f64)>| -> MapDeserializer<'static, _, DeError> { MapDeserializer::new(pairs.into_iter()) };
        let c = RewardConfig::deserialize(map(vec![("success_reward", 5.0)])).unwrap();
        assert_eq!(c, RewardConfig { success_reward: 5.0, ..RewardConfig::default() });
        assert!(RewardConfig::deserialize(map(vec![("successs_reward", 5.0)])).is_err());
        let rule = |s: &'static str| ExplorationRule::deserialize(StrDeserializer::<DeError>::new(s));
        assert_eq!(rule("new_target").unwrap(), ExplorationRule::NewTarget);
        assert!(rule("newtarget").is_err());
        let refl = ReflectionRule::deserialize(StrDeserializer::<DeError>::new("previous_step")).unwrap();
        assert_eq!(refl, ReflectionRule::PreviousStep);
    }

    #[test]
    fn validate_rejects_non_finite_weights() {
        let c = RewardConfig { reflection_reward: f64::NAN, ..RewardConfig::default() };
        let err = c.validate().unwrap_err();
        assert_eq!(err.key, "reflection_reward");
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        const ACTIONS: [&str; 5] = ["go to desk 1", "go to shelf 1", "take pen 1 from desk 1", "look", ""];

        fn facts() -> impl Strategy<Value = EpisodeFacts<'static>> {
            let step = (any::<bool>(), prop_oneof![Just(None), Just(P), Just(E), Just(R), Just(M)], 0..ACTIONS.len(), any::<bool>())
                .prop_map(|(valid, tag, a, admissible)| StepFacts { format_valid: valid, tag, action: ACTIONS[a], admissible, observation: "o", output: "" });
            (any::<bool>(), prop::collection::vec(step, 0..12)).prop_map(|(won, steps)| EpisodeFacts { uid: "g", won, steps })
        }

        fn config() -> impl Strategy<Value = RewardConfig> {
            let rule = prop_oneof![
                Just(ReflectionRule::PreviousStep),
                (1u32..4).prop_map(|n| ReflectionRule::AfterConsecutiveFailures { n: NonZeroU32::new(n).unwrap() }),
            ];
            let explore = prop_oneof![Just(ExplorationRule::NewAction), Just(ExplorationRule::NewTarget)];
            (explore, rule, 0.5..2.0f64).prop_map(|(exploration, reflection, m)| RewardConfig {
                exploration,
                reflection,
                monitor_reward: m,
                ..RewardConfig::default()
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

            #[test]
            fn per_step_invariants(e in facts(), c in config()) {
                let r = compute_rewards(&c, &e);
                prop_assert_eq!(r.steps.len(), e.steps.len());
                let won = if e.won { 1.0 } else { 0.0 };
                let mut invalid = 0.0;
                for (t, (s, f)) in r.steps.iter().zip(&e.steps).enumerate() {
                    prop_assert_eq!(s.outcome_reward, 10.0 * won - if f.format_valid { 0.0 } else { 0.1 });
                    prop_assert_eq!(s.env_reward, if t + 1 == e.steps.len() { 10.0 * won } else { 0.0 });
                    if !f.format_valid {
                        invalid += 1.0;
                        prop_assert_eq!(s.tag, None);
                        prop_assert_eq!(s.mr_reward, 0.0);
                    } else {
                        prop_assert_eq!(s.tag, f.tag);
                    }
                    let weight = match s.tag {
                        None => 0.0,
                        Some(Tag::Planning) => c.planning_reward * won,
                        Some(Tag::Explore) => c.exploration_reward,
                        Some(Tag::Reflection) => c.reflection_reward,
                        Some(Tag::Monitor) => c.monitor_reward,
                    };
                    prop_assert!(s.mr_reward == 0.0 || s.mr_reward == weight, "{:?}", s);
                    if s.tag == Some(Tag::Monitor) {
                        prop_assert_eq!(s.mr_reward, c.monitor_reward);
                    }
                }
                // An episode without steps has no last step to pay the outcome on: return 0.
                let expected = if e.steps.is_empty() { 0.0 } else { 10.0 * won - 0.1 * invalid };
                prop_assert!((r.episode_return() - expected).abs() < 1e-9);
            }

            #[test]
            fn new_action_pays_each_action_at_most_once_per_valid_run(e in facts()) {
                // Under NewAction, once an action was taken at a valid step, no later explore
                // step with that action is paid.
                let r = compute_rewards(&RewardConfig::default(), &e);
                let mut taken: HashSet<&str> = HashSet::new();
                for (s, f) in r.steps.iter().zip(&e.steps) {
                    if s.tag == Some(Tag::Explore) {
                        prop_assert_eq!(s.mr_reward == 1.0, !taken.contains(f.action));
                    }
                    if f.format_valid {
                        taken.insert(f.action);
                    }
                }
            }
        }
    }
}
