//! The pure core of RLVMR: deterministic functions from records to numbers.
//! No ML and no I/O: environments, models and the trainer build on it.

pub mod env;
pub mod format;
pub mod metrics;
pub mod tag;

pub use env::{Env, EnvError, StepResult};
pub use format::{parse_output, InvalidReason, OutputStyle, ParsedOutput, Validity};
pub use tag::Tag;
