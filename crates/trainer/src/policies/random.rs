//! A seeded random player: a uniformly drawn admissible action (never `help`) under a
//! uniformly drawn tag, the baseline every trained policy must beat.

use std::collections::HashMap;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rlvmr_core::Tag;

use crate::agent::{Policy, Reply, Turn};
use crate::error::Result;
use crate::record::EpisodeSpec;

use crate::agent::tagged_reply;

#[derive(Default)]
pub struct RandomPolicy {
    rngs: HashMap<usize, ChaCha8Rng>,
}

impl RandomPolicy {
    pub fn new() -> Self {
        Self::default()
    }
}

impl Policy for RandomPolicy {
    fn name(&self) -> String {
        "random".into()
    }

    fn start_episode(&mut self, slot: usize, spec: &EpisodeSpec) -> Result<()> {
        self.rngs
            .insert(slot, ChaCha8Rng::seed_from_u64(spec.rollout_seed));
        Ok(())
    }

    fn act(&mut self, turns: &[Turn]) -> Result<Vec<Result<Reply, String>>> {
        Ok(turns
            .iter()
            .map(|turn| {
                let rng = self
                    .rngs
                    .entry(turn.slot)
                    .or_insert_with(|| ChaCha8Rng::seed_from_u64(turn.slot as u64));
                let choices: Vec<&String> = turn
                    .admissible
                    .unwrap_or(&[])
                    .iter()
                    .filter(|a| a.as_str() != "help")
                    .collect();
                let action = choices.choose(rng).map_or("look", |a| a.as_str());
                let tag = Tag::ALL.choose(rng).copied().unwrap_or(Tag::Explore);
                Ok(Reply::text(tagged_reply(
                    tag,
                    &format!("I pick '{action}' at random to see what happens."),
                    action,
                )))
            })
            .collect())
    }
}
