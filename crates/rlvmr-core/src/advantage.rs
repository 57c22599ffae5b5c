//! Advantages: GRPO-MR (reference and paper forms), GRPO, GiGPO and RLOO, over step samples.
//!
//! Input: the rewards of a batch of episodes ([`EpisodeRewards`], from
//! [`crate::reward::compute_rewards`]); episodes sharing a `uid` form one group (the G rollouts of
//! one task). Output: one advantage per step, per episode, in the input order
//! ([`compute_advantages`]), or the same with its two components ([`compute_advantage_terms`]).
//! Every step is one training sample; its advantage is broadcast to all its response tokens by
//! the trainer.
//!
//! The functions are deterministic and order-independent: permuting the episodes of the batch
//! permutes the outputs and changes no bit of them (group statistics are summed in a canonical
//! order: ascending values).
//!
//! # Group normalisation `N`
//!
//! For a value `x` in a group `X = {x_1..x_n}`:
//!
//! ```text
//! n == 1:  m = 0,            s = 1                       (the reference code's convention)
//! n >= 2:  m = mean(X),      s = sqrt( sum_k (x_k - m)^2 / (n - 1) )   (unbiased)
//! N(x) = (x - m) / (s + epsilon)    norm = mean_std_norm (default)
//! N(x) =  x - m                     norm = mean_norm
//! ```
//!
//! So a one-sample group gives `x / (1 + epsilon)` (≈ `x`; exactly `x` under `mean_norm`), and a
//! group whose values are all equal gives exactly 0 (the mean is computed as
//! `min + sum(x_k - min) / n`, which is exact for equal values, so `x - m == 0` and no division
//! by a vanishing std can blow up).
//!
//! # Terms (notation of [`crate::reward`]; `i` is a step sample of episode `e(i)`, `u(i)` its uid)
//!
//! * **Episode term, reference form** (every algorithm but RLOO, `form = reference`):
//!   `E_i = N(outcome_i)` over the step samples of `u(i)`, where
//!   `outcome_i = success_reward * won - format_penalty * !valid_i` is the step's trajectory
//!   term. Long episodes weigh more in the statistics, as in the reference code.
//! * **Episode term, paper form** (`form = paper`): `E_i = N(R_{e(i)})` over the *episodes* of
//!   `u(i)` (one sample per episode), where
//!   `R_e = success_reward * won_e - format_penalty * #invalid_e` is the episode return
//!   ([`EpisodeRewards::episode_return`]); every step of an episode gets its episode's value.
//! * **Tag term** (GRPO-MR): `T_i = N(mr_i)` over the step samples with the same key
//!   `(u(i), tag_i)` (`tag_scope = uid`, default, the reference code) or `tag_i` alone
//!   (`tag_scope = batch`: all steps carrying the tag across the batch). Invalid-format and
//!   untagged steps have tag *none* and form their own `(uid, none)` (or `none`) group, as the
//!   reference code's grouping by tag string does; their `mr` is 0, so their tag term is 0.
//! * **Step term** (GiGPO): discounted returns of the environment reward within each episode,
//!   `G_t = env_t + gamma * G_{t+1}` (`G_T = 0`; `env_t = success_reward * won` on the last step,
//!   else 0), then `v_t = G_t - format_penalty_t` (the reference applies the invalid-format
//!   penalty after discounting, to the step that broke the format only), and
//!   `S_i = N(v_i)` over the step samples with the same `(u(i), anchor_i)`: the steps of the
//!   group that acted on an identical observation. Meta-reasoning rewards do not enter GiGPO.
//! * **Leave-one-out term** (RLOO): over the episodes of a uid, `L_e = R_e - mean_{e' != e} R_e'`
//!   when the group has `n >= 2` episodes, and `L_e = R_e` when it has one (baseline 0, the same
//!   convention as `N`); broadcast to the episode's steps. `form` and `norm` do not apply.
//!
//! # Algorithms
//!
//! | `algo` | `form` | advantage `A_i` | `episode` / `step` components |
//! |---|---|---|---|
//! | `grpo_mr` (default) | `reference` (default) | `E_i + w * T_i` | `E_i` / `T_i` |
//! | `grpo_mr` | `paper` | `alpha * E_i + (1 - alpha) * T_i` | `E_i` / `T_i` |
//! | `grpo` | either | `E_i` | `E_i` / 0 |
//! | `gigpo` | either | `E_i + w * S_i` | `E_i` / `S_i` |
//! | `rloo` | ignored | `L_{e(i)}` | `L_{e(i)}` / 0 |
//!
//! Defaults: `w = 1`, `alpha = 0.5`, `gamma = 0.95`, `epsilon = 1e-6`.
//!
//! # The tag term in lost episodes (`tag_lift`, this project's variant, not the paper's)
//!
//! With `tag_lift = always` (default: the paper and the reference code) the formulas above hold
//! as written. With `tag_lift = won_only`, GRPO-MR lets the tag term lift a step only in a won
//! episode; in a lost one it can only lower it:
//!
//! ```text
//! T'_i = T_i             if the episode of i was won
//! T'_i = min(T_i, 0)     if it was lost
//! ```
//!
//! and `T'_i` replaces `T_i` in the combination (both forms). Why: under `always`, the paid
//! `explore` steps of lost episodes sit above their (uid, explore) group's mean, so their tag
//! term outweighs the negative outcome term (and is the whole advantage in a group where every
//! episode lost), and the policy is taught to wander in the games it fails (`rlvmr advantages`,
//! docs/training.md). `won_only` keeps what the process reward says against a lost step (an
//! explore step that repeats an action, a plan in a lost episode) and keeps the order of a lost
//! episode's steps, but no step of a lost episode ends above its outcome term. The `step`
//! component reported is `T_i`, before the bound. GRPO, GiGPO and RLOO have no tag term and are
//! unchanged.
//!
//! Episodes without steps have no samples and contribute nothing to any statistic. Empty input
//! gives empty output. Rewards must be finite ([`AdvantageError::NonFinite`] otherwise); outputs
//! are then finite as long as the rewards are of sane magnitude (|x| far below 1e150, so that
//! squares do not overflow).

use std::collections::BTreeMap;
use std::fmt;

use crate::reward::EpisodeRewards;
use crate::tag::Tag;

/// The advantage estimator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Algo {
    /// RLVMR: episode term plus meta-reasoning (tag) term.
    #[default]
    GrpoMr,
    /// The episode term alone.
    Grpo,
    /// Episode term plus anchor-state step term on discounted returns.
    Gigpo,
    /// Leave-one-out mean baseline over the group's episodes.
    Rloo,
}

/// Reference code or paper formulation (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Form {
    /// Episode term over step samples; GRPO-MR combines `E + w * T`.
    #[default]
    Reference,
    /// Episode term over episodes; GRPO-MR combines `alpha * E + (1 - alpha) * T`.
    Paper,
}

/// How a group normalises its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Norm {
    /// `(x - mean) / (std + epsilon)`.
    #[default]
    MeanStdNorm,
    /// `x - mean`.
    MeanNorm,
}

/// Which steps share a tag group in the GRPO-MR tag term.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TagScope {
    /// Steps of the same uid with the same tag (the reference code).
    #[default]
    Uid,
    /// All steps of the batch with the same tag.
    Batch,
}

/// Whether GRPO-MR's tag term may lift the steps of a lost episode (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TagLift {
    /// The tag term as published: `E + w * T` for every step.
    #[default]
    Always,
    /// This project's variant: in a lost episode the tag term is `min(T, 0)`.
    WonOnly,
}

/// Advantage settings. `Default` is the reference code's GRPO-MR.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdvantageConfig {
    pub algo: Algo,
    pub form: Form,
    pub norm: Norm,
    pub tag_scope: TagScope,
    /// Whether the tag term may lift a lost episode's steps (GRPO-MR only).
    pub tag_lift: TagLift,
    /// Weight of the tag term (GRPO-MR, reference form) or of the step term (GiGPO).
    pub w: f64,
    /// Weight of the episode term in the paper form of GRPO-MR, in `[0, 1]`.
    pub alpha: f64,
    /// GiGPO's discount, in `[0, 1]`.
    pub gamma: f64,
    /// Added to the std before dividing; `> 0`.
    pub epsilon: f64,
}

impl Default for AdvantageConfig {
    fn default() -> Self {
        AdvantageConfig {
            algo: Algo::GrpoMr,
            form: Form::Reference,
            norm: Norm::MeanStdNorm,
            tag_scope: TagScope::Uid,
            tag_lift: TagLift::Always,
            w: 1.0,
            alpha: 0.5,
            gamma: 0.95,
            epsilon: 1e-6,
        }
    }
}

/// Why advantages could not be computed.
#[derive(Debug, Clone, PartialEq)]
pub enum AdvantageError {
    /// A configuration value is out of range.
    Config { key: &'static str, value: f64, expected: &'static str },
    /// A reward is NaN or infinite.
    NonFinite { episode: usize, step: usize, field: &'static str, value: f64 },
}

impl fmt::Display for AdvantageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AdvantageError::Config { key, value, expected } => {
                write!(f, "advantage config: `{key}` = {value}, expected {expected}")
            }
            AdvantageError::NonFinite { episode, step, field, value } => {
                write!(f, "episode {episode}, step {step}: `{field}` is not finite ({value})")
            }
        }
    }
}

impl std::error::Error for AdvantageError {}

impl AdvantageConfig {
    /// Checks the ranges: `w` finite, `alpha` and `gamma` in `[0, 1]`, `epsilon` finite and `> 0`.
    pub fn validate(&self) -> Result<(), AdvantageError> {
        let bad = |key, value, expected| Err(AdvantageError::Config { key, value, expected });
        if !self.w.is_finite() {
            return bad("w", self.w, "a finite number");
        }
        if !(0.0..=1.0).contains(&self.alpha) {
            return bad("alpha", self.alpha, "a number in [0, 1]");
        }
        if !(0.0..=1.0).contains(&self.gamma) {
            return bad("gamma", self.gamma, "a number in [0, 1]");
        }
        if !(self.epsilon.is_finite() && self.epsilon > 0.0) {
            return bad("epsilon", self.epsilon, "a finite number > 0");
        }
        Ok(())
    }
}

/// One step's advantage and its two components (see the table in the module docs).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct AdvantageTerms {
    /// The episode term `E` (or RLOO's `L`).
    pub episode: f64,
    /// The tag term `T` (GRPO-MR) or step term `S` (GiGPO), unweighted; 0 for GRPO and RLOO.
    pub step: f64,
    /// The advantage the trainer uses.
    pub advantage: f64,
}

/// One advantage per step, per episode, in the input order.
pub fn compute_advantages(config: &AdvantageConfig, episodes: &[EpisodeRewards<'_>]) -> Result<Vec<Vec<f64>>, AdvantageError> {
    let terms = compute_advantage_terms(config, episodes)?;
    Ok(terms.into_iter().map(|ep| ep.into_iter().map(|t| t.advantage).collect()).collect())
}

/// Like [`compute_advantages`], with each step's episode and step components.
pub fn compute_advantage_terms(config: &AdvantageConfig, episodes: &[EpisodeRewards<'_>]) -> Result<Vec<Vec<AdvantageTerms>>, AdvantageError> {
    config.validate()?;
    check_finite(episodes)?;
    let (norm, eps) = (config.norm, config.epsilon);

    // Step samples, flattened in input order: (episode, step).
    let samples: Vec<(usize, usize)> =
        episodes.iter().enumerate().flat_map(|(e, ep)| (0..ep.steps.len()).map(move |t| (e, t))).collect();
    let step = |&(e, t): &(usize, usize)| &episodes[e].steps[t];

    let episode_term: Vec<f64> = match (config.algo, config.form) {
        (Algo::Rloo, _) => {
            let per_episode = per_episode(episodes, |values, keys| leave_one_out_in_groups(values, keys));
            samples.iter().map(|&(e, _)| per_episode[e]).collect()
        }
        (_, Form::Reference) => {
            let values: Vec<f64> = samples.iter().map(|s| step(s).outcome_reward).collect();
            let keys: Vec<&str> = samples.iter().map(|&(e, _)| episodes[e].uid).collect();
            normalize_in_groups(&values, &keys, norm, eps)
        }
        (_, Form::Paper) => {
            let per_episode = per_episode(episodes, |values, keys| normalize_in_groups(values, keys, norm, eps));
            samples.iter().map(|&(e, _)| per_episode[e]).collect()
        }
    };

    let step_term: Vec<f64> = match config.algo {
        Algo::Grpo | Algo::Rloo => vec![0.0; samples.len()],
        Algo::GrpoMr => {
            let values: Vec<f64> = samples.iter().map(|s| step(s).mr_reward).collect();
            let keys: Vec<(Option<&str>, Option<Tag>)> = samples
                .iter()
                .map(|&(e, t)| {
                    let uid = match config.tag_scope {
                        TagScope::Uid => Some(episodes[e].uid),
                        TagScope::Batch => None,
                    };
                    (uid, episodes[e].steps[t].tag)
                })
                .collect();
            normalize_in_groups(&values, &keys, norm, eps)
        }
        Algo::Gigpo => {
            let mut values = Vec::with_capacity(samples.len());
            for ep in episodes {
                let env: Vec<f64> = ep.steps.iter().map(|s| s.env_reward).collect();
                let returns = discounted_returns(&env, config.gamma);
                values.extend(returns.iter().zip(&ep.steps).map(|(g, s)| g - s.format_penalty));
            }
            let keys: Vec<(&str, &str)> = samples.iter().map(|s| (episodes[s.0].uid, step(s).anchor)).collect();
            normalize_in_groups(&values, &keys, norm, eps)
        }
    };

    // The tag term as combined: bounded above by 0 in lost episodes under `won_only`.
    let lifted = |won: bool, s: f64| match (config.algo, config.tag_lift) {
        (Algo::GrpoMr, TagLift::WonOnly) if !won => s.min(0.0),
        _ => s,
    };
    let combine = |e: f64, s: f64| match (config.algo, config.form) {
        (Algo::GrpoMr, Form::Reference) | (Algo::Gigpo, _) => e + config.w * s,
        (Algo::GrpoMr, Form::Paper) => config.alpha * e + (1.0 - config.alpha) * s,
        (Algo::Grpo, _) | (Algo::Rloo, _) => e,
    };

    let mut out: Vec<Vec<AdvantageTerms>> = episodes.iter().map(|ep| Vec::with_capacity(ep.steps.len())).collect();
    for (k, &(e, _)) in samples.iter().enumerate() {
        let (episode, step) = (episode_term[k], step_term[k]);
        out[e].push(AdvantageTerms { episode, step, advantage: combine(episode, lifted(episodes[e].won, step)) });
    }
    Ok(out)
}

/// Applies `f` to the episode returns of the episodes that have steps, keyed by uid, and returns
/// one value per episode (0 for episodes without steps, which have no samples anyway).
fn per_episode(episodes: &[EpisodeRewards<'_>], f: impl Fn(&[f64], &[&str]) -> Vec<f64>) -> Vec<f64> {
    let present: Vec<usize> = (0..episodes.len()).filter(|&e| !episodes[e].steps.is_empty()).collect();
    let values: Vec<f64> = present.iter().map(|&e| episodes[e].episode_return()).collect();
    let keys: Vec<&str> = present.iter().map(|&e| episodes[e].uid).collect();
    let mut out = vec![0.0; episodes.len()];
    for (&e, v) in present.iter().zip(f(&values, &keys)) {
        out[e] = v;
    }
    out
}

fn check_finite(episodes: &[EpisodeRewards<'_>]) -> Result<(), AdvantageError> {
    for (e, ep) in episodes.iter().enumerate() {
        for (t, s) in ep.steps.iter().enumerate() {
            let fields = [
                ("outcome_reward", s.outcome_reward),
                ("mr_reward", s.mr_reward),
                ("env_reward", s.env_reward),
                ("format_penalty", s.format_penalty),
            ];
            for (field, value) in fields {
                if !value.is_finite() {
                    return Err(AdvantageError::NonFinite { episode: e, step: t, field, value });
                }
            }
        }
    }
    Ok(())
}

/// Indices of `keys`, grouped by key.
fn groups<K: Ord + Clone>(keys: &[K]) -> BTreeMap<K, Vec<usize>> {
    let mut map: BTreeMap<K, Vec<usize>> = BTreeMap::new();
    for (i, k) in keys.iter().enumerate() {
        map.entry(k.clone()).or_default().push(i);
    }
    map
}

/// The values of one group, ascending (the canonical summation order).
fn sorted(values: &[f64], members: &[usize]) -> Vec<f64> {
    let mut v: Vec<f64> = members.iter().map(|&i| values[i]).collect();
    v.sort_by(f64::total_cmp);
    v
}

/// `(mean, unbiased std)` of an ascending, non-empty slice; `(0, 1)` for a single value.
/// The mean is `min + sum(x - min) / n`, exact when all values are equal.
fn mean_std(sorted: &[f64]) -> (f64, f64) {
    let n = sorted.len();
    if n == 1 {
        return (0.0, 1.0);
    }
    let shift = sorted[0];
    let mean = shift + sorted.iter().map(|x| x - shift).sum::<f64>() / n as f64;
    let var = sorted.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1) as f64;
    (mean, var.sqrt())
}

/// `N(x)` of the module docs, for every value, with groups given by equal keys.
/// `values` and `keys` have the same length; the output is in their order.
pub fn normalize_in_groups<K: Ord + Clone>(values: &[f64], keys: &[K], norm: Norm, epsilon: f64) -> Vec<f64> {
    assert_eq!(values.len(), keys.len(), "one key per value");
    let mut out = vec![0.0; values.len()];
    for members in groups(keys).values() {
        let (mean, std) = mean_std(&sorted(values, members));
        for &i in members {
            out[i] = match norm {
                Norm::MeanStdNorm => (values[i] - mean) / (std + epsilon),
                Norm::MeanNorm => values[i] - mean,
            };
        }
    }
    out
}

/// `x - mean(others in the group)`; `x` itself in a group of one.
/// Computed as `(x - c) - (sum(v - c) - (x - c)) / (n - 1)` with `c` the group's minimum,
/// exact (0) when all values are equal.
pub fn leave_one_out_in_groups<K: Ord + Clone>(values: &[f64], keys: &[K]) -> Vec<f64> {
    assert_eq!(values.len(), keys.len(), "one key per value");
    let mut out = vec![0.0; values.len()];
    for members in groups(keys).values() {
        let n = members.len();
        if n == 1 {
            out[members[0]] = values[members[0]];
            continue;
        }
        let v = sorted(values, members);
        let shift = v[0];
        let total: f64 = v.iter().map(|x| x - shift).sum();
        for &i in members {
            let own = values[i] - shift;
            out[i] = own - (total - own) / (n - 1) as f64;
        }
    }
    out
}

/// `G_t = r_t + gamma * G_{t+1}`, `G_T = 0`, for one episode's rewards in step order.
pub fn discounted_returns(rewards: &[f64], gamma: f64) -> Vec<f64> {
    let mut out = vec![0.0; rewards.len()];
    let mut running = 0.0;
    for t in (0..rewards.len()).rev() {
        running = rewards[t] + gamma * running;
        out[t] = running;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reward::{compute_rewards, EpisodeFacts, RewardConfig, StepFacts, StepReward};
    use serde::de::value::{Error as DeError, MapDeserializer, StrDeserializer};
    use serde::Deserialize;

    const EPS: f64 = 1e-6;
    const P: Option<Tag> = Some(Tag::Planning);
    const E: Option<Tag> = Some(Tag::Explore);
    const R: Option<Tag> = Some(Tag::Reflection);
    const M: Option<Tag> = Some(Tag::Monitor);

    fn fact<'a>(valid: bool, tag: Option<Tag>, action: &'a str, observation: &'a str) -> StepFacts<'a> {
        StepFacts { format_valid: valid, tag, action, admissible: true, observation, output: "" }
    }

    fn close(actual: &[f64], expected: &[f64]) {
        assert_eq!(actual.len(), expected.len(), "{actual:?} vs {expected:?}");
        for (a, e) in actual.iter().zip(expected) {
            assert!((a - e).abs() <= 1e-9 * (1.0 + e.abs()), "{actual:?} vs {expected:?}");
        }
    }

    fn flat(v: &[Vec<f64>]) -> Vec<f64> {
        v.iter().flatten().copied().collect()
    }

    fn cfg(algo: Algo, form: Form, norm: Norm) -> AdvantageConfig {
        AdvantageConfig { algo, form, norm, ..AdvantageConfig::default() }
    }

    /// The running example: one group `g` of two episodes.
    ///
    /// * A (won):  planning "go to desk 1" (mr 1: won), explore "open drawer 1" (mr 1: new).
    ///   Outcomes 10, 10.
    /// * B (lost): planning "go to desk 1" (mr 0: lost), an invalid step (tag none, mr 0,
    ///   outcome -0.1), reflection "go to shelf 1" (mr 1: after an invalid step, new action).
    ///   Outcomes 0, -0.1, 0.
    fn example() -> Vec<EpisodeFacts<'static>> {
        vec![
            EpisodeFacts { uid: "g", won: true, steps: vec![fact(true, P, "go to desk 1", "o0"), fact(true, E, "open drawer 1", "o1")] },
            EpisodeFacts {
                uid: "g",
                won: false,
                steps: vec![fact(true, P, "go to desk 1", "o0"), fact(false, None, "", "o1"), fact(true, R, "go to shelf 1", "o1")],
            },
        ]
    }

    fn rewards<'a>(facts: &[EpisodeFacts<'a>]) -> Vec<EpisodeRewards<'a>> {
        facts.iter().map(|f| compute_rewards(&RewardConfig::default(), f)).collect()
    }

    // Episode term of the example, reference form, mean_std_norm. Step outcomes
    // [10, 10 | 0, -0.1, 0]: mean 19.9 / 5 = 3.98; squared deviations 6.02² + 6.02² + 3.98² +
    // 4.08² + 3.98² = 120.808; unbiased var 120.808 / 4 = 30.202; std 5.495634631232320.
    // (10 - 3.98) / (5.4956346312 + 1e-6) = 1.0954146897562964,
    // (0 - 3.98) / (...) = -0.7242110407358902, (-0.1 - 3.98) / (...) = -0.742407298040812.
    const EP_A: f64 = 1.0954146897562964;
    const EP_B0: f64 = -0.7242110407358902;
    const EP_B1: f64 = -0.742407298040812;
    // Tag term of the example, (uid, tag) groups:
    // (g, planning) = [1 (A0), 0 (B0)]: mean 0.5, std sqrt((0.25 + 0.25) / 1) = 0.7071067811865476,
    //   ±0.5 / (0.7071067811865476 + 1e-6) = ±0.7071057811879616;
    // (g, explore) = [1 (A1)] and (g, reflection) = [1 (B2)]: one sample, 1 / (1 + 1e-6) = 0.999999000001;
    // (g, none) = [0 (B1)]: one sample, 0.
    const TAG_P: f64 = 0.7071057811879616;
    const ONE: f64 = 0.999999000001;

    #[test]
    fn grpo_mr_reference_mean_std_norm() {
        let r = rewards(&example());
        let terms = compute_advantage_terms(&AdvantageConfig::default(), &r).unwrap();
        let ep: Vec<f64> = terms.iter().flatten().map(|t| t.episode).collect();
        let tag: Vec<f64> = terms.iter().flatten().map(|t| t.step).collect();
        close(&ep, &[EP_A, EP_A, EP_B0, EP_B1, EP_B0]);
        close(&tag, &[TAG_P, ONE, -TAG_P, 0.0, ONE]);
        // A = E + 1.0 * T.
        let a = compute_advantages(&AdvantageConfig::default(), &r).unwrap();
        assert_eq!(a.iter().map(Vec::len).collect::<Vec<_>>(), vec![2, 3]);
        close(&flat(&a), &[EP_A + TAG_P, EP_A + ONE, EP_B0 - TAG_P, EP_B1, EP_B0 + ONE]);
        // w = 0.5 halves the tag term.
        let half = AdvantageConfig { w: 0.5, ..AdvantageConfig::default() };
        let a = compute_advantages(&half, &r).unwrap();
        close(&flat(&a), &[EP_A + 0.5 * TAG_P, EP_A + 0.5 * ONE, EP_B0 - 0.5 * TAG_P, EP_B1, EP_B0 + 0.5 * ONE]);
    }

    #[test]
    fn won_only_keeps_the_tag_term_of_lost_steps_at_or_below_zero() {
        // The example under `tag_lift = won_only`: A (won) is unchanged; in B (lost) the plan's
        // negative tag term stays, the paid reflection's positive one (ONE) is cut to 0.
        let r = rewards(&example());
        let won_only = AdvantageConfig { tag_lift: TagLift::WonOnly, ..AdvantageConfig::default() };
        let terms = compute_advantage_terms(&won_only, &r).unwrap();
        let tag: Vec<f64> = terms.iter().flatten().map(|t| t.step).collect();
        close(&tag, &[TAG_P, ONE, -TAG_P, 0.0, ONE]);
        let a: Vec<f64> = terms.iter().flatten().map(|t| t.advantage).collect();
        close(&a, &[EP_A + TAG_P, EP_A + ONE, EP_B0 - TAG_P, EP_B1, EP_B0]);
        // GRPO has no tag term: the setting changes nothing.
        let grpo = |tag_lift| AdvantageConfig { algo: Algo::Grpo, tag_lift, ..AdvantageConfig::default() };
        assert_eq!(compute_advantages(&grpo(TagLift::WonOnly), &r), compute_advantages(&grpo(TagLift::Always), &r));
    }

    #[test]
    fn grpo_mr_reference_mean_norm() {
        // E = outcome - 3.98 = [6.02, 6.02, -3.98, -4.08, -3.98];
        // T: planning [1, 0] - 0.5 = [0.5, -0.5]; one-sample groups keep their value (mean 0):
        // explore 1, none 0, reflection 1. A = E + T = [6.52, 7.02, -4.48, -4.08, -2.98].
        let a = compute_advantages(&cfg(Algo::GrpoMr, Form::Reference, Norm::MeanNorm), &rewards(&example())).unwrap();
        close(&flat(&a), &[6.52, 7.02, -4.48, -4.08, -2.98]);
    }

    #[test]
    fn grpo_mr_paper_form() {
        // Episode returns: A = 10, B = 0 - 0.1 * 1 invalid = -0.1. Over the two episodes: mean 4.95,
        // std sqrt(2 * 5.05²) = 7.14177848998413, ±5.05 / (7.14177848998413 + 1e-6) = ±0.7071066821766604,
        // broadcast to the steps. Tag term as in the reference form (uid scope).
        // A = 0.5 * E + 0.5 * T.
        const TRAJ: f64 = 0.7071066821766604;
        let a = compute_advantages(&cfg(Algo::GrpoMr, Form::Paper, Norm::MeanStdNorm), &rewards(&example())).unwrap();
        close(
            &flat(&a),
            &[0.5 * (TRAJ + TAG_P), 0.5 * (TRAJ + ONE), 0.5 * (-TRAJ - TAG_P), 0.5 * (-TRAJ + 0.0), 0.5 * (-TRAJ + ONE)],
        );
        // alpha = 1: the episode term alone.
        let only_traj = AdvantageConfig { alpha: 1.0, ..cfg(Algo::GrpoMr, Form::Paper, Norm::MeanStdNorm) };
        close(&flat(&compute_advantages(&only_traj, &rewards(&example())).unwrap()), &[TRAJ, TRAJ, -TRAJ, -TRAJ, -TRAJ]);
    }

    #[test]
    fn tag_scope_batch_pools_the_uids() {
        // Two groups, one explore step each: u1 new action (mr 1), u2 a repeat (mr 0).
        let facts = vec![
            EpisodeFacts { uid: "u1", won: false, steps: vec![fact(true, E, "go to desk 1", "o")] },
            EpisodeFacts { uid: "u2", won: false, steps: vec![fact(true, M, "look", "o"), fact(true, E, "look", "o")] },
        ];
        let r = rewards(&facts);
        let tag = |scope| -> Vec<f64> {
            let c = AdvantageConfig { tag_scope: scope, ..AdvantageConfig::default() };
            compute_advantage_terms(&c, &r).unwrap().iter().flatten().map(|t| t.step).collect()
        };
        // uid scope: (u1, explore) = [1] → 1 / (1 + 1e-6); (u2, monitor) = [0] → 0; (u2, explore) = [0] → 0.
        close(&tag(TagScope::Uid), &[ONE, 0.0, 0.0]);
        // batch scope: explore = [1, 0] → ±0.7071057811879616; monitor = [0] → 0.
        close(&tag(TagScope::Batch), &[TAG_P, 0.0, -TAG_P]);
    }

    #[test]
    fn grpo_is_the_episode_term_alone() {
        let r = rewards(&example());
        close(&flat(&compute_advantages(&cfg(Algo::Grpo, Form::Reference, Norm::MeanStdNorm), &r).unwrap()), &[EP_A, EP_A, EP_B0, EP_B1, EP_B0]);
        close(&flat(&compute_advantages(&cfg(Algo::Grpo, Form::Reference, Norm::MeanNorm), &r).unwrap()), &[6.02, 6.02, -3.98, -4.08, -3.98]);
    }

    /// Three episodes of one group for GiGPO, RLOO and the paper-form GRPO:
    /// A (won): anchors s0, s1, s2, all valid; B (lost): s0, s1 with step 1 invalid; C (lost): s0, s3.
    fn three() -> Vec<EpisodeFacts<'static>> {
        vec![
            EpisodeFacts { uid: "g", won: true, steps: vec![fact(true, M, "a", "s0"), fact(true, M, "b", "s1"), fact(true, M, "c", "s2")] },
            EpisodeFacts { uid: "g", won: false, steps: vec![fact(true, M, "a", "s0"), fact(false, None, "b", "s1")] },
            EpisodeFacts { uid: "g", won: false, steps: vec![fact(true, M, "d", "s0"), fact(true, M, "e", "s3")] },
        ]
    }

    #[test]
    fn discounted_returns_of_a_won_episode() {
        // 10 on the last of three steps: [0.95² * 10, 0.95 * 10, 10].
        close(&discounted_returns(&[0.0, 0.0, 10.0], 0.95), &[9.025, 9.5, 10.0]);
        close(&discounted_returns(&[1.0, 1.0], 0.0), &[1.0, 1.0]);
        assert!(discounted_returns(&[], 0.95).is_empty());
    }

    #[test]
    fn gigpo() {
        // Episode term over the 7 step samples, outcomes [10, 10, 10 | 0, -0.1 | 0, 0]:
        // mean 29.9 / 7 = 4.271428571428571, unbiased var 28.71571428571429, std 5.358704534280117;
        // (10 - m) / (s + 1e-6) = 1.0690215000479586, (0 - m) / ... = -0.7971008192377547,
        // (-0.1 - m) / ... = -0.8157620424306117.
        let (ea, e0, e1) = (1.0690215000479586, -0.7971008192377547, -0.8157620424306117);
        // Step values: A: G = [9.025, 9.5, 10]; B: G = [0, 0] minus the penalty of step 1 → [0, -0.1];
        // C: [0, 0]. Anchor groups within g:
        // s0 = [9.025, 0, 0]: mean 3.008333, std 5.210586179436373 → [1.154700316772646, -0.5773501583863229 (×2)];
        // s1 = [9.5, -0.1]: ±0.7071066770198962; s2 = [10]: 10 / (1 + 1e-6) = 9.999990000010001; s3 = [0]: 0.
        let (s0a, s0o, s1) = (1.154700316772646, -0.5773501583863229, 0.7071066770198962);
        let s2 = 9.999990000010001;
        let r = rewards(&three());
        let c = cfg(Algo::Gigpo, Form::Reference, Norm::MeanStdNorm);
        let terms = compute_advantage_terms(&c, &r).unwrap();
        close(&terms.iter().flatten().map(|t| t.episode).collect::<Vec<_>>(), &[ea, ea, ea, e0, e1, e0, e0]);
        close(&terms.iter().flatten().map(|t| t.step).collect::<Vec<_>>(), &[s0a, s1, s2, s0o, -s1, s0o, 0.0]);
        // A = E + 1.0 * S.
        close(
            &flat(&compute_advantages(&c, &r).unwrap()),
            &[ea + s0a, ea + s1, ea + s2, e0 + s0o, e1 - s1, e0 + s0o, e0],
        );
        // mean_norm: E = outcome - 4.271428571428571; S: s0 [9.025, 0, 0] - 3.0083333 = [6.0166667, -3.0083333 (×2)],
        // s1 [9.5, -0.1] - 4.7 = [4.8, -4.8], s2 [10] → 10, s3 [0] → 0.
        let c = cfg(Algo::Gigpo, Form::Reference, Norm::MeanNorm);
        let m = 29.9 / 7.0;
        let s0m = 9.025 / 3.0;
        close(
            &flat(&compute_advantages(&c, &r).unwrap()),
            &[10.0 - m + 9.025 - s0m, 10.0 - m + 4.8, 10.0 - m + 10.0, -m - s0m, -0.1 - m - 4.8, -m - s0m, -m],
        );
    }

    #[test]
    fn gigpo_gamma_changes_the_step_term_only() {
        // gamma = 0: G_A = [0, 0, 10]; s0 = [0, 0, 0] all equal → 0; s1 = [0, -0.1] → ±0.7071066770198962... of
        // values [0, -0.1]: mean -0.05, std 0.0707106781, ±0.05 / (0.0707106781 + 1e-6) = ±0.7070966779.
        let r = rewards(&three());
        let c = AdvantageConfig { gamma: 0.0, ..cfg(Algo::Gigpo, Form::Reference, Norm::MeanStdNorm) };
        let steps: Vec<f64> = compute_advantage_terms(&c, &r).unwrap().iter().flatten().map(|t| t.step).collect();
        let s1 = 0.05 / (0.005f64.sqrt() + 1e-6);
        close(&steps, &[0.0, s1, 9.999990000010001, 0.0, -s1, 0.0, 0.0]);
        assert!(steps[0] == 0.0 && steps[3] == 0.0 && steps[5] == 0.0, "all-equal group gives exact zeros");
    }

    #[test]
    fn grpo_paper_form_is_over_episodes() {
        // Episode returns [10, -0.1, 0]: mean 3.3, std 5.8025856305616035;
        // (10 - 3.3) / (s + 1e-6) = 1.154657470292958, (-0.1 - 3.3) / ... = -0.5859455819397101,
        // (0 - 3.3) / ... = -0.568711888353248; each broadcast to its episode's steps.
        let (a, b, c) = (1.154657470292958, -0.5859455819397101, -0.568711888353248);
        let adv = compute_advantages(&cfg(Algo::Grpo, Form::Paper, Norm::MeanStdNorm), &rewards(&three())).unwrap();
        close(&flat(&adv), &[a, a, a, b, b, c, c]);
    }

    #[test]
    fn rloo() {
        // Group g, returns [10, -0.1, 0]: 10 - (-0.1 + 0) / 2 = 10.05; -0.1 - (10 + 0) / 2 = -5.1;
        // 0 - (10 - 0.1) / 2 = -4.95. Group h, one won episode: baseline 0 → 10.
        let mut facts = three();
        facts.push(EpisodeFacts { uid: "h", won: true, steps: vec![fact(true, M, "a", "s0")] });
        let r = rewards(&facts);
        for form in [Form::Reference, Form::Paper] {
            for norm in [Norm::MeanStdNorm, Norm::MeanNorm] {
                let adv = compute_advantages(&cfg(Algo::Rloo, form, norm), &r).unwrap();
                close(&flat(&adv), &[10.05, 10.05, 10.05, -5.1, -5.1, -4.95, -4.95, 10.0]);
            }
        }
        assert_eq!(leave_one_out_in_groups(&[3.0, 3.0, 3.0], &[0, 0, 0]), vec![0.0, 0.0, 0.0]);
    }

    #[test]
    fn one_sample_group_uses_mean_zero_std_one() {
        let facts = vec![EpisodeFacts { uid: "solo", won: true, steps: vec![fact(true, P, "go to desk 1", "o")] }];
        let r = rewards(&facts);
        // E = 10 / (1 + 1e-6) = 9.99999000001, T = 1 / (1 + 1e-6).
        close(&flat(&compute_advantages(&AdvantageConfig::default(), &r).unwrap()), &[9.99999000001 + ONE]);
        // mean_norm: exactly 10 + 1.
        assert_eq!(flat(&compute_advantages(&cfg(Algo::GrpoMr, Form::Reference, Norm::MeanNorm), &r).unwrap()), vec![11.0]);
    }

    #[test]
    fn all_equal_groups_give_exact_zeros() {
        // Two lost episodes, every step monitor with mr 0 and outcome 0: every group is constant.
        let facts = vec![
            EpisodeFacts { uid: "g", won: false, steps: vec![fact(true, M, "a", "o"), fact(true, M, "b", "o")] },
            EpisodeFacts { uid: "g", won: false, steps: vec![fact(true, M, "a", "o")] },
        ];
        for algo in [Algo::GrpoMr, Algo::Grpo, Algo::Gigpo, Algo::Rloo] {
            for form in [Form::Reference, Form::Paper] {
                let adv = compute_advantages(&cfg(algo, form, Norm::MeanStdNorm), &rewards(&facts)).unwrap();
                assert_eq!(flat(&adv), vec![0.0; 3], "{algo:?} {form:?}");
            }
        }
        // A constant that is not exactly representable as a mean of sums: 0.1 thrice.
        assert_eq!(normalize_in_groups(&[0.1, 0.1, 0.1], &[1, 1, 1], Norm::MeanStdNorm, EPS), vec![0.0; 3]);
    }

    #[test]
    fn empty_inputs() {
        for algo in [Algo::GrpoMr, Algo::Grpo, Algo::Gigpo, Algo::Rloo] {
            let c = cfg(algo, Form::Reference, Norm::MeanStdNorm);
            assert!(compute_advantages(&c, &[]).unwrap().is_empty());
            // An episode without steps yields an empty row and does not disturb the others.
            let mut r = rewards(&example());
            let with_empty = {
                r.insert(1, EpisodeRewards { uid: "g", won: true, steps: vec![] });
                compute_advantages(&c, &r).unwrap()
            };
            r.remove(1);
            let without = compute_advantages(&c, &r).unwrap();
            assert_eq!(with_empty[1], Vec::<f64>::new());
            assert_eq!(with_empty[0], without[0]);
            assert_eq!(with_empty[2], without[1]);
        }
    }

    #[test]
    fn errors() {
        let mut r = rewards(&example());
        r[1].steps[2].mr_reward = f64::NAN;
        let err = compute_advantages(&AdvantageConfig::default(), &r).unwrap_err();
        assert!(matches!(err, AdvantageError::NonFinite { episode: 1, step: 2, field: "mr_reward", .. }), "{err}");
        let r = rewards(&example());
        for bad in [
            AdvantageConfig { epsilon: 0.0, ..AdvantageConfig::default() },
            AdvantageConfig { alpha: 1.5, ..AdvantageConfig::default() },
            AdvantageConfig { gamma: -0.1, ..AdvantageConfig::default() },
            AdvantageConfig { w: f64::INFINITY, ..AdvantageConfig::default() },
        ] {
            assert!(matches!(compute_advantages(&bad, &r), Err(AdvantageError::Config { .. })));
        }
    }

    #[test]
    fn config_defaults_and_serde() {
        let c = AdvantageConfig::default();
        assert_eq!((c.algo, c.form, c.norm, c.tag_scope), (Algo::GrpoMr, Form::Reference, Norm::MeanStdNorm, TagScope::Uid));
        assert_eq!(c.tag_lift, TagLift::Always);
        assert_eq!((c.w, c.alpha, c.gamma, c.epsilon), (1.0, 0.5, 0.95, 1e-6));
        let map = |pairs: Vec<(&'static str, f64)>| -> MapDeserializer<'static, _, DeError> { MapDeserializer::new(pairs.into_iter()) };
        let parsed = AdvantageConfig::deserialize(map(vec![("gamma", 0.9), ("w", 2.0)])).unwrap();
        assert_eq!(parsed, AdvantageConfig { gamma: 0.9, w: 2.0, ..AdvantageConfig::default() });
        assert!(AdvantageConfig::deserialize(map(vec![("gama", 0.9)])).is_err());
        assert_eq!(TagLift::deserialize(StrDeserializer::<DeError>::new("won_only")).unwrap(), TagLift::WonOnly);
        let s = |v: &'static str| StrDeserializer::<DeError>::new(v);
        assert_eq!(Algo::deserialize(s("grpo_mr")).unwrap(), Algo::GrpoMr);
        assert_eq!(Algo::deserialize(s("gigpo")).unwrap(), Algo::Gigpo);
        assert_eq!(Algo::deserialize(s("rloo")).unwrap(), Algo::Rloo);
        assert_eq!(Form::deserialize(s("paper")).unwrap(), Form::Paper);
        assert_eq!(Norm::deserialize(s("mean_norm")).unwrap(), Norm::MeanNorm);
        assert_eq!(TagScope::deserialize(s("batch")).unwrap(), TagScope::Batch);
        assert!(Norm::deserialize(s("std")).is_err());
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        const UIDS: [&str; 3] = ["u0", "u1", "u2"];
        const ANCHORS: [&str; 3] = ["s0", "s1", "s2"];

        fn value() -> impl Strategy<Value = f64> {
            // Ties are common in practice (0, 10, 9.9), so draw them often.
            prop_oneof![Just(0.0), Just(10.0), Just(-0.1), Just(1.0), -1e6..1e6f64]
        }

        fn tag() -> impl Strategy<Value = Option<Tag>> {
            prop_oneof![Just(None), Just(P), Just(E), Just(R), Just(M)]
        }

        fn step() -> impl Strategy<Value = StepReward<'static>> {
            (tag(), value(), value(), value(), prop_oneof![Just(0.0), Just(0.1)], 0..ANCHORS.len()).prop_map(
                |(tag, outcome_reward, mr_reward, env_reward, format_penalty, a)| StepReward {
                    tag,
                    outcome_reward,
                    mr_reward,
                    env_reward,
                    format_penalty,
                    anchor: ANCHORS[a],
                },
            )
        }

        fn episode() -> impl Strategy<Value = EpisodeRewards<'static>> {
            (0..UIDS.len(), any::<bool>(), prop::collection::vec(step(), 0..6))
                .prop_map(|(u, won, steps)| EpisodeRewards { uid: UIDS[u], won, steps })
        }

        fn batch() -> impl Strategy<Value = Vec<EpisodeRewards<'static>>> {
            prop::collection::vec(episode(), 0..10)
        }

        fn config() -> impl Strategy<Value = AdvantageConfig> {
            (
                prop_oneof![Just(Algo::GrpoMr), Just(Algo::Grpo), Just(Algo::Gigpo), Just(Algo::Rloo)],
                prop_oneof![Just(Form::Reference), Just(Form::Paper)],
                prop_oneof![Just(Norm::MeanStdNorm), Just(Norm::MeanNorm)],
                prop_oneof![Just(TagScope::Uid), Just(TagScope::Batch)],
                prop_oneof![Just(TagLift::Always), Just(TagLift::WonOnly)],
                -3.0..3.0f64,
                0.0..=1.0f64,
                0.0..=1.0f64,
                prop_oneof![Just(1e-6), 1e-12..1.0f64],
            )
                .prop_map(|(algo, form, norm, tag_scope, tag_lift, w, alpha, gamma, epsilon)| AdvantageConfig {
                    algo,
                    form,
                    norm,
                    tag_scope,
                    tag_lift,
                    w,
                    alpha,
                    gamma,
                    epsilon,
                })
        }

        /// Mean of `terms` per key, over groups of at least two members.
        fn group_means<K: Ord + Clone>(terms: &[f64], keys: &[K]) -> Vec<(f64, f64)> {
            groups(keys)
                .values()
                .filter(|m| m.len() >= 2)
                .map(|m| {
                    let mean = m.iter().map(|&i| terms[i]).sum::<f64>() / m.len() as f64;
                    let scale = m.iter().map(|&i| terms[i].abs()).fold(1.0, f64::max);
                    (mean, scale)
                })
                .collect()
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

            /// `won_only` changes nothing in won episodes, nor where the tag term is not
            /// positive; elsewhere a lost step gets exactly the advantage of a tag term of 0.
            #[test]
            fn won_only_bounds_the_tag_term_of_lost_steps(b in batch(), c in config()) {
                let always = compute_advantage_terms(&AdvantageConfig { tag_lift: TagLift::Always, ..c }, &b).unwrap();
                let won_only = compute_advantage_terms(&AdvantageConfig { tag_lift: TagLift::WonOnly, ..c }, &b).unwrap();
                for ((ep, a), o) in b.iter().zip(&always).zip(&won_only) {
                    for (a, o) in a.iter().zip(o) {
                        prop_assert_eq!((a.episode, a.step), (o.episode, o.step));
                        let bounded = c.algo == Algo::GrpoMr && !ep.won && a.step > 0.0;
                        if !bounded {
                            prop_assert_eq!(a.advantage, o.advantage);
                        } else if c.form == Form::Reference {
                            prop_assert_eq!(o.advantage, a.episode + c.w * 0.0);
                        } else {
                            prop_assert_eq!(o.advantage, c.alpha * a.episode);
                        }
                    }
                }
            }

            #[test]
            fn outputs_are_finite_and_shaped_like_the_input(b in batch(), c in config()) {
                let adv = compute_advantage_terms(&c, &b).unwrap();
                prop_assert_eq!(adv.len(), b.len());
                for (row, ep) in adv.iter().zip(&b) {
                    prop_assert_eq!(row.len(), ep.steps.len());
                    for t in row {
                        prop_assert!(t.episode.is_finite() && t.step.is_finite() && t.advantage.is_finite(), "{:?}", t);
                    }
                }
            }

            #[test]
            fn permuting_episodes_permutes_the_outputs(
                (b, perm) in batch().prop_flat_map(|b| { let n = b.len(); (Just(b), Just((0..n).collect::<Vec<usize>>()).prop_shuffle()) }),
                c in config(),
            ) {
                let base = compute_advantage_terms(&c, &b).unwrap();
                let permuted: Vec<EpisodeRewards<'static>> = perm.iter().map(|&i| b[i].clone()).collect();
                let out = compute_advantage_terms(&c, &permuted).unwrap();
                for (k, &i) in perm.iter().enumerate() {
                    // Bit for bit: group statistics are summed in a canonical order.
                    prop_assert_eq!(&out[k], &base[i]);
                }
            }

            #[test]
            fn episode_term_has_zero_group_means(b in batch(), c in config()) {
                let terms = compute_advantage_terms(&c, &b).unwrap();
                let per_step = c.algo != Algo::Rloo && c.form == Form::Reference;
                let (values, keys): (Vec<f64>, Vec<&str>) = if per_step {
                    // Reference form: mean over the uid's step samples.
                    terms.iter().zip(&b).flat_map(|(row, ep)| row.iter().map(move |t| (t.episode, ep.uid))).unzip()
                } else {
                    // Paper form and RLOO: mean over the uid's episodes (those with steps).
                    terms.iter().zip(&b).filter(|(row, _)| !row.is_empty()).map(|(row, ep)| (row[0].episode, ep.uid)).unzip()
                };
                for (mean, scale) in group_means(&values, &keys) {
                    prop_assert!(mean.abs() <= 1e-9 * scale, "mean {} scale {}", mean, scale);
                }
            }

            #[test]
            fn tag_and_anchor_terms_have_zero_group_means(b in batch(), c in config()) {
                let terms = compute_advantage_terms(&c, &b).unwrap();
                let step: Vec<f64> = terms.iter().flatten().map(|t| t.step).collect();
                let samples: Vec<(&str, &StepReward)> = b.iter().flat_map(|ep| ep.steps.iter().map(move |s| (ep.uid, s))).collect();
                let means = match c.algo {
                    Algo::GrpoMr => {
                        let keys: Vec<(Option<&str>, Option<Tag>)> = samples.iter().map(|(u, s)| {
                            (if c.tag_scope == TagScope::Uid { Some(*u) } else { None }, s.tag)
                        }).collect();
                        group_means(&step, &keys)
                    }
                    Algo::Gigpo => {
                        let keys: Vec<(&str, &str)> = samples.iter().map(|(u, s)| (*u, s.anchor)).collect();
                        group_means(&step, &keys)
                    }
                    Algo::Grpo | Algo::Rloo => {
                        prop_assert!(step.iter().all(|&x| x == 0.0));
                        vec![]
                    }
                };
                for (mean, scale) in means {
                    prop_assert!(mean.abs() <= 1e-9 * scale, "mean {} scale {}", mean, scale);
                }
            }

            #[test]
            fn one_sample_groups_keep_their_value(
                steps in prop::collection::vec(step(), 1..=3),
                c in config(),
            ) {
                // Every episode has its own uid and one step with its own anchor: every group
                // has one sample, with mean 0 and std 1.
                let b: Vec<EpisodeRewards<'static>> = steps.into_iter().enumerate().map(|(k, mut s)| {
                    s.anchor = ANCHORS[k];
                    EpisodeRewards { uid: UIDS[k], won: false, steps: vec![s] }
                }).collect();
                let c = AdvantageConfig { tag_scope: TagScope::Uid, ..c };
                let terms = compute_advantage_terms(&c, &b).unwrap();
                let n = |x: f64| match c.norm { Norm::MeanStdNorm => x / (1.0 + c.epsilon), Norm::MeanNorm => x };
                for (row, ep) in terms.iter().zip(&b) {
                    let s = &ep.steps[0];
                    let t = row[0];
                    let ret = ep.episode_return();
                    let episode = match (c.algo, c.form) {
                        (Algo::Rloo, _) => ret,
                        (_, Form::Reference) => n(s.outcome_reward),
                        (_, Form::Paper) => n(ret),
                    };
                    prop_assert_eq!(t.episode, episode);
                    let step = match c.algo {
                        Algo::GrpoMr => n(s.mr_reward),
                        Algo::Gigpo => n(s.env_reward - s.format_penalty),
                        Algo::Grpo | Algo::Rloo => 0.0,
                    };
                    prop_assert_eq!(t.step, step);
                }
            }

            #[test]
            fn all_equal_groups_give_zero(
                b in batch(),
                c in config(),
                outcome in value(),
                mr in value(),
            ) {
                // Every step of the batch has the same outcome and the same mr reward (and no
                // penalty, so episode returns depend only on env rewards).
                let b: Vec<EpisodeRewards<'static>> = b.into_iter().map(|mut ep| {
                    for s in &mut ep.steps { s.outcome_reward = outcome; s.mr_reward = mr; }
                    ep
                }).collect();
                let terms = compute_advantage_terms(&c, &b).unwrap();
                let mut per_uid: BTreeMap<&str, usize> = BTreeMap::new();
                let mut per_tag: BTreeMap<(Option<&str>, Option<Tag>), usize> = BTreeMap::new();
                for ep in &b {
                    *per_uid.entry(ep.uid).or_default() += ep.steps.len();
                    for s in &ep.steps {
                        let scope = if c.tag_scope == TagScope::Uid { Some(ep.uid) } else { None };
                        *per_tag.entry((scope, s.tag)).or_default() += 1;
                    }
                }
                for (row, ep) in terms.iter().zip(&b) {
                    for (t, s) in row.iter().zip(&ep.steps) {
                        if c.algo != Algo::Rloo && c.form == Form::Reference && per_uid[ep.uid] >= 2 {
                            prop_assert_eq!(t.episode, 0.0);
                        }
                        let scope = if c.tag_scope == TagScope::Uid { Some(ep.uid) } else { None };
                        if c.algo == Algo::GrpoMr && per_tag[&(scope, s.tag)] >= 2 {
                            prop_assert_eq!(t.step, 0.0);
                        }
                    }
                }
            }

            #[test]
            fn mean_norm_and_rloo_agree_on_differences(b in batch()) {
                // Within a uid, RLOO differences equal n/(n-1) times mean_norm differences of the
                // paper-form episode term: L_e - L_f = (R_e - R_f) * n / (n - 1).
                let rloo = compute_advantage_terms(&cfg(Algo::Rloo, Form::Paper, Norm::MeanNorm), &b).unwrap();
                let grpo = compute_advantage_terms(&cfg(Algo::Grpo, Form::Paper, Norm::MeanNorm), &b).unwrap();
                let eps: Vec<usize> = (0..b.len()).filter(|&e| !b[e].steps.is_empty()).collect();
                for &e in &eps {
                    for &f in &eps {
                        let n = eps.iter().filter(|&&k| b[k].uid == b[e].uid).count() as f64;
                        if e != f && b[e].uid == b[f].uid {
                            let lhs = rloo[e][0].episode - rloo[f][0].episode;
                            let rhs = (grpo[e][0].episode - grpo[f][0].episode) * n / (n - 1.0);
                            prop_assert!((lhs - rhs).abs() <= 1e-6 * (1.0 + lhs.abs()), "{} vs {}", lhs, rhs);
                        }
                    }
                }
            }
        }
    }
}
