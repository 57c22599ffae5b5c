//! Per-step cost of the py4j path on one JVM (a development aid, not the benchmark):
//! `cargo run --release -p sciworld --example step_timing [valid]`; with `valid` every step also
//! fetches the valid-action list. Shows the JIT warm-up of the first few hundred calls.
//! `SCIWORLD_FLAGS="-XX:+UseSerialGC ..."` and `SCIWORLD_XMX=MB` replace the JVM flags, to
//! compare settings.
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut config = sciworld::EnvConfig::from_default_jar()?;
    config.valid_actions = std::env::args().nth(1).is_some();
    if let Ok(flags) = std::env::var("SCIWORLD_FLAGS") {
        config.jvm.flags = flags.split_whitespace().map(str::to_string).collect();
    }
    if let Some(mb) = std::env::var("SCIWORLD_XMX")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        config.jvm.max_heap_mb = mb;
    }
    let mut env = sciworld::SciWorldEnv::new(config)?;
    env.reset_to("boil", 21)?;
    let commands = [
        "look around",
        "teleport to kitchen",
        "open cupboard",
        "look around",
        "teleport to hallway",
    ];
    for round in 0..8 {
        let started = Instant::now();
        for i in 0..50 {
            env.step_command(commands[i % commands.len()])?;
        }
        println!(
            "round {round}: {:.1} ms/step",
            started.elapsed().as_secs_f64() * 20.0
        );
    }
    if let Some(pid) = env.jvm_pid() {
        println!(
            "JVM RSS {:.0} MB",
            sciworld::bench::rss_bytes(pid).unwrap_or(0) as f64 / 1048576.0
        );
    }
    Ok(())
}
