//! The kernels below the model, each fused op beside its plain reference.
//!
//! - [`reference`]: the ops written with candle's primitive ops (exact, with a backward,
//!   slow): the reference in tests and the fallback off the CPU.
//! - [`fused`]: the same ops as custom CPU kernels with their own backward (softmax, RMS
//!   norm, SwiGLU, rope with the head split, token scores), since candle's fast ops have no
//!   backward and silently drop gradients.
//! - [`attention`] (the sampling path's cached and packed attention) and `triangle` (the
//!   training path's causal attention over the lower triangle only), on the shared `lanes`;
//!   [`skinny`]: matrix-vector products for decode steps; [`frozen`]: matmuls that compute no
//!   gradient for a frozen weight; `simd`, [`vexp`] and `raw`: the lanes, the vector exp and
//!   the raw slices the kernels share.
//! - [`gpu`]: CUDA kernels (f32) for the attention's masked softmax and its backward, where
//!   the GPU path would otherwise run several of candle's ops over the scores.

pub mod attention;
pub mod frozen;
pub mod fused;
pub mod gpu;
pub(crate) mod lanes;
pub(crate) mod raw;
pub mod reference;
pub(crate) mod simd;
pub mod skinny;
pub(crate) mod triangle;
pub mod vexp;
