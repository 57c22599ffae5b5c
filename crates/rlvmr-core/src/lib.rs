//! The pure core of RLVMR: deterministic functions from records to numbers.
//! This first slice holds the environment contract every environment implements.

pub mod env;

pub use env::{Env, EnvError, StepResult};
