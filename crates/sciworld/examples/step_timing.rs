//! Per-step cost of the py4j path on one JVM (a development aid, not the benchmark):
//! `cargo run --release -p sciworld --example step_timing [valid]`; with `valid` every step also
//! fetches the valid-action list. Shows the JIT warm-up of the first few hundred calls.
use std::time::Instant;
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut config = sciworld::EnvConfig::from_default_jar()?;
    config.valid_actions = std::env::args().nth(1).is_some();
    let mut env = sciworld::SciWorldEnv::new(config)?;
    env.reset_to("boil", 21)?;
    for round in 0..6 {
        let t = Instant::now();
        for _ in 0..50 {
            env.step_command("look around")?;
        }
        println!(
            "round {round}: {:.1} ms/step",
            t.elapsed().as_secs_f64() * 20.0
        );
    }
    let mut sim = sciworld::sim::Simulator::start(&sciworld::EnvConfig::from_default_jar()?.jvm)?;
    sim.load("boil", 21, "easy", false)?;
    for round in 0..4 {
        let t = Instant::now();
        for _ in 0..50 {
            sim.valid_actions()?;
        }
        println!(
            "valid only {round}: {:.1} ms/call",
            t.elapsed().as_secs_f64() * 20.0
        );
        let t = Instant::now();
        for _ in 0..50 {
            sim.task_description()?;
        }
        println!(
            "trivial call {round}: {:.2} ms/call",
            t.elapsed().as_secs_f64() * 20.0
        );
    }
    Ok(())
}
