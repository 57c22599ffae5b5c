//! The training model: a Llama decoder whose every weight is a [`Var`] and whose every op has
//! a backward pass.
//!
//! Embedding by `index_select`; RMS norm, half-split rope, causal attention (GQA by stacking
//! the query heads of each KV head) and the SiLU-gated MLP as the fused ops of
//! [`crate::ops::fused`], each with its own backward (the primitive-op versions in
//! [`crate::ops::reference`] are their reference in tests and their fallback off the CPU); an
//! optionally tied output head. Weight names and layouts follow the Hugging Face convention
//! (`model.layers.{i}.self_attn.q_proj.weight`, `[out, in]`, half-split rope); the GGUF
//! loader converts to it. LoRA adapters attach to it ([`crate::lora`]).
//!
//! The same decoder serves the Qwen2 family ([`Family::Qwen2`](super::config::Family::Qwen2)): Qwen2 differs from Llama only
//! by biases on the q/k/v projections (trainable, `...q_proj.bias` etc.). Qwen2's sliding-window
//! attention is not implemented: every layer attends to the whole context, which is what Qwen2
//! does whenever `use_sliding_window` is false (the released models) or the sequence is shorter
//! than the window.

use std::collections::HashMap;

use candle_core::backprop::GradStore;
use candle_core::{DType, Device, Tensor, Var};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::config::{rope_tables, LlamaConfig};
use crate::error::{PolicyError, Result};
use crate::lora::{LoraAdapters, TargetModule};
use crate::ops::fused;
use crate::ops::reference::{add_bias, linear, linear_or_frozen};

pub(super) struct Layer {
    pub(super) input_norm: Var,
    pub(super) q: Var,
    pub(super) k: Var,
    pub(super) v: Var,
    /// q/k/v biases (Qwen2 only).
    pub(super) q_bias: Option<Var>,
    pub(super) k_bias: Option<Var>,
    pub(super) v_bias: Option<Var>,
    pub(super) o: Var,
    pub(super) post_norm: Var,
    pub(super) gate: Var,
    pub(super) up: Var,
    pub(super) down: Var,
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
    pub(super) cfg: LlamaConfig,
    pub(super) embed: Var,
    pub(super) layers: Vec<Layer>,
    pub(super) norm: Var,
    pub(super) lm_head: Option<Var>,
    /// `[max_position, head_dim]` rope tables (constants, not trained).
    pub(super) cos: Tensor,
    pub(super) sin: Tensor,
    pub(super) dtype: DType,
    pub(super) device: Device,
    /// LoRA adapters; while attached the base weights are frozen (see [`crate::lora`]).
    pub(super) lora: Option<LoraAdapters>,
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

impl Llama {
    /// Attach LoRA adapters: from now on the base weights are frozen and the forward pass adds
    /// the low-rank updates. Refused when the adapters do not fit the model or one is attached.
    pub fn attach_lora(&mut self, adapters: LoraAdapters) -> Result<()> {
        if self.lora.is_some() {
            return Err(PolicyError::Input(
                "the model already has a LoRA adapter (take it off first)".into(),
            ));
        }
        adapters.check_fits(self.config(), self.dtype(), self.device())?;
        self.lora = Some(adapters);
        Ok(())
    }

    /// Detach the adapters (the base becomes trainable again) and return them.
    pub fn take_lora(&mut self) -> Option<LoraAdapters> {
        self.lora.take()
    }

    pub fn lora(&self) -> Option<&LoraAdapters> {
        self.lora.as_ref()
    }

    /// What training updates: the adapter matrices when an adapter is attached, else every
    /// weight ([`Llama::named_vars`]).
    pub fn trainable_vars(&self) -> Vec<(String, Var)> {
        match &self.lora {
            Some(lora) => lora.named_vars(),
            None => self.named_vars(),
        }
    }

    /// A new model (no adapter) whose weights are this one's with the adapters merged in,
    /// `W + (alpha / r) B A`. Without an adapter, a copy.
    pub fn merged(&self) -> Result<Llama> {
        let mut weights: HashMap<String, Tensor> = self
            .named_vars()
            .into_iter()
            .map(|(name, var)| (name, var.as_tensor().detach()))
            .collect();
        if let Some(lora) = &self.lora {
            for layer in 0..lora.num_layers() {
                for target in TargetModule::ALL {
                    let Some(delta) = lora.delta_weight(layer, target)? else {
                        continue;
                    };
                    let name = target.weight_name(layer);
                    let w = weights
                        .remove(&name)
                        .ok_or_else(|| PolicyError::Config(format!("no base weight {name}")))?;
                    weights.insert(name, (w + delta)?);
                }
            }
        }
        Llama::from_weights(
            self.config().clone(),
            self.dtype(),
            self.device(),
            |name, _| {
                weights
                    .remove(name)
                    .ok_or_else(|| PolicyError::Config(format!("no weight {name}")))
            },
        )
    }
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

