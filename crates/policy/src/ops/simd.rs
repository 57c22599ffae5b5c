//! One dispatch for the hand-written CPU kernels: a kernel is written once as generic Rust
//! over `const FMA: bool`, in register blocks the compiler vectorises, and [`run_best`]
//! runs the copy compiled for the widest vector instructions the CPU has (AVX-512, else
//! AVX2 + FMA, else portable code).

/// A kernel body. `FMA`: whether `a * b + c` may be one fused instruction (only where the
/// CPU has it; elsewhere `mul_add` is a slow library call), see [`madd`].
pub(crate) trait Kernel {
    fn run<const FMA: bool>(self);
}

/// Runs `kernel` compiled for the CPU's widest vector instructions.
pub(crate) fn run_best<K: Kernel>(kernel: K) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has the features the function is compiled for.
            unsafe { run_avx512(kernel) };
            return;
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
            // SAFETY: as above.
            unsafe { run_avx2(kernel) };
            return;
        }
    }
    kernel.run::<false>()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn run_avx512<K: Kernel>(kernel: K) {
    kernel.run::<true>()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn run_avx2<K: Kernel>(kernel: K) {
    kernel.run::<true>()
}

/// `a * b + c`, one instruction where `FMA`.
#[inline(always)]
pub(crate) fn madd<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}
