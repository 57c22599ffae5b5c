//! The ALFWorld expert as a policy: the hand-coded expert picks the command, the
//! annotator ([`super::annotate`]) adds the tag and reason, so the expert's replies go
//! through the same parser and metrics as a model's.
//!
//! For cold-start data a seeded fraction of episodes carries one recoverable mistake: at a
//! random early step the policy plays a wrong command instead of the expert's (a malformed,
//! inadmissible version of it, or a detour to another receptacle), and at the next step the
//! expert's intended command, tagged `reflection`. The expert never sees the mistake's
//! feedback, so it stays on track.
//!
//! Another seeded fraction may search for the appliance of a heat, cool or clean task (try
//! the kitchen's and bathroom's fixed appliances in a shuffled order until the task's command
//! is admissible) instead of knowing it, as it searches for the object.

use std::collections::HashMap;

use alfworld::expert::{Expert, Task, APPLIANCE_KINDS};
use alfworld::TaskSpec;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::agent::{act_in_slots, Policy, Reply, Turn};
use super::annotate::{Mistake, Situation};
use crate::error::Result;
use crate::record::EpisodeSpec;

use crate::agent::annotated_reply;
use rlvmr_core::OutputStyle;

/// The last step at which a mistake may be planted (expert episodes are 4-10 steps long).
const LAST_MISTAKE_STEP: usize = 4;

/// One episode's expert, annotator and mistake plan.
struct Slot {
    spec: EpisodeSpec,
    expert: Option<Expert>,
    situation: Option<Situation>,
    rng: ChaCha8Rng,
    mistake_at: Option<usize>,
    /// The appliance kinds to try, in order, when this episode searches for its appliance
    /// (handed to the expert at the first step).
    appliance_order: Option<Vec<String>>,
    /// The expert's intended command, to play right after a mistake.
    correction: Option<String>,
    /// The kind of mistake the previous step was.
    last_mistake: Option<Mistake>,
    last_action: String,
}

/// The expert policy; `mistake_fraction` of the episodes (seeded) get one mistake, and
/// `appliance_search` of them search for their appliance ([`ExpertPolicy::searching_appliance`]).
pub struct ExpertPolicy {
    mistake_fraction: f64,
    appliance_search: f64,
    style: OutputStyle,
    slots: HashMap<usize, Slot>,
}

impl ExpertPolicy {
    /// Replies in the tagged format; see [`ExpertPolicy::replying`].
    pub fn new(mistake_fraction: f64) -> Self {
        ExpertPolicy {
            mistake_fraction: mistake_fraction.clamp(0.0, 1.0),
            appliance_search: 0.0,
            style: OutputStyle::Tagged,
            slots: HashMap::new(),
        }
    }

    /// In a seeded `fraction` of the episodes the expert of a heat, cool or clean task does
    /// not go straight to its appliance: it tries the kinds of [`APPLIANCE_KINDS`] in a
    /// shuffled order until the task's command is admissible (`alfworld::expert::Expert::searching_appliance`).
    pub fn searching_appliance(mut self, fraction: f64) -> Self {
        self.appliance_search = fraction.clamp(0.0, 1.0);
        self
    }

    /// Replies in `style` (`<think>` demonstrations for the published baselines).
    pub fn replying(mut self, style: OutputStyle) -> Self {
        self.style = style;
        self
    }
}

/// The task an ALFWorld game's folder name gives: `json_2.1.1/<split>/<task dir>/...`.
fn folder_task(game: &str) -> Option<Task> {
    let dir = game.split('/').nth(2)?;
    TaskSpec::from_task_dir(dir).map(|spec| Task::from_spec(&spec))
}

/// A malformed, inadmissible way of writing `command`, as a model might.
fn malformed(command: &str, admissible: &[String], rng: &mut impl Rng) -> Option<String> {
    let words: Vec<&str> = command.split_whitespace().collect();
    let candidates: Vec<String> = match words.as_slice() {
        ["go", "to", place @ ..] => vec![
            format!("go to the {}", place.join(" ")),
            format!("walk to {}", place.join(" ")),
        ],
        ["take", rest @ ..] => {
            let object = rest
                .split(|w| *w == "from")
                .next()
                .map(|o| o.join(" "))
                .unwrap_or_default();
            vec![format!("pick up {object}"), format!("take {object}")]
        }
        ["move", rest @ ..] => {
            let text = rest.join(" ");
            vec![
                format!("put {}", text.replacen(" to ", " in ", 1)),
                format!("place {}", text.replacen(" to ", " on ", 1)),
            ]
        }
        ["open", rest @ ..] => vec![format!("open the {}", rest.join(" "))],
        [verb @ ("heat" | "cool" | "clean"), rest @ ..] => vec![format!(
            "{verb} {}",
            rest.join(" ").replacen(" with ", " in ", 1)
        )],
        ["use", rest @ ..] => vec![format!("turn on {}", rest.join(" "))],
        _ => vec![],
    };
    let fresh: Vec<String> = candidates
        .into_iter()
        .filter(|c| !admissible.contains(c))
        .collect();
    fresh.choose(rng).cloned()
}

/// A `go to` another receptacle than the one `command` goes to.
fn detour(command: &str, admissible: &[String], rng: &mut impl Rng) -> Option<String> {
    command.strip_prefix("go to ")?;
    let others: Vec<&String> = admissible
        .iter()
        .filter(|a| a.starts_with("go to ") && a.as_str() != command)
        .collect();
    others.choose(rng).map(|s| s.to_string())
}

/// Whether an episode searches for its appliance, and in which order: drawn from a stream
/// of its own, so that demonstrations without the search stay as they were.
fn appliance_order(rollout_seed: u64, fraction: f64) -> Option<Vec<String>> {
    // The episode's seed mixed with "applianc" in ASCII: a stream apart from the mistakes'.
    let mut rng = ChaCha8Rng::seed_from_u64(rollout_seed ^ 0x6170_706c_6961_6e63);
    if fraction <= 0.0 || !rng.gen_bool(fraction) {
        return None;
    }
    let mut order: Vec<String> = APPLIANCE_KINDS.iter().map(|k| k.to_string()).collect();
    order.shuffle(&mut rng);
    Some(order)
}

impl Slot {
    fn new(spec: &EpisodeSpec, mistake_fraction: f64, appliance_search: f64) -> Slot {
        let mut rng = ChaCha8Rng::seed_from_u64(spec.rollout_seed);
        let mistake_at = rng
            .gen_bool(mistake_fraction)
            .then(|| rng.gen_range(1..=LAST_MISTAKE_STEP));
        Slot {
            spec: spec.clone(),
            expert: None,
            situation: None,
            rng,
            mistake_at,
            appliance_order: appliance_order(spec.rollout_seed, appliance_search),
            correction: None,
            last_mistake: None,
            last_action: String::new(),
        }
    }

    fn act(&mut self, turn: &Turn, style: OutputStyle) -> Result<Reply, String> {
        let admissible = turn.admissible.unwrap_or(&[]);
        if turn.step == 0 {
            let fallback = folder_task(&self.spec.task.game);
            let expert = match Expert::new(turn.observation) {
                Ok(e) => e,
                Err(_) => Expert::with_task(
                    turn.observation,
                    fallback.clone().ok_or("the task sentence does not parse")?,
                )
                .map_err(|e| e.to_string())?,
            };
            let situation = Situation::new(turn.observation, fallback);
            (self.expert, self.situation) = match self.appliance_order.take() {
                Some(order) => (
                    Some(expert.searching_appliance(order)),
                    Some(situation.searching_appliance()),
                ),
                None => (Some(expert), Some(situation)),
            };
        } else if let Some(situation) = self.situation.as_mut() {
            situation.update(&self.last_action, turn.observation);
        }
        let (Some(expert), Some(situation)) = (self.expert.as_mut(), self.situation.as_mut())
        else {
            return Err("the expert policy missed the episode's first step".into());
        };
        let intended = match self.correction.take() {
            Some(c) if admissible.contains(&c) => c,
            _ => expert.act(turn.observation, admissible),
        };
        let previous_mistake = self.last_mistake.take();
        let mut command = intended.clone();
        if self.mistake_at == Some(turn.step) && previous_mistake.is_none() {
            let planted = if self.rng.gen_bool(0.5) {
                detour(&intended, admissible, &mut self.rng).map(|c| (c, Mistake::Detour))
            } else {
                None
            };
            if let Some((wrong, kind)) = planted.or_else(|| {
                malformed(&intended, admissible, &mut self.rng).map(|c| (c, Mistake::Inadmissible))
            }) {
                command = wrong;
                self.last_mistake = Some(kind);
                self.correction = Some(intended.clone());
            }
        }
        // A malformed command is the right idea mistyped: it carries the intended step's reason.
        let reasoned = if self.last_mistake == Some(Mistake::Inadmissible) {
            &intended
        } else {
            &command
        };
        let (tag, reason) =
            situation.annotate(turn.step, reasoned, previous_mistake, &mut self.rng);
        self.last_action = command.clone();
        Ok(Reply {
            mistake: self.last_mistake.is_some(),
            ..Reply::text(annotated_reply(style, tag, &reason, &command))
        })
    }
}

impl Policy for ExpertPolicy {
    fn name(&self) -> String {
        "expert".into()
    }

    fn start_episode(&mut self, slot: usize, spec: &EpisodeSpec) -> Result<()> {
        self.slots
            .insert(slot, Slot::new(spec, self.mistake_fraction, self.appliance_search));
        Ok(())
    }

    fn act(&mut self, turns: &[Turn]) -> Result<Vec<Result<Reply, String>>> {
        let style = self.style;
        Ok(act_in_slots(&mut self.slots, turns, "expert episode", |slot, turn| slot.act(turn, style)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn mistakes_are_inadmissible_or_other_places() {
        let admissible = list(&[
            "go to desk 1",
            "go to shelf 2",
            "take pen 1 from desk 1",
            "move pen 1 to desk 1",
        ]);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for command in [
            "go to desk 1",
            "take pen 1 from desk 1",
            "move pen 1 to desk 1",
            "open drawer 1",
            "heat egg 1 with microwave 1",
            "use desklamp 1",
        ] {
            let wrong = malformed(command, &admissible, &mut rng).unwrap();
            assert!(
                !admissible.contains(&wrong) && wrong != command,
                "{command} -> {wrong}"
            );
        }
        assert_eq!(malformed("look", &admissible, &mut rng), None);
        assert_eq!(
            detour("go to desk 1", &admissible, &mut rng).as_deref(),
            Some("go to shelf 2")
        );
        assert_eq!(
            detour("take pen 1 from desk 1", &admissible, &mut rng),
            None
        );
        assert_eq!(folder_task("json_2.1.1/train/pick_cool_then_place_in_recep-Mug-None-Cabinet-5/trial_1/game.tw-pddl").map(|t| t.object), Some("mug".into()));
    }
}
