//! The lane kernels the attention ops share (scores of a block of queries against 16 keys at
//! a time, the weighted sum of 16 value columns, a row's exp and normalisation), the keys a
//! query of a padded, cached row may see, and the f32 slices of an attention op's inputs.

use candle_core::{CpuStorage, Layout};

use crate::ops::raw::{max_scaled, slice, sum_slice_f64};
use crate::ops::simd::madd;

/// Queries scored together: each key vector loaded is used this many times.
pub(crate) const QUERIES: usize = 4;
/// Keys scored together, and value columns weighed together: one 512-bit register of f32
/// (two 256-bit ones).
pub(crate) const LANES: usize = 16;

/// `sum_j scores[i][j] * values[j * stride + column..][..LANES]` over the first `keys` rows
/// of `values`, for each query `i` of the block.
#[inline(always)]
pub(crate) fn weigh_lanes<const FMA: bool>(
    scores: &[f32],
    width: usize,
    keys: usize,
    values: &[f32],
    stride: usize,
    column: usize,
) -> [[f32; LANES]; QUERIES] {
    let mut acc = [[0f32; LANES]; QUERIES];
    // Each query's scores cut to `keys`, so that indexing them needs no check.
    let rows: [&[f32]; QUERIES] = std::array::from_fn(|i| &scores[i * width..][..keys]);
    for j in 0..keys {
        let value: &[f32; LANES] = values[j * stride + column..][..LANES].try_into().expect("LANES values");
        for (i, acc) in acc.iter_mut().enumerate() {
            let p = rows[i][j];
            for (a, &x) in acc.iter_mut().zip(value) {
                *a = madd::<FMA>(p, x, *a);
            }
        }
    }
    acc
}

/// [`weigh_lanes`] for the last `lanes` (< `LANES`) value columns.
#[inline(always)]
pub(crate) fn weigh_few<const FMA: bool>(
    scores: &[f32],
    width: usize,
    keys: usize,
    values: &[f32],
    stride: usize,
    column: usize,
    lanes: usize,
) -> [[f32; LANES]; QUERIES] {
    let mut acc = [[0f32; LANES]; QUERIES];
    // Each query's scores cut to `keys`, so that indexing them needs no check.
    let rows: [&[f32]; QUERIES] = std::array::from_fn(|i| &scores[i * width..][..keys]);
    for j in 0..keys {
        let value = &values[j * stride + column..][..lanes];
        for (i, acc) in acc.iter_mut().enumerate() {
            let p = rows[i][j];
            for (a, &x) in acc.iter_mut().zip(value) {
                *a = madd::<FMA>(p, x, *a);
            }
        }
    }
    acc
}

/// `scores[i][start..start + count]`: the scores of the `QUERIES` queries of `by_dim`
/// (`[d][QUERIES]`) against `LANES` keys whose dimension `c` is `keys[c * stride..][..LANES]`
/// (the first `count` of them are kept).
#[inline(always)]
pub(crate) fn score_lanes<const FMA: bool>(
    by_dim: &[f32],
    keys: &[f32],
    stride: usize,
    scores: &mut [f32],
    width: usize,
    start: usize,
    count: usize,
) {
    let mut acc = [[0f32; LANES]; QUERIES];
    for (c, xs) in by_dim.chunks_exact(QUERIES).enumerate() {
        let key: &[f32; LANES] = keys[c * stride..][..LANES].try_into().expect("LANES keys");
        let xs: &[f32; QUERIES] = xs.try_into().expect("QUERIES queries");
        for (acc, &x) in acc.iter_mut().zip(xs) {
            for (a, &k) in acc.iter_mut().zip(key) {
                *a = madd::<FMA>(x, k, *a);
            }
        }
    }
    for (i, acc) in acc.iter().enumerate() {
        scores[i * width + start..][..count].copy_from_slice(&acc[..count]);
    }
}

/// `a . b`, in `LANES` lanes (so the compiler vectorises it) summed at the end.
#[inline(always)]
pub(crate) fn dot<const FMA: bool>(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; LANES];
    let (a_blocks, b_blocks) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f32 = a_blocks.remainder().iter().zip(b_blocks.remainder()).map(|(&x, &y)| x * y).sum();
    for (a, b) in a_blocks.zip(b_blocks) {
        for ((l, &x), &y) in lanes.iter_mut().zip(a).zip(b) {
            *l = madd::<FMA>(x, y, *l);
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// `s = exp(scale * s - max)`, returning the sum (the softmax's denominator).
#[inline(always)]
pub(crate) fn exp_normalised(s: &mut [f32], scale: f32) -> f32 {
    let m = max_scaled(s, scale);
    for x in s.iter_mut() {
        *x = *x * scale - m;
    }
    crate::ops::vexp::exp_in_place(s);
    sum_slice_f64(s)
}

/// The keys `lo..hi` query `q` (of `t` new queries against `total` keys) of a row with `pad`
/// padding columns sees: its own position and those before it, padding excluded; a padding
/// query sees only itself (which keeps it finite).
pub(crate) fn visible_keys(q: usize, t: usize, total: usize, pad: usize) -> (usize, usize) {
    let at = total - t + q;
    if at < pad {
        (at, at + 1)
    } else {
        (pad, at + 1)
    }
}

/// The contiguous f32 element slices of an attention op's `q`, `k` and `v`.
pub(crate) fn attention_inputs<'a>(
    q: (&'a CpuStorage, &Layout),
    k: (&'a CpuStorage, &Layout),
    v: (&'a CpuStorage, &Layout),
) -> candle_core::Result<(&'a [f32], &'a [f32], &'a [f32])> {
    Ok((slice(q.0, q.1, "attention (q)")?, slice(k.0, k.1, "attention (k)")?, slice(v.0, v.1, "attention (v)")?))
}
