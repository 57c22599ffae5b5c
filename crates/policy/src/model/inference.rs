//! The inference model: the training model's weights detached (or quantized, or with a LoRA
//! adapter merged in), a KV cache of left-padded rows, prefill and decode steps with candle's
//! fast ops (no backward is needed here).

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{DType, Device, Module, Tensor, Var, D};

use super::config::LlamaConfig;
use super::training::Llama;
use crate::error::{PolicyError, Result};
use crate::ops::fused;
use crate::ops::reference::{add_bias, linear};
use crate::ops::skinny::{self, SkinnyWeight};

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
    /// ([`crate::ops::skinny`]: small f32 weights on the CPU).
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
/// rows read transposed copies of the small f32 matrices ([`crate::ops::skinny`]) made when it is
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
        if crate::ops::attention::fused(&self.device, self.embed.dtype()) {
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
            let out = crate::ops::attention::cached_attention(&q, &k, &v, scale, t, &cache.pad)?
                .reshape((b, nh, t, hd))?;
            x = self.finish_layer(layer, x, &out)?;
        }
        let x = x.narrow(1, t - 1, 1)?.squeeze(1)?.contiguous()?;
        self.logits(&x)
    }

    /// The prompts' tokens one after another, no padding (`[1, n, hidden]`): every matrix
    /// product runs on real tokens only, where a left-padded batch of prompts spread over
    /// 300-1000 tokens ran each layer on twice as many. Each prompt attends to itself
    /// ([`crate::ops::attention::packed_causal_attention`]); its keys and values are then put
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
            let out = crate::ops::attention::packed_causal_attention(&q, &k_t, &v, scale, &lens)?;
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
