//! Linear layers as single graph nodes: `x @ W^T` for a trained weight ([`trained_linear`]) and
//! for a frozen one ([`frozen_linear`]).
//!
//! Built from candle's ops, `x @ W^T` is a transpose and a matmul, plus two reshapes when `x`
//! has more than two dimensions, and candle's backward zero-fills and then adds into a fresh
//! gradient buffer for every node: four activation-sized buffers per projection. As one custom
//! op it is one node, with the same matmul forward and backward.
//!
//! For a frozen weight, candle's `matmul` backward computes the gradient of both operands,
//! even for a detached weight that no optimizer will ever read; on a LoRA step that is one
//! `[out, in]` matmul per projection per layer wasted (a third of the backward's work) plus the
//! memory to hold the results. [`frozen_linear`]'s op does not take `W` as an argument at all,
//! only holds it as a constant, so the graph has no edge to it and no gradient for it is ever
//! computed or stored.

use crate::error::{PolicyError, Result};
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CudaStorage, CustomOp1, CustomOp2, Layout, Shape, Storage, Tensor};

/// `x @ W^T` on raw storages, `x: [rows, in]`, `W: [out, in]`: `W`'s layout transposed, as
/// `Tensor::matmul(&w.t())` does.
fn matmul_wt<S: BackendStorage>(
    x: &S,
    x_layout: &Layout,
    weight: &S,
    weight_layout: &Layout,
) -> candle_core::Result<(S, Shape)> {
    let (rows, inner) = x_layout.shape().dims2()?;
    let (out, w_inner) = weight_layout.shape().dims2()?;
    if inner != w_inner {
        return Err(candle_core::Error::Msg(format!(
            "linear: input has {inner} features, weight expects {w_inner}"
        )));
    }
    let weight_t = weight_layout.transpose(0, 1)?;
    let y = x.matmul(weight, (1, rows, out, inner), x_layout, &weight_t)?;
    Ok((y, Shape::from((rows, out))))
}

/// The trained linear layer's op: arguments `x: [rows, in]` and `W: [out, in]`.
struct TrainedMatmul;

impl CustomOp2 for TrainedMatmul {
    fn name(&self) -> &'static str {
        "linear"
    }

    fn cpu_fwd(&self, x: &CpuStorage, xl: &Layout, w: &CpuStorage, wl: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        matmul_wt(x, xl, w, wl)
    }

    fn cuda_fwd(&self, x: &CudaStorage, xl: &Layout, w: &CudaStorage, wl: &Layout) -> candle_core::Result<(CudaStorage, Shape)> {
        matmul_wt(x, xl, w, wl)
    }

    /// `dL/dx = dL/dy @ W` and `dL/dW = (dL/dy)^T @ x`.
    fn bwd(&self, x: &Tensor, w: &Tensor, _y: &Tensor, grad_y: &Tensor) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        Ok((Some(grad_y.matmul(w)?), Some(grad_y.t()?.matmul(x)?)))
    }
}

/// `x @ w.T` for `x: [rows, in]` and a trained `w: [out, in]`, as one node of the graph (see
/// the module docs); [`crate::ops::reference::linear`] takes inputs of any rank.
pub fn trained_linear(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    if x.dtype() != w.dtype() {
        return Err(PolicyError::Input(format!(
            "linear: input is {:?}, weight {:?}",
            x.dtype(),
            w.dtype()
        )));
    }
    Ok(x.apply_op2(w, TrainedMatmul)?)
}

/// The op: holds the weight `[out, in]` (detached); its argument is `x: [rows, in]`.
struct FrozenMatmul {
    weight: Tensor,
}

fn wrong_device(op: &str) -> candle_core::Error {
    candle_core::Error::Msg(format!(
        "frozen linear ({op}): the weight is not on the input's device"
    ))
}

impl CustomOp1 for FrozenMatmul {
    fn name(&self) -> &'static str {
        "frozen-linear"
    }

    fn cpu_fwd(&self, x: &CpuStorage, layout: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let (storage, w_layout) = self.weight.storage_and_layout();
        match &*storage {
            Storage::Cpu(w) => matmul_wt(x, layout, w, w_layout),
            _ => Err(wrong_device("cpu")),
        }
    }

    fn cuda_fwd(
        &self,
        x: &CudaStorage,
        layout: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let (storage, w_layout) = self.weight.storage_and_layout();
        match &*storage {
            Storage::Cuda(w) => matmul_wt(x, layout, w, w_layout),
            _ => Err(wrong_device("cuda")),
        }
    }

    /// `dL/dx = dL/dy @ W`; nothing for `W`.
    fn bwd(
        &self,
        _x: &Tensor,
        _y: &Tensor,
        grad_y: &Tensor,
    ) -> candle_core::Result<Option<Tensor>> {
        Ok(Some(grad_y.matmul(&self.weight)?))
    }
}

/// `x @ w.T` for `x: [.., in]`, `w: [out, in]`, with `w` treated as a constant: the result
/// carries a gradient to `x` only (see the module docs). Same numbers as
/// [`crate::ops::reference::linear`].
pub fn frozen_linear(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    let dims = x.dims().to_vec();
    let (last, lead) = dims
        .split_last()
        .ok_or_else(|| PolicyError::Input("scalar input to frozen_linear".into()))?;
    let rows: usize = lead.iter().product();
    let x2 = x.reshape((rows, *last))?.contiguous()?;
    let weight = w.detach();
    if weight.dtype() != x.dtype() {
        return Err(PolicyError::Input(format!(
            "frozen_linear: input is {:?}, weight {:?}",
            x.dtype(),
            weight.dtype()
        )));
    }
    let y = x2.apply_op1(FrozenMatmul { weight })?;
    let mut out_shape = lead.to_vec();
    out_shape.push(w.dim(0)?);
    Ok(y.reshape(out_shape)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::reference::linear;
    use candle_core::{DType, Device, Var};

    /// Same values as `linear`; the input's gradient matches; the weight gets none and is not in
    /// the store at all.
    #[test]
    fn matches_linear_and_gives_only_the_input_gradient() {
        let dev = Device::Cpu;
        let x = Var::from_tensor(&Tensor::randn(0f64, 1.0, (2, 3, 5), &dev).unwrap()).unwrap();
        let w = Tensor::randn(0f64, 1.0, (4, 5), &dev).unwrap();
        let w_var = Var::from_tensor(&w).unwrap();
        let ours = frozen_linear(x.as_tensor(), w_var.as_tensor()).unwrap();
        let plain = linear(x.as_tensor(), &w).unwrap();
        assert_eq!(ours.dims(), &[2, 3, 4]);
        let diff = (&ours - &plain)
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f64>()
            .unwrap();
        assert!(diff < 1e-12, "forward differs by {diff}");

        // A non-uniform upstream gradient, so that a wrong transpose would show.
        let up = Tensor::randn(0f64, 1.0, (2, 3, 4), &dev).unwrap();
        let grads = (ours * &up).unwrap().sum_all().unwrap().backward().unwrap();
        let want = (plain * &up)
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap();
        let g = grads.get(x.as_tensor()).unwrap();
        let g_want = want.get(x.as_tensor()).unwrap();
        let diff = (g - g_want)
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f64>()
            .unwrap();
        assert!(diff < 1e-12, "input gradient differs by {diff}");
        assert!(grads.get(w_var.as_tensor()).is_none());
        // No weight-shaped gradient was computed for any tensor (the weight's detached copy
        // included): the store holds the input's and `up`'s only.
        for id in grads.get_ids() {
            assert_ne!(grads.get_id(*id).unwrap().dims(), &[4, 5]);
        }
        assert_eq!(grads.get_ids().count(), 2);
    }

    #[test]
    fn mismatched_shapes_and_dtypes_are_errors() {
        let dev = Device::Cpu;
        let x = Tensor::zeros((3, 5), DType::F32, &dev).unwrap();
        let err = frozen_linear(&x, &Tensor::zeros((4, 6), DType::F32, &dev).unwrap())
            .unwrap_err()
            .to_string();
        assert!(err.contains("5 features"), "{err}");
        let err = frozen_linear(&x, &Tensor::zeros((4, 5), DType::F64, &dev).unwrap())
            .unwrap_err()
            .to_string();
        assert!(err.contains("F64"), "{err}");
    }
}
