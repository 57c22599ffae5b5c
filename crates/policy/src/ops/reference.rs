//! The plain versions of the fused ops, written with candle's primitive ops (each has a
//! backward): the reference the fused kernels are tested against, and their fallback where
//! a kernel does not apply (off the CPU, other dtypes).

use candle_core::{Tensor, D};

use super::frozen::{frozen_linear, trained_linear};
use crate::error::{PolicyError, Result};

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

/// `x @ w^T`; a `w` that carries no gradient (detached, as a LoRA-frozen base weight is)
/// goes through [`frozen_linear`], so none is computed for it.
pub fn linear_or_frozen(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    match w.track_op() {
        true => linear(x, w),
        false => frozen_linear(x, w),
    }
}

/// `y + bias` broadcast over the last dimension, or `y` when there is no bias.
pub fn add_bias(y: Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
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

