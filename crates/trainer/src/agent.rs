//! The policy contract: every way of acting (the expert, a random player, an LLM) answers
//! the same batched turns, so their rollouts go through one collector and compare.

use std::collections::HashMap;

use rlvmr_core::{OutputStyle, Tag};

use crate::error::Result;
use crate::record::EpisodeSpec;
use crate::usage::{RequestStats, TokenUsage};

/// One running episode's turn: the prompt the core's builder rendered and what it shows.
#[derive(Debug, Clone, Copy)]
pub struct Turn<'a> {
    /// The episode's index in the collection (stable for the whole episode).
    pub slot: usize,
    /// 0-based step number.
    pub step: usize,
    /// The rendered prompt (the user message, no chat template).
    pub prompt: &'a str,
    /// The task sentence.
    pub task: &'a str,
    /// The current observation (ALFWorld: the intro at step 0).
    pub observation: &'a str,
    pub admissible: Option<&'a [String]>,
}

/// What a policy produced for one turn.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reply {
    /// The raw output bytes; invalid UTF-8 is allowed (the collector replaces it).
    pub output: Vec<u8>,
    pub prompt_ids: Vec<u32>,
    pub response_ids: Vec<u32>,
    pub logprobs: Vec<f32>,
    /// This step is a deliberate mistake (cold-start demonstrations only).
    pub mistake: bool,
    /// Tokens as a served model's server counted them (no token ids come back from one).
    pub usage: Option<TokenUsage>,
}

impl Reply {
    /// A reply of plain text with no token information.
    pub fn text(output: impl Into<String>) -> Reply {
        Reply {
            output: output.into().into_bytes(),
            ..Reply::default()
        }
    }
}

/// A way of acting. `act` gets the turns of every episode still running, in one call, so a
/// model samples them as one batch; finished episodes are not asked.
pub trait Policy {
    /// A short name for logs and summaries.
    fn name(&self) -> String;

    /// An episode starts in `slot` (called before its first turn).
    fn start_episode(&mut self, slot: usize, spec: &EpisodeSpec) -> Result<()>;

    /// Episodes start in these slots, all at once, one result each: a policy that prepares
    /// an episode slowly (a gold path to generate) may prepare them side by side. Default:
    /// [`Policy::start_episode`] for each, in order.
    fn start_episodes(&mut self, starts: &[(usize, &EpisodeSpec)]) -> Vec<Result<()>> {
        starts.iter().map(|&(slot, spec)| self.start_episode(slot, spec)).collect()
    }

    /// One reply per turn, in order. An `Err` inside the list fails that episode only; an
    /// `Err` for the whole call stops the collection.
    fn act(&mut self, turns: &[Turn]) -> Result<Vec<Result<Reply, String>>>;

    /// Whether the policy reads the admissible actions at turn `step` of the episode in
    /// `slot` (the collector fetches the list only for such turns under
    /// [`crate::collector::AdmissibleLists::WhereRead`]). Default: at every turn.
    fn reads_admissible(&self, slot: usize, step: usize) -> bool {
        let _ = (slot, step);
        true
    }

    /// Request counts of a policy behind a server (requests, retries, failures, tokens).
    fn request_stats(&self) -> Option<RequestStats> {
        None
    }
}

/// `<tag>reason</tag>\n<action>command</action>`, the reply format RLVMR asks for.
pub fn tagged_reply(tag: Tag, reason: &str, action: &str) -> String {
    annotated_reply(OutputStyle::Tagged, tag, reason, action)
}

/// An annotated step in the reply format `style` asks for: the tagged one, or for the
/// published baselines `<think>reason</think>\n<action>command</action>` (the same reasoning
/// without its tag).
pub fn annotated_reply(style: OutputStyle, tag: Tag, reason: &str, action: &str) -> String {
    match style {
        OutputStyle::Tagged => format!("<{tag}>{reason}</{tag}>\n<action>{action}</action>"),
        OutputStyle::Think => format!("<think>{reason}</think>\n<action>{action}</action>"),
    }
}

/// The scripted players' `act`: each turn goes to the player its slot's episode started with;
/// a turn whose slot started none is that turn's error (`player` names what is missing).
pub(crate) fn act_in_slots<P>(
    slots: &mut HashMap<usize, P>,
    turns: &[Turn],
    player: &str,
    mut act: impl FnMut(&mut P, &Turn) -> std::result::Result<Reply, String>,
) -> Vec<std::result::Result<Reply, String>> {
    turns
        .iter()
        .map(|turn| match slots.get_mut(&turn.slot) {
            Some(slot) => act(slot, turn),
            None => Err(format!("no {player} started in slot {}", turn.slot)),
        })
        .collect()
}
