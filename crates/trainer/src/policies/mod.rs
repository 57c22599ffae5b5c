//! The ways of acting that belong to no environment: a model sampled here and a random
//! player. (Each environment's scripted player is in its folder under `envs/`; a model
//! behind a server is in `served/`.)

pub mod model;
pub mod random;

pub use model::{ModelPolicy, ModelPolicyOptions};
pub use random::RandomPolicy;
