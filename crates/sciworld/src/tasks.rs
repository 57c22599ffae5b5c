//! The 30 tasks, their variations, the official train/dev/test splits and RLVMR's L0/L1/L2.
//!
//! The table below is what `scienceworld==1.2.3` reports (`getTaskNames`,
//! `getTaskMaxVariations`, `getVariationsTrain/Dev/Test`); every split is a contiguous range
//! (train first, then dev, then test). The test `catalog_matches_the_simulator` in
//! `tests/jvm.rs` asks the simulator and compares, so the table cannot drift from the jar.

use crate::error::{Result, SciError};

/// One task: its name and how its variations split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskInfo {
    /// Position in the simulator's alphabetical task list (0 = boil .. 29 = use-thermometer).
    pub index: usize,
    pub name: &'static str,
    /// Number of variations: valid variations are `0..variations`.
    pub variations: usize,
    train: usize,
    dev: usize,
}

impl TaskInfo {
    /// The variations of one official split.
    pub fn split(&self, split: OfficialSplit) -> std::ops::Range<usize> {
        match split {
            OfficialSplit::Train => 0..self.train,
            OfficialSplit::Dev => self.train..self.train + self.dev,
            OfficialSplit::Test => self.train + self.dev..self.variations,
        }
    }

    /// Electrical tasks keep the `connect` actions even under "easy".
    pub fn is_electrical(&self) -> bool {
        self.name.contains("power-component") || self.name.contains("conductivity")
    }
}

/// (name, variations, train, dev); test = the rest.
const TABLE: [(&str, usize, usize, usize); 30] = [
    ("boil", 30, 14, 7),
    ("change-the-state-of-matter-of", 30, 14, 7),
    ("chemistry-mix", 32, 16, 8),
    ("chemistry-mix-paint-secondary-color", 36, 18, 9),
    ("chemistry-mix-paint-tertiary-color", 36, 18, 9),
    ("find-animal", 300, 150, 75),
    ("find-living-thing", 300, 150, 75),
    ("find-non-living-thing", 300, 150, 75),
    ("find-plant", 300, 150, 75),
    ("freeze", 30, 14, 7),
    ("grow-fruit", 126, 62, 31),
    ("grow-plant", 126, 62, 31),
    ("identify-life-stages-1", 14, 6, 3),
    ("identify-life-stages-2", 10, 4, 2),
    ("inclined-plane-determine-angle", 168, 84, 42),
    ("inclined-plane-friction-named-surfaces", 1386, 692, 346),
    ("inclined-plane-friction-unnamed-surfaces", 162, 80, 40),
    ("lifespan-longest-lived", 125, 62, 31),
    ("lifespan-longest-lived-then-shortest-lived", 125, 62, 31),
    ("lifespan-shortest-lived", 125, 62, 31),
    ("measure-melting-point-known-substance", 436, 218, 109),
    ("measure-melting-point-unknown-substance", 300, 150, 75),
    ("melt", 30, 14, 7),
    ("mendelian-genetics-known-plant", 120, 60, 30),
    ("mendelian-genetics-unknown-plant", 480, 240, 120),
    ("power-component", 20, 10, 5),
    (
        "power-component-renewable-vs-nonrenewable-energy",
        20,
        10,
        5,
    ),
    ("test-conductivity", 900, 450, 225),
    ("test-conductivity-of-unknown-substances", 600, 300, 150),
    ("use-thermometer", 540, 270, 135),
];

/// Number of tasks.
pub const NUM_TASKS: usize = TABLE.len();

/// Tasks whose outcome can differ between JVMs (and between episodes of one JVM) given the
/// same commands when the JVM hands out its own identity hash codes, as the official client's
/// does, even where the official client's two runs agreed: the order in which circuit parts
/// are evaluated (power-component: the same gold path reached 100 in one JVM and 77 in
/// another) and pollinating bees (mendelian, grow-fruit). The official transcripts are
/// compared only at their reset for them. Under [`crate::JvmConfig::DEFAULT_FLAGS`] these
/// tasks are as deterministic as the others.
pub const NONDETERMINISTIC_TASKS: [&str; 5] = [
    "power-component",
    "power-component-renewable-vs-nonrenewable-energy",
    "mendelian-genetics-known-plant",
    "mendelian-genetics-unknown-plant",
    "grow-fruit",
];

/// All 30 tasks in the simulator's order.
pub fn tasks() -> Vec<TaskInfo> {
    (0..NUM_TASKS).map(task).collect()
}

/// The task at `index` (must be below [`NUM_TASKS`]; see [`resolve_task`] for input).
fn task(index: usize) -> TaskInfo {
    let (name, variations, train, dev) = TABLE[index];
    TaskInfo {
        index,
        name,
        variations,
        train,
        dev,
    }
}

/// A task by name ("boil") or index ("0".."29").
pub fn resolve_task(name_or_index: &str) -> Result<TaskInfo> {
    let key = name_or_index.trim();
    if let Some(index) = TABLE.iter().position(|row| row.0 == key) {
        return Ok(task(index));
    }
    match key.parse::<usize>() {
        Ok(index) if index < NUM_TASKS => Ok(task(index)),
        _ => Err(SciError::UnknownTask(name_or_index.to_string())),
    }
}

/// Check that `variation` exists for `task`.
pub fn check_variation(task: &TaskInfo, variation: usize) -> Result<()> {
    if variation < task.variations {
        Ok(())
    } else {
        Err(SciError::VariationOutOfRange {
            task: task.name.to_string(),
            variation,
            max: task.variations,
        })
    }
}

/// The simulator's own variation splits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OfficialSplit {
    Train,
    Dev,
    Test,
}

impl OfficialSplit {
    pub const ALL: [OfficialSplit; 3] = [
        OfficialSplit::Train,
        OfficialSplit::Dev,
        OfficialSplit::Test,
    ];

    /// The simulator method that lists this split for the loaded task.
    pub fn method(self) -> &'static str {
        match self {
            OfficialSplit::Train => "getVariationsTrain",
            OfficialSplit::Dev => "getVariationsDev",
            OfficialSplit::Test => "getVariationsTest",
        }
    }

    /// "train", "dev" or "test".
    pub fn name(self) -> &'static str {
        match self {
            OfficialSplit::Train => "train",
            OfficialSplit::Dev => "dev",
            OfficialSplit::Test => "test",
        }
    }

    /// Parse "train", "dev" or "test".
    pub fn from_name(name: &str) -> Option<OfficialSplit> {
        OfficialSplit::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// RLVMR's generalisation levels (rlvmr.md §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Level {
    /// Train variations of 29 tasks; tested on their dev variations.
    L0,
    /// Same training; tested on the test variations.
    L1,
    /// Train variations of 19 tasks; tested on the test variations of 10 held-out tasks.
    L2,
}

/// Training or evaluation side of a level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    Train,
    Test,
}

/// The task RLVMR leaves out of every level.
pub const UNUSED_TASK: &str = "use-thermometer";

/// The 10 tasks L2 holds out of training and tests on.
pub const L2_HELD_OUT: [&str; 10] = [
    "change-the-state-of-matter-of",
    "chemistry-mix-paint-tertiary-color",
    "find-plant",
    "grow-plant",
    "identify-life-stages-2",
    "inclined-plane-friction-unnamed-surfaces",
    "lifespan-longest-lived-then-shortest-lived",
    "measure-melting-point-unknown-substance",
    "mendelian-genetics-unknown-plant",
    "test-conductivity-of-unknown-substances",
];

impl Level {
    /// Parse "L0", "L1" or "L2" (any case).
    pub fn from_name(name: &str) -> Option<Level> {
        match name.to_ascii_uppercase().as_str() {
            "L0" => Some(Level::L0),
            "L1" => Some(Level::L1),
            "L2" => Some(Level::L2),
            _ => None,
        }
    }

    /// The tasks used on one side of the level.
    pub fn tasks(self, phase: Phase) -> Vec<TaskInfo> {
        let used = tasks().into_iter().filter(|t| t.name != UNUSED_TASK);
        match (self, phase) {
            (Level::L0 | Level::L1, _) => used.collect(),
            (Level::L2, Phase::Train) => used.filter(|t| !L2_HELD_OUT.contains(&t.name)).collect(),
            (Level::L2, Phase::Test) => used.filter(|t| L2_HELD_OUT.contains(&t.name)).collect(),
        }
    }

    /// Which official split supplies the variations of one side.
    pub fn official_split(self, phase: Phase) -> OfficialSplit {
        match (self, phase) {
            (_, Phase::Train) => OfficialSplit::Train,
            (Level::L0, Phase::Test) => OfficialSplit::Dev,
            (Level::L1 | Level::L2, Phase::Test) => OfficialSplit::Test,
        }
    }

    /// Every (task, variation) of one side, tasks in index order, variations ascending.
    pub fn games(self, phase: Phase) -> Vec<TaskVariation> {
        let split = self.official_split(phase);
        self.tasks(phase)
            .into_iter()
            .flat_map(|t| {
                t.split(split)
                    .map(move |variation| TaskVariation { task: t, variation })
            })
            .collect()
    }
}

/// One playable game: a task and one of its variations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskVariation {
    pub task: TaskInfo,
    pub variation: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_match_the_published_counts() {
        let all = tasks();
        assert_eq!(all.len(), 30);
        let count = |s| all.iter().map(|t| t.split(s).len()).sum::<usize>();
        assert_eq!(all.iter().map(|t| t.variations).sum::<usize>(), 7207);
        assert_eq!(count(OfficialSplit::Train), 3592);
        assert_eq!(count(OfficialSplit::Dev), 1796);
        assert_eq!(count(OfficialSplit::Test), 1819);
        let mut names: Vec<_> = all.iter().map(|t| t.name).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            all.iter().map(|t| t.name).collect::<Vec<_>>(),
            "alphabetical"
        );
    }

    #[test]
    fn tasks_resolve_by_name_or_index_and_reject_others() {
        assert_eq!(resolve_task("boil").unwrap().index, 0);
        assert_eq!(resolve_task("29").unwrap().name, "use-thermometer");
        assert_eq!(resolve_task(" melt ").unwrap().index, 22);
        for bad in ["30", "-1", "boiling", "", "task-1-1"] {
            let err = resolve_task(bad).unwrap_err();
            assert!(err.to_string().contains(&format!("`{bad}`")), "{err}");
        }
        let boil = resolve_task("boil").unwrap();
        assert!(check_variation(&boil, 29).is_ok());
        let err = check_variation(&boil, 30).unwrap_err();
        assert!(err.to_string().contains("30 variations"), "{err}");
    }

    #[test]
    fn levels_follow_the_paper() {
        assert_eq!(Level::L0.tasks(Phase::Train).len(), 29);
        assert_eq!(Level::L1.tasks(Phase::Test).len(), 29);
        assert_eq!(Level::L2.tasks(Phase::Train).len(), 19);
        assert_eq!(Level::L2.tasks(Phase::Test).len(), 10);
        for name in L2_HELD_OUT {
            assert!(resolve_task(name).is_ok(), "{name}");
        }
        let thermometer = resolve_task(UNUSED_TASK).unwrap();
        for level in [Level::L0, Level::L1, Level::L2] {
            for phase in [Phase::Train, Phase::Test] {
                assert!(level.games(phase).iter().all(|g| g.task != thermometer));
            }
        }
        // L0 tests on dev, L1 on test; both train on the same games.
        assert_eq!(Level::L0.games(Phase::Train), Level::L1.games(Phase::Train));
        assert_eq!(Level::L0.games(Phase::Test).len(), 1796 - 135);
        assert_eq!(Level::L1.games(Phase::Test).len(), 1819 - 135);
        let boil_dev: Vec<usize> = Level::L0
            .games(Phase::Test)
            .iter()
            .filter(|g| g.task.name == "boil")
            .map(|g| g.variation)
            .collect();
        assert_eq!(boil_dev, (14..21).collect::<Vec<_>>());
        let l2_test = Level::L2.games(Phase::Test);
        assert!(l2_test.iter().all(|g| L2_HELD_OUT.contains(&g.task.name)));
        assert!(Level::L2
            .games(Phase::Train)
            .iter()
            .all(|g| !L2_HELD_OUT.contains(&g.task.name)));
    }

    /// The authors' lists (`variations_idx/L{0,1,2}_idx.json` of their release: `train` and
    /// `test`, each `[task index, variation]` pairs in a seed-42 shuffle) hold the same games
    /// as ours: the sha256 of the pairs sorted, one `task variation` line each, computed from
    /// their files (docs/sciworld.md, "Levels as the authors draw them").
    #[test]
    fn levels_hold_the_authors_games() {
        use sha2::{Digest, Sha256};
        let authors = [
            (Level::L0, Phase::Train, 3322, "0b05971632882110e9589e6a632b1da9e43be7e625357ce16209d84ed8edf42f"),
            (Level::L0, Phase::Test, 1661, "0ddb6cf993447e6e179bbe2c25a602779c23df8cd4f5550669513df7c3340fae"),
            (Level::L1, Phase::Train, 3322, "0b05971632882110e9589e6a632b1da9e43be7e625357ce16209d84ed8edf42f"),
            (Level::L1, Phase::Test, 1684, "dea6e4ecd74ff9acbd0f79f185ab3704c246a3ce6a0892062c4d35afd8d79523"),
            (Level::L2, Phase::Train, 2242, "3b35385b4e5377d075eb8f59a2d73867b9e863df5fcab37b13a13778b7d21d24"),
            (Level::L2, Phase::Test, 549, "6483d99697226cca140041ddfd97cb549d09716c9aad30e7d4372b0fa87ae580"),
        ];
        for (level, phase, count, sha) in authors {
            let mut pairs: Vec<(usize, usize)> =
                level.games(phase).iter().map(|g| (g.task.index, g.variation)).collect();
            pairs.sort();
            let text: String = pairs.iter().map(|(t, v)| format!("{t} {v}\n")).collect();
            assert_eq!(pairs.len(), count, "{level:?} {phase:?}");
            let digest: String = Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(digest, sha, "{level:?} {phase:?}");
        }
    }
}
