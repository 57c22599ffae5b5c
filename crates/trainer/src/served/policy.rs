//! A model behind an OpenAI-compatible server as the policy: each turn's prompt is sent as
//! the one user message a local model gets (the server applies its own chat template), the
//! turns of a batch are in flight together (at most `max_in_flight`), each reply is sampled
//! with its own seed (rollout seed and step, as local models do), and a request that fails
//! after its retries fails only its episode. Token counts and log-probs are recorded when
//! the server returns them; there are no token ids.

use crate::agent::{Policy, Reply, Turn};
use crate::collector::StepSeeds;
use crate::error::{Result, TrainerError};
use crate::record::EpisodeSpec;
use super::client::{map_in_flight, Client, Completion, Message, RequestError, RequestStats, Sampling, ServedOptions};

/// The end of the action block: generation stops there, as for local models.
pub const ACTION_STOP: &str = "</action>";

/// How replies are sampled.
#[derive(Debug, Clone, PartialEq)]
pub struct ServedSampling {
    pub max_tokens: usize,
    pub temperature: f64,
    pub top_p: f64,
    pub seed: u64,
}

pub struct ServedPolicy {
    client: Client,
    sampling: ServedSampling,
    seeds: StepSeeds,
    /// The server has answered at least once: a refusal after that fails episodes, not
    /// the run, so what was played is kept.
    answered: bool,
}

impl ServedPolicy {
    /// Connects (one `GET /models`) so a wrong URL or key fails before any episode.
    pub fn connect(options: ServedOptions, sampling: ServedSampling) -> Result<ServedPolicy> {
        Ok(ServedPolicy {
            client: Client::connect(options)?,
            sampling,
            seeds: StepSeeds::default(),
            answered: false,
        })
    }

    fn request(&self, turn: &Turn) -> Result<Reply, RequestError> {
        let sampling = Sampling {
            max_tokens: self.sampling.max_tokens,
            temperature: self.sampling.temperature,
            top_p: self.sampling.top_p,
            seed: Some(self.seeds.of(turn)),
            stop: vec![ACTION_STOP.to_string()],
        };
        let completion = self.client.chat(&[Message::user(turn.prompt)], &sampling)?;
        Ok(reply_of(completion))
    }
}

/// The reply as a local model would have recorded it: servers drop the stop string, so an
/// action block left open by a `stop` finish gets its `</action>` back.
pub fn reply_of(completion: Completion) -> Reply {
    let mut text = completion.text;
    if completion.finish_reason.as_deref() == Some("stop") && action_left_open(&text) {
        text.push_str(ACTION_STOP);
    }
    Reply {
        output: text.into_bytes(),
        logprobs: completion.logprobs,
        usage: completion.usage,
        ..Reply::default()
    }
}

fn action_left_open(text: &str) -> bool {
    match (text.rfind("<action>"), text.rfind(ACTION_STOP)) {
        (Some(open), Some(close)) => open > close,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

impl Policy for ServedPolicy {
    fn name(&self) -> String {
        self.client.name()
    }

    fn start_episode(&mut self, slot: usize, spec: &EpisodeSpec) -> Result<()> {
        self.seeds.start(slot, self.sampling.seed, spec);
        Ok(())
    }

    fn act(&mut self, turns: &[Turn]) -> Result<Vec<Result<Reply, String>>> {
        let this = &*self;
        let results = map_in_flight(turns, this.client.options().max_in_flight, |t| this.request(t));
        self.answered |= results.iter().any(Result::is_ok);
        if !self.answered {
            // Refused before any answer (a bad key, a wrong model): stop with the reason.
            if let Some(Err(RequestError::Fatal(m))) = results.iter().find(|r| matches!(r, Err(RequestError::Fatal(_)))) {
                return Err(TrainerError::Invalid(m.clone()));
            }
        }
        Ok(results
            .into_iter()
            .map(|r| r.map_err(|e| e.to_string()))
            .collect())
    }

    fn request_stats(&self) -> Option<RequestStats> {
        Some(self.client.stats())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn completion(text: &str, finish: &str) -> Completion {
        Completion {
            text: text.into(),
            finish_reason: Some(finish.into()),
            ..Completion::default()
        }
    }

    #[test]
    fn a_stopped_open_action_is_closed_like_a_local_reply() {
        let out = |c| String::from_utf8(reply_of(c).output).unwrap();
        assert_eq!(
            out(completion("<planning>p</planning>\n<action>look", "stop")),
            "<planning>p</planning>\n<action>look</action>"
        );
        // Cut by the token limit: left as it is (an invalid step, as for a local model).
        assert_eq!(out(completion("<action>lo", "length")), "<action>lo");
        // Closed already, or no action at all: unchanged.
        assert_eq!(out(completion("<action>a</action>", "stop")), "<action>a</action>");
        assert_eq!(out(completion("no tags", "stop")), "no tags");
        assert_eq!(
            out(completion("<action>a</action> then <action>b", "stop")),
            "<action>a</action> then <action>b</action>"
        );
    }
}
