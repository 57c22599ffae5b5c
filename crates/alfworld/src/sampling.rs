//! Seeded task selection: the games of a level's training or test side, and a
//! sampler that walks them in shuffled epochs (same seed, same sequence).

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::data::{AlfworldData, GameEntry};
use crate::task::{Level, Split, TaskType};

/// Games of `split` whose type is in `types`, sorted by path.
pub fn select<'a>(data: &'a AlfworldData, split: Split, types: &[TaskType]) -> Vec<&'a GameEntry> {
    data.games().iter().filter(|g| g.split == split && types.contains(&g.task_type)).collect()
}

impl Level {
    pub fn train_games(self, data: &AlfworldData) -> Vec<&GameEntry> {
        select(data, Split::Train, self.train_types())
    }

    pub fn test_games(self, data: &AlfworldData) -> Vec<&GameEntry> {
        select(data, self.test_split(), self.test_types())
    }
}

/// Draws games without replacement within an epoch, reshuffling each epoch.
#[derive(Debug, Clone)]
pub struct TaskSampler {
    games: Vec<GameEntry>,
    order: Vec<usize>,
    next: usize,
    rng: ChaCha8Rng,
}

impl TaskSampler {
    /// `None` when there is nothing to sample.
    pub fn new(games: Vec<GameEntry>, seed: u64) -> Option<TaskSampler> {
        if games.is_empty() {
            return None;
        }
        let order = (0..games.len()).collect();
        let mut sampler = TaskSampler { games, order, next: 0, rng: ChaCha8Rng::seed_from_u64(seed) };
        sampler.order.shuffle(&mut sampler.rng);
        Some(sampler)
    }

    pub fn sample(&mut self) -> &GameEntry {
        if self.next == self.order.len() {
            self.order.shuffle(&mut self.rng);
            self.next = 0;
        }
        self.next += 1;
        &self.games[self.order[self.next - 1]]
    }

    pub fn sample_n(&mut self, n: usize) -> Vec<GameEntry> {
        (0..n).map(|_| self.sample().clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(n: usize) -> Vec<GameEntry> {
        (0..n)
            .map(|i| GameEntry::from_path(&format!("json_2.1.1/train/pick_and_place_simple-Book-None-Sofa-{i}/trial_1/game.tw-pddl")).unwrap())
            .collect()
    }

    #[test]
    fn same_seed_same_sequence_and_epochs_cover_everything() {
        let a = TaskSampler::new(entries(10), 7).unwrap().sample_n(30);
        let b = TaskSampler::new(entries(10), 7).unwrap().sample_n(30);
        assert_eq!(a, b);
        let c = TaskSampler::new(entries(10), 8).unwrap().sample_n(30);
        assert_ne!(a, c);
        let mut first_epoch: Vec<_> = a[..10].iter().map(|g| g.path.clone()).collect();
        first_epoch.sort();
        first_epoch.dedup();
        assert_eq!(first_epoch.len(), 10);
        assert!(TaskSampler::new(vec![], 0).is_none());
    }
}
