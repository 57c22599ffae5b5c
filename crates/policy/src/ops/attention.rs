//! Attention of the KV-cached sampling path, fused: prefill of prompts packed without padding
//! ([`packed_causal_attention`]) and decode steps against the cache ([`cached_attention`]).
//!
//! The sampling path computed `softmax(q k^T) v` as two batched matmuls around
//! [`crate::ops::fused::padded_causal_softmax`]: the score tensor `[b, heads, t, total]` held every
//! query-key pair, those that get probability 0 (later positions, left padding) included, and
//! went through memory three times. At 460-token prompts about half of those multiply-adds are
//! masked ones, more with padding. Here each (prompt, head) is one task: the scores of
//! [`QUERIES`] queries are computed against [`LANES`] keys at a time (prefill; the keys come
//! transposed, `[d, n]`, so a block of keys is one contiguous load per dimension) or by dot
//! products (decode, against the cache's keys row by row), exponentiated with
//! [`crate::ops::vexp`], and the probabilities multiplied into [`LANES`] value columns at a time
//! (register blocks the compiler vectorises); the softmax's division is applied to the
//! output row. No score tensor, no masked pair computed beyond the last block. f32 on the
//! CPU; other dtypes and devices take the matmul path. No backward: sampling only.

use crate::error::{PolicyError, Result};
use crate::ops::lanes::{attention_inputs, dot, exp_normalised, score_lanes, visible_keys, weigh_few, weigh_lanes, LANES, QUERIES};
use crate::ops::raw::slice;
use crate::ops::simd::{run_best, Kernel};
use candle_core::{CpuStorage, CustomOp3, DType, Device, Layout, Shape, Tensor};
use rayon::prelude::*;

/// `softmax(scale * q k^T) v` over the keys each query may see, for `q: [b, g, r * t, d]`
/// (`t` new queries of each of the `r` query heads sharing KV head `g`, stacked), and the keys
/// and values `k, v: [b, g, total, d]` (cached keys first, then the `t` new ones); `pads[i]`
/// padding columns start row `i`. Query `q` of a head sees keys `pads[i]..=total - t + q`; a
/// padding query sees only its own key (its output is that key's value, finite and unused).
/// Returns `[b, g, r * t, d]`. Made for decode steps (few queries against the cache).
pub fn cached_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    scale: f64,
    t: usize,
    pads: &[usize],
) -> Result<Tensor> {
    let (b, g, rows, d) = q.dims4()?;
    let (kb, kg, total, kd) = k.dims4()?;
    let shapes_agree = b == pads.len() && (kb, kg, kd) == (b, g, d) && v.dims() == k.dims();
    if !shapes_agree || t == 0 || rows % t != 0 || total < t {
        return Err(PolicyError::Input(format!(
            "cached_attention: q {:?}, k {:?}, v {:?} for {} rows of {t} queries",
            q.dims(),
            k.dims(),
            v.dims(),
            pads.len()
        )));
    }
    if !fused(q.device(), q.dtype()) {
        return matmul_attention(q, k, v, scale, t, pads);
    }
    let op = CachedAttention { scale: scale as f32, t, pads: pads.to_vec() };
    Ok(q.contiguous()?.apply_op3_no_bwd(&by_head(k)?, &by_head(v)?, &op)?)
}

/// Whether the fused kernels serve tensors of `dtype` on `device` (f32 on the CPU).
pub fn fused(device: &Device, dtype: DType) -> bool {
    device.is_cpu() && dtype == DType::F32
}

/// Causal attention of prompts packed one after another without padding: `q: [1, heads, n,
/// d]`, the keys transposed, `k_t: [1, g, d, n]`, and the values `v: [1, g, n, d]`, where
/// prompt `i` holds the `lens[i]` positions after the prompts before it and attends to its
/// own positions only (query head `h` uses KV head `h / (heads / g)`). Returns
/// `[1, heads, n, d]`.
pub fn packed_causal_attention(q: &Tensor, k_t: &Tensor, v: &Tensor, scale: f64, lens: &[usize]) -> Result<Tensor> {
    let (one, heads, n, d) = q.dims4()?;
    let (_, g, _, _) = k_t.dims4()?;
    let shapes_agree = one == 1 && g > 0 && heads % g == 0 && k_t.dims() == [1, g, d, n] && v.dims() == [1, g, n, d];
    if !shapes_agree || lens.contains(&0) || lens.iter().sum::<usize>() != n {
        return Err(PolicyError::Input(format!(
            "packed_causal_attention: q {:?}, k_t {:?}, v {:?} for prompts of {lens:?} tokens",
            q.dims(),
            k_t.dims(),
            v.dims()
        )));
    }
    if !fused(q.device(), q.dtype()) {
        return packed_matmul_attention(q, k_t, v, scale, lens);
    }
    let op = PackedAttention { scale: scale as f32, lens: lens.to_vec() };
    Ok(q.contiguous()?.apply_op3_no_bwd(&k_t.contiguous()?, &v.contiguous()?, &op)?)
}

/// [`packed_causal_attention`] one prompt at a time with [`matmul_attention`] (the reference,
/// and the path of other dtypes and devices).
pub fn packed_matmul_attention(q: &Tensor, k_t: &Tensor, v: &Tensor, scale: f64, lens: &[usize]) -> Result<Tensor> {
    let (_, heads, _, d) = q.dims4()?;
    let g = k_t.dim(1)?;
    let mut outs = Vec::with_capacity(lens.len());
    let mut start = 0;
    for &len in lens {
        let q = q.narrow(2, start, len)?.contiguous()?.reshape((1, g, heads / g * len, d))?;
        let k = k_t.narrow(3, start, len)?.transpose(2, 3)?;
        let out = matmul_attention(&q, &k, &v.narrow(2, start, len)?, scale, len, &[0])?;
        outs.push(out.reshape((1, heads, len, d))?);
        start += len;
    }
    Ok(Tensor::cat(&outs, 2)?)
}

struct PackedAttention {
    scale: f32,
    lens: Vec<usize>,
}

impl CustomOp3 for PackedAttention {
    fn name(&self) -> &'static str {
        "policy-packed-attention"
    }
    fn cpu_fwd(
        &self,
        qs: &CpuStorage,
        ql: &Layout,
        ks: &CpuStorage,
        kl: &Layout,
        vs: &CpuStorage,
        vl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (q, k_t, v) = attention_inputs((qs, ql), (ks, kl), (vs, vl))?;
        let dims = ql.shape().dims();
        let (heads, n, d) = (dims[1], dims[2], dims[3]);
        let per_kv = heads / kl.shape().dims()[1];
        let mut out = vec![0f32; q.len()];
        // One task per (head, prompt), each writing its own rows of the output.
        let mut tasks = Vec::with_capacity(heads * self.lens.len());
        for (head, mut rest) in out.chunks_mut(n * d).enumerate() {
            let mut start = 0;
            for &len in &self.lens {
                let (rows, after) = std::mem::take(&mut rest).split_at_mut(len * d);
                tasks.push((head, start, len, rows));
                rest = after;
                start += len;
            }
        }
        tasks.into_par_iter().for_each(|(head, start, len, rows)| {
            let kv = head / per_kv;
            let task = Head {
                q: &q[(head * n + start) * d..][..len * d],
                keys: Keys::Transposed(Rows { data: &k_t[kv * d * n + start..], stride: n }),
                values: Rows { data: &v[(kv * n + start) * d..], stride: d },
                d,
                total: len,
                t: len,
                pad: 0,
                scale: self.scale,
            };
            task.run(rows);
        });
        Ok((CpuStorage::F32(out), ql.shape().clone()))
    }
}

/// [`cached_attention`] with untransposed keys `k: [b, g, total, d]`, as matmuls around the
/// padded causal softmax (the reference the fused kernel is tested against, and the path of
/// other dtypes and devices).
pub fn matmul_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    scale: f64,
    t: usize,
    pads: &[usize],
) -> Result<Tensor> {
    let probs = crate::ops::fused::padded_causal_softmax(&q.matmul(&k.contiguous()?.t()?)?, scale, t, pads)?;
    Ok(probs.matmul(&v.contiguous()?)?)
}

/// `x: [b, g, n, m]` whose rows are contiguous and whose heads are evenly spaced (a view of
/// the first columns of a KV cache buffer is), else a contiguous copy.
fn by_head(x: &Tensor) -> Result<Tensor> {
    let g = x.dim(1)?;
    let stride = x.stride();
    let evenly = stride[3] == 1 && stride[0] == g * stride[1];
    Ok(if evenly { x.clone() } else { x.contiguous()? })
}

/// Head `h` of a [`by_head`] layout: its elements from its first, and its row stride.
fn head_rows<'a>(x: &'a [f32], l: &Layout, h: usize) -> Rows<'a> {
    let dims = l.shape().dims();
    let stride = l.stride()[2];
    let len = (dims[2] - 1) * stride + dims[3];
    Rows { data: &x[l.start_offset() + h * l.stride()[1]..][..len], stride }
}

/// A matrix whose row `r` starts at `data[r * stride]`.
#[derive(Clone, Copy)]
struct Rows<'a> {
    data: &'a [f32],
    stride: usize,
}

impl<'a> Rows<'a> {
    fn row(&self, r: usize) -> &'a [f32] {
        &self.data[r * self.stride..]
    }
}

struct CachedAttention {
    scale: f32,
    t: usize,
    pads: Vec<usize>,
}

impl CustomOp3 for CachedAttention {
    fn name(&self) -> &'static str {
        "policy-cached-attention"
    }
    fn cpu_fwd(
        &self,
        qs: &CpuStorage,
        ql: &Layout,
        ks: &CpuStorage,
        kl: &Layout,
        vs: &CpuStorage,
        vl: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let q = slice::<f32>(qs, ql, "attention (q)")?;
        let (k, v) = (ks.as_slice::<f32>()?, vs.as_slice::<f32>()?);
        let dims = ql.shape().dims();
        let (g, rows, d) = (dims[1], dims[2], dims[3]);
        let total = kl.shape().dims()[2];
        let mut out = vec![0f32; q.len()];
        out.par_chunks_mut(rows * d).enumerate().for_each(|(head, out)| {
            let task = Head {
                q: &q[head * rows * d..][..rows * d],
                keys: Keys::ByRow(head_rows(k, kl, head)),
                values: head_rows(v, vl, head),
                d,
                total,
                t: self.t,
                pad: self.pads[head / g],
                scale: self.scale,
            };
            task.run(out);
        });
        Ok((CpuStorage::F32(out), ql.shape().clone()))
    }
}

/// How a head's keys are laid out.
#[derive(Clone, Copy)]
enum Keys<'a> {
    /// `[d, total]`: a prompt's keys in prefill, scored `LANES` keys at a time.
    Transposed(Rows<'a>),
    /// `[total, d]`: the KV cache's, scored by dot products. A decode step reads every cached
    /// key once; row by row that is one stream through memory, where transposed keys would be
    /// `d` strided ones (measured: the decode steps' attention waited on those loads).
    ByRow(Rows<'a>),
}

/// One (row, KV head): its queries `[rows, d]`, keys and values `[total, d]`.
struct Head<'a> {
    q: &'a [f32],
    keys: Keys<'a>,
    values: Rows<'a>,
    d: usize,
    total: usize,
    t: usize,
    pad: usize,
    scale: f32,
}

/// A [`Head`] with the output rows it writes, as a [`Kernel`].
struct HeadInto<'a, 'h> {
    head: &'a Head<'h>,
    out: &'a mut [f32],
}

impl Kernel for HeadInto<'_, '_> {
    #[inline(always)]
    fn run<const FMA: bool>(self) {
        self.head.run_generic::<FMA>(self.out)
    }
}

impl Head<'_> {
    fn run(&self, out: &mut [f32]) {
        run_best(HeadInto { head: self, out })
    }

    #[inline(always)]
    fn run_generic<const FMA: bool>(&self, out: &mut [f32]) {
        let d = self.d;
        let rows = self.q.len() / d;
        let real = self.total - self.pad.min(self.total);
        let width = real.div_ceil(LANES).max(1) * LANES;
        let mut scores = vec![0f32; QUERIES * width];
        let mut block = vec![0f32; QUERIES * d];
        // The last keys of a block that has fewer than `LANES`, as `[d][LANES]`.
        let mut tail = vec![0f32; d * LANES];
        let mut row = 0;
        while row < rows {
            let n = QUERIES.min(rows - row);
            // Each query's visible keys, counted from the first real key.
            let mut seen = [0usize; QUERIES];
            for (i, seen) in seen.iter_mut().enumerate().take(n) {
                let (lo, hi) = visible_keys((row + i) % self.t, self.t, self.total, self.pad);
                if lo < self.pad {
                    // A padding query: its only key is itself.
                    out[(row + i) * d..][..d].copy_from_slice(&self.values.row(lo)[..d]);
                } else {
                    *seen = hi - lo;
                }
            }
            let most = seen.iter().copied().max().unwrap_or(0);
            if most > 0 {
                block.fill(0.0);
                block[..n * d].copy_from_slice(&self.q[row * d..][..n * d]);
                self.score::<FMA>(&block, n, most, width, &mut scores, &mut tail);
                let mut sums = [1f32; QUERIES];
                for i in 0..QUERIES {
                    let s = &mut scores[i * width..][..most];
                    if seen[i] > 0 {
                        sums[i] = exp_normalised(&mut s[..seen[i]], self.scale);
                    }
                    // Keys a query does not see, and rows that are no query of this head,
                    // weigh nothing.
                    s[seen[i]..].fill(0.0);
                }
                self.weigh::<FMA>(&scores, width, most, &mut out[row * d..][..n * d], &seen[..n], &sums);
            }
            row += n;
        }
    }

    /// `scores[i][j] = q_i . key_(pad + j)` for the first `n` queries of `block`
    /// (`[QUERIES][d]`) and the first `keys` real keys.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn score<const FMA: bool>(
        &self,
        block: &[f32],
        n: usize,
        keys: usize,
        width: usize,
        scores: &mut [f32],
        tail: &mut [f32],
    ) {
        let d = self.d;
        let keys_t = match self.keys {
            Keys::Transposed(keys_t) => keys_t,
            Keys::ByRow(rows) => {
                for j in 0..keys {
                    let key = &rows.row(self.pad + j)[..d];
                    for (i, query) in block.chunks_exact(d).take(n).enumerate() {
                        scores[i * width + j] = dot::<FMA>(query, key);
                    }
                }
                return;
            }
        };
        // The queries dimension by dimension (`[d][QUERIES]`): one load gives the inputs that
        // multiply one key dimension, with no index to check per query.
        let by_dim = crate::ops::skinny::interleave::<QUERIES>(block, d);
        let full = keys / LANES * LANES;
        for start in (0..full).step_by(LANES) {
            let first = &keys_t.data[self.pad + start..];
            score_lanes::<FMA>(&by_dim, first, keys_t.stride, scores, width, start, LANES);
        }
        if full < keys {
            // The last keys, fewer than `LANES`, copied into lanes of their own (`[d][LANES]`;
            // reading past them could leave the buffer); the other lanes are never read back.
            let rest = keys - full;
            for (c, lanes) in tail.chunks_exact_mut(LANES).enumerate() {
                lanes[..rest].copy_from_slice(&keys_t.row(c)[self.pad + full..][..rest]);
            }
            score_lanes::<FMA>(&by_dim, tail, LANES, scores, width, full, rest);
        }
    }

    /// `out[i] = sum_j scores[i][j] * value_(pad + j) / sums[i]` over the first `keys` real
    /// keys, for the queries `i` of the block that see keys (`seen[i] > 0`; padding queries
    /// were written already), `LANES` value columns at a time.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn weigh<const FMA: bool>(
        &self,
        scores: &[f32],
        width: usize,
        keys: usize,
        out: &mut [f32],
        seen: &[usize],
        sums: &[f32; QUERIES],
    ) {
        let d = self.d;
        let values = &self.values.data[self.pad * self.values.stride..];
        let mut column = 0;
        while column < d {
            let lanes = LANES.min(d - column);
            let acc = if lanes == LANES {
                weigh_lanes::<FMA>(scores, width, keys, values, self.values.stride, column)
            } else {
                weigh_few::<FMA>(scores, width, keys, values, self.values.stride, column, lanes)
            };
            for (i, _) in seen.iter().enumerate().filter(|(_, &seen)| seen > 0) {
                let inv = 1.0 / sums[i];
                for (o, &a) in out[i * d + column..][..lanes].iter_mut().zip(&acc[i]) {
                    *o = a * inv;
                }
            }
            column += lanes;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    fn rand(shape: &[usize], seed: u64) -> Tensor {
        let n: usize = shape.iter().product();
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let data: Vec<f32> = (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                ((x >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
            })
            .collect();
        Tensor::from_vec(data, shape, &Device::Cpu).unwrap()
    }

    fn max_abs_diff(a: &Tensor, b: &Tensor) -> f32 {
        (a - b).unwrap().abs().unwrap().flatten_all().unwrap().max(0).unwrap().to_scalar().unwrap()
    }

    /// Prefill (`t` = total) and decode (`t` = 1 against a cache) shapes, with several
    /// heads per KV head, head sizes that are not a multiple of the lane count, and padding
    /// that covers all but one column of a row.
    #[test]
    fn matches_the_matmul_path() {
        let cases: [(usize, usize, usize, usize, usize, Vec<usize>); 8] = [
            (2, 2, 7, 7, 32, vec![0, 3]),
            (3, 1, 37, 37, 20, vec![5, 0, 36]),
            (1, 3, 1, 1, 16, vec![0]),
            (2, 1, 1, 53, 64, vec![0, 40]),
            (2, 2, 3, 19, 8, vec![2, 15]),
            (1, 1, 130, 130, 32, vec![9]),
            (4, 2, 1, 300, 32, vec![0, 1, 17, 250]),
            (1, 6, 5, 40, 128, vec![3]),
        ];
        for (seed, (b, r, t, total, d, pads)) in cases.into_iter().enumerate() {
            let g = 2;
            let q = rand(&[b, g, r * t, d], seed as u64 * 3);
            // Keys and values as the KV cache holds them: the first columns of larger buffers.
            let k = rand(&[b, g, total + 3, d], seed as u64 * 3 + 1).narrow(2, 0, total).unwrap();
            let v = rand(&[b, g, total + 3, d], seed as u64 * 3 + 2).narrow(2, 0, total).unwrap();
            let scale = 1.0 / (d as f64).sqrt();
            let fused = cached_attention(&q, &k, &v, scale, t, &pads).unwrap();
            let reference = matmul_attention(&q, &k, &v, scale, t, &pads).unwrap();
            let diff = max_abs_diff(&fused, &reference);
            assert!(diff < 2e-5, "b {b} r {r} t {t} total {total} d {d} pads {pads:?}: {diff}");
            // Contiguous inputs, and f64 (the matmul path), agree too.
            let contiguous = |x: &Tensor| x.contiguous().unwrap();
            let packed = cached_attention(&q, &contiguous(&k), &contiguous(&v), scale, t, &pads).unwrap();
            assert_eq!(max_abs_diff(&packed, &fused), 0.0);
            let as64 = |x: &Tensor| x.to_dtype(DType::F64).unwrap();
            let wide = cached_attention(&as64(&q), &as64(&k), &as64(&v), scale, t, &pads).unwrap();
            assert!(max_abs_diff(&wide.to_dtype(DType::F32).unwrap(), &reference) < 2e-5);
        }
    }

    /// Both key layouts, prefill and decode shapes, compiled for the CPU's vector units and
    /// portably.
    #[test]
    fn the_portable_kernel_agrees_with_the_dispatched_one() {
        let (total, d) = (45, 24);
        let k = rand(&[total * d], 8).to_vec1::<f32>().unwrap();
        let k_t = rand(&[total * d], 8).t_flat(total, d);
        let v = rand(&[total * d], 9).to_vec1::<f32>().unwrap();
        for (rows, t) in [(90, 45), (2, 1)] {
            let q = rand(&[rows * d], 7).to_vec1::<f32>().unwrap();
            for keys in [Keys::ByRow(Rows { data: &k, stride: d }), Keys::Transposed(Rows { data: &k_t, stride: total })] {
                let head = Head { q: &q, keys, values: Rows { data: &v, stride: d }, d, total, t, pad: 4, scale: 0.3 };
                let mut fast = vec![0f32; q.len()];
                head.run(&mut fast);
                let mut portable = vec![0f32; q.len()];
                head.run_generic::<false>(&mut portable);
                let diff = fast.iter().zip(&portable).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
                assert!(diff < 1e-5, "{rows} queries: {diff}");
            }
        }
    }

    trait Transposed {
        fn t_flat(&self, rows: usize, cols: usize) -> Vec<f32>;
    }

    impl Transposed for Tensor {
        /// The `[rows, cols]` matrix this tensor holds, transposed, flat.
        fn t_flat(&self, rows: usize, cols: usize) -> Vec<f32> {
            self.reshape((rows, cols)).unwrap().t().unwrap().contiguous().unwrap().flatten_all().unwrap().to_vec1().unwrap()
        }
    }

    /// Prompts of different lengths packed one after another, against each prompt alone
    /// through the matmul path.
    #[test]
    fn packed_prompts_match_each_prompt_alone() {
        for (seed, (g, r, d, lens)) in [(2, 2, 32, vec![7, 1, 40, 19]), (1, 3, 20, vec![130]), (2, 1, 64, vec![3, 17])]
            .into_iter()
            .enumerate()
        {
            let n: usize = lens.iter().sum();
            let q = rand(&[1, g * r, n, d], seed as u64 * 3 + 20);
            let k_t = rand(&[1, g, d, n], seed as u64 * 3 + 21);
            let v = rand(&[1, g, n, d], seed as u64 * 3 + 22);
            let scale = 1.0 / (d as f64).sqrt();
            let fused = packed_causal_attention(&q, &k_t, &v, scale, &lens).unwrap();
            let reference = packed_matmul_attention(&q, &k_t, &v, scale, &lens).unwrap();
            assert_eq!(fused.dims(), [1, g * r, n, d]);
            let diff = max_abs_diff(&fused, &reference);
            assert!(diff < 2e-5, "g {g} r {r} d {d} lens {lens:?}: {diff}");
        }
        let q = rand(&[1, 2, 5, 8], 1);
        let (k_t, v) = (rand(&[1, 1, 8, 5], 2), rand(&[1, 1, 5, 8], 3));
        assert!(packed_causal_attention(&q, &k_t, &v, 1.0, &[2, 3]).is_ok());
        assert!(packed_causal_attention(&q, &k_t, &v, 1.0, &[2, 2]).is_err());
        assert!(packed_causal_attention(&q, &k_t, &v, 1.0, &[5, 0]).is_err());
        assert!(packed_causal_attention(&q, &v, &v, 1.0, &[5]).is_err());
    }

    #[test]
    fn mismatched_shapes_are_errors() {
        let q = rand(&[1, 2, 4, 8], 1);
        let k = rand(&[1, 2, 6, 8], 2);
        assert!(cached_attention(&q, &k, &k, 1.0, 3, &[0, 0]).is_err());
        assert!(cached_attention(&q, &k, &k, 1.0, 3, &[0]).is_err());
        assert!(cached_attention(&q, &k, &rand(&[1, 2, 5, 8], 3), 1.0, 4, &[0]).is_err());
        assert!(cached_attention(&q, &rand(&[1, 2, 8, 6], 4), &k, 1.0, 4, &[0]).is_err());
        assert!(cached_attention(&q, &k, &k, 1.0, 4, &[0]).is_ok());
    }
}
