//! Direct access to the f32/f64 buffers of contiguous CPU tensors: the slices the kernels
//! read, the f64-accumulated sums and maxima they share, and the optimizer's fused in-place
//! loops (one pass over parameter, moments and gradient instead of a dozen temporary tensors
//! per parameter).
//!
//! Mutable access goes through candle's in-place op (which takes the tensor's write lock), so
//! other tensors sharing the storage (e.g. the inference view's detached weights) see the new
//! values, as with `Var::set`.

use crate::error::{PolicyError, Result};
use candle_core::{CpuStorage, InplaceOp1, Layout, Storage, Tensor, WithDType};
use std::cell::RefCell;

/// The float types the fused loops run on.
pub(crate) trait RawFloat: WithDType + num_traits_like::Float {
    fn slice_mut(s: &mut CpuStorage) -> Option<&mut Vec<Self>>;
}

impl RawFloat for f32 {
    fn slice_mut(s: &mut CpuStorage) -> Option<&mut Vec<Self>> {
        match s {
            CpuStorage::F32(v) => Some(v),
            _ => None,
        }
    }
}

impl RawFloat for f64 {
    fn slice_mut(s: &mut CpuStorage) -> Option<&mut Vec<Self>> {
        match s {
            CpuStorage::F64(v) => Some(v),
            _ => None,
        }
    }
}

/// The few float operations the loops need (so that no `num-traits` dependency is needed).
pub(crate) mod num_traits_like {
    pub trait Float:
        Copy
        + Send
        + Sync
        + std::ops::Add<Output = Self>
        + std::ops::Sub<Output = Self>
        + std::ops::Mul<Output = Self>
        + std::ops::Div<Output = Self>
    {
        const ZERO: Self;
        const NEG_INFINITY: Self;
        fn sqrt(self) -> Self;
        /// `x = exp(x)` over a slice (f32: vectorised, [`crate::ops::vexp`]).
        fn exp_in_place(xs: &mut [Self]);
        fn ln(self) -> Self;
        fn maximum(self, other: Self) -> Self;
    }
    macro_rules! float_impl {
        ($t:ty, $exp_slice:expr) => {
            impl Float for $t {
                const ZERO: Self = 0.0;
                const NEG_INFINITY: Self = <$t>::NEG_INFINITY;
                fn sqrt(self) -> Self {
                    <$t>::sqrt(self)
                }
                fn exp_in_place(xs: &mut [Self]) {
                    ($exp_slice)(xs)
                }
                fn ln(self) -> Self {
                    <$t>::ln(self)
                }
                fn maximum(self, other: Self) -> Self {
                    <$t>::max(self, other)
                }
            }
        };
    }
    float_impl!(f32, crate::ops::vexp::exp_in_place);
    float_impl!(f64, |xs: &mut [f64]| xs.iter_mut().for_each(|x| *x = x.exp()));
}

fn contiguous_range(layout: &Layout, what: &str) -> Result<(usize, usize)> {
    layout.contiguous_offsets().ok_or_else(|| {
        PolicyError::Input(format!("{what}: tensor is not contiguous"))
    })
}

/// Call `f` with the element slice of the contiguous CPU tensor `t` (dtype `T`).
pub(crate) fn with_slice<T: RawFloat, R>(
    t: &Tensor,
    what: &str,
    f: impl FnOnce(&[T]) -> Result<R>,
) -> Result<R> {
    let (storage, layout) = t.storage_and_layout();
    let Storage::Cpu(cpu) = &*storage else {
        return Err(PolicyError::Input(format!("{what}: not a CPU tensor")));
    };
    let (start, end) = contiguous_range(layout, what)?;
    let all = cpu
        .as_slice::<T>()
        .map_err(|e| PolicyError::Input(format!("{what}: {e}")))?;
    f(&all[start..end])
}

/// Call `f` with the mutable element slice of the contiguous CPU tensor `t` (dtype `T`).
pub(crate) fn with_slice_mut<T: RawFloat, R>(
    t: &Tensor,
    what: &str,
    f: impl FnOnce(&mut [T]) -> Result<R>,
) -> Result<R> {
    let op = SliceMut::<T, R, _> {
        what,
        f: RefCell::new(Some(f)),
        out: RefCell::new(None),
        _t: std::marker::PhantomData,
    };
    t.inplace_op1(&op)?;
    op.out
        .into_inner()
        .unwrap_or_else(|| Err(PolicyError::Input(format!("{what}: not a CPU tensor"))))
}

/// An in-place op that hands the buffer to a closure once.
struct SliceMut<'a, T, R, F> {
    what: &'a str,
    f: RefCell<Option<F>>,
    out: RefCell<Option<Result<R>>>,
    _t: std::marker::PhantomData<T>,
}

impl<T: RawFloat, R, F: FnOnce(&mut [T]) -> Result<R>> InplaceOp1 for SliceMut<'_, T, R, F> {
    fn name(&self) -> &'static str {
        "policy-raw-slice-mut"
    }

    fn cpu_fwd(&self, storage: &mut CpuStorage, layout: &Layout) -> candle_core::Result<()> {
        let result = (|| {
            let (start, end) = contiguous_range(layout, self.what)?;
            let buf = T::slice_mut(storage).ok_or_else(|| {
                PolicyError::Input(format!(
                    "{}: expected dtype {:?}",
                    self.what,
                    T::DTYPE
                ))
            })?;
            let f = self.f.borrow_mut().take().ok_or_else(|| {
                PolicyError::Input(format!("{}: in-place op ran twice", self.what))
            })?;
            f(&mut buf[start..end])
        })();
        *self.out.borrow_mut() = Some(result);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn mutation_is_seen_by_tensors_sharing_the_storage() {
        let t = Tensor::new(&[1f32, 2., 3.], &Device::Cpu).unwrap();
        let shared = t.detach();
        with_slice_mut::<f32, _>(&t, "t", |s| {
            s[1] = 5.0;
            Ok(())
        })
        .unwrap();
        assert_eq!(shared.to_vec1::<f32>().unwrap(), vec![1., 5., 3.]);
        let sum = with_slice::<f32, _>(&t, "t", |s| Ok(s.iter().sum::<f32>())).unwrap();
        assert_eq!(sum, 9.0);
    }

    #[test]
    fn wrong_dtype_and_layout_are_errors() {
        let t = Tensor::new(&[1f64, 2.], &Device::Cpu).unwrap();
        let err = with_slice_mut::<f32, _>(&t, "param w", |_| Ok(())).unwrap_err();
        assert!(err.to_string().contains("param w"), "{err}");
        let m = Tensor::new(&[[1f32, 2.], [3., 4.]], &Device::Cpu).unwrap().t().unwrap();
        let err = with_slice::<f32, _>(&m, "grad g", |_| Ok(())).unwrap_err();
        assert!(err.to_string().contains("not contiguous"), "{err}");
    }
}

type CResult<T> = candle_core::Result<T>;

/// The contiguous element slice of a custom op's input.
pub(crate) fn slice<'a, T: RawFloat>(s: &'a CpuStorage, l: &Layout, what: &str) -> CResult<&'a [T]> {
    let (start, end) = l
        .contiguous_offsets()
        .ok_or_else(|| candle_core::Error::Msg(format!("{what}: input is not contiguous")))?;
    Ok(&s.as_slice::<T>()?[start..end])
}

/// A sum accumulated in f64: f32 sums over a vocabulary-sized row lose the small terms (a
/// token with p near 1 followed by 49k terms below f32's epsilon), which biases log-probs.
/// Eight running sums, not one, so that the adds do not wait on each other (no change was
/// measured in the update, whose products dominate; the slice form, [`sum_slice_f64`], made
/// the sampling attention's prefill 1.1x faster).
#[inline(always)]
pub(crate) fn sum_f64<T: RawFloat>(xs: impl Iterator<Item = T>) -> T {
    let mut lanes = [0f64; 8];
    for (i, x) in xs.enumerate() {
        lanes[i % 8] += x.to_f64();
    }
    T::from_f64(lanes.iter().sum::<f64>())
}

/// [`sum_f64`] of a slice, eight elements at a time (this form vectorises).
#[inline(always)]
pub(crate) fn sum_slice_f64<T: RawFloat>(x: &[T]) -> T {
    let mut lanes = [0f64; 8];
    let chunks = x.chunks_exact(8);
    let tail: f64 = chunks.remainder().iter().map(|v| v.to_f64()).sum();
    for chunk in chunks {
        for (l, v) in lanes.iter_mut().zip(chunk) {
            *l += v.to_f64();
        }
    }
    T::from_f64(lanes.iter().sum::<f64>() + tail)
}

/// The largest of `scale * x` (`-inf` for none), in 16 running maxima (one is a chain of
/// dependent instructions).
#[inline(always)]
pub(crate) fn max_scaled<T: RawFloat>(x: &[T], scale: T) -> T {
    let mut lanes = [T::NEG_INFINITY; 16];
    let chunks = x.chunks_exact(16);
    let tail = chunks.remainder().iter().fold(T::NEG_INFINITY, |m, &v| m.maximum(v * scale));
    for chunk in chunks {
        for (l, &v) in lanes.iter_mut().zip(chunk) {
            let v = v * scale;
            *l = if v > *l { v } else { *l };
        }
    }
    lanes.iter().fold(tail, |m, &v| m.maximum(v))
}
