//! A Llama decoder written only with candle ops that have a backward pass.
//!
//! Embedding by `index_select`, RMS norm / half-split rope / softmax from primitive ops, GQA by
//! repeating K/V heads with `cat`, an additive causal mask, a SiLU-gated MLP and an optionally
//! tied output head. Every weight is a [`Var`], so the model is trainable as is. Weight names
//! and layouts follow the Hugging Face convention (`model.layers.{i}.self_attn.q_proj.weight`,
//! `[out, in]`, half-split rope); the GGUF loader converts to it.

use crate::error::{PolicyError, Result};
use candle_core::{DType, Device, Tensor, Var, D};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The shape of a Llama-family model.
#[derive(Debug, Clone, PartialEq)]
pub struct LlamaConfig {
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
    /// A tiny configuration for tests.
    pub fn tiny() -> Self {
        Self {
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
            out.push((format!("{p}.self_attn.k_proj.weight"), vec![kv, h]));
            out.push((format!("{p}.self_attn.v_proj.weight"), vec![kv, h]));
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

struct Layer {
    input_norm: Var,
    q: Var,
    k: Var,
    v: Var,
    o: Var,
    post_norm: Var,
    gate: Var,
    up: Var,
    down: Var,
}

/// The trainable Llama model.
pub struct Llama {
    cfg: LlamaConfig,
    embed: Var,
    layers: Vec<Layer>,
    norm: Var,
    lm_head: Option<Var>,
    /// `[max_position, head_dim]` rope tables (constants, not trained).
    cos: Tensor,
    sin: Tensor,
    dtype: DType,
    device: Device,
}

impl std::fmt::Debug for Llama {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Llama")
            .field("config", &self.cfg)
            .field("dtype", &self.dtype)
            .finish()
    }
}

impl Llama {
    /// Build from named weights in Hugging Face layout (`get(name, shape)` returns the tensor).
    /// Weights are converted to `dtype` and wrapped as [`Var`]s.
    pub fn from_weights(
        cfg: LlamaConfig,
        dtype: DType,
        device: &Device,
        mut get: impl FnMut(&str, &[usize]) -> Result<Tensor>,
    ) -> Result<Self> {
        cfg.validate()?;
        let mut var = |name: &str, shape: &[usize]| -> Result<Var> {
            let t = get(name, shape)?;
            if t.dims() != shape {
                return Err(PolicyError::Config(format!(
                    "weight {name} has shape {:?}, expected {shape:?}",
                    t.dims()
                )));
            }
            Ok(Var::from_tensor(&t.to_dtype(dtype)?.to_device(device)?)?)
        };
        let (h, i, v) = (cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size);
        let q = cfg.num_heads * cfg.head_dim;
        let kv = cfg.num_kv_heads * cfg.head_dim;
        let embed = var("model.embed_tokens.weight", &[v, h])?;
        let mut layers = Vec::with_capacity(cfg.num_layers);
        for l in 0..cfg.num_layers {
            let p = format!("model.layers.{l}");
            layers.push(Layer {
                input_norm: var(&format!("{p}.input_layernorm.weight"), &[h])?,
                q: var(&format!("{p}.self_attn.q_proj.weight"), &[q, h])?,
                k: var(&format!("{p}.self_attn.k_proj.weight"), &[kv, h])?,
                v: var(&format!("{p}.self_attn.v_proj.weight"), &[kv, h])?,
                o: var(&format!("{p}.self_attn.o_proj.weight"), &[h, q])?,
                post_norm: var(&format!("{p}.post_attention_layernorm.weight"), &[h])?,
                gate: var(&format!("{p}.mlp.gate_proj.weight"), &[i, h])?,
                up: var(&format!("{p}.mlp.up_proj.weight"), &[i, h])?,
                down: var(&format!("{p}.mlp.down_proj.weight"), &[h, i])?,
            });
        }
        let norm = var("model.norm.weight", &[h])?;
        let lm_head = if cfg.tie_word_embeddings {
            None
        } else {
            Some(var("lm_head.weight", &[v, h])?)
        };
        let (cos, sin) = rope_tables(&cfg, dtype, device)?;
        Ok(Self {
            cfg,
            embed,
            layers,
            norm,
            lm_head,
            cos,
            sin,
            dtype,
            device: device.clone(),
        })
    }

    /// A randomly initialised model (normal(0, 0.02) matrices, norm weights near 1), seeded.
    pub fn random(cfg: LlamaConfig, dtype: DType, device: &Device, seed: u64) -> Result<Self> {
        use rand_distr_like::normal;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        Self::from_weights(cfg, dtype, device, |name, shape| {
            let n: usize = shape.iter().product();
            let data: Vec<f64> =
                if name.ends_with("norm.weight") || name.ends_with("layernorm.weight") {
                    (0..n).map(|_| 1.0 + 0.1 * normal(&mut rng)).collect()
                } else {
                    (0..n).map(|_| 0.02 * normal(&mut rng)).collect()
                };
            Ok(Tensor::from_vec(data, shape, &Device::Cpu)?)
        })
    }

    pub fn config(&self) -> &LlamaConfig {
        &self.cfg
    }
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Every trainable parameter with its Hugging Face name, in [`LlamaConfig::parameter_shapes`]
    /// order.
    pub fn named_vars(&self) -> Vec<(String, Var)> {
        let mut out = vec![("model.embed_tokens.weight".to_string(), self.embed.clone())];
        for (l, layer) in self.layers.iter().enumerate() {
            let p = format!("model.layers.{l}");
            let items = [
                ("input_layernorm.weight", &layer.input_norm),
                ("self_attn.q_proj.weight", &layer.q),
                ("self_attn.k_proj.weight", &layer.k),
                ("self_attn.v_proj.weight", &layer.v),
                ("self_attn.o_proj.weight", &layer.o),
                ("post_attention_layernorm.weight", &layer.post_norm),
                ("mlp.gate_proj.weight", &layer.gate),
                ("mlp.up_proj.weight", &layer.up),
                ("mlp.down_proj.weight", &layer.down),
            ];
            for (n, v) in items {
                out.push((format!("{p}.{n}"), v.clone()));
            }
        }
        out.push(("model.norm.weight".to_string(), self.norm.clone()));
        if let Some(head) = &self.lm_head {
            out.push(("lm_head.weight".to_string(), head.clone()));
        }
        out
    }

    /// Logits `[batch, seq, vocab]` for token ids `[batch, seq]` (u32). Every row starts at
    /// position 0; pad on the right (the causal mask keeps padding out of earlier positions).
    pub fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        let (b, t) = ids.dims2()?;
        if t == 0 {
            return Err(PolicyError::Input("empty input sequence".into()));
        }
        if t > self.cfg.max_position {
            return Err(PolicyError::Input(format!(
                "sequence of {t} tokens exceeds the context length {}",
                self.cfg.max_position
            )));
        }
        let h = self.cfg.hidden_size;
        let mut x = self
            .embed
            .as_tensor()
            .index_select(&ids.flatten_all()?, 0)?
            .reshape((b, t, h))?;
        let cos = self.cos.narrow(0, 0, t)?;
        let sin = self.sin.narrow(0, 0, t)?;
        let mask = causal_mask(t, self.dtype, &self.device)?;
        for layer in &self.layers {
            let normed = rms_norm(&x, layer.input_norm.as_tensor(), self.cfg.rms_norm_eps)?;
            let attn = self.attention(layer, &normed, &cos, &sin, &mask)?;
            x = (x + attn)?;
            let normed = rms_norm(&x, layer.post_norm.as_tensor(), self.cfg.rms_norm_eps)?;
            let gate = linear(&normed, layer.gate.as_tensor())?;
            let up = linear(&normed, layer.up.as_tensor())?;
            let mlp = linear(&(silu(&gate)? * up)?, layer.down.as_tensor())?;
            x = (x + mlp)?;
        }
        let x = rms_norm(&x, self.norm.as_tensor(), self.cfg.rms_norm_eps)?;
        let head = self.lm_head.as_ref().unwrap_or(&self.embed);
        linear(&x, head.as_tensor())
    }

    fn attention(
        &self,
        layer: &Layer,
        x: &Tensor,
        cos: &Tensor,
        sin: &Tensor,
        mask: &Tensor,
    ) -> Result<Tensor> {
        let (b, t, _) = x.dims3()?;
        let (nh, nkv, hd) = (self.cfg.num_heads, self.cfg.num_kv_heads, self.cfg.head_dim);
        let q = linear(x, layer.q.as_tensor())?
            .reshape((b, t, nh, hd))?
            .transpose(1, 2)?;
        let k = linear(x, layer.k.as_tensor())?
            .reshape((b, t, nkv, hd))?
            .transpose(1, 2)?;
        let v = linear(x, layer.v.as_tensor())?
            .reshape((b, t, nkv, hd))?
            .transpose(1, 2)?;
        let q = rope(&q, cos, sin)?;
        let k = repeat_kv(&rope(&k, cos, sin)?, nh / nkv)?;
        let v = repeat_kv(&v.contiguous()?, nh / nkv)?;
        let scale = 1.0 / (hd as f64).sqrt();
        let scores = (q.matmul(&k.t()?)? * scale)?.broadcast_add(mask)?;
        let probs = softmax_last_dim(&scores)?;
        let out = probs
            .matmul(&v)?
            .transpose(1, 2)?
            .reshape((b, t, nh * hd))?;
        linear(&out, layer.o.as_tensor())
    }
}

/// `x @ w.T` for `x: [.., in]`, `w: [out, in]`.
pub fn linear(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    let dims = x.dims().to_vec();
    let (last, lead) = dims
        .split_last()
        .ok_or_else(|| PolicyError::Input("scalar input to linear".into()))?;
    let rows: usize = lead.iter().product();
    let y = x.reshape((rows, *last))?.matmul(&w.t()?)?;
    let mut out_shape = lead.to_vec();
    out_shape.push(w.dim(0)?);
    Ok(y.reshape(out_shape)?)
}

/// RMS norm over the last dimension, from primitive ops.
pub fn rms_norm(x: &Tensor, weight: &Tensor, eps: f64) -> Result<Tensor> {
    let ms = x.sqr()?.mean_keepdim(D::Minus1)?;
    let inv = (ms + eps)?.sqrt()?.recip()?;
    Ok(x.broadcast_mul(&inv)?.broadcast_mul(weight)?)
}

/// Softmax over the last dimension, from primitive ops (the max shift is a detached constant).
pub fn softmax_last_dim(x: &Tensor) -> Result<Tensor> {
    let m = x.max_keepdim(D::Minus1)?.detach();
    let e = x.broadcast_sub(&m)?.exp()?;
    Ok(e.broadcast_div(&e.sum_keepdim(D::Minus1)?)?)
}

/// Log-softmax over the last dimension, from primitive ops.
pub fn log_softmax_last_dim(x: &Tensor) -> Result<Tensor> {
    let m = x.max_keepdim(D::Minus1)?.detach();
    let shifted = x.broadcast_sub(&m)?;
    let lse = shifted.exp()?.sum_keepdim(D::Minus1)?.log()?;
    Ok(shifted.broadcast_sub(&lse)?)
}

/// SiLU, `x * sigmoid(x)`, from primitive ops.
pub fn silu(x: &Tensor) -> Result<Tensor> {
    let denom = (x.neg()?.exp()? + 1.0)?;
    Ok((x / denom)?)
}

/// Half-split rotary embedding: `x * cos + rotate_half(x) * sin`, `x: [b, heads, t, d]`,
/// `cos`/`sin`: `[t, d]`.
pub fn rope(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
    let d = x.dim(D::Minus1)?;
    let x1 = x.narrow(D::Minus1, 0, d / 2)?;
    let x2 = x.narrow(D::Minus1, d / 2, d / 2)?;
    let rotated = Tensor::cat(&[&x2.neg()?, &x1], D::Minus1)?;
    Ok((x.broadcast_mul(cos)? + rotated.broadcast_mul(sin)?)?)
}

/// `[t, d]` cos and sin tables for positions `0..max_position` (half-split layout).
fn rope_tables(cfg: &LlamaConfig, dtype: DType, device: &Device) -> Result<(Tensor, Tensor)> {
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

/// `[t, t]` additive causal mask: 0 on and below the diagonal, -inf above.
fn causal_mask(t: usize, dtype: DType, device: &Device) -> Result<Tensor> {
    let data: Vec<f32> = (0..t)
        .flat_map(|i| (0..t).map(move |j| if j > i { f32::NEG_INFINITY } else { 0.0 }))
        .collect();
    Ok(Tensor::from_vec(data, (t, t), device)?.to_dtype(dtype)?)
}

/// `[b, kv, t, d]` -> `[b, kv * n_rep, t, d]`, each KV head repeated for its query group.
fn repeat_kv(x: &Tensor, n_rep: usize) -> Result<Tensor> {
    if n_rep == 1 {
        return Ok(x.clone());
    }
    let (b, kv, t, d) = x.dims4()?;
    let x = x.unsqueeze(2)?;
    let reps: Vec<&Tensor> = std::iter::repeat_n(&x, n_rep).collect();
    Ok(Tensor::cat(&reps, 2)?.reshape((b, kv * n_rep, t, d))?)
}

/// A tiny Box-Muller normal sampler so that `rand_distr` is not needed.
mod rand_distr_like {
    use rand::Rng;
    pub fn normal(rng: &mut impl Rng) -> f64 {
        let u1: f64 = rng.gen::<f64>().max(f64::MIN_POSITIVE);
        let u2: f64 = rng.gen();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}
