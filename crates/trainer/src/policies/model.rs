//! An LLM as a policy: each turn's prompt goes through the chat template and every running
//! episode is sampled in one KV-cached batch (`policy::sample::sample_batch_with`).
//! Every rollout samples from its own stream, seeded by its rollout seed and the step, so
//! its tokens do not depend on which other episodes share its batch.
//!
//! The recorded output is the decoded text of exactly the sampled tokens (a reply cut at
//! the `</action>` stop string keeps it), so output, response ids and log-probs agree.

use candle_core::quantized::GgmlDType;
use policy::chat::{apply_chatml, ChatMessage};
use policy::sample::{sample_batch_with, SampleOptions};
use policy::{InferenceModel, Llama, Tokenizer};

use crate::agent::{Policy, Reply, Turn};
use crate::collector::StepSeeds;
use crate::error::Result;
use crate::record::EpisodeSpec;

/// How the model samples.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelPolicyOptions {
    pub max_new_tokens: usize,
    pub temperature: f64,
    pub top_k: usize,
    pub top_p: f64,
    pub seed: u64,
    /// Rows sampled together at most (bounds the KV cache's memory).
    pub max_batch: usize,
    /// Decode with a Q8_0 copy of the weights (faster on CPU; log-probs are the copy's).
    pub quantized_decode: bool,
}

impl Default for ModelPolicyOptions {
    fn default() -> Self {
        ModelPolicyOptions {
            max_new_tokens: 256,
            temperature: 0.4,
            top_k: 0,
            top_p: 1.0,
            seed: 0,
            max_batch: 16,
            quantized_decode: false,
        }
    }
}

pub struct ModelPolicy {
    name: String,
    inference: InferenceModel,
    tokenizer: Tokenizer,
    options: ModelPolicyOptions,
    seeds: StepSeeds,
}

impl ModelPolicy {
    pub fn new(
        name: impl Into<String>,
        model: Llama,
        tokenizer: Tokenizer,
        options: ModelPolicyOptions,
    ) -> Result<Self> {
        Self::sampling(name, &model, tokenizer, options)
    }

    /// A policy sampling from `model`'s current weights: the inference view (built now: its
    /// decode steps read copies of the small matrices), or a Q8_0 copy made now when
    /// `options.quantized_decode` is set.
    pub fn sampling(
        name: impl Into<String>,
        model: &Llama,
        tokenizer: Tokenizer,
        options: ModelPolicyOptions,
    ) -> Result<Self> {
        let inference = if options.quantized_decode {
            model.quantized(GgmlDType::Q8_0)?
        } else {
            model.inference()?
        };
        Ok(ModelPolicy {
            name: name.into(),
            inference,
            tokenizer,
            options,
            seeds: StepSeeds::default(),
        })
    }

    fn sample_options(&self, row_seeds: Vec<u64>) -> SampleOptions {
        SampleOptions {
            max_new_tokens: self.options.max_new_tokens,
            temperature: self.options.temperature,
            top_k: self.options.top_k,
            top_p: self.options.top_p,
            seed: self.options.seed,
            row_seeds,
            stop_strings: vec!["</action>".to_string()],
            ..SampleOptions::chat_defaults(&self.tokenizer)
        }
    }

    /// Tokenized chat prompts, or why a turn cannot be sampled.
    fn encode(&self, turn: &Turn) -> Result<Vec<u32>, String> {
        let text = apply_chatml(&[ChatMessage::user(turn.prompt)], true);
        let ids = self.tokenizer.encode(&text).map_err(|e| e.to_string())?;
        let context = self.inference.config().max_position;
        if ids.len() >= context {
            return Err(format!(
                "prompt of {} tokens does not fit the context length {context}",
                ids.len()
            ));
        }
        Ok(ids)
    }
}

impl Policy for ModelPolicy {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn start_episode(&mut self, slot: usize, spec: &EpisodeSpec) -> Result<()> {
        self.seeds.start(slot, self.options.seed, spec);
        Ok(())
    }

    fn act(&mut self, turns: &[Turn]) -> Result<Vec<Result<Reply, String>>> {
        let encoded: Vec<Result<Vec<u32>, String>> = turns.iter().map(|t| self.encode(t)).collect();
        let ready: Vec<usize> = (0..turns.len()).filter(|&i| encoded[i].is_ok()).collect();
        let mut replies: Vec<Option<Reply>> = vec![None; turns.len()];
        for chunk in ready.chunks(self.options.max_batch.max(1)) {
            let prompts: Vec<Vec<u32>> = chunk
                .iter()
                .filter_map(|&i| encoded[i].as_ref().ok().cloned())
                .collect();
            let row_seeds = chunk.iter().map(|&i| self.seeds.of(&turns[i])).collect();
            let opts = self.sample_options(row_seeds);
            let sampled = sample_batch_with(&self.inference, &self.tokenizer, &prompts, &opts)?;
            for ((&i, prompt_ids), s) in chunk.iter().zip(prompts).zip(sampled) {
                let output = self.tokenizer.decode(&s.ids, true)?;
                replies[i] = Some(Reply {
                    output: output.into_bytes(),
                    prompt_ids,
                    response_ids: s.ids,
                    logprobs: s.logprobs,
                    mistake: false,
                    usage: None,
                });
            }
        }
        Ok(encoded
            .into_iter()
            .zip(replies)
            .map(|(enc, reply)| match (enc, reply) {
                (Err(e), _) => Err(e),
                (Ok(_), Some(r)) => Ok(r),
                (Ok(_), None) => Err("the model returned no sample".into()),
            })
            .collect())
    }
}
