//! A simulator JVM killed in the middle of a collected episode: that episode ends failed with
//! the error, the collection returns, and the pooled simulator comes back with a fresh JVM
//! for the next episode. A test binary of its own, since it kills every JVM this process
//! started.

use rlvmr_core::Tag;
use trainer::agent::{Policy, Reply, Turn};
use trainer::envs::EnvProvider;
use trainer::agent::tagged_reply;
use trainer::envs::SciworldProvider;
use trainer::{collect, grouped_specs, CollectorOptions, EpisodeSpec};

/// Looks around; at `kill_at` it first kills the simulator JVMs (children of this process).
struct Killer {
    kill_at: Option<usize>,
}

fn java_children() -> Vec<u32> {
    let me = std::process::id();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // "pid (comm) state ppid ..."
            let Some((comm, rest)) = stat.split_once(") ") else { return false };
            let ppid = rest.split_whitespace().nth(1).and_then(|p| p.parse::<u32>().ok());
            comm.ends_with("(java") && ppid == Some(me)
        })
        .collect()
}

impl Policy for Killer {
    fn name(&self) -> String {
        "killer".into()
    }

    fn start_episode(&mut self, _slot: usize, _spec: &EpisodeSpec) -> trainer::Result<()> {
        Ok(())
    }

    fn act(&mut self, turns: &[Turn]) -> trainer::Result<Vec<Result<Reply, String>>> {
        if turns.iter().any(|t| Some(t.step) == self.kill_at) {
            let pids = java_children();
            assert!(!pids.is_empty(), "no simulator JVM to kill");
            for pid in pids {
                let _ = std::process::Command::new("kill").args(["-9", &pid.to_string()]).status();
            }
        }
        Ok(turns
            .iter()
            .map(|_| Ok(Reply::text(tagged_reply(Tag::Explore, "I look.", "look around"))))
            .collect())
    }
}

#[test]
fn a_jvm_killed_mid_episode_fails_that_episode_and_the_next_one_gets_a_fresh_jvm() {
    let provider = SciworldProvider::open("L0").unwrap();
    let task = provider.test_tasks().remove(0);
    let options = CollectorOptions {
        max_steps: 5,
        ..CollectorOptions::default()
    };
    let specs = grouped_specs(std::slice::from_ref(&task), 1, 0);
    let run = collect(&provider, &mut Killer { kill_at: Some(2) }, &specs, &options).unwrap();
    let episode = &run.episodes[0];
    assert!(!episode.won && episode.steps.len() == 2, "{} steps", episode.steps.len());
    let error = episode.error.clone().expect("the episode is marked failed");
    assert!(error.contains("step 2"), "{error}");
    assert_eq!(provider.idle_simulators(), 1, "the simulator went back to the pool");

    let run = collect(&provider, &mut Killer { kill_at: None }, &specs, &options).unwrap();
    let episode = &run.episodes[0];
    assert!(episode.error.is_none(), "{:?}", episode.error);
    assert_eq!(episode.steps.len(), 5);
    assert!(episode.steps[4].next_observation.contains("This room is called"));
    assert_eq!(java_children().len(), 1, "one fresh JVM replaced the killed one");
}
