//! The allocator's policy for a process that trains or samples (the `rlvmr` binary and the
//! benchmarks call it first thing).
//!
//! A training step allocates and frees tensors of tens to hundreds of MB (attention
//! scores, activations kept for the backward pass). glibc serves each of those with its own
//! `mmap` and gives it back with `munmap` when freed, so every step pays the page faults
//! and the zeroing of fresh pages again: on a 4M-parameter model's SFT a third of the time
//! went to the kernel. Serving everything from the heap and never trimming it keeps those
//! pages mapped and reused; the process's memory stays at its peak, which a training run
//! reaches anyway. Sampling gains too: a rollout batch's packed prefill ran 1.3-1.45x faster
//! with it (`bench_sampling`, 32 prompts of up to 460 tokens).

/// Keep freed memory for reuse: no per-allocation `mmap`, no trimming of the heap.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn keep_freed_memory() {
    // SAFETY: mallopt only changes tunables of glibc's allocator; it is called at startup,
    // before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_MAX, 0);
        // -1 disables trimming (mallopt(3)); i32::MAX only delayed it until a freed top
        // of the heap passed 2 GB, which long-sequence SFT batches reach: each step then gave
        // gigabytes back and faulted them in again (75% of the time in the kernel).
        libc::mallopt(libc::M_TRIM_THRESHOLD, -1);
        libc::mallopt(libc::M_TOP_PAD, 256 << 20);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn keep_freed_memory() {}
