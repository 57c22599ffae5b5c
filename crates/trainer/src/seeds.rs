//! The purposes a run's seed is mixed with (`collector::mix(seed, purpose)`), one constant
//! each, so that two draws never share a stream by accident. (SFT's epoch shuffles use the
//! epoch number; evaluation and the cold start use the seed as it is.)

/// The rollouts of an RL iteration.
pub const RL_ROLLOUT: u64 = 1;
/// The order of an RL iteration's samples in its mini-batches.
pub const RL_SHUFFLE: u64 = 2;
/// The initial draw of RL's LoRA adapter.
pub const RL_LORA: u64 = 3;
/// The initial draw of SFT's LoRA adapter, apart from the epochs' shuffles (`mix(seed, epoch)`).
pub const SFT_LORA: u64 = u64::MAX;
