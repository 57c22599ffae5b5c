//! The tokenizer: a `tokenizers` BPE built from GGUF metadata, or loaded from `tokenizer.json`.

use crate::error::{PolicyError, Result};
use candle_core::quantized::gguf_file::{Content, Value};
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::BPE;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::{AddedToken, PreTokenizerWrapper};

/// GGUF `token_type` of control (special) tokens.
const TOKEN_TYPE_CONTROL: i64 = 3;

/// A text <-> token-id codec.
#[derive(Clone)]
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("vocab_size", &self.vocab_size())
            .finish()
    }
}

/// Wrap a tokenizer built with the `tokenizers` crate (e.g. a small one for tests).
impl From<tokenizers::Tokenizer> for Tokenizer {
    fn from(inner: tokenizers::Tokenizer) -> Self {
        Self { inner }
    }
}

fn tok_err(e: impl std::fmt::Display) -> PolicyError {
    PolicyError::Tokenizer(e.to_string())
}

fn string_array(ct: &Content, key: &str) -> Result<Vec<String>> {
    let v = ct
        .metadata
        .get(key)
        .ok_or_else(|| PolicyError::Tokenizer(format!("GGUF metadata has no `{key}`")))?;
    let arr = v
        .to_vec()
        .map_err(|_| PolicyError::Tokenizer(format!("`{key}` is not an array")))?;
    arr.iter()
        .map(|x| {
            x.to_string()
                .cloned()
                .map_err(|_| PolicyError::Tokenizer(format!("`{key}` holds a non-string")))
        })
        .collect()
}

fn as_i64(v: &Value) -> Option<i64> {
    Some(match v {
        Value::U8(x) => *x as i64,
        Value::I8(x) => *x as i64,
        Value::U16(x) => *x as i64,
        Value::I16(x) => *x as i64,
        Value::U32(x) => *x as i64,
        Value::I32(x) => *x as i64,
        Value::U64(x) => *x as i64,
        Value::I64(x) => *x,
        _ => return None,
    })
}

impl Tokenizer {
    /// Build the byte-level BPE described by GGUF metadata (`tokenizer.ggml.*`): vocabulary and
    /// merges, pre-tokenizer Digits(individual) then ByteLevel(no prefix space, trim offsets,
    /// regex), ByteLevel decoder, and every token of type 3 (control) registered as special.
    pub fn from_gguf(ct: &Content) -> Result<Self> {
        if let Some(model) = ct.metadata.get("tokenizer.ggml.model") {
            let model = model.to_string().map_err(tok_err)?;
            if model != "gpt2" {
                return Err(PolicyError::Tokenizer(format!(
                    "unsupported GGUF tokenizer model `{model}` (only byte-level BPE, `gpt2`)"
                )));
            }
        }
        let tokens = string_array(ct, "tokenizer.ggml.tokens")?;
        let merges_raw = string_array(ct, "tokenizer.ggml.merges")?;
        let mut merges = Vec::with_capacity(merges_raw.len());
        for m in &merges_raw {
            let (a, b) = m
                .split_once(' ')
                .ok_or_else(|| PolicyError::Tokenizer(format!("malformed merge `{m}`")))?;
            merges.push((a.to_string(), b.to_string()));
        }
        let vocab: tokenizers::models::bpe::Vocab = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .build()
            .map_err(tok_err)?;
        let mut inner = tokenizers::Tokenizer::new(bpe);
        let pre = Sequence::new(vec![
            PreTokenizerWrapper::Digits(Digits::new(true)),
            PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, true, true)),
        ]);
        inner.with_pre_tokenizer(Some(pre));
        inner.with_decoder(Some(ByteLevelDecoder::default()));
        let types: Vec<i64> = match ct.metadata.get("tokenizer.ggml.token_type") {
            Some(v) => v
                .to_vec()
                .map_err(tok_err)?
                .iter()
                .map(|x| as_i64(x).unwrap_or(0))
                .collect(),
            None => Vec::new(),
        };
        let special: Vec<AddedToken> = tokens
            .iter()
            .zip(types.iter())
            .filter(|(_, ty)| **ty == TOKEN_TYPE_CONTROL)
            .map(|(t, _)| AddedToken::from(t.clone(), true))
            .collect();
        inner.add_special_tokens(special).map_err(tok_err)?;
        Ok(Self { inner })
    }

    /// Load a Hugging Face `tokenizer.json`.
    pub fn from_file(path: &std::path::Path) -> Result<Self> {
        let inner = tokenizers::Tokenizer::from_file(path)
            .map_err(|e| PolicyError::context(format!("tokenizer {}", path.display()), e))?;
        Ok(Self { inner })
    }

    /// Token ids of `text`. Special-token markup in the text (e.g. `<|im_start|>`) maps to its
    /// id; no BOS/EOS or other tokens are added.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let enc = self.inner.encode(text, false).map_err(tok_err)?;
        Ok(enc.get_ids().to_vec())
    }

    /// Text of `ids`; special tokens are kept unless `skip_special`.
    pub fn decode(&self, ids: &[u32], skip_special: bool) -> Result<String> {
        self.inner.decode(ids, skip_special).map_err(tok_err)
    }

    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    /// Vocabulary size including added tokens.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    pub fn inner(&self) -> &tokenizers::Tokenizer {
        &self.inner
    }
}

/// A word-level tokenizer with exactly `n` tokens, `<unk>` (id 0) and `w1` .. `w{n-1}`, split on
/// whitespace: the tokenizer saved beside tiny random models (tests, examples).
pub fn word_level(n: u32) -> Result<Tokenizer> {
    use tokenizers::models::wordlevel::WordLevel;
    use tokenizers::pre_tokenizers::whitespace::Whitespace;
    let vocab = (0..n)
        .map(|i| (if i == 0 { "<unk>".to_string() } else { format!("w{i}") }, i))
        .collect();
    let model = WordLevel::builder()
        .vocab(vocab)
        .unk_token("<unk>".into())
        .build()
        .map_err(|e| PolicyError::context("word-level tokenizer", e))?;
    let mut tok = tokenizers::Tokenizer::new(model);
    tok.with_pre_tokenizer(Some(Whitespace {}));
    Ok(Tokenizer::from(tok))
}
