//! A model made from nothing: a byte-level BPE tokenizer trained on the texts the model
//! will read (the environment's own prompts and replies), and a small randomly initialised
//! Llama of the same architecture as the pretrained ones, so that everything downstream
//! (SFT, sampling, checkpoints, transformers) treats it like any other model.

use candle_core::{DType, Device};
use serde::{Deserialize, Serialize};
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{BpeTrainer, BPE};
use tokenizers::models::TrainerWrapper;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::{AddedToken, PreTokenizerWrapper};

use crate::chat::{IM_END, IM_START};
use crate::error::{PolicyError, Result};
use crate::model::{Family, Llama, LlamaConfig};
use crate::tokenizer::Tokenizer;

/// The padding / end-of-text token, as SmolLM2 names it.
pub const END_OF_TEXT: &str = "<|endoftext|>";

/// The special tokens of a from-scratch tokenizer, ids 0, 1, 2 (SmolLM2's order).
pub const SPECIAL_TOKENS: [&str; 3] = [END_OF_TEXT, IM_START, IM_END];

/// The shape of a from-scratch model and its tokenizer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScratchConfig {
    /// Tokenizer vocabulary, special tokens and the 256 byte symbols included.
    pub vocab_size: usize,
    /// A merge is learned only from pairs seen at least this often.
    pub min_frequency: u64,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_layers: usize,
    pub num_heads: usize,
    pub num_kv_heads: usize,
    /// The context length.
    pub max_position: usize,
    pub rope_theta: f64,
}

impl Default for ScratchConfig {
    fn default() -> Self {
        ScratchConfig {
            vocab_size: 2048,
            min_frequency: 2,
            hidden_size: 256,
            intermediate_size: 768,
            num_layers: 4,
            num_heads: 8,
            num_kv_heads: 4,
            max_position: 2048,
            rope_theta: 10_000.0,
        }
    }
}

impl ScratchConfig {
    /// Checks the shape; the message names the field.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(PolicyError::Config(m));
        if self.vocab_size < 256 + SPECIAL_TOKENS.len() {
            return bad(format!(
                "vocab_size must hold the 256 byte symbols and {} special tokens, got {}",
                SPECIAL_TOKENS.len(),
                self.vocab_size
            ));
        }
        if self.num_heads == 0 || !self.hidden_size.is_multiple_of(self.num_heads) {
            return bad(format!(
                "hidden_size ({}) must be a multiple of num_heads ({})",
                self.hidden_size, self.num_heads
            ));
        }
        if self.intermediate_size == 0 || self.max_position == 0 {
            return bad("intermediate_size and max_position must be positive".into());
        }
        self.llama(self.vocab_size).validate()
    }

    /// The transformer's configuration for a tokenizer of `vocab_size` tokens (BPE training
    /// may stop short of the asked size when the texts have few distinct pairs).
    pub fn llama(&self, vocab_size: usize) -> LlamaConfig {
        LlamaConfig {
            family: Family::Llama,
            vocab_size,
            hidden_size: self.hidden_size,
            intermediate_size: self.intermediate_size,
            num_layers: self.num_layers,
            num_heads: self.num_heads,
            num_kv_heads: self.num_kv_heads,
            head_dim: self.hidden_size / self.num_heads.max(1),
            rope_theta: self.rope_theta,
            rms_norm_eps: 1e-5,
            max_position: self.max_position,
            tie_word_embeddings: true,
        }
    }
}

/// Trains a byte-level BPE (SmolLM2's pre-tokenization: single digits, then byte-level
/// words) on `texts`; the special tokens get ids 0, 1, 2 and are never split.
pub fn train_tokenizer<'a>(
    texts: impl Iterator<Item = &'a str> + Send,
    vocab_size: usize,
    min_frequency: u64,
) -> Result<Tokenizer> {
    let err = |e: tokenizers::Error| PolicyError::Tokenizer(format!("training the BPE: {e}"));
    let specials: Vec<AddedToken> = SPECIAL_TOKENS
        .iter()
        .map(|t| AddedToken::from(t.to_string(), true))
        .collect();
    let trainer = BpeTrainer::builder()
        .vocab_size(vocab_size)
        .min_frequency(min_frequency)
        .show_progress(false)
        .special_tokens(specials.clone())
        .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
        .build();
    let mut inner = tokenizers::Tokenizer::new(BPE::default());
    inner.with_pre_tokenizer(Some(Sequence::new(vec![
        PreTokenizerWrapper::Digits(Digits::new(true)),
        PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, true, true)),
    ])));
    inner.with_decoder(Some(ByteLevelDecoder::default()));
    // Special-token markup inside the texts is cut out before the BPE sees it.
    inner.add_special_tokens(specials.clone()).map_err(err)?;
    let mut trainer = TrainerWrapper::BpeTrainer(trainer);
    inner.train(&mut trainer, texts).map_err(err)?;
    inner.add_special_tokens(specials.clone()).map_err(err)?;
    // Through its JSON form and back: the tokenizer trained on is then exactly the one a
    // checkpoint's tokenizer.json loads (the trained model's in-memory merge ranks can
    // break ties differently from the saved merge list).
    let json = inner.to_string(false).map_err(err)?;
    let inner: tokenizers::Tokenizer = json.parse().map_err(err)?;
    let tokenizer = Tokenizer::from(inner);
    for (id, token) in SPECIAL_TOKENS.iter().enumerate() {
        if tokenizer.token_to_id(token) != Some(id as u32) {
            return Err(PolicyError::Tokenizer(format!(
                "the trained BPE does not give {token} id {id}"
            )));
        }
    }
    Ok(tokenizer)
}

/// A tokenizer trained on `texts` and a seeded random model of `config`'s shape for it.
pub fn create<'a>(
    config: &ScratchConfig,
    texts: impl Iterator<Item = &'a str> + Send,
    seed: u64,
    device: &Device,
) -> Result<(Llama, Tokenizer)> {
    config.validate()?;
    let tokenizer = train_tokenizer(texts, config.vocab_size, config.min_frequency)?;
    let model = Llama::random(
        config.llama(tokenizer.vocab_size()),
        DType::F32,
        device,
        seed,
    )?;
    Ok((model, tokenizer))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::{apply_chatml, ChatMessage};

    fn corpus() -> Vec<String> {
        (0..50)
            .map(|i| {
                apply_chatml(
                    &[ChatMessage::user(format!(
                        "You arrive at countertop {i}. On the countertop {i}, you see a mug 2."
                    ))],
                    true,
                ) + "<monitor>I take the mug.</monitor><action>take mug 2 from countertop 1</action><|im_end|>"
            })
            .collect()
    }

    #[test]
    fn the_trained_bpe_round_trips_and_keeps_markup_whole() {
        let texts = corpus();
        let tok = train_tokenizer(texts.iter().map(String::as_str), 400, 2).unwrap();
        assert!(tok.vocab_size() <= 400 && tok.vocab_size() > 259, "{}", tok.vocab_size());
        for text in &texts {
            let ids = tok.encode(text).unwrap();
            assert_eq!(&tok.decode(&ids, false).unwrap(), text);
            assert!(ids.len() < text.len() / 3, "merges compress the corpus");
        }
        let ids = tok.encode("<|im_start|>user\nhi<|im_end|>").unwrap();
        assert_eq!(ids[0], 1);
        assert_eq!(*ids.last().unwrap(), 2);
        // Text never seen (other bytes, digits) still encodes: the byte alphabet is complete.
        let odd = "Zürich 9876 ~{}";
        assert_eq!(tok.decode(&tok.encode(odd).unwrap(), false).unwrap(), odd);
    }

    #[test]
    fn created_models_are_seeded_and_sized_to_the_tokenizer() {
        let config = ScratchConfig {
            vocab_size: 300,
            hidden_size: 32,
            intermediate_size: 48,
            num_layers: 2,
            num_heads: 4,
            num_kv_heads: 2,
            max_position: 128,
            ..ScratchConfig::default()
        };
        let texts = corpus();
        let (a, tok) = create(&config, texts.iter().map(String::as_str), 7, &Device::Cpu).unwrap();
        let (b, _) = create(&config, texts.iter().map(String::as_str), 7, &Device::Cpu).unwrap();
        assert_eq!(a.config().vocab_size, tok.vocab_size());
        let ids = candle_core::Tensor::new(&[[1u32, 5, 9]], &Device::Cpu).unwrap();
        let la = a.forward(&ids).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let lb = b.forward(&ids).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(la, lb);
    }

    #[test]
    fn impossible_shapes_name_the_field() {
        let config = ScratchConfig {
            hidden_size: 100,
            num_heads: 8,
            ..ScratchConfig::default()
        };
        let err = config.validate().unwrap_err().to_string();
        assert!(err.contains("hidden_size") && err.contains("num_heads"), "{err}");
        let config = ScratchConfig {
            vocab_size: 10,
            ..ScratchConfig::default()
        };
        assert!(config.validate().unwrap_err().to_string().contains("vocab_size"));
    }
}
