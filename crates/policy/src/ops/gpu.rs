//! The GPU's row softmax kernels (src/ops/kernels.cu, f32): the attention's masked softmax,
//! whose mask is computed from the row's index instead of read from a mask tensor, and its
//! backward. Built from candle's ops each is several passes over the `[.., rows, keys]`
//! scores (scale, add a mask, the softmax; multiply, sum, subtract, multiply, scale); each
//! kernel here is one. Forward only (no graph): [`crate::ops::fused::causal_attention`] puts
//! them into its one node, and the sampling path needs no gradient.
//!
//! Beside them, the optimizer's kernels: AdamW in place, gradient accumulation in place and
//! the f64 sum of squares of the gradient norm, one pass each.
//!
//! They run only in a build with the `cuda` feature, on f32 tensors of a CUDA device
//! ([`serves`]); the CPU runs `crate::ops::fused`'s kernels. On a GPU, `rlvmr bench-policy`'s
//! `check` phase holds the log-probs and gradients they give to the CPU's.

use crate::error::{PolicyError, Result};
use candle_core::{CpuStorage, CustomOp1, CustomOp2, DType, Layout, Shape, Tensor};

/// Whether the kernels serve `x`: f32 on a CUDA device, in a build with the `cuda` feature.
pub fn serves(x: &Tensor) -> bool {
    cfg!(feature = "cuda") && x.device().is_cuda() && x.dtype() == DType::F32
}

/// `softmax(scale * x)` over the keys each query sees, for scores `x: [b, .., t-query rows,
/// width]` whose rows are the `t` newest positions of each batch row (repeated per head): query
/// `q` (row `% t`) sees keys up to `width - t + q`, after the `pads[b]` padding keys of its
/// batch row (`pads`: none, or one per batch row). 0 for the keys it does not see. The
/// training attention's causal mask is `t = width`, no pads.
pub fn masked_softmax(x: &Tensor, scale: f64, t: usize, pads: Option<&[usize]>) -> Result<Tensor> {
    let dims = x.dims();
    let (b, rows, width) = (dims[0], x.elem_count() / x.dim(candle_core::D::Minus1)?, x.dim(candle_core::D::Minus1)?);
    if !serves(x) || t == 0 || t > width || rows % t != 0 || pads.is_some_and(|p| p.len() != b) {
        return Err(PolicyError::Input(format!(
            "masked_softmax: scores {dims:?} ({:?} on {:?}) for {t} queries and pads {pads:?}",
            x.dtype(),
            x.device().location()
        )));
    }
    let op = MaskedSoftmax {
        scale: scale as f32,
        t,
        rows_per_batch: rows / b,
        pads: pads.map(|p| p.iter().map(|&p| p as u32).collect()),
    };
    Ok(x.contiguous()?.apply_op1_no_bwd(&op)?)
}

/// The gradient of `softmax(scale * x)` with respect to `x` from its output `y` and the
/// gradient `g` that reached it, `scale * y * (g - sum(y * g))` over the last dimension.
pub fn softmax_backward(y: &Tensor, g: &Tensor, scale: f64) -> Result<Tensor> {
    if !serves(y) || y.dims() != g.dims() || g.dtype() != DType::F32 {
        return Err(PolicyError::Input(format!("softmax_backward: y {:?}, g {:?}", y.dims(), g.dims())));
    }
    Ok(y.contiguous()?.apply_op2_no_bwd(&g.contiguous()?, &SoftmaxBackward { scale: scale as f32 })?)
}

/// Checks that `tensors` are contiguous f32 on a CUDA device with the same number of
/// elements, which it returns; the error names `op` and what was wrong.
fn flat_operands(op: &str, tensors: &[(&str, &Tensor)]) -> Result<usize> {
    let n = tensors[0].1.elem_count();
    for (name, x) in tensors {
        if !serves(x) || !x.is_contiguous() || x.elem_count() != n {
            return Err(PolicyError::Input(format!(
                "{op}: {name} {:?} ({:?} on {:?}, contiguous: {}) beside {n} elements",
                x.dims(),
                x.dtype(),
                x.device().location(),
                x.is_contiguous()
            )));
        }
    }
    Ok(n)
}

/// AdamW's update of one f32 parameter in place, as the CPU's fused loop: `p` (the
/// parameter), `m` and `v` (its moments) are written, `g` is read. `k`: `1 - lr * wd`, `b1`,
/// `b2`, `1 - b1`, `1 - b2`, `1 / sqrt(1 - b2^t)`, `eps`, `lr / (1 - b1^t)`.
pub fn adamw_in_place(p: &Tensor, m: &Tensor, v: &Tensor, g: &Tensor, k: [f32; 8]) -> Result<()> {
    flat_operands("adamw_in_place", &[("parameter", p), ("exp_avg", m), ("exp_avg_sq", v), ("gradient", g)])?;
    #[cfg(feature = "cuda")]
    return Ok(cuda::adamw(p, m, v, g, k)?);
    #[cfg(not(feature = "cuda"))]
    Err(PolicyError::Input(format!("adamw_in_place: a GPU kernel ({k:?})")))
}

/// `dst += src` in place (the same number of f32 elements, both contiguous).
pub fn add_assign(dst: &Tensor, src: &Tensor) -> Result<()> {
    flat_operands("add_assign", &[("dst", dst), ("src", src)])?;
    #[cfg(feature = "cuda")]
    return Ok(cuda::add_assign(dst, src)?);
    #[cfg(not(feature = "cuda"))]
    Err(PolicyError::Input("add_assign: a GPU kernel".into()))
}

/// The sum of `x`'s squares in f64: per-block partial sums on the GPU, added in order on the
/// host (the same value every run).
pub fn sum_of_squares(x: &Tensor) -> Result<f64> {
    flat_operands("sum_of_squares", &[("x", x)])?;
    #[cfg(feature = "cuda")]
    return Ok(cuda::sum_of_squares(x)?);
    #[cfg(not(feature = "cuda"))]
    Err(PolicyError::Input("sum_of_squares: a GPU kernel".into()))
}

// The fields are read by the CUDA launches alone.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
struct MaskedSoftmax {
    scale: f32,
    t: usize,
    rows_per_batch: usize,
    pads: Option<Vec<u32>>,
}

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
struct SoftmaxBackward {
    scale: f32,
}

fn gpu_only(op: &str) -> candle_core::Error {
    candle_core::Error::Msg(format!("{op}: a GPU kernel, called on the CPU"))
}

impl CustomOp1 for MaskedSoftmax {
    fn name(&self) -> &'static str {
        "policy-gpu-masked-softmax"
    }
    fn cpu_fwd(&self, _: &CpuStorage, _: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        Err(gpu_only(self.name()))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s: &candle_core::CudaStorage, l: &Layout) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        cuda::masked_softmax(self, s, l)
    }
}

impl CustomOp2 for SoftmaxBackward {
    fn name(&self) -> &'static str {
        "policy-gpu-softmax-backward"
    }
    fn cpu_fwd(&self, _: &CpuStorage, _: &Layout, _: &CpuStorage, _: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        Err(gpu_only(self.name()))
    }
    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        y: &candle_core::CudaStorage,
        yl: &Layout,
        g: &candle_core::CudaStorage,
        gl: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        cuda::softmax_backward(self.scale, y, yl, g, gl)
    }
}

#[cfg(feature = "cuda")]
mod cuda {
    use super::MaskedSoftmax;
    use candle_core::cuda_backend::cudarc::driver::{CudaView, LaunchConfig, PushKernelArg};
    use candle_core::cuda_backend::{CudaDType, WrapErr};
    use candle_core::{CudaStorage, Layout, Shape, Tensor};

    const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/kernels.ptx"));
    const MODULE: &str = "policy-kernels";
    /// Threads per row: 8 warps, several keys each at a thousand keys.
    const THREADS: u32 = 256;

    /// The contiguous f32 elements of a storage under its layout.
    fn view<'a>(s: &'a CudaStorage, l: &Layout) -> candle_core::Result<CudaView<'a, f32>> {
        let (start, end) = l
            .contiguous_offsets()
            .ok_or_else(|| candle_core::Error::Msg("GPU softmax: the input is not contiguous".into()))?;
        Ok(s.as_cuda_slice::<f32>()?.slice(start..end))
    }

    fn rows_of(l: &Layout) -> candle_core::Result<(u32, i32)> {
        let width = *l.dims().last().ok_or_else(|| candle_core::Error::Msg("GPU softmax: a scalar".into()))?;
        if width == 0 || width > i32::MAX as usize {
            candle_core::bail!("GPU softmax: rows of {width} elements");
        }
        let rows = l.shape().elem_count() / width;
        let rows = u32::try_from(rows).map_err(|_| candle_core::Error::Msg(format!("GPU softmax: {rows} rows")))?;
        Ok((rows, width as i32))
    }

    fn launch_config(rows: u32) -> LaunchConfig {
        LaunchConfig { grid_dim: (rows, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 }
    }

    pub(super) fn masked_softmax(op: &MaskedSoftmax, s: &CudaStorage, l: &Layout) -> candle_core::Result<(CudaStorage, Shape)> {
        let dev = &s.device;
        let x = view(s, l)?;
        let (rows, width) = rows_of(l)?;
        // A one-element buffer stands for "no padding", so the kernel never gets a null pointer.
        let pads = dev.clone_htod(op.pads.as_deref().unwrap_or(&[0]))?;
        let y = unsafe { dev.alloc::<f32>(l.shape().elem_count())? };
        let (t, per_batch, has_pads) = (op.t as i32, op.rows_per_batch as i32, op.pads.is_some() as i32);
        let func = dev.get_or_load_custom_func("masked_softmax_f32", MODULE, PTX)?;
        let mut args = func.builder();
        args.arg(&x).arg(&y).arg(&width).arg(&t).arg(&per_batch).arg(&pads).arg(&has_pads).arg(&op.scale);
        // SAFETY: the arguments match the kernel's parameters, and `y` holds one value per input.
        unsafe { args.launch(launch_config(rows)) }.w()?;
        Ok((f32::wrap_cuda_slice(y, dev.clone()), l.shape().clone()))
    }

    /// Blocks of a grid-stride pass over `n` elements: enough to fill the GPU, no more.
    fn flat_config(n: usize) -> LaunchConfig {
        let blocks = n.div_ceil(THREADS as usize).clamp(1, 1024) as u32;
        LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 }
    }

    /// The CUDA storage behind a read guard.
    fn cuda_of<'a>(s: &'a candle_core::Storage) -> candle_core::Result<&'a CudaStorage> {
        match s {
            candle_core::Storage::Cuda(c) => Ok(c),
            _ => candle_core::bail!("a GPU kernel's operand is not on the GPU"),
        }
    }

    // The in-place kernels write through views taken under read guards: the GPU's memory is
    // not Rust's, candle runs one stream per device (so launches keep their order), and the
    // callers own the tensors written (an optimizer's parameter and moments, an
    // accumulator's sum).

    pub(super) fn adamw(p: &Tensor, m: &Tensor, v: &Tensor, g: &Tensor, k: [f32; 8]) -> candle_core::Result<()> {
        let ((ps, pl), (ms, ml), (vs, vl), (gs, gl)) =
            (p.storage_and_layout(), m.storage_and_layout(), v.storage_and_layout(), g.storage_and_layout());
        let pc = cuda_of(&ps)?;
        let (pv, mv, vv, gv) = (view(pc, pl)?, view(cuda_of(&ms)?, ml)?, view(cuda_of(&vs)?, vl)?, view(cuda_of(&gs)?, gl)?);
        let n = pl.shape().elem_count();
        let n64 = n as i64;
        let func = pc.device.get_or_load_custom_func("adamw_f32", MODULE, PTX)?;
        let mut args = func.builder();
        args.arg(&pv).arg(&mv).arg(&vv).arg(&gv).arg(&n64);
        for x in &k {
            args.arg(x);
        }
        // SAFETY: the arguments match the kernel's parameters; the four views hold n elements.
        unsafe { args.launch(flat_config(n)) }.w()?;
        Ok(())
    }

    pub(super) fn add_assign(dst: &Tensor, src: &Tensor) -> candle_core::Result<()> {
        let ((ds, dl), (ss, sl)) = (dst.storage_and_layout(), src.storage_and_layout());
        let dc = cuda_of(&ds)?;
        let (dv, sv) = (view(dc, dl)?, view(cuda_of(&ss)?, sl)?);
        let n = dl.shape().elem_count();
        let n64 = n as i64;
        let func = dc.device.get_or_load_custom_func("add_assign_f32", MODULE, PTX)?;
        let mut args = func.builder();
        args.arg(&dv).arg(&sv).arg(&n64);
        // SAFETY: as above; both views hold n elements.
        unsafe { args.launch(flat_config(n)) }.w()?;
        Ok(())
    }

    pub(super) fn sum_of_squares(x: &Tensor) -> candle_core::Result<f64> {
        let (xs, xl) = x.storage_and_layout();
        let xc = cuda_of(&xs)?;
        let xv = view(xc, xl)?;
        let n = xl.shape().elem_count();
        let (n64, config) = (n as i64, flat_config(n));
        let partial = unsafe { xc.device.alloc::<f64>(config.grid_dim.0 as usize)? };
        let func = xc.device.get_or_load_custom_func("sum_squares_f32", MODULE, PTX)?;
        let mut args = func.builder();
        args.arg(&xv).arg(&n64).arg(&partial);
        // SAFETY: as above; `partial` holds one value per block.
        unsafe { args.launch(config) }.w()?;
        Ok(xc.device.clone_dtoh(&partial)?.iter().sum())
    }

    pub(super) fn softmax_backward(
        scale: f32,
        y: &CudaStorage,
        yl: &Layout,
        g: &CudaStorage,
        gl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let dev = &y.device;
        let (yv, gv) = (view(y, yl)?, view(g, gl)?);
        let (rows, width) = rows_of(yl)?;
        let dx = unsafe { dev.alloc::<f32>(yl.shape().elem_count())? };
        let func = dev.get_or_load_custom_func("softmax_backward_f32", MODULE, PTX)?;
        let mut args = func.builder();
        args.arg(&yv).arg(&gv).arg(&dx).arg(&width).arg(&scale);
        // SAFETY: as above.
        unsafe { args.launch(launch_config(rows)) }.w()?;
        Ok((f32::wrap_cuda_slice(dx, dev.clone()), yl.shape().clone()))
    }
}
