// Row softmax kernels of the GPU path (policy::ops::gpu), compiled to PTX by the policy
// crate's build script when the `cuda` feature is on. f32, one block per row.

#include <float.h>

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// The maximum (is_max) or the sum of v over the block; every thread gets it.
__device__ float block_reduce(float v, bool is_max) {
    __shared__ float partial[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int warps = (blockDim.x + 31) >> 5;
    v = is_max ? warp_max(v) : warp_sum(v);
    __syncthreads();  // an earlier call may still read partial[0]
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < warps ? partial[lane] : (is_max ? -FLT_MAX : 0.0f);
        v = is_max ? warp_max(v) : warp_sum(v);
        if (lane == 0) partial[0] = v;
    }
    __syncthreads();
    return partial[0];
}

// y = softmax(scale * x) over the keys each row's query sees, 0 elsewhere; x, y: rows of
// `width` keys. Row r holds query q = r % t of the t newest positions (key width - t + q), in
// batch row r / rows_per_batch, whose first pads[...] keys are padding (has_pads = 0: none).
// A query sees the keys from the padding's end to its own; a padding query sees only itself
// (as policy::ops::lanes::visible_keys).
extern "C" __global__ void masked_softmax_f32(const float* __restrict__ x, float* __restrict__ y,
                                              int width, int t, int rows_per_batch,
                                              const unsigned int* __restrict__ pads, int has_pads,
                                              float scale) {
    const long long row = blockIdx.x;
    const int at = width - t + (int)(row % t);
    int lo = has_pads ? (int)pads[row / rows_per_batch] : 0;
    if (at < lo) lo = at;
    const int hi = at + 1;
    const float* xr = x + row * (long long)width;
    float* yr = y + row * (long long)width;
    float m = -FLT_MAX;
    for (int j = lo + threadIdx.x; j < hi; j += blockDim.x) m = fmaxf(m, xr[j] * scale);
    m = block_reduce(m, true);
    float s = 0.0f;
    for (int j = lo + threadIdx.x; j < hi; j += blockDim.x) s += expf(xr[j] * scale - m);
    const float inv = 1.0f / block_reduce(s, false);
    for (int j = threadIdx.x; j < width; j += blockDim.x)
        yr[j] = (j >= lo && j < hi) ? expf(xr[j] * scale - m) * inv : 0.0f;
}

// dx = scale * y * (g - sum(y * g)) per row of `width`: the gradient of softmax(scale * x)
// from its output y and the gradient g that reached it.
extern "C" __global__ void softmax_backward_f32(const float* __restrict__ y, const float* __restrict__ g,
                                                float* __restrict__ dx, int width, float scale) {
    const long long off = (long long)blockIdx.x * width;
    float d = 0.0f;
    for (int j = threadIdx.x; j < width; j += blockDim.x) d += y[off + j] * g[off + j];
    d = block_reduce(d, false);
    for (int j = threadIdx.x; j < width; j += blockDim.x) dx[off + j] = scale * y[off + j] * (g[off + j] - d);
}

// The optimizer's kernels (policy::optim on a GPU): one pass over n contiguous f32 elements
// each, grid-stride, in place, instead of a dozen candle ops with a fresh tensor apiece.

// AdamW in place, as the CPU's fused loop (policy::optim::fused_update): k holds decay
// (1 - lr * wd), b1, b2, 1 - b1, 1 - b2, 1 / sqrt(1 - b2^t), eps and lr / (1 - b1^t).
extern "C" __global__ void adamw_f32(float* __restrict__ p, float* __restrict__ m, float* __restrict__ v,
                                     const float* __restrict__ g, long long n, float decay, float b1,
                                     float b2, float one_b1, float one_b2, float inv_sqrt_bc2, float eps,
                                     float step_size) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const float gi = g[i];
        const float mi = m[i] * b1 + gi * one_b1;
        const float vi = v[i] * b2 + gi * gi * one_b2;
        const float denom = sqrtf(vi) * inv_sqrt_bc2 + eps;
        p[i] = p[i] * decay - mi / denom * step_size;
        m[i] = mi;
        v[i] = vi;
    }
}

// dst += src (gradient accumulation over micro-batches).
extern "C" __global__ void add_assign_f32(float* __restrict__ dst, const float* __restrict__ src, long long n) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        dst[i] += src[i];
}

// partial[block] = the sum of x^2 over the elements the block visits, in f64 (the gradient
// norm); the host adds the partials in order, so the norm does not depend on timing.
extern "C" __global__ void sum_squares_f32(const float* __restrict__ x, long long n, double* __restrict__ partial) {
    __shared__ double warp_sums[32];
    double s = 0.0;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const double xi = x[i];
        s += xi * xi;
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    if (lane == 0) warp_sums[warp] = s;
    __syncthreads();
    if (warp == 0) {
        s = lane < warps ? warp_sums[lane] : 0.0;
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0) partial[blockIdx.x] = s;
    }
}
