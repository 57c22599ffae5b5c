//! The training graph's causal attention in f32 on the CPU, forward and backward, over the
//! causal triangle only.
//!
//! As matmuls ([`crate::ops::fused::causal_attention`]'s path for other dtypes) the attention
//! computes every query-key pair of the `[r * t, t]` square in all six of its products
//! (scores and probabilities x values forward; the value, probability, query and key
//! gradients backward), and the half above the diagonal is multiplied by zero. At the CPU
//! preset's shapes (head dimension 32, ~330 positions) the attention was a third of an
//! update's micro-batch. Here each product runs over the keys a query sees only, in the
//! register blocks of the sampling prefill ([`crate::ops::attention`]): [`QUERIES`] rows against
//! [`LANES`] keys (keys transposed, one load per dimension), or [`LANES`] columns of
//! [`QUERIES`] rows weighed together; the key and value gradients take [`QUERIES`] keys at a
//! time down the rows that see them.
//!
//! Layout: `blocks` independent (batch row, KV head) pairs, each with its `r` query heads'
//! `t` positions stacked, `q: [r * t, d]`, against `k, v: [t, d]`; row `i` is position
//! `i % t`. The forward keeps the probabilities for the backward, each row's visible part in
//! a buffer of row stride [`Dims::stride`] (zeros beyond).

use crate::ops::lanes::{exp_normalised, score_lanes, weigh_lanes, LANES, QUERIES};
use crate::ops::simd::{madd, run_best, Kernel};
use crate::ops::skinny::interleave;
use rayon::prelude::*;

/// The shape of one attention call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Dims {
    /// Independent (batch row, KV head) pairs.
    pub blocks: usize,
    /// Query heads per KV head.
    pub r: usize,
    /// Positions.
    pub t: usize,
    /// Head dimension.
    pub d: usize,
}

impl Dims {
    /// Whether these kernels serve the shape: the head dimension a whole number of
    /// [`LANES`] (32, 64 and 128 are), and something to compute.
    pub fn served(&self) -> bool {
        self.blocks > 0 && self.r > 0 && self.t > 0 && self.d > 0 && self.d % LANES == 0
    }
    fn rows(&self) -> usize {
        self.r * self.t
    }
    /// The row stride of the probabilities and score gradients: `t` rounded up to
    /// [`QUERIES`], so that the key-gradient pass reads [`QUERIES`] keys of a row at once.
    pub fn stride(&self) -> usize {
        self.t.div_ceil(QUERIES) * QUERIES
    }
    /// The row stride of transposed keys and of a block's score scratch: whole [`LANES`].
    fn width(&self) -> usize {
        self.t.div_ceil(LANES) * LANES
    }
    /// Block `b`'s rows of `q` (`[r * t, d]`) and of `k` and `v` (`[t, d]`).
    fn inputs_of<'a>(&self, b: usize, q: &'a [f32], k: &'a [f32], v: &'a [f32]) -> (&'a [f32], &'a [f32], &'a [f32]) {
        let (queries, keys) = (self.rows() * self.d, self.t * self.d);
        (&q[b * queries..][..queries], &k[b * keys..][..keys], &v[b * keys..][..keys])
    }
    /// The keys row `row` of a block sees.
    fn seen(&self, row: usize) -> usize {
        row % self.t + 1
    }
}

/// `softmax(scale * q k^T) v` under the causal mask, for every block: returns the output
/// (`[blocks, r * t, d]`) and the probabilities (`[blocks, r * t, stride]`).
pub(crate) fn forward(q: &[f32], k: &[f32], v: &[f32], dims: Dims, scale: f32) -> (Vec<f32>, Vec<f32>) {
    forward_by(q, k, v, dims, scale, |block: Forward<'_>| run_best(block))
}

/// [`forward`] with each block run by `run` (the tests run the portable copy).
fn forward_by(q: &[f32], k: &[f32], v: &[f32], dims: Dims, scale: f32, run: impl Fn(Forward<'_>) + Sync) -> (Vec<f32>, Vec<f32>) {
    let (rows, d, stride) = (dims.rows(), dims.d, dims.stride());
    let mut out = vec![0f32; dims.blocks * rows * d];
    let mut probs = vec![0f32; dims.blocks * rows * stride];
    out.par_chunks_mut(rows * d)
        .zip(probs.par_chunks_mut(rows * stride))
        .enumerate()
        .for_each(|(b, (out, probs))| {
            let (q, k, v) = dims.inputs_of(b, q, k, v);
            run(Forward {
                q,
                k,
                v,
                dims,
                scale,
                out,
                probs,
            })
        });
    (out, probs)
}

/// The gradients `(dq, dk, dv)` of [`forward`]'s output given its gradient `dout` and the
/// probabilities it returned.
pub(crate) fn backward(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    probs: &[f32],
    dout: &[f32],
    dims: Dims,
    scale: f32,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    backward_by(q, k, v, probs, dout, dims, scale, |block: Backward<'_>| run_best(block))
}

/// [`backward`] with each block run by `run`.
#[allow(clippy::too_many_arguments)]
fn backward_by(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    probs: &[f32],
    dout: &[f32],
    dims: Dims,
    scale: f32,
    run: impl Fn(Backward<'_>) + Sync,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let (rows, t, d, stride) = (dims.rows(), dims.t, dims.d, dims.stride());
    let mut dq = vec![0f32; dims.blocks * rows * d];
    let mut dk = vec![0f32; dims.blocks * t * d];
    let mut dv = vec![0f32; dims.blocks * t * d];
    dq.par_chunks_mut(rows * d)
        .zip(dk.par_chunks_mut(t * d).zip(dv.par_chunks_mut(t * d)))
        .enumerate()
        .for_each(|(b, (dq, (dk, dv)))| {
            let (q, k, v) = dims.inputs_of(b, q, k, v);
            run(Backward {
                q,
                k,
                v,
                probs: &probs[b * rows * stride..][..rows * stride],
                dout: &dout[b * rows * d..][..rows * d],
                dims,
                scale,
                dq,
                dk,
                dv,
            })
        });
    (dq, dk, dv)
}

/// `x: [t, d]` as `[d, width]`, zeros beyond column `t`.
fn transpose_padded(x: &[f32], dims: Dims) -> Vec<f32> {
    let (t, d, width) = (dims.t, dims.d, dims.width());
    let mut out = vec![0f32; d * width];
    for (j, row) in x.chunks_exact(d).take(t).enumerate() {
        for (c, &value) in row.iter().enumerate() {
            out[c * width + j] = value;
        }
    }
    out
}

/// Rows `row..row + QUERIES` of a block (fewer at its end): how many are rows, the keys each
/// sees (0 for none), and the most any sees.
fn row_block(dims: Dims, row: usize) -> (usize, [usize; QUERIES], usize) {
    let n = QUERIES.min(dims.rows() - row);
    let seen = std::array::from_fn(|i| if i < n { dims.seen(row + i) } else { 0 });
    let most = seen.iter().copied().max().unwrap_or(0);
    (n, seen, most)
}

/// `scores[i][j] = x_(row + i) . y_j` for the block's rows `row..row + n` of `x: [rows, d]`
/// and the first `most` columns of `y_t: [d, width]`.
#[inline(always)]
fn score_rows<const FMA: bool>(x: &[f32], row: usize, n: usize, most: usize, y_t: &[f32], dims: Dims, scores: &mut [f32]) {
    let (d, width) = (dims.d, dims.width());
    let mut block = vec![0f32; QUERIES * d];
    block[..n * d].copy_from_slice(&x[row * d..][..n * d]);
    let by_dim = interleave::<QUERIES>(&block, d);
    for start in (0..most).step_by(LANES) {
        score_lanes::<FMA>(&by_dim, &y_t[start..], width, scores, width, start, LANES);
    }
}

/// `out[row + i] = sum_j scores[i][j] * y_j` over the first `most` rows of `y: [t, d]`, for the
/// block's `n` rows.
#[inline(always)]
fn weigh_rows<const FMA: bool>(scores: &[f32], most: usize, y: &[f32], dims: Dims, row: usize, n: usize, out: &mut [f32]) {
    let (d, width) = (dims.d, dims.width());
    for column in (0..d).step_by(LANES) {
        let acc = weigh_lanes::<FMA>(scores, width, most, y, d, column);
        for (i, acc) in acc.iter().enumerate().take(n) {
            out[(row + i) * d + column..][..LANES].copy_from_slice(acc);
        }
    }
}

/// One block's forward.
struct Forward<'a> {
    q: &'a [f32],
    k: &'a [f32],
    v: &'a [f32],
    dims: Dims,
    scale: f32,
    out: &'a mut [f32],
    probs: &'a mut [f32],
}

impl Kernel for Forward<'_> {
    #[inline(always)]
    fn run<const FMA: bool>(self) {
        let Forward { q, k, v, dims, scale, out, probs } = self;
        let (width, stride) = (dims.width(), dims.stride());
        let keys_t = transpose_padded(k, dims);
        let mut scores = vec![0f32; QUERIES * width];
        for row in (0..dims.rows()).step_by(QUERIES) {
            let (n, seen, most) = row_block(dims, row);
            score_rows::<FMA>(q, row, n, most, &keys_t, dims, &mut scores);
            for (i, &seen) in seen.iter().enumerate() {
                let s = &mut scores[i * width..][..most];
                if seen > 0 {
                    let visible = &mut s[..seen];
                    let inv = 1.0 / exp_normalised(visible, scale);
                    visible.iter_mut().for_each(|p| *p *= inv);
                    probs[(row + i) * stride..][..seen].copy_from_slice(visible);
                }
                // Keys a row does not see, and rows past the block's end, weigh nothing.
                s[seen..].fill(0.0);
            }
            weigh_rows::<FMA>(&scores, most, v, dims, row, n, out);
        }
    }
}

/// One block's backward.
struct Backward<'a> {
    q: &'a [f32],
    k: &'a [f32],
    v: &'a [f32],
    probs: &'a [f32],
    dout: &'a [f32],
    dims: Dims,
    scale: f32,
    dq: &'a mut [f32],
    dk: &'a mut [f32],
    dv: &'a mut [f32],
}

impl Kernel for Backward<'_> {
    #[inline(always)]
    fn run<const FMA: bool>(self) {
        let Backward { q, k, v, probs, dout, dims, scale, dq, dk, dv } = self;
        let (width, stride, d) = (dims.width(), dims.stride(), dims.d);
        let values_t = transpose_padded(v, dims);
        // Score gradients, `scale * p * (dp - sum_j p_j dp_j)` with `dp = dout v^T`, kept for
        // the key gradients.
        let mut dscores = vec![0f32; dims.rows() * stride];
        let mut scratch = vec![0f32; QUERIES * width];
        for row in (0..dims.rows()).step_by(QUERIES) {
            let (n, seen, most) = row_block(dims, row);
            score_rows::<FMA>(dout, row, n, most, &values_t, dims, &mut scratch);
            for (i, &seen) in seen.iter().enumerate() {
                let s = &mut scratch[i * width..][..most];
                if seen > 0 {
                    let p = &probs[(row + i) * stride..][..seen];
                    let dp = &mut s[..seen];
                    let dot = dot_f64(p, dp);
                    for (g, &p) in dp.iter_mut().zip(p) {
                        *g = scale * p * (*g - dot);
                    }
                    dscores[(row + i) * stride..][..seen].copy_from_slice(dp);
                }
                s[seen..].fill(0.0);
            }
            weigh_rows::<FMA>(&scratch, most, k, dims, row, n, dq);
        }
        for key in (0..dims.t).step_by(QUERIES) {
            let n = QUERIES.min(dims.t - key);
            for column in (0..d).step_by(LANES) {
                let grad_k = weigh_columns::<FMA>(&dscores, q, dims, key, column);
                let grad_v = weigh_columns::<FMA>(probs, dout, dims, key, column);
                for i in 0..n {
                    dk[(key + i) * d + column..][..LANES].copy_from_slice(&grad_k[i]);
                    dv[(key + i) * d + column..][..LANES].copy_from_slice(&grad_v[i]);
                }
            }
        }
    }
}

/// `sum_i s[i][key + j] * x[i][column..column + LANES]` for the [`QUERIES`] keys `key + j`,
/// over the rows that see key `key` (positions `key..t` of every query head; the rows that
/// do not see `key + j` hold 0 there).
#[inline(always)]
fn weigh_columns<const FMA: bool>(s: &[f32], x: &[f32], dims: Dims, key: usize, column: usize) -> [[f32; LANES]; QUERIES] {
    let (t, d, stride) = (dims.t, dims.d, dims.stride());
    let mut acc = [[0f32; LANES]; QUERIES];
    for head in 0..dims.r {
        for i in head * t + key..(head + 1) * t {
            let weights: &[f32; QUERIES] = s[i * stride + key..][..QUERIES].try_into().expect("QUERIES keys");
            let xs: &[f32; LANES] = x[i * d + column..][..LANES].try_into().expect("LANES columns");
            for (acc, &w) in acc.iter_mut().zip(weights) {
                for (a, &x) in acc.iter_mut().zip(xs) {
                    *a = madd::<FMA>(w, x, *a);
                }
            }
        }
    }
    acc
}

/// `a . b` summed in f64 (as the matmul path's softmax gradient sums).
#[inline(always)]
fn dot_f64(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f64; 8];
    let (a_chunks, b_chunks) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f64 = a_chunks.remainder().iter().zip(b_chunks.remainder()).map(|(&x, &y)| x as f64 * y as f64).sum();
    for (a, b) in a_chunks.zip(b_chunks) {
        for ((l, &x), &y) in lanes.iter_mut().zip(a).zip(b) {
            *l += x as f64 * y as f64;
        }
    }
    (lanes.iter().sum::<f64>() + tail) as f32
}


#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn seeded(n: usize, seed: u64) -> Vec<f32> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        (0..n).map(|_| rng.gen_range(-2.0..2.0)).collect()
    }

    fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
    }

    /// The copy this CPU dispatches to (tested against the matmul path in `fused`) and the
    /// portable copy without fused multiply-adds (what a CPU without AVX2 runs) agree to
    /// rounding, forward and backward.
    #[test]
    fn portable_and_dispatched_copies_agree() {
        let dims = Dims { blocks: 3, r: 2, t: 23, d: 32 };
        let (rows, kv) = (dims.blocks * dims.rows() * dims.d, dims.blocks * dims.t * dims.d);
        let (q, k, v, dout) = (seeded(rows, 1), seeded(kv, 2), seeded(kv, 3), seeded(rows, 4));
        let (out, probs) = forward(&q, &k, &v, dims, 0.3);
        let (out_p, probs_p) = forward_by(&q, &k, &v, dims, 0.3, |block: Forward<'_>| block.run::<false>());
        assert!(max_abs_diff(&out, &out_p) < 1e-5 && max_abs_diff(&probs, &probs_p) < 1e-6);
        let grads = backward(&q, &k, &v, &probs, &dout, dims, 0.3);
        let grads_p = backward_by(&q, &k, &v, &probs, &dout, dims, 0.3, |block: Backward<'_>| block.run::<false>());
        for (a, b) in [(&grads.0, &grads_p.0), (&grads.1, &grads_p.1), (&grads.2, &grads_p.2)] {
            let size = b.iter().fold(0f32, |m, x| m.max(x.abs()));
            assert!(size > 0.1 && max_abs_diff(a, b) < 1e-5 * size, "{} of {size}", max_abs_diff(a, b));
        }
        // Past each row's last key the probabilities are 0 (the key gradients read them).
        for (i, row) in probs.chunks_exact(dims.stride()).enumerate() {
            assert!(row[dims.seen(i % dims.rows())..].iter().all(|&p| p == 0.0), "row {i}");
        }
    }
}
