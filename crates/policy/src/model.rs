//! A Llama decoder written only with candle ops that have a backward pass.
//!
//! Embedding by `index_select`; RMS norm, half-split rope, causal attention (GQA by stacking
//! the query heads of each KV head) and the SiLU-gated MLP as the fused ops of
//! [`crate::fused`], each with its own backward (the primitive-op versions below are their
//! reference in tests and their fallback off the CPU); an optionally tied output head. Every
//! weight is a [`Var`], so the model is trainable as is. Weight names and layouts follow the
//! Hugging Face convention (`model.layers.{i}.self_attn.q_proj.weight`, `[out, in]`,
//! half-split rope); the GGUF loader converts to it.
//!
//! The same decoder serves the Qwen2 family ([`Family::Qwen2`]): Qwen2 differs from Llama only
//! by biases on the q/k/v projections (trainable, `...q_proj.bias` etc.). Qwen2's sliding-window
//! attention is not implemented: every layer attends to the whole context, which is what Qwen2
//! does whenever `use_sliding_window` is false (the released models) or the sequence is shorter
//! than the window.

use crate::error::{PolicyError, Result};
use crate::fused;
use crate::frozen::{frozen_linear, trained_linear};
use crate::lora::{LoraAdapters, TargetModule};
use crate::skinny::{self, SkinnyWeight};
use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::backprop::GradStore;
use candle_core::{DType, Device, Module, Tensor, Var, D};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

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

struct Layer {
    input_norm: Var,
    q: Var,
    k: Var,
    v: Var,
    /// q/k/v biases (Qwen2 only).
    q_bias: Option<Var>,
    k_bias: Option<Var>,
    v_bias: Option<Var>,
    o: Var,
    post_norm: Var,
    gate: Var,
    up: Var,
    down: Var,
}

impl Layer {
    fn weight(&self, target: TargetModule) -> &Var {
        match target {
            TargetModule::QProj => &self.q,
            TargetModule::KProj => &self.k,
            TargetModule::VProj => &self.v,
            TargetModule::OProj => &self.o,
            TargetModule::GateProj => &self.gate,
            TargetModule::UpProj => &self.up,
            TargetModule::DownProj => &self.down,
        }
    }

    /// The bias of a projection (Qwen2's q/k/v), if it has one.
    fn bias(&self, target: TargetModule) -> Option<&Var> {
        match target {
            TargetModule::QProj => self.q_bias.as_ref(),
            TargetModule::KProj => self.k_bias.as_ref(),
            TargetModule::VProj => self.v_bias.as_ref(),
            _ => None,
        }
    }
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
    /// LoRA adapters; while attached the base weights are frozen (see [`crate::lora`]).
    pub(crate) lora: Option<LoraAdapters>,
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
            let mut bias = |proj: &str, n: usize| -> Result<Option<Var>> {
                if !cfg.family.has_qkv_bias() {
                    return Ok(None);
                }
                var(&format!("{p}.self_attn.{proj}.bias"), &[n]).map(Some)
            };
            let (q_bias, k_bias, v_bias) =
                (bias("q_proj", q)?, bias("k_proj", kv)?, bias("v_proj", kv)?);
            layers.push(Layer {
                input_norm: var(&format!("{p}.input_layernorm.weight"), &[h])?,
                q: var(&format!("{p}.self_attn.q_proj.weight"), &[q, h])?,
                k: var(&format!("{p}.self_attn.k_proj.weight"), &[kv, h])?,
                v: var(&format!("{p}.self_attn.v_proj.weight"), &[kv, h])?,
                q_bias,
                k_bias,
                v_bias,
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
            lora: None,
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
                ("input_layernorm.weight", Some(&layer.input_norm)),
                ("self_attn.q_proj.weight", Some(&layer.q)),
                ("self_attn.q_proj.bias", layer.q_bias.as_ref()),
                ("self_attn.k_proj.weight", Some(&layer.k)),
                ("self_attn.k_proj.bias", layer.k_bias.as_ref()),
                ("self_attn.v_proj.weight", Some(&layer.v)),
                ("self_attn.v_proj.bias", layer.v_bias.as_ref()),
                ("self_attn.o_proj.weight", Some(&layer.o)),
                ("post_attention_layernorm.weight", Some(&layer.post_norm)),
                ("mlp.gate_proj.weight", Some(&layer.gate)),
                ("mlp.up_proj.weight", Some(&layer.up)),
                ("mlp.down_proj.weight", Some(&layer.down)),
            ];
            for (n, v) in items {
                if let Some(v) = v {
                    out.push((format!("{p}.{n}"), v.clone()));
                }
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
        linear_or_frozen(&self.hidden(ids)?, &self.head())
    }

    /// The LM head's weight `[vocab, hidden]` as it enters the graph (the embedding when
    /// tied; detached while a LoRA adapter freezes the base).
    pub fn head(&self) -> Tensor {
        self.param(self.lm_head.as_ref().unwrap_or(&self.embed))
    }

    /// The final hidden states `[batch, seq, hidden]` (after the last norm), which the LM
    /// head turns into logits; see [`Llama::forward`].
    pub fn hidden(&self, ids: &Tensor) -> Result<Tensor> {
        let (b, t) = self.check_ids(ids)?;
        let (cos, sin) = self.rope_tables(t)?;
        let mut x = self.embed_rows(ids)?;
        for l in 0..self.layers.len() {
            x = self.layer(l, &x, b, &cos, &sin)?;
        }
        self.final_norm(&x, b, t)
    }

    /// [`Llama::hidden`]'s values without a graph: each layer's output is detached as it
    /// comes, so only one layer's activations live at a time. For passes no gradient goes
    /// through (the update's old and reference log-probs): [`Llama::hidden`] on trainable
    /// weights records the whole forward pass and keeps every activation until its result
    /// is dropped, the memory of a training step.
    pub fn hidden_without_graph(&self, ids: &Tensor) -> Result<Tensor> {
        let (b, t) = self.check_ids(ids)?;
        let (cos, sin) = self.rope_tables(t)?;
        let mut x = self.embed_rows(ids)?.detach();
        for l in 0..self.layers.len() {
            x = self.layer(l, &x, b, &cos, &sin)?.detach();
        }
        Ok(self.final_norm(&x, b, t)?.detach())
    }

    /// The loss `loss_of(self.hidden(ids))` (detached) and its gradients: with `recompute`
    /// through [`Llama::backward_recomputed`] (one layer's activations at a time), else
    /// through one graph of the whole forward pass. The graph is gone when this returns.
    pub fn backward_from_hidden(
        &self,
        ids: &Tensor,
        recompute: bool,
        loss_of: impl FnOnce(&Tensor) -> Result<Tensor>,
    ) -> Result<(Tensor, GradStore)> {
        if recompute {
            return self.backward_recomputed(ids, loss_of);
        }
        let loss = loss_of(&self.hidden(ids)?)?;
        let grads = loss.backward()?;
        Ok((loss.detach(), grads))
    }

    /// Gradients of `loss_of(final hidden states)` with respect to every trainable variable,
    /// keeping one layer's activations at a time (activation checkpointing): a forward pass
    /// without a graph keeps each layer's input, then the backward runs from the top layer
    /// down, recomputing each layer's forward from its input and taking the gradient that
    /// flowed into its output. `loss_of` gets what [`Llama::hidden`] returns for `ids` and
    /// returns a scalar. The gradients equal `loss_of(self.hidden(ids)).backward()`'s up to
    /// rounding, for about one more forward pass of compute. Returns the loss (detached) and
    /// the gradients of [`Llama::trainable_vars`].
    pub fn backward_recomputed(
        &self,
        ids: &Tensor,
        loss_of: impl FnOnce(&Tensor) -> Result<Tensor>,
    ) -> Result<(Tensor, GradStore)> {
        let (b, t) = self.check_ids(ids)?;
        let (cos, sin) = self.rope_tables(t)?;
        let mut inputs = Vec::with_capacity(self.layers.len());
        let mut x = self.embed_rows(ids)?.detach();
        for l in 0..self.layers.len() {
            let out = self.layer(l, &x, b, &cos, &sin)?.detach();
            inputs.push(std::mem::replace(&mut x, out));
        }
        let vars = self.trainable_vars();
        let mut grads = GradStore::default();
        // The head: the final norm and the loss, from the last layer's output as a variable.
        let top = Var::from_tensor(&x)?;
        drop(x);
        let loss = loss_of(&self.final_norm(top.as_tensor(), b, t)?)?;
        let mut step = loss.backward()?;
        // Only the value is returned: the head's graph goes before the layers' backward.
        let loss = loss.detach();
        let mut upstream = take_gradient(&mut step, &top)?;
        add_gradients(&mut grads, &vars, step)?;
        for l in (0..self.layers.len()).rev() {
            let input = Var::from_tensor(&inputs.pop().expect("one input per layer"))?;
            let out = self.layer(l, input.as_tensor(), b, &cos, &sin)?;
            // d/d(out) of sum(out * upstream) is `upstream`: the chain rule through this layer.
            let surrogate = (out * &upstream)?.sum_all()?;
            let mut step = surrogate.backward()?;
            upstream = take_gradient(&mut step, &input)?;
            add_gradients(&mut grads, &vars, step)?;
        }
        // The embedding rows take the first layer's input gradient (frozen under LoRA).
        let rows = self.embed_rows(ids)?;
        if rows.track_op() {
            let surrogate = (rows * &upstream)?.sum_all()?;
            add_gradients(&mut grads, &vars, surrogate.backward()?)?;
        }
        Ok((loss, grads))
    }

    /// `ids: [batch, seq]` checked against the context length: (batch, seq).
    fn check_ids(&self, ids: &Tensor) -> Result<(usize, usize)> {
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
        Ok((b, t))
    }

    /// The rope tables of the first `t` positions.
    fn rope_tables(&self, t: usize) -> Result<(Tensor, Tensor)> {
        Ok((self.cos.narrow(0, 0, t)?, self.sin.narrow(0, 0, t)?))
    }

    /// The embeddings of `ids`, `[b * t, hidden]`: the residual stream stays in that layout
    /// (row `i * t + p`: position `p` of sequence `i`), the projections' own, so no reshape
    /// enters the graph.
    fn embed_rows(&self, ids: &Tensor) -> Result<Tensor> {
        Ok(self.param(&self.embed).index_select(&ids.flatten_all()?, 0)?)
    }

    /// Decoder layer `l` on the residual stream `x: [b * t, hidden]`.
    fn layer(&self, l: usize, x: &Tensor, b: usize, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
        let layer = &self.layers[l];
        let eps = self.cfg.rms_norm_eps;
        let normed = fused::rms_norm(x, &self.param(&layer.input_norm), eps)?;
        let x = (x + self.attention(l, &normed, b, cos, sin)?)?;
        let normed = fused::rms_norm(&x, &self.param(&layer.post_norm), eps)?;
        let gate = self.proj(l, TargetModule::GateProj, &normed)?;
        let up = self.proj(l, TargetModule::UpProj, &normed)?;
        let mlp = self.proj(l, TargetModule::DownProj, &fused::swiglu(&gate, &up)?)?;
        Ok((x + mlp)?)
    }

    /// The last norm, back to `[b, t, hidden]`.
    fn final_norm(&self, x: &Tensor, b: usize, t: usize) -> Result<Tensor> {
        let normed = fused::rms_norm(x, &self.param(&self.norm), self.cfg.rms_norm_eps)?;
        Ok(normed.reshape((b, t, self.cfg.hidden_size))?)
    }

    /// A weight other than the seven projections as it enters the graph: detached while a LoRA
    /// adapter freezes the base (so no gradient is computed for it), else the trainable `Var`.
    fn param(&self, var: &Var) -> Tensor {
        match self.lora {
            Some(_) => var.as_tensor().detach(),
            None => var.as_tensor().clone(),
        }
    }

    /// Projection `target` of layer `l` applied to `x` (`x @ W^T`); with a LoRA adapter, the
    /// frozen `W` plus the adapter's low-rank update. Every projection goes through here.
    fn proj(&self, l: usize, target: TargetModule, x: &Tensor) -> Result<Tensor> {
        let w = self.layers[l].weight(target).as_tensor();
        let y = match &self.lora {
            Some(lora) => lora.project(l, target, x, w)?,
            None => linear(x, w)?,
        };
        let bias = self.layers[l].bias(target).map(|b| self.param(b));
        add_bias(y, bias.as_ref())
    }

    /// Self-attention of layer `l` over `x: [b * t, hidden]` (`b` sequences), `[b * t, hidden]`.
    fn attention(&self, l: usize, x: &Tensor, b: usize, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
        let (nh, nkv, hd) = (self.cfg.num_heads, self.cfg.num_kv_heads, self.cfg.head_dim);
        // GQA without copying K/V per query head: the `nh / nkv` query heads of each KV head
        // are stacked as rows (head `g * rep + r` uses KV head `g`).
        let rope = Some((cos, sin));
        let q = fused::split_heads(&self.proj(l, TargetModule::QProj, x)?, b, nh, nkv, rope)?;
        let k = fused::split_heads(&self.proj(l, TargetModule::KProj, x)?, b, nkv, nkv, rope)?;
        let v = fused::split_heads(&self.proj(l, TargetModule::VProj, x)?, b, nkv, nkv, None)?;
        let scale = 1.0 / (hd as f64).sqrt();
        let out = fused::causal_attention(&q, &k, &v, scale)?;
        self.proj(l, TargetModule::OProj, &fused::merge_heads(&out, nh)?)
    }
}

/// `step`'s gradient of `input`, taken out of it (zeros where the loss does not reach `input`).
///
/// Gradients come out detached: candle leaves a variable's gradient attached to the graph
/// that computed it (a backward that used the variable's value records ops), and a gradient
/// kept across layers would keep every layer's recomputed graph alive with it.
fn take_gradient(step: &mut GradStore, input: &Var) -> Result<Tensor> {
    match step.remove(input.as_tensor()) {
        Some(g) => Ok(g.detach()),
        None => Ok(input.as_tensor().zeros_like()?),
    }
}

/// Adds the gradients of `vars` in `step` into `sum` (detached, as in [`take_gradient`]).
fn add_gradients(sum: &mut GradStore, vars: &[(String, Var)], mut step: GradStore) -> Result<()> {
    for (_, var) in vars {
        if let Some(g) = step.remove(var.as_tensor()) {
            let g = g.detach();
            let total = match sum.remove(var.as_tensor()) {
                Some(s) => (s + g)?,
                None => g,
            };
            sum.insert(var.as_tensor(), total);
        }
    }
    Ok(())
}

/// Key/value cache of the inference path ([`Llama::prefill`], [`Llama::decode_step`]).
///
/// Rows are LEFT-padded: row `i` has `pad[i]` masked columns at the start, then its real tokens;
/// positions (for rope) count from the first real token of each row. Every decode step appends
/// one column to every row. [`KvCache::retain`] drops finished rows so they cost no compute.
///
/// The keys and values live in buffers with room for more columns than are filled: a decode
/// step writes its column in place, where concatenating would copy the whole cache every step
/// (at 500 columns and 32 rows that copy was a tenth of a rollout). A full buffer grows by
/// [`GROW_COLUMNS`] at least. Not `Clone`: decode steps and [`KvCache::retain`] write into
/// the buffers in place, so two caches must never share them.
#[derive(Debug)]
pub struct KvCache {
    /// Per layer `[batch, kv_heads, capacity, head_dim]`; columns `len..` are free.
    k: Vec<Tensor>,
    v: Vec<Tensor>,
    /// Free columns the first buffers get past the prompt.
    reserve: usize,
    /// Per row: number of masked padding columns at the start.
    pad: Vec<usize>,
    /// Per row: position of the next token.
    next_pos: Vec<usize>,
    /// Number of columns (padding included).
    len: usize,
}

impl KvCache {
    pub fn batch_size(&self) -> usize {
        self.pad.len()
    }
    /// Position the next token of each row gets (its number of real tokens so far).
    pub fn positions(&self) -> &[usize] {
        &self.next_pos
    }
    /// Keep only the rows `rows` (indices into the current batch, in the new order).
    ///
    /// Cheapest in the order [`swap_remove_order`] gives (rows that stay keep their slot, the
    /// last rows fill the holes): then only the moved rows are copied, inside the buffers,
    /// where any other order copies the whole cache (a tenth of a rollout's time when 32 rows
    /// finish one by one).
    pub fn retain(&mut self, rows: &[usize]) -> Result<()> {
        let batch = self.pad.len();
        if rows.is_empty() || rows.iter().any(|&r| r >= batch) {
            return Err(PolicyError::Input(format!("KvCache::retain: rows {rows:?} of a batch of {batch}")));
        }
        if rows.len() == batch && rows.iter().enumerate().all(|(i, &r)| i == r) {
            return Ok(());
        }
        let kept = rows.len();
        let in_place = rows.iter().enumerate().all(|(slot, &r)| r == slot || r >= kept);
        for t in self.k.iter_mut().chain(self.v.iter_mut()) {
            if in_place {
                for (slot, &r) in rows.iter().enumerate().filter(|(slot, &r)| r != *slot) {
                    // `force_contiguous` copies the row alone (`copy` would clone the whole
                    // buffer the view points into: measured, 4% of a rollout).
                    t.slice_set(&t.narrow(0, r, 1)?.force_contiguous()?, 0, slot)?;
                }
                *t = t.narrow(0, 0, kept)?;
            } else {
                let idx: Vec<u32> = rows.iter().map(|&r| r as u32).collect();
                *t = t.index_select(&Tensor::new(idx.as_slice(), t.device())?, 0)?;
            }
        }
        self.pad = rows.iter().map(|&r| self.pad[r]).collect();
        self.next_pos = rows.iter().map(|&r| self.next_pos[r]).collect();
        // Columns that are padding for every remaining row go when they are a quarter of the
        // buffer or more (dropping them copies the cache; attention skips padding anyway).
        let common = self.pad.iter().copied().min().unwrap_or(0);
        let capacity = match self.k.first() {
            Some(k) => k.dim(2)?,
            None => 0,
        };
        if common > 0 && common * 4 >= capacity {
            for t in self.k.iter_mut().chain(self.v.iter_mut()) {
                *t = t.narrow(2, common, capacity - common)?.contiguous()?;
            }
            self.len -= common;
            for p in self.pad.iter_mut() {
                *p -= common;
            }
        }
        Ok(())
    }

    /// Writes the `t` new columns `k_new`, `v_new` (`[batch, kv_heads, t, head_dim]`) of
    /// layer `l` after the `len` filled ones (making or growing its buffers), and returns
    /// views of the layer's filled keys and values, `len + t` columns.
    fn store(&mut self, l: usize, k_new: &Tensor, v_new: &Tensor) -> Result<(Tensor, Tensor)> {
        let (b, g, t, d) = k_new.dims4()?;
        let filled = self.len + t;
        if l == self.k.len() {
            let capacity = filled + self.reserve;
            self.k.push(Tensor::zeros((b, g, capacity, d), k_new.dtype(), k_new.device())?);
            self.v.push(Tensor::zeros((b, g, capacity, d), v_new.dtype(), v_new.device())?);
        }
        for (buffer, new) in [(&mut self.k[l], k_new), (&mut self.v[l], v_new)] {
            let capacity = buffer.dim(2)?;
            if filled > capacity {
                let more = Tensor::zeros((b, g, (filled - capacity).max(GROW_COLUMNS), d), new.dtype(), new.device())?;
                *buffer = Tensor::cat(&[&*buffer, &more], 2)?;
            }
            buffer.slice_set(&new.contiguous()?, 2, self.len)?;
        }
        Ok((self.k[l].narrow(2, 0, filled)?, self.v[l].narrow(2, 0, filled)?))
    }

    /// Makes the next layer's buffers (`t` columns and the reserve) from the keys and values
    /// (`[1, kv_heads, n, head_dim]`) of prompts packed one after another (`lens`), each
    /// prompt's columns after its padding.
    fn store_packed(&mut self, k: &Tensor, v: &Tensor, lens: &[usize], t: usize) -> Result<()> {
        let (_, g, _, d) = k.dims4()?;
        let (b, capacity) = (lens.len(), t + self.reserve);
        let padded = |packed: &Tensor| -> Result<Tensor> {
            let buffer = Tensor::zeros((b, g, capacity, d), packed.dtype(), packed.device())?;
            let mut start = 0;
            for (row, (&len, &pad)) in lens.iter().zip(&self.pad).enumerate() {
                // A row of a contiguous buffer is a contiguous view of the same storage.
                buffer
                    .narrow(0, row, 1)?
                    .slice_set(&packed.narrow(2, start, len)?.contiguous()?, 2, pad)?;
                start += len;
            }
            Ok(buffer)
        };
        let (keys, values) = (padded(k)?, padded(v)?);
        self.k.push(keys);
        self.v.push(values);
        Ok(())
    }
}

/// The rows of a batch of `len` that are not `done`, in the order [`KvCache::retain`] keeps
/// cheaply: a row that stays keeps its slot, and the holes are filled by the last rows.
pub fn swap_remove_order(len: usize, done: impl Fn(usize) -> bool) -> Vec<usize> {
    let kept = (0..len).filter(|&r| !done(r)).count();
    let mut movers = (kept..len).filter(|&r| !done(r));
    (0..kept)
        .map(|slot| if done(slot) { movers.next().expect("a row past the kept ones fills each hole") } else { slot })
        .collect()
}

/// Columns a full KV cache buffer grows by, at least.
pub const GROW_COLUMNS: usize = 16;

/// A linear layer of the inference path: the dense weight (shared with the training model,
/// detached) or a quantized copy (candle's quantized matmul; activations are quantized too).
enum Lin {
    /// The weight, and its transposed copy for decode steps where it applies
    /// ([`crate::skinny`]: small f32 weights on the CPU).
    Dense(Tensor, Option<SkinnyWeight>),
    /// Quantized copy, used for decode steps (few rows); the dense weight for prefill, where
    /// the dense matmul is faster.
    Quant(QMatMul, Tensor),
}

/// The quantized formats a sampling copy may use, by name: `q8_0`, `q4_0`, `q4k`.
pub fn quant_dtype(name: &str) -> Result<GgmlDType> {
    match name.to_ascii_lowercase().as_str() {
        "q8_0" | "q8" => Ok(GgmlDType::Q8_0),
        "q4_0" => Ok(GgmlDType::Q4_0),
        "q4k" | "q4_k" => Ok(GgmlDType::Q4K),
        other => Err(PolicyError::Input(format!(
            "unknown quantization {other:?}: expected q8_0, q4_0 or q4k"
        ))),
    }
}

/// Row counts up to this use the quantized matmul.
const QUANT_MAX_ROWS: usize = 16;

/// The rows of `x: [.., in]`.
fn rows_of(x: &Tensor) -> Result<usize> {
    Ok(x.elem_count() / x.dim(D::Minus1)?)
}

impl Lin {
    /// The layer of `w`: dense (with a transposed copy for decode steps when `skinny`), or
    /// quantized to `quant`.
    fn new(w: &Var, quant: Option<GgmlDType>, skinny: bool) -> Result<Self> {
        let w = w.as_tensor().detach();
        Ok(match quant {
            None => {
                let skinny = if skinny { SkinnyWeight::new(&w)? } else { None };
                Lin::Dense(w, skinny)
            }
            Some(dt) => {
                let q = QTensor::quantize(&w.to_dtype(DType::F32)?, dt)?;
                Lin::Quant(QMatMul::from_qtensor(q)?, w)
            }
        })
    }
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        match self {
            Lin::Dense(_, Some(skinny)) if skinny::serves(rows_of(x)?) => skinny_forward(skinny, x),
            Lin::Dense(w, _) => linear(x, w),
            Lin::Quant(_, w) if rows_of(x)? > QUANT_MAX_ROWS => linear(x, w),
            Lin::Quant(q, _) => quant_forward(q, x),
        }
    }
}

/// [`SkinnyWeight::forward`] on `x: [.., in]`.
fn skinny_forward(skinny: &SkinnyWeight, x: &Tensor) -> Result<Tensor> {
    let (lead, inner) = x.dims().split_at(x.rank() - 1);
    let y = skinny.forward(&x.reshape((lead.iter().product::<usize>(), inner[0]))?)?;
    let mut shape = lead.to_vec();
    shape.push(y.dim(1)?);
    Ok(y.reshape(shape)?)
}

/// The quantized matmul on `x` (in f32, back in `x`'s dtype).
fn quant_forward(q: &QMatMul, x: &Tensor) -> Result<Tensor> {
    let dt = x.dtype();
    Ok(q.forward(&x.to_dtype(DType::F32)?.contiguous()?)?.to_dtype(dt)?)
}

struct InferLayer {
    input_norm: Tensor,
    q: Lin,
    k: Lin,
    v: Lin,
    /// q/k/v biases (Qwen2 only), kept dense.
    q_bias: Option<Tensor>,
    k_bias: Option<Tensor>,
    v_bias: Option<Tensor>,
    o: Lin,
    post_norm: Tensor,
    gate: Lin,
    up: Lin,
    down: Lin,
    /// For decode steps: q, k and v stacked into one matrix, and gate and up, so that a decode
    /// step runs 2 matmuls where it ran 5 (each one a pass of the thread pool, and for a
    /// quantized copy one more quantization of the activations).
    qkv: Option<Stacked>,
    gate_up: Option<Stacked>,
}

/// Weights stacked by rows for decode steps: quantized, or transposed ([`SkinnyWeight`]).
enum Stacked {
    Quant(QMatMul),
    Skinny(SkinnyWeight),
}

impl Stacked {
    /// The rows of `parts` (`[out_i, in]` weights) stacked: quantized to `quant`, else a
    /// transposed copy where [`SkinnyWeight`] applies (else `None`).
    fn new(parts: &[&Var], quant: Option<GgmlDType>) -> Result<Option<Self>> {
        let tensors: Vec<Tensor> = parts.iter().map(|w| w.as_tensor().detach()).collect();
        let stacked = Tensor::cat(&tensors, 0)?;
        Ok(match quant {
            Some(dtype) => Some(Stacked::Quant(QMatMul::from_qtensor(QTensor::quantize(&stacked.to_dtype(DType::F32)?, dtype)?)?)),
            None => SkinnyWeight::new(&stacked)?.map(Stacked::Skinny),
        })
    }
}

/// `x @ w.T` with a stacked matrix for a few rows (decode), or `None` when `x` has more rows
/// than the stacked kind serves or there is no stacked matrix.
fn stacked_forward(stacked: Option<&Stacked>, x: &Tensor) -> Result<Option<Tensor>> {
    let rows = rows_of(x)?;
    match stacked {
        Some(Stacked::Quant(q)) if rows <= QUANT_MAX_ROWS => Ok(Some(quant_forward(q, x)?)),
        Some(Stacked::Skinny(w)) if skinny::serves(rows) => Ok(Some(skinny_forward(w, x)?)),
        _ => Ok(None),
    }
}

/// The inference (sampling) view of a [`Llama`]: no gradient tracking, a KV cache, batches of
/// left-padded prompts of different lengths. Uses candle's fused ops (rms norm, rope, softmax,
/// SiLU), which have no backward: this path is for sampling only.
///
/// [`Llama::inference`] shares the training weights for prefill, but decode steps of 2 to 64
/// rows read transposed copies of the small f32 matrices ([`crate::skinny`]) made when it is
/// built: build it again after a weight update. [`Llama::quantized`] makes a quantized copy
/// of the matrices (e.g. `GgmlDType::Q8_0`), likewise to be rebuilt after each update.
pub struct InferenceModel {
    cfg: LlamaConfig,
    embed: Tensor,
    layers: Vec<InferLayer>,
    norm: Tensor,
    head: Lin,
    cos: Tensor,
    sin: Tensor,
    device: Device,
}

impl Llama {
    /// The inference view sharing this model's weights (with a LoRA adapter attached: a copy
    /// with the adapter merged in).
    pub fn inference(&self) -> Result<InferenceModel> {
        self.build_inference(None)
    }

    /// An inference copy with every matrix (the output head included) quantized to `dtype`
    /// (e.g. [`GgmlDType::Q8_0`]); the embedding lookup and the norms stay dense.
    pub fn quantized(&self, dtype: GgmlDType) -> Result<InferenceModel> {
        self.build_inference(Some(dtype))
    }

    fn build_inference(&self, quant: Option<GgmlDType>) -> Result<InferenceModel> {
        // With a LoRA adapter: a merged copy (it does not see later updates of the adapter).
        if self.lora.is_some() {
            return self.merged()?.build_inference(quant);
        }
        let layers = self
            .layers
            .iter()
            .map(|l| {
                Ok(InferLayer {
                    input_norm: l.input_norm.as_tensor().detach(),
                    // With a stacked copy (quantized, or transposed for a model of small
                    // matrices) these serve prefill only (dense); decode steps use the
                    // stacked `qkv` / `gate_up`.
                    q: Lin::new(&l.q, None, false)?,
                    k: Lin::new(&l.k, None, false)?,
                    v: Lin::new(&l.v, None, false)?,
                    q_bias: l.q_bias.as_ref().map(|b| b.as_tensor().detach()),
                    k_bias: l.k_bias.as_ref().map(|b| b.as_tensor().detach()),
                    v_bias: l.v_bias.as_ref().map(|b| b.as_tensor().detach()),
                    o: Lin::new(&l.o, quant, true)?,
                    post_norm: l.post_norm.as_tensor().detach(),
                    gate: Lin::new(&l.gate, None, false)?,
                    up: Lin::new(&l.up, None, false)?,
                    down: Lin::new(&l.down, quant, true)?,
                    qkv: Stacked::new(&[&l.q, &l.k, &l.v], quant)?,
                    gate_up: Stacked::new(&[&l.gate, &l.up], quant)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(InferenceModel {
            cfg: self.cfg.clone(),
            embed: self.embed.as_tensor().detach(),
            layers,
            norm: self.norm.as_tensor().detach(),
            head: Lin::new(self.lm_head.as_ref().unwrap_or(&self.embed), quant, true)?,
            cos: self.cos.clone(),
            sin: self.sin.clone(),
            device: self.device.clone(),
        })
    }

    /// [`InferenceModel::prefill`] on the shared-weight inference view.
    pub fn prefill(&self, prompts: &[Vec<u32>]) -> Result<(Tensor, KvCache)> {
        self.inference()?.prefill(prompts)
    }

    /// [`InferenceModel::decode_step`] on an inference view built for this one call (its
    /// transposed copies included): for a loop of steps, build [`Llama::inference`] once.
    pub fn decode_step(&self, tokens: &[u32], cache: &mut KvCache) -> Result<Tensor> {
        self.inference()?.decode_step(tokens, cache)
    }
}

impl InferenceModel {
    pub fn config(&self) -> &LlamaConfig {
        &self.cfg
    }
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Run the prompts (each non-empty) through the model and return the logits of each
    /// prompt's last token, `[batch, vocab]` (f32), and the cache to continue from.
    pub fn prefill(&self, prompts: &[Vec<u32>]) -> Result<(Tensor, KvCache)> {
        self.prefill_reserving(prompts, 0)
    }

    /// [`InferenceModel::prefill`] with room in the cache for `columns` decode steps before
    /// it has to grow.
    pub fn prefill_reserving(&self, prompts: &[Vec<u32>], columns: usize) -> Result<(Tensor, KvCache)> {
        if prompts.is_empty() {
            return Err(PolicyError::Input("empty batch".into()));
        }
        let t = prompts.iter().map(Vec::len).max().unwrap_or(0);
        if prompts.iter().any(Vec::is_empty) {
            return Err(PolicyError::Input("empty prompt".into()));
        }
        if t > self.cfg.max_position {
            return Err(PolicyError::Input(format!(
                "prompt of {t} tokens exceeds the context length {}",
                self.cfg.max_position
            )));
        }
        if crate::attention::fused(&self.device, self.embed.dtype()) {
            self.prefill_packed(prompts, columns)
        } else {
            self.prefill_padded(prompts, columns)
        }
    }

    /// The prompts left-padded to the longest as one `[batch, t]` batch (the matmul path of
    /// other dtypes and devices).
    fn prefill_padded(&self, prompts: &[Vec<u32>], columns: usize) -> Result<(Tensor, KvCache)> {
        let t = prompts.iter().map(Vec::len).max().unwrap_or(0);
        let b = prompts.len();
        let pad: Vec<usize> = prompts.iter().map(|p| t - p.len()).collect();
        let mut ids = Vec::with_capacity(b * t);
        let mut pos = Vec::with_capacity(b * t);
        for (p, &np) in prompts.iter().zip(&pad) {
            ids.extend(std::iter::repeat_n(0u32, np));
            ids.extend_from_slice(p);
            pos.extend((0..t).map(|j| j.saturating_sub(np) as u32));
        }
        let dev = &self.device;
        let ids = Tensor::from_vec(ids, (b, t), dev)?;
        let pos = Tensor::from_vec(pos, (b, t), dev)?;
        let mut cache = KvCache {
            k: Vec::new(),
            v: Vec::new(),
            reserve: columns,
            pad,
            next_pos: prompts.iter().map(Vec::len).collect(),
            len: 0,
        };
        let logits = self.forward_cached(&ids, &pos, &mut cache)?;
        cache.len = t;
        Ok((logits, cache))
    }

    /// Feed one token per row (`tokens.len()` = the cache's batch size) and return the logits
    /// of the next token, `[batch, vocab]` (f32).
    pub fn decode_step(&self, tokens: &[u32], cache: &mut KvCache) -> Result<Tensor> {
        let b = cache.batch_size();
        if tokens.len() != b {
            return Err(PolicyError::Input(format!(
                "decode_step: {} tokens for a batch of {b}",
                tokens.len()
            )));
        }
        if let Some(&p) = cache.next_pos.iter().max() {
            if p >= self.cfg.max_position {
                return Err(PolicyError::Input(format!(
                    "sequence exceeds the context length {}",
                    self.cfg.max_position
                )));
            }
        }
        let t = cache.len + 1;
        let dev = &self.device;
        let ids = Tensor::from_vec(tokens.to_vec(), (b, 1), dev)?;
        let pos: Vec<u32> = cache.next_pos.iter().map(|&p| p as u32).collect();
        let pos = Tensor::from_vec(pos, (b, 1), dev)?;
        let logits = self.forward_cached(&ids, &pos, cache)?;
        cache.len = t;
        for p in cache.next_pos.iter_mut() {
            *p += 1;
        }
        Ok(logits)
    }

    /// `ids`, `pos`: `[b, t]` (left-padded by `cache.pad`). Appends to the cache; returns the
    /// last position's logits `[b, vocab]` in f32.
    fn forward_cached(
        &self,
        ids: &Tensor,
        pos: &Tensor,
        cache: &mut KvCache,
    ) -> Result<Tensor> {
        let (b, t) = ids.dims2()?;
        let (mut x, cos, sin) = self.embed_tokens(&ids.flatten_all()?, &pos.flatten_all()?, b, t)?;
        let (nh, nkv, hd) = (self.cfg.num_heads, self.cfg.num_kv_heads, self.cfg.head_dim);
        let scale = 1.0 / (hd as f64).sqrt();
        for (l, layer) in self.layers.iter().enumerate() {
            let normed = self.norm_of(&x, &layer.input_norm)?;
            let (q, k, v) = self.project_qkv(layer, &normed, &cos, &sin)?;
            // Heads are grouped by KV head: query head `g * rep + r` uses KV head `g`.
            let q = q.reshape((b, nkv, nh / nkv * t, hd))?;
            let (k, v) = cache.store(l, &k, &v)?;
            let out = crate::attention::cached_attention(&q, &k, &v, scale, t, &cache.pad)?
                .reshape((b, nh, t, hd))?;
            x = self.finish_layer(layer, x, &out)?;
        }
        let x = x.narrow(1, t - 1, 1)?.squeeze(1)?.contiguous()?;
        self.logits(&x)
    }

    /// The prompts' tokens one after another, no padding (`[1, n, hidden]`): every matrix
    /// product runs on real tokens only, where a left-padded batch of prompts spread over
    /// 300-1000 tokens ran each layer on twice as many. Each prompt attends to itself
    /// ([`crate::attention::packed_causal_attention`]); its keys and values are then put
    /// into the left-padded cache the decode steps continue from. f32 on the CPU (the
    /// attention kernel's); [`InferenceModel::prefill_reserving`] picks it.
    fn prefill_packed(&self, prompts: &[Vec<u32>], columns: usize) -> Result<(Tensor, KvCache)> {
        let lens: Vec<usize> = prompts.iter().map(Vec::len).collect();
        let (n, t) = (lens.iter().sum::<usize>(), lens.iter().copied().max().unwrap_or(0));
        let dev = &self.device;
        let ids = Tensor::from_vec(prompts.concat(), n, dev)?;
        let pos: Vec<u32> = lens.iter().flat_map(|&len| 0..len as u32).collect();
        let pos = Tensor::from_vec(pos, n, dev)?;
        let (mut x, cos, sin) = self.embed_tokens(&ids, &pos, 1, n)?;
        let (nh, hd) = (self.cfg.num_heads, self.cfg.head_dim);
        let scale = 1.0 / (hd as f64).sqrt();
        let mut cache = KvCache {
            k: Vec::new(),
            v: Vec::new(),
            reserve: columns,
            pad: lens.iter().map(|&len| t - len).collect(),
            next_pos: lens.clone(),
            len: 0,
        };
        for layer in &self.layers {
            let normed = self.norm_of(&x, &layer.input_norm)?;
            let (q, k, v) = self.project_qkv(layer, &normed, &cos, &sin)?;
            let k_t = k.transpose(2, 3)?.contiguous()?;
            let out = crate::attention::packed_causal_attention(&q, &k_t, &v, scale, &lens)?;
            cache.store_packed(&k, &v, &lens, t)?;
            x = self.finish_layer(layer, x, &out.reshape((1, nh, n, hd))?)?;
        }
        cache.len = t;
        let last: Vec<u32> = lens
            .iter()
            .scan(0, |end, &len| {
                *end += len;
                Some(*end as u32 - 1)
            })
            .collect();
        let x = x.squeeze(0)?.index_select(&Tensor::new(last.as_slice(), dev)?, 0)?;
        Ok((self.logits(&x)?, cache))
    }

    /// The embeddings of `ids` (`[b * t]`) as `[b, t, hidden]`, and the rope tables of their
    /// positions `pos` (`[b * t]`) as `[b, t, head_dim / 2]` (the fused half-split rope's).
    fn embed_tokens(&self, ids: &Tensor, pos: &Tensor, b: usize, t: usize) -> Result<(Tensor, Tensor, Tensor)> {
        let (h, hd) = (self.cfg.hidden_size, self.cfg.head_dim);
        let x = self.embed.index_select(ids, 0)?.reshape((b, t, h))?;
        let half = |tab: &Tensor| -> Result<Tensor> {
            Ok(tab
                .index_select(pos, 0)?
                .narrow(1, 0, hd / 2)?
                .contiguous()?
                .reshape((b, t, hd / 2))?)
        };
        Ok((x, half(&self.cos)?, half(&self.sin)?))
    }

    fn norm_of(&self, x: &Tensor, weight: &Tensor) -> Result<Tensor> {
        Ok(candle_nn::ops::rms_norm(x, weight, self.cfg.rms_norm_eps as f32)?)
    }

    /// The LM head's logits `[b, vocab]` (f32) of final hidden states `x: [b, hidden]`.
    fn logits(&self, x: &Tensor) -> Result<Tensor> {
        let x = self.norm_of(x, &self.norm)?;
        Ok(self.head.forward(&x)?.to_dtype(DType::F32)?)
    }

    /// The rest of a layer after its attention `attn: [b, heads, t, head_dim]`: the output
    /// projection and the residual, then the MLP and its residual.
    fn finish_layer(&self, layer: &InferLayer, x: Tensor, attn: &Tensor) -> Result<Tensor> {
        let (b, nh, t, hd) = attn.dims4()?;
        let attn = layer.o.forward(&attn.transpose(1, 2)?.reshape((b, t, nh * hd))?)?;
        let x = (x + attn)?;
        let normed = self.norm_of(&x, &layer.post_norm)?;
        let activated = match stacked_forward(layer.gate_up.as_ref(), &normed)? {
            Some(both) => fused::swiglu_halves(&both)?,
            None => fused::swiglu(&layer.gate.forward(&normed)?, &layer.up.forward(&normed)?)?,
        };
        let mlp = layer.down.forward(&activated)?;
        Ok((x + mlp)?)
    }

    /// The queries `[b, heads, t, head_dim]` and keys `[b, kv_heads, t, head_dim]`, roped,
    /// and the values `[b, kv_heads, t, head_dim]` of `x: [b, t, hidden]`, each contiguous.
    fn project_qkv(&self, layer: &InferLayer, x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
        let (b, t, _) = x.dims3()?;
        let (nh, nkv, hd) = (self.cfg.num_heads, self.cfg.num_kv_heads, self.cfg.head_dim);
        let (q, k, v) = match stacked_forward(layer.qkv.as_ref(), x)? {
            Some(all) => (
                all.narrow(D::Minus1, 0, nh * hd)?.contiguous()?,
                all.narrow(D::Minus1, nh * hd, nkv * hd)?.contiguous()?,
                all.narrow(D::Minus1, (nh + nkv) * hd, nkv * hd)?.contiguous()?,
            ),
            None => (layer.q.forward(x)?, layer.k.forward(x)?, layer.v.forward(x)?),
        };
        let heads = |y: Tensor, bias: Option<&Tensor>, n: usize| -> Result<Tensor> {
            Ok(add_bias(y, bias)?.reshape((b, t, n, hd))?.transpose(1, 2)?.contiguous()?)
        };
        let q = heads(q, layer.q_bias.as_ref(), nh)?;
        let k = heads(k, layer.k_bias.as_ref(), nkv)?;
        let v = heads(v, layer.v_bias.as_ref(), nkv)?;
        let q = candle_nn::rotary_emb::rope(&q, cos, sin)?;
        let k = candle_nn::rotary_emb::rope(&k, cos, sin)?;
        Ok((q, k, v))
    }
}

/// `x @ w.T` for `x: [.., in]`, `w: [out, in]`.
pub fn linear(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    let dims = x.dims().to_vec();
    let (last, lead) = dims
        .split_last()
        .ok_or_else(|| PolicyError::Input("scalar input to linear".into()))?;
    if lead.len() == 1 {
        return trained_linear(x, w);
    }
    let rows: usize = lead.iter().product();
    let y = trained_linear(&x.reshape((rows, *last))?, w)?;
    let mut out_shape = lead.to_vec();
    out_shape.push(w.dim(0)?);
    Ok(y.reshape(out_shape)?)
}

/// `y + bias` broadcast over the last dimension, or `y` when there is no bias.
/// `x @ w^T`; a `w` that carries no gradient (detached, as a LoRA-frozen base weight is)
/// goes through [`frozen_linear`], so none is computed for it.
pub fn linear_or_frozen(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    match w.track_op() {
        true => linear(x, w),
        false => frozen_linear(x, w),
    }
}

fn add_bias(y: Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    match bias {
        Some(b) => Ok(y.broadcast_add(b)?),
        None => Ok(y),
    }
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

/// A tiny Box-Muller normal sampler so that `rand_distr` is not needed.
mod rand_distr_like {
    use rand::Rng;
    pub fn normal(rng: &mut impl Rng) -> f64 {
        let u1: f64 = rng.gen::<f64>().max(f64::MIN_POSITIVE);
        let u2: f64 = rng.gen();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn max_abs_diff(a: &Tensor, b: &Tensor) -> f32 {
        (a - b).unwrap().abs().unwrap().flatten_all().unwrap().max(0).unwrap().to_scalar().unwrap()
    }

    #[test]
    fn swap_remove_order_keeps_rows_in_place_and_fills_holes_from_the_end() {
        let done = |set: &'static [usize]| move |r: usize| set.contains(&r);
        assert_eq!(swap_remove_order(5, done(&[1])), vec![0, 4, 2, 3]);
        assert_eq!(swap_remove_order(5, done(&[0, 3])), vec![4, 1, 2]);
        assert_eq!(swap_remove_order(4, done(&[2, 3])), vec![0, 1]);
        assert_eq!(swap_remove_order(3, done(&[])), vec![0, 1, 2]);
        assert_eq!(swap_remove_order(3, done(&[0, 1, 2])), Vec::<usize>::new());
    }

    /// The packed prefill (f32 on the CPU) and the left-padded one give the same logits and
    /// caches that decode the same next steps, also after a row leaves the batch.
    #[test]
    fn packed_and_padded_prefill_agree() {
        let model = Llama::random(LlamaConfig::tiny(), DType::F32, &Device::Cpu, 3).unwrap().inference().unwrap();
        let prompts: Vec<Vec<u32>> = [5usize, 23, 1, 17]
            .iter()
            .enumerate()
            .map(|(i, &n)| (0..n as u32).map(|j| (j * 7 + i as u32 * 3) % 37).collect())
            .collect();
        let (packed_logits, mut packed) = model.prefill_packed(&prompts, 2).unwrap();
        let (padded_logits, mut padded) = model.prefill_padded(&prompts, 2).unwrap();
        assert!(max_abs_diff(&packed_logits, &padded_logits) < 1e-5);
        assert_eq!((packed.pad.clone(), packed.next_pos.clone(), packed.len), (padded.pad.clone(), padded.next_pos.clone(), padded.len));
        for step in 0..4u32 {
            if step == 1 {
                // In place (the last row fills the hole) on one cache, a copy on the other.
                packed.retain(&[0, 3, 2]).unwrap();
                padded.retain(&[0, 3, 2]).unwrap();
            }
            if step == 2 {
                packed.retain(&[2, 0]).unwrap();
                padded.retain(&[2, 0]).unwrap();
            }
            let tokens: Vec<u32> = (0..packed.batch_size() as u32).map(|r| (r * 11 + step) % 37).collect();
            let a = model.decode_step(&tokens, &mut packed).unwrap();
            let b = model.decode_step(&tokens, &mut padded).unwrap();
            assert!(max_abs_diff(&a, &b) < 1e-5, "decode step {step}");
        }
    }
}
