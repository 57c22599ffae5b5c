//! `rlvmr advantages`: where a run's advantages went. The rollouts of `rlvmr train`
//! (`DIR/rollouts/NNNN.jsonl.gz`) keep the advantage every step was trained with; this pools
//! them over a range of iterations by the episode's outcome (won or lost), the step's tag and
//! whether the step earned a meta-reasoning reward, and tells how many steps each cell holds,
//! their mean advantage and how many were pushed up (advantage > 0). It answers which
//! behaviour a run reinforces in the episodes it loses: under GRPO a step's advantage is its
//! episode's outcome (less its own format penalty) normalised in the group, negative in a lost
//! episode unless the whole group lost; under GRPO-MR a paid step can come out positive.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::error::{Result, TrainerError};
use crate::rl::{rollouts_file, rollouts_folder};
use crate::view::{read_source, ViewEpisode};

/// A first and a last iteration, both included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IterationRange {
    pub first: usize,
    pub last: usize,
}

impl std::str::FromStr for IterationRange {
    type Err = String;

    /// `7` or `11-20`.
    fn from_str(text: &str) -> std::result::Result<Self, String> {
        let number = |t: &str| {
            t.trim()
                .parse::<usize>()
                .ok()
                .filter(|&n| n >= 1)
                .ok_or_else(|| format!("`{text}`: iterations are numbers from 1, as `7` or `11-20`"))
        };
        let (first, last) = match text.split_once('-') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => (number(text)?, number(text)?),
        };
        if first > last {
            return Err(format!("`{text}`: the first iteration comes after the last"));
        }
        Ok(IterationRange { first, last })
    }
}

/// One cell's key: the episode's outcome, the step's tag (`none` for an invalid step), and
/// whether the step earned a meta-reasoning reward.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct CellKey {
    pub won: bool,
    pub tag: String,
    pub paid: bool,
}

/// The steps of one cell.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cell {
    pub steps: usize,
    pub advantage_sum: f64,
    /// Steps with an advantage above 0: the ones the update made more likely.
    pub pushed_up: usize,
}

impl Cell {
    pub fn mean_advantage(&self) -> f64 {
        self.advantage_sum / self.steps.max(1) as f64
    }
}

/// A run's advantages pooled over some iterations.
#[derive(Debug, Clone, PartialEq)]
pub struct Credit {
    pub run: PathBuf,
    pub range: IterationRange,
    pub episodes: usize,
    pub cells: BTreeMap<CellKey, Cell>,
}

/// Adds `episodes` to `cells`. A step without an advantage is an error naming it: only
/// training rollouts carry one.
pub fn tally(episodes: &[ViewEpisode], cells: &mut BTreeMap<CellKey, Cell>) -> std::result::Result<(), String> {
    for (e, episode) in episodes.iter().enumerate() {
        for (s, step) in episode.steps.iter().enumerate() {
            let advantage = step
                .advantage
                .ok_or_else(|| format!("episode {}, step {s}: no advantage (not a training rollout)", e + 1))?;
            let key = CellKey {
                won: episode.won,
                tag: step.tag.clone().unwrap_or_else(|| "none".into()),
                paid: step.mr_reward.is_some_and(|r| r > 0.0),
            };
            let cell = cells.entry(key).or_default();
            cell.steps += 1;
            cell.advantage_sum += advantage;
            cell.pushed_up += usize::from(advantage > 0.0);
        }
    }
    Ok(())
}

/// The rollouts of `run` (a `rlvmr train` directory) over `range`, or over every iteration it
/// has written when `range` is `None`.
pub fn read(run: &Path, range: Option<IterationRange>) -> Result<Credit> {
    let folder = rollouts_folder(run);
    if !folder.is_dir() {
        return Err(TrainerError::Invalid(format!("{}: not a `rlvmr train` run (no rollouts folder)", run.display())));
    }
    let written = written_iterations(&folder)?;
    let (Some(&first_written), Some(&last_written)) = (written.first(), written.last()) else {
        return Err(TrainerError::Invalid(format!("{}: no rollouts (NNNN.jsonl.gz) in this folder", folder.display())));
    };
    let range = range.unwrap_or(IterationRange {
        first: first_written,
        last: last_written,
    });
    if let Some(missing) = (range.first..=range.last).find(|i| !written.contains(i)) {
        return Err(TrainerError::Invalid(format!(
            "{}: no rollouts of iteration {missing} (it has iterations {first_written}-{last_written})",
            folder.display()
        )));
    }
    let mut cells = BTreeMap::new();
    let mut episodes = 0;
    for iteration in range.first..=range.last {
        let path = rollouts_file(&folder, iteration);
        let source = read_source(&path, false)?;
        tally(&source.episodes, &mut cells).map_err(|message| TrainerError::Invalid(format!("{}: {message}", path.display())))?;
        episodes += source.episodes.len();
    }
    Ok(Credit {
        run: run.to_path_buf(),
        range,
        episodes,
        cells,
    })
}

/// The iterations with a rollouts file in `folder`, ascending.
fn written_iterations(folder: &Path) -> Result<Vec<usize>> {
    let entries = std::fs::read_dir(folder).map_err(|e| TrainerError::io(folder, e))?;
    let mut found = Vec::new();
    for entry in entries {
        let name = entry.map_err(|e| TrainerError::io(folder, e))?.file_name();
        if let Some(number) = name.to_string_lossy().strip_suffix(".jsonl.gz") {
            if let Ok(iteration) = number.parse::<usize>() {
                found.push(iteration);
            }
        }
    }
    found.sort_unstable();
    Ok(found)
}

/// One Markdown table: lost episodes first, then won ones; tags in the method's order.
pub fn table(credit: &Credit) -> String {
    let total: usize = credit.cells.values().map(|c| c.steps).sum();
    let mut out = format!(
        "{}, iterations {}-{} ({} episodes, {total} steps)\n\n",
        credit.run.display(),
        credit.range.first,
        credit.range.last,
        credit.episodes
    );
    out.push_str("| episode | tag | meta-reasoning reward | steps | share of steps | mean advantage | advantage > 0 |\n");
    out.push_str("|---|---|---|---:|---:|---:|---:|\n");
    let tag_order = |tag: &str| ["planning", "explore", "reflection", "monitor", "none"].iter().position(|t| *t == tag).unwrap_or(5);
    let mut keys: Vec<&CellKey> = credit.cells.keys().collect();
    keys.sort_by_key(|k| (k.won, tag_order(&k.tag), k.tag.clone(), k.paid));
    for key in keys {
        let cell = &credit.cells[key];
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {:.1}% | {:+.2} | {:.0}% |",
            if key.won { "won" } else { "lost" },
            key.tag,
            if key.paid { "paid" } else { "none" },
            cell.steps,
            100.0 * cell.steps as f64 / total.max(1) as f64,
            cell.mean_advantage(),
            100.0 * cell.pushed_up as f64 / cell.steps as f64,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::episode_of;

    fn episode(won: bool, steps: &[(&str, f64, f64)]) -> ViewEpisode {
        let steps: Vec<_> = steps
            .iter()
            .map(|(tag, mr, adv)| serde_json::json!({"tag": tag, "mr_reward": mr, "advantage": adv, "output": "", "action": "look"}))
            .collect();
        episode_of(&serde_json::json!({"won": won, "steps": steps}), false).unwrap()
    }

    #[test]
    fn ranges_read_one_number_or_two_and_refuse_the_rest() {
        assert_eq!("7".parse(), Ok(IterationRange { first: 7, last: 7 }));
        assert_eq!("11-20".parse(), Ok(IterationRange { first: 11, last: 20 }));
        for bad in ["0", "20-11", "a-3", "", "3-", "-3"] {
            let err = bad.parse::<IterationRange>().unwrap_err();
            assert!(err.contains(&format!("`{bad}`")), "{err}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_range_reads_back_and_any_text_is_a_value_or_a_message(first in 1usize..100_000, span in 0usize..1000, text in ".{0,12}") {
            let last = first + span;
            proptest::prop_assert_eq!(format!("{first}-{last}").parse(), Ok(IterationRange { first, last }));
            match text.parse::<IterationRange>() {
                Ok(range) => proptest::prop_assert!(range.first >= 1 && range.first <= range.last),
                Err(message) => {
                    let quoted = format!("`{}`", text);
                    proptest::prop_assert!(message.contains(&quoted), "{}", message);
                }
            }
        }
    }

    #[test]
    fn steps_fall_into_cells_by_outcome_tag_and_reward() {
        let episodes = [
            episode(false, &[("explore", 1.0, 0.5), ("explore", 0.0, -1.5), ("monitor", 0.0, -0.2)]),
            episode(false, &[("explore", 1.0, 0.7), ("none", 0.0, -2.0)]),
            episode(true, &[("planning", 1.0, 2.0), ("monitor", 0.0, 1.0)]),
        ];
        let mut cells = BTreeMap::new();
        tally(&episodes, &mut cells).unwrap();
        let lost_paid_explore = &cells[&CellKey { won: false, tag: "explore".into(), paid: true }];
        assert_eq!(lost_paid_explore.steps, 2);
        assert_eq!(lost_paid_explore.pushed_up, 2);
        assert!((lost_paid_explore.mean_advantage() - 0.6).abs() < 1e-12);
        assert_eq!(cells[&CellKey { won: false, tag: "explore".into(), paid: false }].pushed_up, 0);
        assert_eq!(cells[&CellKey { won: false, tag: "none".into(), paid: false }].steps, 1);
        assert_eq!(cells.values().map(|c| c.steps).sum::<usize>(), 7);

        let credit = Credit {
            run: "runs/x".into(),
            range: IterationRange { first: 1, last: 2 },
            episodes: 3,
            cells,
        };
        let text = table(&credit);
        assert!(text.starts_with("runs/x, iterations 1-2 (3 episodes, 7 steps)"), "{text}");
        assert!(text.contains("| lost | explore | paid | 2 | 28.6% | +0.60 | 100% |"), "{text}");
        // Lost before won, and the method's tag order inside each.
        let lost_explore = text.find("| lost | explore").unwrap();
        assert!(lost_explore < text.find("| lost | monitor").unwrap());
        assert!(text.find("| lost | none").unwrap() < text.find("| won | planning").unwrap());
    }

    #[test]
    fn a_step_without_an_advantage_is_named() {
        let value = serde_json::json!({"won": false, "steps": [{"tag": "monitor", "output": ""}]});
        let mut cells = BTreeMap::new();
        let err = tally(&[episode_of(&value, false).unwrap()], &mut cells).unwrap_err();
        assert_eq!(err, "episode 1, step 0: no advantage (not a training rollout)");
    }
}
