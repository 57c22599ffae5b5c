//! `x @ W^T` for a few rows of `x` (a decode step's batch), against a transposed copy of `W`.
//!
//! candle's matmul (the `gemm` crate) packs both operands into its own layout on every call.
//! For a decode step of the CPU preset's model (about 25 rows against `[384, 128]` weights)
//! packing the weight costs as much as the multiply-adds, and a decode step runs 43 of those
//! products. Here the weight is transposed once, when the inference model is built
//! (`[in, out]` in strips of [`LANES`] columns, `out` rounded up with zero columns), and each call runs
//! [`ROWS`] rows against [`LANES`] output columns at a time: every weight load serves
//! [`ROWS`] multiply-adds and each input element is broadcast straight from memory, with no
//! packing. The output columns are split among the threads in strips; a strip of the weight
//! (`in x LANES`) stays in cache while every row goes through it. f32 on the CPU; no backward
//! (sampling only).

use crate::error::{PolicyError, Result};
use crate::ops::raw::slice;
use crate::ops::simd::{madd, run_best, Kernel};
use candle_core::{CpuStorage, CustomOp1, DType, Layout, Shape, Tensor};
use rayon::prelude::*;

/// Rows computed together (each weight load serves this many multiply-adds).
const ROWS: usize = 4;
/// Output columns computed together: one 512-bit register of f32 (two 256-bit ones).
const LANES: usize = 16;
/// Inputs with more rows than this (a prefill) go through candle's matmul, which packs its
/// operands once for many rows.
pub const MAX_ROWS: usize = 64;
/// Nor do inputs with fewer rows than this: a single row would fill a block of [`ROWS`] with
/// zero rows (measured on SmolLM2-135M: batch-1 decode 7% slower here, batch 8 2.3x faster).
pub const MIN_ROWS: usize = 2;
/// Weights with more elements than this keep candle's matmul only: the transposed copy would
/// double a large model's memory, where its matmuls are dominated by the multiply-adds anyway.
pub const MAX_ELEMENTS: usize = 1 << 20;

/// Whether `rows` input rows go through [`SkinnyWeight::forward`].
pub fn serves(rows: usize) -> bool {
    (MIN_ROWS..=MAX_ROWS).contains(&rows)
}

/// A weight `W: [out, in]` transposed for [`SkinnyWeight::forward`].
pub struct SkinnyWeight {
    /// `W^T` in strips of [`LANES`] columns, each strip contiguous (`[strip][in][LANES]`;
    /// row-major `[in][out]` put a strip's rows a power of two apart, in one cache set),
    /// columns `out..` of the last strip zero.
    transposed: Vec<f32>,
    inner: usize,
    out: usize,
}

impl SkinnyWeight {
    /// The transposed copy of `w` (`[out, in]`), or `None` where it does not apply: another
    /// dtype or device, or more than [`MAX_ELEMENTS`] elements.
    pub fn new(w: &Tensor) -> Result<Option<Self>> {
        if !w.device().is_cpu() || w.dtype() != DType::F32 || w.elem_count() > MAX_ELEMENTS || w.rank() != 2 {
            return Ok(None);
        }
        let (out, inner) = w.dims2()?;
        let rows: Vec<f32> = w.flatten_all()?.to_vec1()?;
        let mut transposed = vec![0f32; out.div_ceil(LANES) * LANES * inner];
        for (o, row) in rows.chunks_exact(inner).enumerate() {
            let strip = &mut transposed[o / LANES * inner * LANES..][..inner * LANES];
            for (c, &x) in row.iter().enumerate() {
                strip[c * LANES + o % LANES] = x;
            }
        }
        Ok(Some(Self { transposed, inner, out }))
    }

    /// `x @ W^T` for `x: [rows, in]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (_, inner) = x.dims2()?;
        if inner != self.inner {
            return Err(PolicyError::Input(format!(
                "linear: input has {inner} features, weight expects {}",
                self.inner
            )));
        }
        Ok(x.contiguous()?.apply_op1_no_bwd(self)?)
    }

    /// `y[r][cols] = x[r] @ W^T[.., cols]` for the strips `strips` (of [`LANES`] columns), from
    /// `x` in blocks of [`ROWS`] rows interleaved (`[block][in][ROWS]`, see [`interleave`]);
    /// `y` holds those strips' columns only.
    fn strips(&self, x: &[f32], strips: std::ops::Range<usize>, y: &mut [f32]) {
        run_best(Strips { weight: self, x, strips, y })
    }

    #[inline(always)]
    fn strips_generic<const FMA: bool>(&self, x: &[f32], strips: std::ops::Range<usize>, y: &mut [f32]) {
        let inner = self.inner;
        let y_width = strips.len() * LANES;
        for (s, strip) in strips.enumerate() {
            let weights = &self.transposed[strip * inner * LANES..][..inner * LANES];
            for (block, x_block) in x.chunks_exact(ROWS * inner).enumerate() {
                let mut acc = [[0f32; LANES]; ROWS];
                for (xs, w) in x_block.chunks_exact(ROWS).zip(weights.chunks_exact(LANES)) {
                    let w: &[f32; LANES] = w.try_into().expect("LANES columns");
                    let xs: &[f32; ROWS] = xs.try_into().expect("ROWS rows");
                    for (acc, &xi) in acc.iter_mut().zip(xs) {
                        for (a, &wl) in acc.iter_mut().zip(w) {
                            *a = madd::<FMA>(xi, wl, *a);
                        }
                    }
                }
                for (i, acc) in acc.iter().enumerate() {
                    y[(block * ROWS + i) * y_width + s * LANES..][..LANES].copy_from_slice(acc);
                }
            }
        }
    }
}

/// `x: [rows, inner]` as blocks of `R` rows (the last one completed with zero rows), each
/// block column-major (`[inner][R]`), so one load gives the `R` inputs that multiply one
/// weight row (here) or one key dimension (the sampling attention's queries).
pub(crate) fn interleave<const R: usize>(x: &[f32], inner: usize) -> Vec<f32> {
    let blocks = (x.len() / inner).div_ceil(R);
    let mut out = vec![0f32; blocks * R * inner];
    for (r, row) in x.chunks_exact(inner).enumerate() {
        let block = &mut out[r / R * R * inner..][..R * inner];
        for (c, &v) in row.iter().enumerate() {
            block[c * R + r % R] = v;
        }
    }
    out
}

/// [`SkinnyWeight::strips`]'s arguments, as a [`Kernel`].
struct Strips<'a> {
    weight: &'a SkinnyWeight,
    x: &'a [f32],
    strips: std::ops::Range<usize>,
    y: &'a mut [f32],
}

impl Kernel for Strips<'_> {
    #[inline(always)]
    fn run<const FMA: bool>(self) {
        self.weight.strips_generic::<FMA>(self.x, self.strips, self.y)
    }
}

impl CustomOp1 for SkinnyWeight {
    fn name(&self) -> &'static str {
        "skinny-linear"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let x = slice::<f32>(storage, layout, "linear (x)")?;
        let rows = x.len() / self.inner;
        let blocks = rows.div_ceil(ROWS);
        let interleaved = interleave::<ROWS>(x, self.inner);
        let strips = self.out.div_ceil(LANES);
        let tasks = rayon::current_num_threads().min(strips).max(1);
        let parts: Vec<(std::ops::Range<usize>, Vec<f32>)> = (0..tasks)
            .into_par_iter()
            .map(|task| {
                let range = task * strips / tasks..(task + 1) * strips / tasks;
                let mut y = vec![0f32; blocks * ROWS * range.len() * LANES];
                self.strips(&interleaved, range.clone(), &mut y);
                (range, y)
            })
            .collect();
        let mut out = vec![0f32; rows * self.out];
        for (range, part) in parts {
            let first = range.start * LANES;
            let width = (range.end * LANES).min(self.out).saturating_sub(first);
            let part_width = range.len() * LANES;
            for (row, out_row) in out.chunks_exact_mut(self.out).enumerate() {
                out_row[first..][..width].copy_from_slice(&part[row * part_width..][..width]);
            }
        }
        Ok((CpuStorage::F32(out), Shape::from((rows, self.out))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    fn rand(shape: &[usize], seed: u64) -> Tensor {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let data: Vec<f32> = (0..shape.iter().product()).map(|_| rng.gen_range(-0.5f32..0.5)).collect();
        Tensor::from_vec(data, shape, &Device::Cpu).unwrap()
    }

    #[test]
    fn matches_candles_matmul_on_odd_shapes() {
        // Rows not a multiple of ROWS, outputs not a multiple of LANES, one strip or many.
        for (rows, out, inner) in [(1, 5, 3), (3, 16, 8), (5, 37, 24), (25, 384, 128), (64, 2048, 128), (7, 17, 1)] {
            let w = rand(&[out, inner], rows as u64 + 7);
            let x = rand(&[rows, inner], out as u64 + 3);
            let skinny = SkinnyWeight::new(&w).unwrap().expect("applies to f32 on the CPU");
            let got = skinny.forward(&x).unwrap();
            let want = x.matmul(&w.t().unwrap()).unwrap();
            assert_eq!(got.dims(), want.dims());
            let diff = (got - want).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
            assert!(diff < 1e-5, "{rows}x{inner} @ {out}: {diff}");
        }
    }

    #[test]
    fn declines_what_it_does_not_cover_and_checks_the_width() {
        assert!(SkinnyWeight::new(&rand(&[4, 4], 1).to_dtype(DType::F64).unwrap()).unwrap().is_none());
        assert!(SkinnyWeight::new(&rand(&[MAX_ELEMENTS + 1, 1], 1)).unwrap().is_none());
        let skinny = SkinnyWeight::new(&rand(&[8, 4], 1)).unwrap().unwrap();
        let err = skinny.forward(&rand(&[2, 5], 2)).unwrap_err().to_string();
        assert!(err.contains("5 features") && err.contains("expects 4"), "{err}");
    }
}
