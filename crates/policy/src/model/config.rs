//! The decoder's shape: the family (Llama or Qwen2), the sizes, and the rope tables both the
//! training and the inference model read.

use candle_core::{DType, Device, Tensor};

use crate::error::{PolicyError, Result};

/// The model family, as named by Hugging Face's `architectures` in `config.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Family {
    /// `LlamaForCausalLM` (SmolLM2): no attention biases.
    #[default]
    Llama,
    /// `Qwen2ForCausalLM`: biases on the q, k and v projections.
    Qwen2,
}

impl Family {
    /// Whether the q/k/v projections carry a bias.
    pub fn has_qkv_bias(self) -> bool {
        self == Family::Qwen2
    }
}

/// The shape of a Llama-family model (Llama or Qwen2, see [`Family`]).
#[derive(Debug, Clone, PartialEq)]
pub struct LlamaConfig {
    pub family: Family,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_layers: usize,
    pub num_heads: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
    pub rope_theta: f64,
    pub rms_norm_eps: f64,
    /// Longest sequence the model accepts (the context length).
    pub max_position: usize,
    pub tie_word_embeddings: bool,
}

impl LlamaConfig {
    /// SmolLM2-135M's shape (the embedded model's), for benchmarks with random weights.
    pub fn smollm2_135m() -> Self {
        Self {
            family: Family::Llama,
            vocab_size: 49_152,
            hidden_size: 576,
            intermediate_size: 1536,
            num_layers: 30,
            num_heads: 9,
            num_kv_heads: 3,
            head_dim: 64,
            rope_theta: 100_000.0,
            rms_norm_eps: 1e-5,
            max_position: 8192,
            tie_word_embeddings: true,
        }
    }

    /// Qwen2.5-1.5B's shape (its config.json), for benchmarks with random weights.
    pub fn qwen2_5_1_5b() -> Self {
        Self {
            family: Family::Qwen2,
            vocab_size: 151_936,
            hidden_size: 1536,
            intermediate_size: 8960,
            num_layers: 28,
            num_heads: 12,
            num_kv_heads: 2,
            head_dim: 128,
            rope_theta: 1_000_000.0,
            rms_norm_eps: 1e-6,
            max_position: 32_768,
            tie_word_embeddings: true,
        }
    }

    /// A tiny configuration for tests.
    pub fn tiny() -> Self {
        Self {
            family: Family::Llama,
            vocab_size: 37,
            hidden_size: 16,
            intermediate_size: 24,
            num_layers: 2,
            num_heads: 4,
            num_kv_heads: 2,
            head_dim: 4,
            rope_theta: 10_000.0,
            rms_norm_eps: 1e-5,
            max_position: 64,
            tie_word_embeddings: true,
        }
    }

    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(PolicyError::Config(m));
        if self.num_heads == 0
            || self.num_kv_heads == 0
            || !self.num_heads.is_multiple_of(self.num_kv_heads)
        {
            return bad(format!(
                "num_heads ({}) must be a positive multiple of num_kv_heads ({})",
                self.num_heads, self.num_kv_heads
            ));
        }
        if self.head_dim == 0 || !self.head_dim.is_multiple_of(2) {
            return bad(format!(
                "head_dim ({}) must be even and positive",
                self.head_dim
            ));
        }
        if self.vocab_size == 0 || self.hidden_size == 0 || self.num_layers == 0 {
            return bad("vocab_size, hidden_size and num_layers must be positive".into());
        }
        Ok(())
    }

    /// Names and shapes of every parameter, Hugging Face layout.
    pub fn parameter_shapes(&self) -> Vec<(String, Vec<usize>)> {
        let (h, i, v) = (self.hidden_size, self.intermediate_size, self.vocab_size);
        let q = self.num_heads * self.head_dim;
        let kv = self.num_kv_heads * self.head_dim;
        let mut out = vec![("model.embed_tokens.weight".to_string(), vec![v, h])];
        for l in 0..self.num_layers {
            let p = format!("model.layers.{l}");
            out.push((format!("{p}.input_layernorm.weight"), vec![h]));
            out.push((format!("{p}.self_attn.q_proj.weight"), vec![q, h]));
            if self.family.has_qkv_bias() {
                out.push((format!("{p}.self_attn.q_proj.bias"), vec![q]));
            }
            out.push((format!("{p}.self_attn.k_proj.weight"), vec![kv, h]));
            if self.family.has_qkv_bias() {
                out.push((format!("{p}.self_attn.k_proj.bias"), vec![kv]));
            }
            out.push((format!("{p}.self_attn.v_proj.weight"), vec![kv, h]));
            if self.family.has_qkv_bias() {
                out.push((format!("{p}.self_attn.v_proj.bias"), vec![kv]));
            }
            out.push((format!("{p}.self_attn.o_proj.weight"), vec![h, q]));
            out.push((format!("{p}.post_attention_layernorm.weight"), vec![h]));
            out.push((format!("{p}.mlp.gate_proj.weight"), vec![i, h]));
            out.push((format!("{p}.mlp.up_proj.weight"), vec![i, h]));
            out.push((format!("{p}.mlp.down_proj.weight"), vec![h, i]));
        }
        out.push(("model.norm.weight".to_string(), vec![h]));
        if !self.tie_word_embeddings {
            out.push(("lm_head.weight".to_string(), vec![v, h]));
        }
        out
    }
}

/// `[t, d]` cos and sin tables for positions `0..max_position` (half-split layout).
pub(super) fn rope_tables(cfg: &LlamaConfig, dtype: DType, device: &Device) -> Result<(Tensor, Tensor)> {
    let half = cfg.head_dim / 2;
    let inv_freq: Vec<f64> = (0..half)
        .map(|i| 1.0 / cfg.rope_theta.powf(2.0 * i as f64 / cfg.head_dim as f64))
        .collect();
    let mut cos = Vec::with_capacity(cfg.max_position * cfg.head_dim);
    let mut sin = Vec::with_capacity(cfg.max_position * cfg.head_dim);
    for pos in 0..cfg.max_position {
        for _half in 0..2 {
            for f in &inv_freq {
                let angle = pos as f64 * f;
                cos.push(angle.cos());
                sin.push(angle.sin());
            }
        }
    }
    let shape = (cfg.max_position, cfg.head_dim);
    Ok((
        Tensor::from_vec(cos, shape, device)?.to_dtype(dtype)?,
        Tensor::from_vec(sin, shape, device)?.to_dtype(dtype)?,
    ))
}

