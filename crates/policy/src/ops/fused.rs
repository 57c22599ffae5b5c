//! Fused CPU kernels for the training forward, each with its own backward pass.
//!
//! candle's own fused ops (`softmax_last_dim`, `rms_norm`, ...) have no backward and silently
//! drop gradients; the primitive-op versions in [`crate::model`] are exact but build many
//! full-size temporaries, forward and backward. These are candle custom ops whose `bwd` computes
//! the input gradients in one pass (custom ops of their own, without a backward: no second-order
//! gradients). f32 and f64 on the CPU; any other dtype or device falls back to the primitive ops.
//! Tests compare values and gradients with the primitive versions in f64.

use crate::error::Result;
use crate::ops::lanes::{attention_inputs, visible_keys};
use crate::ops::raw::{max_scaled, slice, sum_f64, sum_slice_f64, with_slice, RawFloat};
use crate::ops::triangle;
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CudaStorage, CustomOp1, CustomOp2, CustomOp3, DType, Layout, Shape, Storage, Tensor, D};
use rayon::prelude::*;
use std::sync::Mutex;

type CResult<T> = candle_core::Result<T>;

/// Whether the fused kernels cover `x` (f32 or f64 on the CPU).
fn fusable(x: &Tensor) -> bool {
    x.device().is_cpu() && matches!(x.dtype(), DType::F32 | DType::F64)
}

/// Runs `$f::<T>(args)` for the float type of storage `$s`.
macro_rules! by_dtype {
    ($s:expr, $f:ident ( $($arg:expr),* )) => {
        match $s {
            CpuStorage::F32(_) => $f::<f32>($($arg),*),
            CpuStorage::F64(_) => $f::<f64>($($arg),*),
            _ => Err(candle_core::Error::Msg("fused op: only f32 and f64 are supported".into())),
        }
    };
}

/// Implements a forward-only `CustomOp3` for `$op`: the closure-like call runs for the first
/// storage's float type `T`, with each input as a `(storage, layout)` pair and the op itself.
macro_rules! forward_op3 {
    ($op:ty, $name:literal, |$me:ident, $a:ident, $b:ident, $c:ident| $f:ident($($arg:expr),*)) => {
        impl CustomOp3 for $op {
            fn name(&self) -> &'static str {
                $name
            }
            fn cpu_fwd(
                &self,
                s1: &CpuStorage,
                l1: &Layout,
                s2: &CpuStorage,
                l2: &Layout,
                s3: &CpuStorage,
                l3: &Layout,
            ) -> CResult<(CpuStorage, Shape)> {
                let ($me, $a, $b, $c) = (self, (s1, l1), (s2, l2), (s3, l3));
                by_dtype!(s1, $f($($arg),*))
            }
        }
    };
}

fn last_dim(l: &Layout) -> CResult<usize> {
    l.shape()
        .dims()
        .last()
        .copied()
        .filter(|&d| d > 0)
        .ok_or_else(|| candle_core::Error::Msg("fused op: empty last dimension".into()))
}

// ---------------------------------------------------------------------------------------------
// Sampling attention: the keys each query of a left-padded, cached batch may see.

/// Attention probabilities for sampling: `softmax(scale * x)` of the scores
/// `x: [b, g, r * t, total]` (`t` new queries of `r` query heads per KV head `g`, against
/// `total` cached and new keys) over the keys each query may see ([`visible_keys`], `pads[i]`
/// the padding columns of row `i`); 0 elsewhere. One pass with a vectorised `exp` over the
/// visible keys only, where the primitive version scales, adds a mask and exponentiates all
/// of them. No backward: sampling only (other dtypes and devices: the primitive version).
pub fn padded_causal_softmax(x: &Tensor, scale: f64, t: usize, pads: &[usize]) -> Result<Tensor> {
    let (b, _, rows, _) = x.dims4()?;
    if b != pads.len() || rows % t != 0 {
        return Err(crate::error::PolicyError::Input(format!(
            "padded_causal_softmax: scores {:?} for {} rows of {t} queries",
            x.dims(),
            pads.len()
        )));
    }
    if crate::ops::gpu::serves(x) {
        return crate::ops::gpu::masked_softmax(x, scale, t, Some(pads));
    }
    if !fusable(x) {
        return padded_causal_softmax_primitive(x, scale, t, pads);
    }
    let op = PaddedCausalSoftmax { scale, t, pads: pads.to_vec() };
    Ok(x.contiguous()?.apply_op1_no_bwd(&op)?)
}

/// [`padded_causal_softmax`] from primitive ops: an additive mask and the softmax.
pub fn padded_causal_softmax_primitive(x: &Tensor, scale: f64, t: usize, pads: &[usize]) -> Result<Tensor> {
    let (b, g, rows, total) = x.dims4()?;
    let r = rows / t;
    let key = MaskKey { kind: MaskKind::Padded, t, total, pads: pads.to_vec(), dtype: x.dtype(), device: x.device().location() };
    let mask = cached_mask(key, || {
        let mut mask = Vec::with_capacity(b * t * total);
        for &pad in pads {
            for q in 0..t {
                let (lo, hi) = visible_keys(q, t, total, pad);
                mask.extend((0..total).map(|k| if (lo..hi).contains(&k) { 0f32 } else { f32::NEG_INFINITY }));
            }
        }
        Ok(Tensor::from_vec(mask, (b, 1, 1, t, total), x.device())?.to_dtype(x.dtype())?)
    })?;
    let scores = (x * scale)?.reshape((b, g, r, t, total))?.broadcast_add(&mask)?;
    Ok(candle_nn::ops::softmax_last_dim(&scores)?.reshape((b, g, rows, total))?)
}

struct PaddedCausalSoftmax {
    scale: f64,
    t: usize,
    pads: Vec<usize>,
}

fn padded_causal_softmax_fwd<T: RawFloat>(
    s: &CpuStorage,
    l: &Layout,
    op: &PaddedCausalSoftmax,
) -> CResult<(CpuStorage, Shape)> {
    let x = slice::<T>(s, l, "padded_causal_softmax")?;
    let total = last_dim(l)?;
    let rows_per_batch = x.len() / total / op.pads.len().max(1);
    let out = softmax_rows(x, total, T::from_f64(op.scale), |row| {
        visible_keys(row % op.t, op.t, total, op.pads[row / rows_per_batch])
    });
    Ok((T::to_cpu_storage_owned(out), l.shape().clone()))
}

impl CustomOp1 for PaddedCausalSoftmax {
    fn name(&self) -> &'static str {
        "policy-padded-causal-softmax"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> CResult<(CpuStorage, Shape)> {
        by_dtype!(s, padded_causal_softmax_fwd(s, l, self))
    }
}

// ---------------------------------------------------------------------------------------------
// Causal softmax: softmax(scale * x + causal mask) over the last dimension.

/// `softmax(scale * x + mask)` over the last dimension of `x: [.., r * t, t]` (queries by keys;
/// `r` groups of `t` queries, e.g. the query heads sharing one KV head), where the mask keeps
/// key `j <= i` for query `i` of each group (the others get probability 0).
pub fn causal_softmax(x: &Tensor, scale: f64) -> Result<Tensor> {
    if !fusable(x) {
        return causal_softmax_primitive(x, scale);
    }
    Ok(x.contiguous()?.apply_op1(CausalSoftmax { scale })?)
}

/// [`causal_softmax`] from primitive ops (an additive -inf mask and the primitive softmax).
pub fn causal_softmax_primitive(x: &Tensor, scale: f64) -> Result<Tensor> {
    let masked = add_causal_mask(&(x * scale)?)?;
    crate::ops::reference::softmax_last_dim(&masked)
}

/// `x: [.., r * t, t]` (`r` groups of `t` queries by `t` keys) with `-inf` added where key
/// `j` comes after query `i % t`.
fn add_causal_mask(x: &Tensor) -> Result<Tensor> {
    let dims = x.dims();
    let (rows, t) = (x.dim(D::Minus2)?, x.dim(D::Minus1)?);
    if rows % t != 0 {
        return Err(crate::error::PolicyError::Input(format!("causal mask: expected [.., r * t, t], got {dims:?}")));
    }
    let mut grouped = dims[..dims.len() - 2].to_vec();
    grouped.extend([rows / t, t, t]);
    let key = MaskKey { kind: MaskKind::Causal, t, total: t, pads: Vec::new(), dtype: x.dtype(), device: x.device().location() };
    let mask = cached_mask(key, || {
        let mask: Vec<f32> = (0..t)
            .flat_map(|i| (0..t).map(move |j| if j > i { f32::NEG_INFINITY } else { 0.0 }))
            .collect();
        Ok(Tensor::from_vec(mask, (t, t), x.device())?.to_dtype(x.dtype())?)
    })?;
    Ok(x.reshape(grouped)?.broadcast_add(&mask)?.reshape(dims)?)
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum MaskKind {
    Causal,
    Padded,
}

/// What an additive attention mask depends on.
#[derive(Debug, Clone, PartialEq)]
struct MaskKey {
    kind: MaskKind,
    t: usize,
    total: usize,
    pads: Vec<usize>,
    dtype: DType,
    device: candle_core::DeviceLocation,
}

/// The mask of `key`, made by `make` the first time and kept: every layer of a forward pass
/// uses the same one, and making it is a host loop and a host-to-device copy. Two are kept (a
/// training forward's and a sampling step's), since a prefill's can take hundreds of MB.
fn cached_mask(key: MaskKey, make: impl FnOnce() -> Result<Tensor>) -> Result<Tensor> {
    const KEPT: usize = 2;
    static MASKS: Mutex<Vec<(MaskKey, Tensor)>> = Mutex::new(Vec::new());
    let mut masks = MASKS
        .lock()
        .map_err(|_| crate::error::PolicyError::Input("attention masks: a thread panicked holding them".into()))?;
    if let Some((_, mask)) = masks.iter().find(|(k, _)| *k == key) {
        return Ok(mask.clone());
    }
    let mask = make()?;
    if masks.len() == KEPT {
        masks.remove(0);
    }
    masks.push((key, mask.clone()));
    Ok(mask)
}

struct CausalSoftmax {
    scale: f64,
}

fn causal_softmax_fwd<T: RawFloat>(
    s: &CpuStorage,
    l: &Layout,
    scale: f64,
) -> CResult<(CpuStorage, Shape)> {
    let x = slice::<T>(s, l, "causal_softmax")?;
    let dims = l.shape().dims();
    let t = last_dim(l)?;
    if dims.len() < 2 || dims[dims.len() - 2] % t != 0 {
        candle_core::bail!("causal_softmax: expected [.., r * t, t], got {dims:?}");
    }
    let out = softmax_rows(x, t, T::from_f64(scale), |row| (0, row % t + 1));
    Ok((T::to_cpu_storage_owned(out), l.shape().clone()))
}

/// `softmax(scale * x)` of each row of `width` columns over the columns `keys(row)`
/// (`lo..hi`); the other columns get 0.
fn softmax_rows<T: RawFloat>(
    x: &[T],
    width: usize,
    scale: T,
    keys: impl Fn(usize) -> (usize, usize) + Sync,
) -> Vec<T> {
    let mut out = vec![T::ZERO; x.len()];
    out.par_chunks_mut(width)
        .zip(x.par_chunks(width))
        .enumerate()
        .for_each(|(row, (y, x))| {
            let (lo, hi) = keys(row);
            softmax_into(&mut y[lo..hi], &x[lo..hi], scale);
        });
    out
}

/// `y = softmax(scale * x)` of one row.
fn softmax_into<T: RawFloat>(y: &mut [T], x: &[T], scale: T) {
    let m = max_scaled(x, scale);
    for (y, &x) in y.iter_mut().zip(x) {
        *y = x * scale - m;
    }
    T::exp_in_place(y);
    let sum = sum_slice_f64(y);
    for y in y.iter_mut() {
        *y = *y / sum;
    }
}

impl CustomOp1 for CausalSoftmax {
    fn name(&self) -> &'static str {
        "policy-causal-softmax"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> CResult<(CpuStorage, Shape)> {
        by_dtype!(s, causal_softmax_fwd(s, l, self.scale))
    }
    fn bwd(&self, _x: &Tensor, y: &Tensor, grad: &Tensor) -> CResult<Option<Tensor>> {
        let grad = grad.contiguous()?;
        Ok(Some(y.apply_op2_no_bwd(&grad, &SoftmaxGrad { scale: self.scale })?))
    }
}

/// `dx = scale * y * (g - sum(g * y))` row by row, from the softmax output `y` and its
/// gradient `g` (masked entries have `y = 0`, so they get 0).
struct SoftmaxGrad {
    scale: f64,
}

fn softmax_grad<T: RawFloat>(
    ys: &CpuStorage,
    yl: &Layout,
    gs: &CpuStorage,
    gl: &Layout,
    scale: f64,
) -> CResult<(CpuStorage, Shape)> {
    let y = slice::<T>(ys, yl, "softmax grad (y)")?;
    let g = slice::<T>(gs, gl, "softmax grad (g)")?;
    let t = last_dim(yl)?;
    let scale = T::from_f64(scale);
    let mut dx = vec![T::ZERO; y.len()];
    dx.par_chunks_mut(t)
        .zip(y.par_chunks(t).zip(g.par_chunks(t)))
        .for_each(|(dx, (y, g))| {
            let dot = sum_f64(y.iter().zip(g).map(|(&y, &g)| y * g));
            for ((dx, &y), &g) in dx.iter_mut().zip(y).zip(g) {
                *dx = scale * y * (g - dot);
            }
        });
    Ok((T::to_cpu_storage_owned(dx), yl.shape().clone()))
}

impl CustomOp2 for SoftmaxGrad {
    fn name(&self) -> &'static str {
        "policy-softmax-grad"
    }
    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> CResult<(CpuStorage, Shape)> {
        by_dtype!(s1, softmax_grad(s1, l1, s2, l2, self.scale))
    }
}

// ---------------------------------------------------------------------------------------------
// Causal attention: causal_softmax(q k^T) v as one node of the graph.

/// `causal_softmax(q k^T, scale) v` for `q: [.., r * t, d]` (`r` query heads sharing one KV
/// head, stacked) and `k, v: [.., t, d]`: the attention of every query to the keys at or
/// before its position.
///
/// Same values and gradients as the three ops it replaces, but the graph holds one node, so
/// the backward pass never hands the `[r * t, t]` score and probability gradients to candle's
/// gradient store (which zero-fills a buffer for every gradient it receives and then adds
/// into it: at 500 tokens a tenth of an SFT step went there).
pub fn causal_attention(q: &Tensor, k: &Tensor, v: &Tensor, scale: f64) -> Result<Tensor> {
    let scores = |q: &Tensor, k: &Tensor| -> Result<Tensor> { Ok(q.matmul(&k.t()?)?) };
    if !q.device().is_cpu() {
        return causal_attention_one_node(q, k, v, scale);
    }
    if !fusable(q) {
        let probs = causal_softmax(&scores(q, k)?, scale)?;
        return Ok(probs.matmul(&v.contiguous()?)?);
    }
    let (q, k, v) = (q.contiguous()?, k.contiguous()?, v.contiguous()?);
    if let Some(dims) = triangle_dims(&q, &k, &v)? {
        let op = TriangleAttention { dims, scale: scale as f32, probs: Mutex::new(Vec::new()) };
        return Ok(q.apply_op3(&k, &v, op)?);
    }
    // candle hands a custom op's forward raw storage, so the forward runs here as tensor ops
    // on detached inputs and the op only puts its result into the graph with its backward.
    let probs = causal_softmax(&scores(&q.detach(), &k.detach())?, scale)?;
    let out = probs.matmul(&v.detach())?;
    Ok(q.apply_op3(&k, &v, CausalAttention { out, probs, scale })?)
}

/// [`causal_attention`] as one node of the graph, the path off the CPU: the forward on detached
/// inputs (in f32 on a GPU the masked softmax of [`crate::ops::gpu`]; else the scale folded
/// into `q`, the causal mask made once per shape and kept, and candle's one-kernel softmax),
/// the backward from the probabilities the node keeps.
/// Built from primitive ops, the graph keeps six `[.., r * t, t]` tensors per layer (scores,
/// scaled, masked, shifted, exponentiated, normalised) and runs a kernel for each, forward and
/// backward; this keeps one. Runs on the CPU too (f32 and f64), where tests hold it to the
/// primitive ops.
pub fn causal_attention_one_node(q: &Tensor, k: &Tensor, v: &Tensor, scale: f64) -> Result<Tensor> {
    let probs = if crate::ops::gpu::serves(q) {
        let scores = q.detach().matmul(&k.detach().t()?)?;
        crate::ops::gpu::masked_softmax(&scores, scale, k.dim(D::Minus2)?, None)?
    } else {
        let scores = (q.detach() * scale)?.matmul(&k.detach().t()?)?;
        candle_nn::ops::softmax_last_dim(&add_causal_mask(&scores)?)?
    };
    let out = probs.matmul(&v.detach().contiguous()?)?;
    if !(q.track_op() || k.track_op() || v.track_op()) {
        return Ok(out);
    }
    Ok(q.apply_op3(k, v, CausalAttention { out, probs, scale })?)
}

/// The gradient of `softmax(scale * x)` with respect to `x`, from its output `y` and the
/// gradient `g` that reached it: `scale * y * (g - sum(y * g))` over the last dimension, as
/// tensor ops ([`SoftmaxGrad`] is the CPU kernel of the same).
pub fn softmax_grad_ops(y: &Tensor, g: &Tensor, scale: f64) -> Result<Tensor> {
    let dot = (y * g)?.sum_keepdim(D::Minus1)?;
    Ok(((g.broadcast_sub(&dot)? * y)? * scale)?)
}

/// The [`triangle`] kernels' shape for `q: [.., r * t, d]` and `k, v: [.., t, d]` when they
/// serve it (f32, a head dimension of whole vector registers), else `None`.
fn triangle_dims(q: &Tensor, k: &Tensor, v: &Tensor) -> Result<Option<triangle::Dims>> {
    let (qd, kd) = (q.dims(), k.dims());
    if q.dtype() != DType::F32 || kd.len() < 2 || qd.len() != kd.len() || k.dims() != v.dims() {
        return Ok(None);
    }
    let (t, d) = (kd[kd.len() - 2], kd[kd.len() - 1]);
    let blocks: usize = kd[..kd.len() - 2].iter().product();
    let leading_agree = qd[..qd.len() - 2] == kd[..kd.len() - 2] && qd[qd.len() - 1] == d;
    if !leading_agree || t == 0 || qd[qd.len() - 2] % t != 0 {
        return Ok(None);
    }
    let dims = triangle::Dims { blocks, r: qd[qd.len() - 2] / t, t, d };
    Ok(dims.served().then_some(dims))
}

/// [`causal_attention`] in f32 through [`crate::ops::triangle`]: the forward runs in `cpu_fwd`
/// and leaves the probabilities here for the backward.
struct TriangleAttention {
    dims: triangle::Dims,
    scale: f32,
    probs: Mutex<Vec<f32>>,
}

impl TriangleAttention {
    fn probs(&self) -> CResult<std::sync::MutexGuard<'_, Vec<f32>>> {
        self.probs
            .lock()
            .map_err(|_| candle_core::Error::Msg("causal attention: a thread panicked holding its probabilities".into()))
    }
}

impl CustomOp3 for TriangleAttention {
    fn name(&self) -> &'static str {
        "policy-triangle-attention"
    }
    fn cpu_fwd(
        &self,
        qs: &CpuStorage,
        ql: &Layout,
        ks: &CpuStorage,
        kl: &Layout,
        vs: &CpuStorage,
        vl: &Layout,
    ) -> CResult<(CpuStorage, Shape)> {
        let (q, k, v) = attention_inputs((qs, ql), (ks, kl), (vs, vl))?;
        let (out, probs) = triangle::forward(q, k, v, self.dims, self.scale);
        *self.probs()? = probs;
        Ok((CpuStorage::F32(out), ql.shape().clone()))
    }
    fn bwd(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        _out: &Tensor,
        grad: &Tensor,
    ) -> CResult<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let grad = grad.contiguous()?;
        let probs = self.probs()?;
        let grads = with_slice::<f32, _>(q, "attention (q)", |qs| {
            with_slice::<f32, _>(k, "attention (k)", |ks| {
                with_slice::<f32, _>(v, "attention (v)", |vs| {
                    with_slice::<f32, _>(&grad, "attention (gradient)", |gs| {
                        Ok(triangle::backward(qs, ks, vs, &probs, gs, self.dims, self.scale))
                    })
                })
            })
        })
        .map_err(|e| candle_core::Error::Msg(e.to_string()))?;
        let (dq, dk, dv) = grads;
        let device = q.device();
        Ok((
            Some(Tensor::from_vec(dq, q.shape(), device)?),
            Some(Tensor::from_vec(dk, k.shape(), device)?),
            Some(Tensor::from_vec(dv, v.shape(), device)?),
        ))
    }
}

struct CausalAttention {
    /// The forward's result, computed by [`causal_attention`].
    out: Tensor,
    /// The attention probabilities, kept for the backward pass.
    probs: Tensor,
    scale: f64,
}

fn copy_out<T: RawFloat>(out: &Tensor) -> CResult<(CpuStorage, Shape)> {
    let data = out.flatten_all()?.to_vec1::<T>()?;
    Ok((T::to_cpu_storage_owned(data), out.shape().clone()))
}

impl CustomOp3 for CausalAttention {
    fn name(&self) -> &'static str {
        "policy-causal-attention"
    }
    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> CResult<(CpuStorage, Shape)> {
        by_dtype!(s1, copy_out(&self.out))
    }
    fn cuda_fwd(
        &self,
        _: &CudaStorage,
        _: &Layout,
        _: &CudaStorage,
        _: &Layout,
        _: &CudaStorage,
        _: &Layout,
    ) -> CResult<(CudaStorage, Shape)> {
        let out = self.out.contiguous()?;
        let (storage, layout) = out.storage_and_layout();
        match &*storage {
            Storage::Cuda(s) => Ok((s.try_clone(layout)?, out.shape().clone())),
            _ => candle_core::bail!("causal attention: the result is not on the GPU"),
        }
    }
    fn bwd(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        _out: &Tensor,
        grad: &Tensor,
    ) -> CResult<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let (q, k, v) = (q.detach(), k.detach(), v.detach());
        let grad = grad.contiguous()?;
        let probs_t = self.probs.t()?;
        // The r query heads of a KV head are rows of the same matrix, so these products
        // already sum their contributions to dk and dv.
        let dv = probs_t.matmul(&grad)?;
        let dprobs = grad.matmul(&v.t()?)?;
        let dscores = if fusable(&self.probs) {
            self.probs.apply_op2_no_bwd(&dprobs, &SoftmaxGrad { scale: self.scale })?
        } else if crate::ops::gpu::serves(&self.probs) {
            crate::ops::gpu::softmax_backward(&self.probs, &dprobs, self.scale).map_err(|e| candle_core::Error::Msg(e.to_string()))?
        } else {
            softmax_grad_ops(&self.probs, &dprobs, self.scale).map_err(|e| candle_core::Error::Msg(e.to_string()))?
        };
        let dq = dscores.matmul(&k)?;
        let dk = dscores.t()?.matmul(&q)?;
        Ok((Some(dq), Some(dk), Some(dv)))
    }
}

// ---------------------------------------------------------------------------------------------
// RMS norm: y = x / sqrt(mean(x^2) + eps) * w over the last dimension.

/// RMS norm over the last dimension with weight `w: [d]`.
pub fn rms_norm(x: &Tensor, w: &Tensor, eps: f64) -> Result<Tensor> {
    if !fusable(x) || x.dtype() != w.dtype() {
        return crate::ops::reference::rms_norm(x, w, eps);
    }
    Ok(x.contiguous()?.apply_op2(&w.contiguous()?, RmsNorm { eps })?)
}

struct RmsNorm {
    eps: f64,
}

/// `1 / sqrt(mean(x^2) + eps)` of one row.
fn inv_rms<T: RawFloat>(x: &[T], eps: T) -> T {
    let ss = sum_f64(x.iter().map(|&v| v * v));
    let n = T::from_f64(x.len() as f64);
    T::from_f64(1.0) / (ss / n + eps).sqrt()
}

fn rms_norm_fwd<T: RawFloat>(
    xs: &CpuStorage,
    xl: &Layout,
    ws: &CpuStorage,
    wl: &Layout,
    eps: f64,
) -> CResult<(CpuStorage, Shape)> {
    let x = slice::<T>(xs, xl, "rms_norm (x)")?;
    let w = slice::<T>(ws, wl, "rms_norm (weight)")?;
    let d = last_dim(xl)?;
    if w.len() != d {
        candle_core::bail!("rms_norm: weight of {} for rows of {d}", w.len());
    }
    let eps = T::from_f64(eps);
    let mut out = vec![T::ZERO; x.len()];
    out.par_chunks_mut(d)
        .zip(x.par_chunks(d))
        .for_each(|(y, x)| {
            let r = inv_rms(x, eps);
            for ((y, &x), &w) in y.iter_mut().zip(x).zip(w) {
                *y = x * r * w;
            }
        });
    Ok((T::to_cpu_storage_owned(out), xl.shape().clone()))
}

impl CustomOp2 for RmsNorm {
    fn name(&self) -> &'static str {
        "policy-rms-norm"
    }
    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> CResult<(CpuStorage, Shape)> {
        by_dtype!(s1, rms_norm_fwd(s1, l1, s2, l2, self.eps))
    }
    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        _y: &Tensor,
        grad: &Tensor,
    ) -> CResult<(Option<Tensor>, Option<Tensor>)> {
        let grad = grad.contiguous()?;
        let dx = x.apply_op3_no_bwd(w, &grad, &RmsNormGradX { eps: self.eps })?;
        let dw = x.apply_op2_no_bwd(&grad, &RmsNormGradW { eps: self.eps })?;
        Ok((Some(dx), Some(dw)))
    }
}

/// `dx = r * g * w - x * r^3 * sum(g * w * x) / d` row by row, `r = 1 / rms(x)`.
struct RmsNormGradX {
    eps: f64,
}

fn rms_norm_grad_x<T: RawFloat>(
    (xs, xl): (&CpuStorage, &Layout),
    (ws, wl): (&CpuStorage, &Layout),
    (gs, gl): (&CpuStorage, &Layout),
    eps: f64,
) -> CResult<(CpuStorage, Shape)> {
    let x = slice::<T>(xs, xl, "rms_norm grad (x)")?;
    let w = slice::<T>(ws, wl, "rms_norm grad (weight)")?;
    let g = slice::<T>(gs, gl, "rms_norm grad (g)")?;
    let d = last_dim(xl)?;
    let (eps, n) = (T::from_f64(eps), T::from_f64(d as f64));
    let mut dx = vec![T::ZERO; x.len()];
    dx.par_chunks_mut(d)
        .zip(x.par_chunks(d).zip(g.par_chunks(d)))
        .for_each(|(dx, (x, g))| {
            let r = inv_rms(x, eps);
            let dot = sum_f64(x.iter().zip(g).zip(w).map(|((&x, &g), &w)| g * w * x));
            let c = r * r * r * dot / n;
            for (((dx, &x), &g), &w) in dx.iter_mut().zip(x).zip(g).zip(w) {
                *dx = r * g * w - x * c;
            }
        });
    Ok((T::to_cpu_storage_owned(dx), xl.shape().clone()))
}

forward_op3!(RmsNormGradX, "policy-rms-norm-grad-x", |op, x, w, g| rms_norm_grad_x(x, w, g, op.eps));

/// `dw = sum over rows of g * x * r`.
struct RmsNormGradW {
    eps: f64,
}

fn rms_norm_grad_w<T: RawFloat>(
    xs: &CpuStorage,
    xl: &Layout,
    gs: &CpuStorage,
    gl: &Layout,
    eps: f64,
) -> CResult<(CpuStorage, Shape)> {
    let x = slice::<T>(xs, xl, "rms_norm grad (x)")?;
    let g = slice::<T>(gs, gl, "rms_norm grad (g)")?;
    let d = last_dim(xl)?;
    let eps = T::from_f64(eps);
    // Fixed blocks of rows, each summed in order, then the blocks' sums in order: the result
    // must not depend on how rayon happens to split the work (a fold/reduce does), or the
    // same seed would train different weights on a busy machine.
    const ROWS_PER_BLOCK: usize = 64;
    let block_sums: Vec<Vec<T>> = x
        .par_chunks(d * ROWS_PER_BLOCK)
        .zip(g.par_chunks(d * ROWS_PER_BLOCK))
        .map(|(x, g)| {
            let mut acc = vec![T::ZERO; d];
            for (x, g) in x.chunks(d).zip(g.chunks(d)) {
                let r = inv_rms(x, eps);
                for ((a, &x), &g) in acc.iter_mut().zip(x).zip(g) {
                    *a = *a + g * x * r;
                }
            }
            acc
        })
        .collect();
    let mut dw = vec![T::ZERO; d];
    for block in &block_sums {
        for (a, &b) in dw.iter_mut().zip(block) {
            *a = *a + b;
        }
    }
    Ok((T::to_cpu_storage_owned(dw), Shape::from(d)))
}

impl CustomOp2 for RmsNormGradW {
    fn name(&self) -> &'static str {
        "policy-rms-norm-grad-w"
    }
    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> CResult<(CpuStorage, Shape)> {
        by_dtype!(s1, rms_norm_grad_w(s1, l1, s2, l2, self.eps))
    }
}

// ---------------------------------------------------------------------------------------------
// Token scores: log p(target) and the entropy of each row of logits, without the [n, vocab]
// temporaries of log-softmax.

/// For `logits: [n, v]` and `targets: [n]` (u32), `[n, 2]`: column 0 is
/// `log softmax(logits)[target]`, column 1 the entropy of `softmax(logits)`. Differentiable in
/// both columns with respect to the logits.
pub fn token_scores(logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
    if !fusable(logits) {
        return token_scores_primitive(logits, targets);
    }
    let targets = targets.to_dtype(DType::U32)?.contiguous()?;
    Ok(logits.contiguous()?.apply_op2(&targets, TokenScores)?)
}

/// [`token_scores`] from primitive ops.
pub fn token_scores_primitive(logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
    let m = logits.max_keepdim(D::Minus1)?.detach();
    let shifted = logits.broadcast_sub(&m)?;
    let exp = shifted.exp()?;
    let sum = exp.sum_keepdim(D::Minus1)?;
    let lse = sum.log()?;
    let picked = shifted.gather(&targets.unsqueeze(D::Minus1)?, D::Minus1)?;
    let logprobs = picked.broadcast_sub(&lse)?;
    let p = exp.broadcast_div(&sum)?;
    let entropy = (lse - (p * &shifted)?.sum_keepdim(D::Minus1)?)?;
    Ok(Tensor::cat(&[&logprobs, &entropy], D::Minus1)?)
}

/// [`token_scores`] of the logits `x @ w^T` (`x: [n, h]`, the LM head `w: [v, h]`), as one
/// node of the graph: the `[n, v]` logits' gradient never goes through candle's gradient
/// store (a zero-filled buffer plus an add per gradient, tens of MB per batch at a 2k
/// vocabulary). A `w` that carries no gradient (a detached, frozen head) gets none computed.
pub fn head_token_scores(x: &Tensor, w: &Tensor, targets: &Tensor) -> Result<Tensor> {
    if !fusable(x) || x.dtype() != w.dtype() {
        return token_scores(&crate::ops::reference::linear_or_frozen(x, w)?, targets);
    }
    let (x, w) = (x.contiguous()?, w.contiguous()?);
    let targets = targets.to_dtype(DType::U32)?.contiguous()?;
    // As in `causal_attention`: the forward runs as tensor ops on detached inputs.
    let logits = x.detach().matmul(&w.detach().t()?)?;
    let scores = token_scores(&logits, &targets)?;
    let op = HeadTokenScores {
        logits,
        targets,
        scores,
    };
    Ok(x.apply_op2(&w, op)?)
}

struct HeadTokenScores {
    /// `x @ w^T`, kept for the backward pass.
    logits: Tensor,
    targets: Tensor,
    /// The forward's result, computed by [`head_token_scores`].
    scores: Tensor,
}

impl CustomOp2 for HeadTokenScores {
    fn name(&self) -> &'static str {
        "policy-head-token-scores"
    }
    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> CResult<(CpuStorage, Shape)> {
        by_dtype!(s1, copy_out(&self.scores))
    }
    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> CResult<(Option<Tensor>, Option<Tensor>)> {
        let grad = grad.contiguous()?;
        let dlogits = self
            .logits
            .apply_op3_no_bwd(&self.targets, &grad, &TokenScoresGrad)?;
        let dx = dlogits.matmul(&w.detach())?;
        let dw = match w.track_op() {
            true => Some(dlogits.t()?.matmul(&x.detach())?),
            false => None,
        };
        Ok((Some(dx), dw))
    }
}

struct TokenScores;

/// The probabilities of one row of logits, written into `p`, and their log-sum-exp.
fn softmax_row<T: RawFloat>(z: &[T], p: &mut [T]) -> T {
    let m = max_scaled(z, T::from_f64(1.0));
    for (p, &z) in p.iter_mut().zip(z) {
        *p = z - m;
    }
    T::exp_in_place(p);
    let s = sum_slice_f64(p);
    for p in p.iter_mut() {
        *p = *p / s;
    }
    m + s.ln()
}

/// `sum_j p_j z_j`, the expected logit.
fn expected<T: RawFloat>(p: &[T], z: &[T]) -> T {
    sum_f64(p.iter().zip(z).map(|(&p, &z)| p * z))
}

/// The target of each row, checked against the vocabulary size.
fn targets_of<'a>(s: &'a CpuStorage, l: &Layout, rows: usize, vocab: usize) -> CResult<&'a [u32]> {
    let (start, end) = l
        .contiguous_offsets()
        .ok_or_else(|| candle_core::Error::Msg("token_scores: targets not contiguous".into()))?;
    let t = &s.as_slice::<u32>()?[start..end];
    if t.len() != rows {
        candle_core::bail!("token_scores: {} targets for {rows} rows", t.len());
    }
    if let Some(bad) = t.iter().find(|&&id| id as usize >= vocab) {
        candle_core::bail!("token_scores: target id {bad} outside the vocabulary of {vocab}");
    }
    Ok(t)
}

fn token_scores_fwd<T: RawFloat>(
    zs: &CpuStorage,
    zl: &Layout,
    ts: &CpuStorage,
    tl: &Layout,
) -> CResult<(CpuStorage, Shape)> {
    let z = slice::<T>(zs, zl, "token_scores (logits)")?;
    let v = last_dim(zl)?;
    let rows = z.len() / v;
    let targets = targets_of(ts, tl, rows, v)?;
    let mut out = vec![T::ZERO; rows * 2];
    out.par_chunks_mut(2)
        .zip(z.par_chunks(v).zip(targets.par_iter()))
        .for_each_init(
            || vec![T::ZERO; v],
            |p, (o, (z, &target))| {
                let lse = softmax_row(z, p);
                o[0] = z[target as usize] - lse;
                o[1] = lse - expected(p, z);
            },
        );
    let mut shape = zl.shape().dims().to_vec();
    *shape.last_mut().expect("non-empty shape") = 2;
    Ok((T::to_cpu_storage_owned(out), Shape::from(shape)))
}

impl CustomOp2 for TokenScores {
    fn name(&self) -> &'static str {
        "policy-token-scores"
    }
    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> CResult<(CpuStorage, Shape)> {
        by_dtype!(s1, token_scores_fwd(s1, l1, s2, l2))
    }
    fn bwd(
        &self,
        logits: &Tensor,
        targets: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> CResult<(Option<Tensor>, Option<Tensor>)> {
        let grad = grad.contiguous()?;
        let dz = logits.apply_op3_no_bwd(targets, &grad, &TokenScoresGrad)?;
        Ok((Some(dz), None))
    }
}

/// `dz_j = g_lp * (1[j = target] - p_j) - g_h * p_j * (log p_j + H)` row by row.
struct TokenScoresGrad;

fn token_scores_grad<T: RawFloat>(
    (zs, zl): (&CpuStorage, &Layout),
    (ts, tl): (&CpuStorage, &Layout),
    (gs, gl): (&CpuStorage, &Layout),
) -> CResult<(CpuStorage, Shape)> {
    let z = slice::<T>(zs, zl, "token_scores grad (logits)")?;
    let g = slice::<T>(gs, gl, "token_scores grad (g)")?;
    let v = last_dim(zl)?;
    let rows = z.len() / v;
    let targets = targets_of(ts, tl, rows, v)?;
    let mut dz = vec![T::ZERO; z.len()];
    dz.par_chunks_mut(v)
        .zip(z.par_chunks(v).zip(g.par_chunks(2).zip(targets.par_iter())))
        .for_each(|(dz, (z, (g, &target)))| {
            let (g_lp, g_h) = (g[0], g[1]);
            // The probabilities first, in place; then each becomes its gradient.
            let lse = softmax_row(z, dz);
            let has_h = g_h != T::ZERO;
            let entropy = if has_h { lse - expected(dz, z) } else { T::ZERO };
            for (dz, &z) in dz.iter_mut().zip(z) {
                let p = *dz;
                let mut d = T::ZERO - g_lp * p;
                if has_h {
                    d = d - g_h * p * (z - lse + entropy);
                }
                *dz = d;
            }
            dz[target as usize] = dz[target as usize] + g_lp;
        });
    Ok((T::to_cpu_storage_owned(dz), zl.shape().clone()))
}

forward_op3!(TokenScoresGrad, "policy-token-scores-grad", |_op, z, targets, g| token_scores_grad(z, targets, g));

// ---------------------------------------------------------------------------------------------
// SwiGLU: silu(gate) * up, the MLP's activation.

/// Elements per task of the elementwise kernels: enough to amortise a task, small enough to
/// split a layer's activations across the threads.
const ELEMENTS_PER_TASK: usize = 4096;

/// `silu(gate) * up = gate * sigmoid(gate) * up`, elementwise, for tensors of one shape.
///
/// One pass with the vectorised `exp` where the primitive version (negate, exp, add, divide,
/// multiply) builds five full-size temporaries forward and about a dozen backward; the
/// backward computes both input gradients in one pass too.
pub fn swiglu(gate: &Tensor, up: &Tensor) -> Result<Tensor> {
    if gate.dims() != up.dims() {
        return Err(crate::error::PolicyError::Input(format!(
            "swiglu: gate {:?} and up {:?} differ in shape",
            gate.dims(),
            up.dims()
        )));
    }
    if !gate.device().is_cpu() {
        // candle's one-kernel SiLU, where the reference's makes four.
        return Ok((gate.silu()? * up)?);
    }
    if !fusable(gate) || gate.dtype() != up.dtype() {
        return Ok((crate::ops::reference::silu(gate)? * up)?);
    }
    Ok(gate.contiguous()?.apply_op2(&up.contiguous()?, Swiglu)?)
}

/// [`swiglu`] of the two halves of the last dimension of `both` (gate first, then up), as the
/// inference path's stacked gate and up projection gives them. No backward: sampling only.
pub fn swiglu_halves(both: &Tensor) -> Result<Tensor> {
    let inter = both.dim(D::Minus1)? / 2;
    if !fusable(both) {
        let (gate, up) = (both.narrow(D::Minus1, 0, inter)?, both.narrow(D::Minus1, inter, inter)?);
        return Ok((gate.silu()? * up)?);
    }
    Ok(both.contiguous()?.apply_op1_no_bwd(&SwigluHalves)?)
}

/// `y = silu(g) * u` over one chunk, `y` also the scratch for `exp(-g)`.
fn swiglu_into<T: RawFloat>(y: &mut [T], g: &[T], u: &[T]) {
    let one = T::from_f64(1.0);
    for (y, &g) in y.iter_mut().zip(g) {
        *y = T::ZERO - g;
    }
    T::exp_in_place(y);
    for ((y, &g), &u) in y.iter_mut().zip(g).zip(u) {
        *y = g / (one + *y) * u;
    }
}

struct Swiglu;

fn swiglu_fwd<T: RawFloat>(
    (gs, gl): (&CpuStorage, &Layout),
    (us, ul): (&CpuStorage, &Layout),
) -> CResult<(CpuStorage, Shape)> {
    let g = slice::<T>(gs, gl, "swiglu (gate)")?;
    let u = slice::<T>(us, ul, "swiglu (up)")?;
    let mut y = vec![T::ZERO; g.len()];
    y.par_chunks_mut(ELEMENTS_PER_TASK)
        .zip(g.par_chunks(ELEMENTS_PER_TASK).zip(u.par_chunks(ELEMENTS_PER_TASK)))
        .for_each(|(y, (g, u))| swiglu_into(y, g, u));
    Ok((T::to_cpu_storage_owned(y), gl.shape().clone()))
}

impl CustomOp2 for Swiglu {
    fn name(&self) -> &'static str {
        "policy-swiglu"
    }
    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> CResult<(CpuStorage, Shape)> {
        by_dtype!(s1, swiglu_fwd((s1, l1), (s2, l2)))
    }
    fn bwd(&self, gate: &Tensor, up: &Tensor, _y: &Tensor, grad: &Tensor) -> CResult<(Option<Tensor>, Option<Tensor>)> {
        let both = gate.apply_op3_no_bwd(up, &grad.contiguous()?, &SwigluGrad)?;
        Ok((Some(both.get(0)?), Some(both.get(1)?)))
    }
}

/// The gradients of [`swiglu`] stacked, `[2, ..]`: `d gate = dy * u * s * (1 + g * (1 - s))`
/// and `d up = dy * g * s`, with `s = sigmoid(g)`.
struct SwigluGrad;

fn swiglu_grad<T: RawFloat>(
    (gs, gl): (&CpuStorage, &Layout),
    (us, ul): (&CpuStorage, &Layout),
    (dys, dyl): (&CpuStorage, &Layout),
) -> CResult<(CpuStorage, Shape)> {
    let g = slice::<T>(gs, gl, "swiglu grad (gate)")?;
    let u = slice::<T>(us, ul, "swiglu grad (up)")?;
    let dy = slice::<T>(dys, dyl, "swiglu grad (dy)")?;
    let n = g.len();
    let mut out = vec![T::ZERO; 2 * n];
    let (dg, du) = out.split_at_mut(n);
    let one = T::from_f64(1.0);
    dg.par_chunks_mut(ELEMENTS_PER_TASK)
        .zip(du.par_chunks_mut(ELEMENTS_PER_TASK))
        .zip(g.par_chunks(ELEMENTS_PER_TASK))
        .zip(u.par_chunks(ELEMENTS_PER_TASK).zip(dy.par_chunks(ELEMENTS_PER_TASK)))
        .for_each(|(((dg, du), g), (u, dy))| {
            // dg first holds exp(-g).
            for (e, &g) in dg.iter_mut().zip(g) {
                *e = T::ZERO - g;
            }
            T::exp_in_place(dg);
            for ((((dg, du), &g), &u), &dy) in dg.iter_mut().zip(du.iter_mut()).zip(g).zip(u).zip(dy) {
                let s = one / (one + *dg);
                *du = dy * g * s;
                *dg = dy * u * s * (one + g * (one - s));
            }
        });
    let mut dims = vec![2];
    dims.extend_from_slice(gl.shape().dims());
    Ok((T::to_cpu_storage_owned(out), Shape::from(dims)))
}

forward_op3!(SwigluGrad, "policy-swiglu-grad", |_op, gate, up, dy| swiglu_grad(gate, up, dy));

struct SwigluHalves;

fn swiglu_halves_fwd<T: RawFloat>(s: &CpuStorage, l: &Layout) -> CResult<(CpuStorage, Shape)> {
    let both = slice::<T>(s, l, "swiglu (gate and up)")?;
    let width = last_dim(l)?;
    if width % 2 != 0 {
        candle_core::bail!("swiglu: gate and up of odd width {width}");
    }
    let inter = width / 2;
    let mut y = vec![T::ZERO; both.len() / 2];
    y.par_chunks_mut(inter)
        .zip(both.par_chunks(width))
        .for_each(|(y, row)| swiglu_into(y, &row[..inter], &row[inter..]));
    let mut dims = l.shape().dims().to_vec();
    *dims.last_mut().expect("a last dimension") = inter;
    Ok((T::to_cpu_storage_owned(y), Shape::from(dims)))
}

impl CustomOp1 for SwigluHalves {
    fn name(&self) -> &'static str {
        "policy-swiglu-halves"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> CResult<(CpuStorage, Shape)> {
        by_dtype!(s, swiglu_halves_fwd(s, l))
    }
}

// ---------------------------------------------------------------------------------------------
// Attention heads: a projection's [b * t, heads * d] to [b, heads, t, d] and back, roped.

/// The half-split rotary embedding of one head vector at one position (tables `c`, `s` of
/// that position): for `i < d / 2`, `y[i] = x[i] c[i] - x[i + d/2] s[i]` and
/// `y[i + d/2] = x[i + d/2] c[i + d/2] + x[i] s[i + d/2]`, as [`crate::ops::reference::rope`];
/// `transpose` applies the transposed rotation (the backward of a linear map).
fn rotate<T: RawFloat>(y: &mut [T], x: &[T], c: &[T], s: &[T], transpose: bool) {
    let half = x.len() / 2;
    let (y1, y2) = y.split_at_mut(half);
    let (x1, x2) = x.split_at(half);
    let (c1, c2) = c.split_at(half);
    let (s1, s2) = s.split_at(half);
    for i in 0..half {
        if transpose {
            y1[i] = x1[i] * c1[i] + x2[i] * s2[i];
            y2[i] = x2[i] * c2[i] - x1[i] * s1[i];
        } else {
            y1[i] = x1[i] * c1[i] - x2[i] * s1[i];
            y2[i] = x2[i] * c2[i] + x1[i] * s2[i];
        }
    }
}

/// Which way [`Heads`] moves the heads: `Split` takes `[b * t, heads * d]` (position-major,
/// a projection's output) to `[b, heads, t, d]` (head-major, what attention reads); `Merge`
/// takes them back.
#[derive(Clone, Copy, PartialEq)]
enum Direction {
    Split,
    Merge,
}

/// Moves the heads of a batch of `b` sequences of `t` positions, rotating each head vector
/// by its position's rope tables when given them (`CustomOp3` with the tables, else
/// `CustomOp1`). A pure permutation plus a rotation: its backward is the other direction with
/// the transposed rotation.
#[derive(Clone, Copy)]
struct Heads {
    b: usize,
    t: usize,
    heads: usize,
    /// KV heads of the split output's shape `[b, groups, heads / groups * t, d]` (the query
    /// heads of each KV head stacked, as [`causal_attention`] takes them).
    groups: usize,
    direction: Direction,
    /// Apply the transposed rotation (a backward pass).
    transpose: bool,
}

impl Heads {
    fn backward(self) -> Self {
        let direction = match self.direction {
            Direction::Split => Direction::Merge,
            Direction::Merge => Direction::Split,
        };
        Heads { direction, transpose: !self.transpose, ..self }
    }

    fn out_shape(&self, d: usize) -> Shape {
        match self.direction {
            Direction::Split => Shape::from((self.b, self.groups, self.heads / self.groups * self.t, d)),
            Direction::Merge => Shape::from((self.b * self.t, self.heads * d)),
        }
    }

    fn run<T: RawFloat>(&self, x: &[T], tables: Option<(&[T], &[T])>, d: usize) -> Vec<T> {
        let (t, heads) = (self.t, self.heads);
        let mut y = vec![T::ZERO; x.len()];
        let place = |dst: &mut [T], src: &[T], p: usize| match tables {
            Some((cos, sin)) => rotate(dst, src, &cos[p * d..][..d], &sin[p * d..][..d], self.transpose),
            None => dst.copy_from_slice(src),
        };
        match self.direction {
            // One task per (sequence, head): its t head vectors gathered from the rows.
            Direction::Split => y.par_chunks_mut(t * d).enumerate().for_each(|(block, dst)| {
                let (i, h) = (block / heads, block % heads);
                for (p, dst) in dst.chunks_exact_mut(d).enumerate() {
                    place(dst, &x[((i * t + p) * heads + h) * d..][..d], p);
                }
            }),
            // One task per row (sequence, position): its heads gathered from the blocks.
            Direction::Merge => y.par_chunks_mut(heads * d).enumerate().for_each(|(row, dst)| {
                let (i, p) = (row / t, row % t);
                for (h, dst) in dst.chunks_exact_mut(d).enumerate() {
                    place(dst, &x[((i * heads + h) * t + p) * d..][..d], p);
                }
            }),
        }
        y
    }
}

/// [`Heads`]' forward for the float type `T`, the rope tables when it rotates.
fn heads_fwd<T: RawFloat>(
    op: &Heads,
    (xs, xl): (&CpuStorage, &Layout),
    tables: Option<((&CpuStorage, &Layout), (&CpuStorage, &Layout))>,
) -> CResult<(CpuStorage, Shape)> {
    let x = slice::<T>(xs, xl, "heads (x)")?;
    let d = last_dim(xl)?;
    let d = match op.direction {
        Direction::Split => d / op.heads,
        Direction::Merge => d,
    };
    if x.len() != op.b * op.t * op.heads * d {
        candle_core::bail!("heads: {:?} is not {} sequences of {} positions and {} heads", xl.shape(), op.b, op.t, op.heads);
    }
    let tables = match tables {
        Some(((cs, cl), (ss, sl))) => Some((slice::<T>(cs, cl, "rope (cos)")?, slice::<T>(ss, sl, "rope (sin)")?)),
        None => None,
    };
    let y = op.run(x, tables, d);
    Ok((T::to_cpu_storage_owned(y), op.out_shape(d)))
}

impl CustomOp1 for Heads {
    fn name(&self) -> &'static str {
        "policy-heads"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> CResult<(CpuStorage, Shape)> {
        by_dtype!(s, heads_fwd(self, (s, l), None))
    }
    fn bwd(&self, _x: &Tensor, _y: &Tensor, grad: &Tensor) -> CResult<Option<Tensor>> {
        Ok(Some(grad.contiguous()?.apply_op1_no_bwd(&self.backward())?))
    }
}

impl CustomOp3 for Heads {
    fn name(&self) -> &'static str {
        "policy-heads-roped"
    }
    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> CResult<(CpuStorage, Shape)> {
        by_dtype!(s1, heads_fwd(self, (s1, l1), Some(((s2, l2), (s3, l3)))))
    }
    fn bwd(
        &self,
        _x: &Tensor,
        cos: &Tensor,
        sin: &Tensor,
        _y: &Tensor,
        grad: &Tensor,
    ) -> CResult<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        Ok((Some(grad.contiguous()?.apply_op3_no_bwd(cos, sin, &self.backward())?), None, None))
    }
}

/// The heads of a projection's output `x: [b * t, heads * d]` (row `i * t + p` holds position
/// `p` of sequence `i`) as attention reads them, `[b, groups, heads / groups * t, d]` (query
/// head `g * r + j` is the `j`-th block of `t` rows of group `g`), each head vector roped by its
/// position when `rope` gives the tables `cos, sin: [t, d]`. One node of the graph where the
/// primitive version (reshape, transpose, six rope ops, a copying reshape) makes nine.
pub fn split_heads(x: &Tensor, b: usize, heads: usize, groups: usize, rope: Option<(&Tensor, &Tensor)>) -> Result<Tensor> {
    let (rows, width) = x.dims2()?;
    let shape_ok = b > 0 && rows % b == 0 && heads > 0 && width % heads == 0 && groups > 0 && heads % groups == 0;
    let (t, d) = (rows / b.max(1), width / heads.max(1));
    let tables_ok = rope.is_none_or(|(c, s)| c.dims() == [t, d] && s.dims() == [t, d] && d % 2 == 0);
    if !shape_ok || !tables_ok {
        return Err(crate::error::PolicyError::Input(format!(
            "split_heads: x {:?} as {b} sequences of {heads} heads in {groups} groups, tables {:?}",
            x.dims(),
            rope.map(|(c, s)| (c.dims().to_vec(), s.dims().to_vec()))
        )));
    }
    let tables_fusable = rope.is_none_or(|(c, s)| c.dtype() == x.dtype() && s.dtype() == x.dtype());
    if !fusable(x) || !tables_fusable {
        let y = x.reshape((b, t, heads, d))?.transpose(1, 2)?;
        let y = match rope {
            Some((cos, sin)) => crate::ops::reference::rope(&y, cos, sin)?,
            None => y,
        };
        return Ok(y.reshape((b, groups, heads / groups * t, d))?);
    }
    let op = Heads { b, t, heads, groups, direction: Direction::Split, transpose: false };
    let x = x.contiguous()?;
    Ok(match rope {
        Some((cos, sin)) => x.apply_op3(&cos.contiguous()?.detach(), &sin.contiguous()?.detach(), op)?,
        None => x.apply_op1(op)?,
    })
}

/// The inverse layout move of [`split_heads`] without rope: attention's output
/// `[b, groups, heads / groups * t, d]` back to `[b * t, heads * d]`, the output projection's
/// input.
pub fn merge_heads(x: &Tensor, heads: usize) -> Result<Tensor> {
    let (b, groups, rows, d) = x.dims4()?;
    let r = heads / groups.max(1);
    if groups == 0 || heads % groups != 0 || r == 0 || rows % r != 0 {
        return Err(crate::error::PolicyError::Input(format!(
            "merge_heads: x {:?} for {heads} heads",
            x.dims()
        )));
    }
    let t = rows / r;
    if !fusable(x) {
        return Ok(x.reshape((b, heads, t, d))?.transpose(1, 2)?.reshape((b * t, heads * d))?);
    }
    let op = Heads { b, t, heads, groups, direction: Direction::Merge, transpose: false };
    Ok(x.contiguous()?.apply_op1(op)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    fn rand(shape: &[usize], seed: u64) -> Tensor {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let n: usize = shape.iter().product();
        let data: Vec<f64> = (0..n).map(|_| rng.gen_range(-2.0..2.0)).collect();
        Tensor::from_vec(data, shape, &Device::Cpu).unwrap()
    }

    fn max_abs_diff(a: &Tensor, b: &Tensor) -> f64 {
        (a - b)
            .unwrap()
            .abs()
            .unwrap()
            .flatten_all()
            .unwrap()
            .max(0)
            .unwrap()
            .to_scalar::<f64>()
            .unwrap()
    }

    /// Value and input gradients of `loss(f(inputs))` for the fused `f` and the primitive `f`,
    /// in f64, with a random weighting of the outputs as the loss.
    fn compare(
        inputs: &[Tensor],
        fused: impl Fn(&[Tensor]) -> Tensor,
        primitive: impl Fn(&[Tensor]) -> Tensor,
        tol: f64,
    ) {
        let vars: Vec<Var> = inputs
            .iter()
            .map(|t| Var::from_tensor(t).unwrap())
            .collect();
        let tensors: Vec<Tensor> = vars.iter().map(|v| v.as_tensor().clone()).collect();
        let (yf, yp) = (fused(&tensors), primitive(&tensors));
        assert_eq!(yf.dims(), yp.dims());
        let diff = max_abs_diff(&yf, &yp);
        assert!(diff < tol, "values differ by {diff}");
        let weights = rand(yf.dims(), 99);
        let gf = (&yf * &weights).unwrap().sum_all().unwrap().backward().unwrap();
        let gp = (&yp * &weights).unwrap().sum_all().unwrap().backward().unwrap();
        for (i, v) in vars.iter().enumerate() {
            let (a, b) = (gf.get(v.as_tensor()), gp.get(v.as_tensor()));
            let (a, b) = (a.expect("fused gradient"), b.expect("primitive gradient"));
            let diff = max_abs_diff(a, b);
            let scale = max_abs_diff(b, &b.zeros_like().unwrap()).max(1e-12);
            assert!(scale > 1e-6, "input {i}: zero gradient");
            assert!(diff < tol, "input {i}: gradients differ by {diff} (scale {scale})");
        }
    }

    #[test]
    fn swiglu_matches_primitive_ops_f64() {
        // Wide enough for several tasks; large gates of both signs saturate the sigmoid.
        let g = (rand(&[3, 2000], 20) * 20.0).unwrap();
        let u = rand(&[3, 2000], 21);
        compare(
            &[g, u],
            |t| swiglu(&t[0], &t[1]).unwrap(),
            |t| (crate::ops::reference::silu(&t[0]).unwrap() * &t[1]).unwrap(),
            1e-12,
        );
    }

    /// The GPU's SwiGLU (candle's SiLU op) against the reference's, run here.
    #[test]
    fn candle_silu_matches_the_reference_f64() {
        let g = (rand(&[3, 50], 27) * 20.0).unwrap();
        compare(&[g], |t| t[0].silu().unwrap(), |t| crate::ops::reference::silu(&t[0]).unwrap(), 1e-12);
    }

    #[test]
    fn swiglu_halves_match_swiglu_in_f32() {
        let both = rand(&[2, 5, 14], 22).to_dtype(DType::F32).unwrap();
        let (g, u) = (both.narrow(2, 0, 7).unwrap(), both.narrow(2, 7, 7).unwrap());
        let want = (crate::ops::reference::silu(&g.contiguous().unwrap()).unwrap() * &u).unwrap();
        let got = swiglu_halves(&both).unwrap();
        assert_eq!(got.dims(), [2, 5, 7]);
        let diff = max_abs_diff(&got.to_dtype(DType::F64).unwrap(), &want.to_dtype(DType::F64).unwrap());
        assert!(diff < 1e-6, "{diff}");
        assert!(swiglu(&g, &rand(&[2, 5, 6], 1).to_dtype(DType::F32).unwrap()).is_err());
    }

    /// Heads split (roped or not) and merged against reshape, transpose and the primitive
    /// rope; tables whose halves differ, so a swapped half would show.
    #[test]
    fn heads_split_and_merge_match_primitive_ops_f64() {
        let (b, t, heads, groups, d) = (2, 5, 4, 2, 8);
        let x = rand(&[b * t, heads * d], 23);
        let cos = rand(&[t, d], 24);
        let sin = rand(&[t, d], 25);
        let heads_first = |x: &Tensor| x.reshape((b, t, heads, d)).unwrap().transpose(1, 2).unwrap();
        let stacked = |y: Tensor| y.reshape((b, groups, heads / groups * t, d)).unwrap();
        compare(
            &[x.clone()],
            |v| split_heads(&v[0], b, heads, groups, Some((&cos, &sin))).unwrap(),
            |v| stacked(crate::ops::reference::rope(&heads_first(&v[0]), &cos, &sin).unwrap()),
            1e-12,
        );
        compare(
            &[x.clone()],
            |v| split_heads(&v[0], b, heads, groups, None).unwrap(),
            |v| stacked(heads_first(&v[0])),
            1e-12,
        );
        let y = rand(&[b, groups, heads / groups * t, d], 26);
        compare(
            &[y],
            |v| merge_heads(&v[0], heads).unwrap(),
            |v| {
                let y = v[0].reshape((b, heads, t, d)).unwrap().transpose(1, 2).unwrap();
                y.reshape((b * t, heads * d)).unwrap()
            },
            1e-12,
        );
        assert!(split_heads(&x, b, heads, groups, Some((&cos.narrow(0, 0, 4).unwrap(), &sin))).is_err());
        assert!(split_heads(&x, 3, heads, groups, None).is_err());
        assert!(merge_heads(&rand(&[2, 2, 9, 8], 1), 4).is_err());
    }

    #[test]
    fn causal_softmax_matches_primitive_ops_f64() {
        // Two groups of 5 queries over 5 keys.
        let x = rand(&[2, 3, 10, 5], 1);
        compare(
            &[x],
            |t| causal_softmax(&t[0], 0.7).unwrap(),
            |t| causal_softmax_primitive(&t[0], 0.7).unwrap(),
            1e-12,
        );
    }

    #[test]
    fn padded_causal_softmax_matches_the_masked_softmax_in_prefill_and_decode() {
        // [batch 3, 2 KV heads, 2 query heads x t queries, total keys], pads 0, 2 and 4.
        let pads = [0, 2, 4];
        for (t, total) in [(6, 6), (1, 7), (2, 9)] {
            for dtype in [DType::F64, DType::F32] {
                let x = rand(&[3, 2, 2 * t, total], 5 + t as u64).to_dtype(dtype).unwrap();
                let fused = padded_causal_softmax(&x, 0.6, t, &pads).unwrap();
                let primitive = padded_causal_softmax_primitive(&x, 0.6, t, &pads).unwrap();
                let (f, p) = (fused.to_dtype(DType::F64).unwrap(), primitive.to_dtype(DType::F64).unwrap());
                let tol = if dtype == DType::F64 { 1e-12 } else { 1e-6 };
                assert!(max_abs_diff(&f, &p) < tol, "t {t}, total {total}, {dtype:?}");
                // Hidden keys get exactly 0: padding, and keys after the query.
                let all = f.flatten_all().unwrap().to_vec1::<f64>().unwrap();
                let row = |b: usize, r: usize| &all[((b * 2) * 2 * t + r) * total..][..total];
                let last = row(2, 2 * t - 1);
                assert!(last[..4].iter().all(|&v| v == 0.0), "padding columns are hidden: {last:?}");
                assert!((last.iter().sum::<f64>() - 1.0).abs() < tol);
            }
        }
        assert!(padded_causal_softmax(&rand(&[2, 1, 4, 4], 1), 1.0, 4, &[0]).is_err());
    }

    #[test]
    fn causal_attention_matches_primitive_ops_f64() {
        // Two query heads share each of 3 KV heads: 2 groups of 5 queries over 5 keys.
        let q = rand(&[2, 3, 10, 4], 11);
        let k = rand(&[2, 3, 5, 4], 12);
        let v = rand(&[2, 3, 5, 4], 13);
        compare(
            &[q, k, v],
            |t| causal_attention(&t[0], &t[1], &t[2], 0.5).unwrap(),
            |t| {
                let scores = t[0].matmul(&t[1].t().unwrap()).unwrap();
                causal_softmax_primitive(&scores, 0.5)
                    .unwrap()
                    .matmul(&t[2])
                    .unwrap()
            },
            1e-12,
        );
    }

    /// The GPU's path, run here: one node from candle's ops (the mask kept between calls, so
    /// shapes alternate to catch a mask of the wrong shape), values and gradients in f64; and
    /// without a graph, the same values.
    #[test]
    fn causal_attention_as_one_node_matches_primitive_ops_f64() {
        for (case, (r, t)) in [(2, 5), (3, 7), (2, 5), (1, 1)].into_iter().enumerate() {
            let seed = 200 + 4 * case as u64;
            let (q, k, v) = (rand(&[2, 3, r * t, 4], seed), rand(&[2, 3, t, 4], seed + 1), rand(&[2, 3, t, 4], seed + 2));
            let primitive = |t: &[Tensor]| {
                let scores = t[0].matmul(&t[1].t().unwrap()).unwrap();
                causal_softmax_primitive(&scores, 0.5).unwrap().matmul(&t[2]).unwrap()
            };
            if t > 1 {
                compare(&[q.clone(), k.clone(), v.clone()], |t| causal_attention_one_node(&t[0], &t[1], &t[2], 0.5).unwrap(), primitive, 1e-12);
            }
            let detached = causal_attention_one_node(&q, &k, &v, 0.5).unwrap();
            assert!(max_abs_diff(&detached, &primitive(&[q, k, v])) < 1e-12, "case {case}");
        }
    }

    #[test]
    fn the_softmax_gradient_as_tensor_ops_matches_its_kernel() {
        let y = causal_softmax(&rand(&[2, 6, 3], 30), 1.0).unwrap();
        let g = rand(&[2, 6, 3], 31);
        let kernel = y.apply_op2_no_bwd(&g, &SoftmaxGrad { scale: 0.7 }).unwrap();
        assert!(max_abs_diff(&softmax_grad_ops(&y, &g, 0.7).unwrap(), &kernel) < 1e-12);
    }

    /// The f32 path (`crate::ops::triangle`, over the causal triangle only) against the primitive
    /// ops in f64: values and the three input gradients, for shapes whose positions are no
    /// whole number of register blocks, one to three query heads per KV head, and head
    /// dimensions of one to four vector registers.
    #[test]
    fn causal_attention_in_f32_matches_primitive_ops_in_f64() {
        let shapes: [(&[usize], usize, usize, usize); 6] =
            [(&[1, 1], 1, 1, 16), (&[2, 3], 2, 5, 16), (&[1, 2], 3, 37, 32), (&[2], 2, 20, 64), (&[1, 1], 1, 16, 16), (&[3], 2, 70, 32)];
        for (case, &(lead, r, t, d)) in shapes.iter().enumerate() {
            let shape = |rows: usize| [lead, &[rows, d]].concat();
            let seed = 100 + 3 * case as u64;
            let inputs = [rand(&shape(r * t), seed), rand(&shape(t), seed + 1), rand(&shape(t), seed + 2)];
            let weights = rand(&shape(r * t), seed + 3);
            let run = |dtype: DType, attention: &dyn Fn(&[Tensor]) -> Tensor| {
                let vars: Vec<Var> = inputs.iter().map(|x| Var::from_tensor(&x.to_dtype(dtype).unwrap()).unwrap()).collect();
                let tensors: Vec<Tensor> = vars.iter().map(|v| v.as_tensor().clone()).collect();
                let y = attention(&tensors);
                let grads = (&y * weights.to_dtype(dtype).unwrap()).unwrap().sum_all().unwrap().backward().unwrap();
                let mut out = vec![y.to_dtype(DType::F64).unwrap()];
                out.extend(vars.iter().map(|v| grads.get(v.as_tensor()).expect("gradient").to_dtype(DType::F64).unwrap()));
                out
            };
            let f32_inputs: Vec<Tensor> = inputs.iter().map(|x| x.to_dtype(DType::F32).unwrap()).collect();
            assert!(triangle_dims(&f32_inputs[0], &f32_inputs[1], &f32_inputs[2]).unwrap().is_some(), "case {case}: not served");
            let fast = run(DType::F32, &|t| causal_attention(&t[0], &t[1], &t[2], 0.4).unwrap());
            let reference = run(DType::F64, &|t| {
                let scores = t[0].matmul(&t[1].t().unwrap()).unwrap();
                causal_softmax_primitive(&scores, 0.4).unwrap().matmul(&t[2]).unwrap()
            });
            for (what, (a, b)) in ["output", "dq", "dk", "dv"].iter().zip(fast.iter().zip(&reference)) {
                let size = max_abs_diff(b, &b.zeros_like().unwrap());
                let diff = max_abs_diff(a, b);
                // One key gets probability 1 whatever the scores: no query or key gradient.
                let constant = t == 1 && matches!(*what, "dq" | "dk");
                assert!(constant || size > 1e-3, "case {case}, {what}: all zero");
                assert!(diff < 2e-5 * size.max(1.0), "case {case} ({lead:?}, r {r}, t {t}, d {d}), {what}: differs by {diff} (size {size})");
            }
        }
    }

    #[test]
    fn rms_norm_matches_primitive_ops_f64() {
        let x = rand(&[2, 4, 6], 2);
        let w = ((rand(&[6], 3) * 0.2).unwrap() + 1.0).unwrap();
        compare(
            &[x, w],
            |t| rms_norm(&t[0], &t[1], 1e-5).unwrap(),
            |t| crate::ops::reference::rms_norm(&t[0], &t[1], 1e-5).unwrap(),
            1e-12,
        );
    }

    /// The weight gradient sums over every row; it must come out bit for bit the same however
    /// many threads share the work (a resumed run must equal an uninterrupted one).
    #[test]
    fn rms_norm_weight_gradient_does_not_depend_on_the_thread_count() {
        let x = rand(&[4000, 64], 8).to_dtype(DType::F32).unwrap();
        let w = Var::from_tensor(&(rand(&[64], 9) + 1.0).unwrap().to_dtype(DType::F32).unwrap())
            .unwrap();
        let weights = rand(&[4000, 64], 10).to_dtype(DType::F32).unwrap();
        let grad_in_pool = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| {
                let y = rms_norm(&x, w.as_tensor(), 1e-5).unwrap();
                let grads = (&y * &weights).unwrap().sum_all().unwrap().backward().unwrap();
                grads.get(w.as_tensor()).unwrap().to_vec1::<f32>().unwrap()
            })
        };
        let one = grad_in_pool(1);
        for threads in [2, 3, 5] {
            assert_eq!(grad_in_pool(threads), one, "{threads} threads");
        }
    }

    #[test]
    fn token_scores_match_primitive_ops_f64() {
        let z = (rand(&[7, 11], 4) * 3.0).unwrap();
        let targets = Tensor::new(&[0u32, 3, 10, 5, 5, 1, 9], &Device::Cpu).unwrap();
        compare(
            &[z],
            |t| token_scores(&t[0], &targets).unwrap(),
            |t| token_scores_primitive(&t[0], &targets).unwrap(),
            1e-12,
        );
    }

    #[test]
    fn head_token_scores_match_primitive_ops_f64() {
        let x = rand(&[7, 5], 14);
        let w = rand(&[11, 5], 15);
        let targets = Tensor::new(&[0u32, 3, 10, 5, 5, 1, 9], &Device::Cpu).unwrap();
        compare(
            &[x, w],
            |t| head_token_scores(&t[0], &t[1], &targets).unwrap(),
            |t| {
                let logits = t[0].matmul(&t[1].t().unwrap()).unwrap();
                token_scores_primitive(&logits, &targets).unwrap()
            },
            1e-12,
        );
    }

    /// A frozen (detached) head gets no gradient computed; the input's is unchanged.
    #[test]
    fn head_token_scores_leave_a_frozen_head_alone() {
        let x = Var::from_tensor(&rand(&[7, 5], 16)).unwrap();
        let w = rand(&[11, 5], 17);
        let targets = Tensor::new(&[0u32, 3, 10, 5, 5, 1, 9], &Device::Cpu).unwrap();
        let loss = |w: &Tensor| {
            head_token_scores(x.as_tensor(), w, &targets)
                .unwrap()
                .sum_all()
                .unwrap()
                .backward()
                .unwrap()
        };
        let frozen = loss(&w.detach());
        let trained_w = Var::from_tensor(&w).unwrap();
        let trained = loss(trained_w.as_tensor());
        assert_eq!(frozen.get_ids().count(), 1, "only the input's gradient");
        let (a, b) = (frozen.get(x.as_tensor()), trained.get(x.as_tensor()));
        assert_eq!(max_abs_diff(a.unwrap(), b.unwrap()), 0.0);
        assert!(trained.get(trained_w.as_tensor()).is_some());
    }

    #[test]
    fn f32_agrees_with_f64() {
        let z = (rand(&[4, 9], 5) * 3.0).unwrap();
        let targets = Tensor::new(&[1u32, 8, 0, 4], &Device::Cpu).unwrap();
        let want = token_scores(&z, &targets).unwrap();
        let got = token_scores(&z.to_dtype(DType::F32).unwrap(), &targets).unwrap();
        let diff = max_abs_diff(&want, &got.to_dtype(DType::F64).unwrap());
        assert!(diff < 1e-5, "{diff}");
    }

    /// A peaked row over a large vocabulary: the sum of the small probabilities must not be
    /// lost in f32 (with an f32 accumulator, log p came out 0 instead of -1.03e-4).
    #[test]
    fn f32_sums_keep_small_terms() {
        let v = 50_000;
        let mut row = vec![0f64; v];
        row[7] = 20.0;
        let z = Tensor::from_vec(row, (1, v), &Device::Cpu).unwrap();
        let targets = Tensor::new(&[7u32], &Device::Cpu).unwrap();
        let want = -((v - 1) as f64 * (-20f64).exp()).ln_1p();
        let got = token_scores(&z.to_dtype(DType::F32).unwrap(), &targets)
            .unwrap()
            .to_dtype(DType::F64)
            .unwrap()
            .to_vec2::<f64>()
            .unwrap()[0][0];
        assert!((got - want).abs() < 2e-7, "log p {got}, want {want}");
    }

    #[test]
    fn bad_targets_are_errors() {
        let z = rand(&[2, 3], 6);
        let err = token_scores(&z, &Tensor::new(&[0u32, 3], &Device::Cpu).unwrap()).unwrap_err();
        assert!(err.to_string().contains("target id 3"), "{err}");
        let err = token_scores(&z, &Tensor::new(&[0u32], &Device::Cpu).unwrap()).unwrap_err();
        assert!(err.to_string().contains("1 targets for 2 rows"), "{err}");
        let err = causal_softmax(&rand(&[2, 3], 7), 1.0).unwrap_err();
        assert!(err.to_string().contains("[.., r * t, t]"), "{err}");
    }
}
