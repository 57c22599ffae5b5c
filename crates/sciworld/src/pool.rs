//! A pool of environments, one JVM each, started in parallel.

use crate::env::{EnvConfig, SciWorldEnv};
use crate::error::Result;

/// Start `n` environments at once (JVM start-up is about 2 s and mostly single-threaded, so
/// starting them side by side takes about as long as one on a machine with enough cores).
/// If any fails, the others are shut down and the first error is returned.
pub fn start_envs(n: usize, config: &EnvConfig) -> Result<Vec<SciWorldEnv>> {
    let started: Vec<Result<SciWorldEnv>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..n)
            .map(|_| scope.spawn(|| SciWorldEnv::new(config.clone())))
            .collect();
        handles
            .into_iter()
            .map(|h| match h.join() {
                Ok(result) => result,
                Err(_) => Err(crate::error::SciError::Start(
                    "a start-up thread panicked".to_string(),
                )),
            })
            .collect()
    });
    started.into_iter().collect()
}
