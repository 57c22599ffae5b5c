//! Ground facts: objects are numbered in sorted-name order, so sorting argument
//! tuples by number gives the same order the reference gets by sorting names.

use std::collections::BTreeSet;

pub const MAX_ARITY: usize = 4;
/// Unused argument slots hold this value.
pub const NO_ARG: u32 = u32::MAX;

pub type Args = [u32; MAX_ARITY];

pub fn args_of(values: &[u32]) -> Args {
    let mut args = [NO_ARG; MAX_ARITY];
    args[..values.len()].copy_from_slice(values);
    args
}

/// A set of ground facts, indexed by predicate, each predicate's facts kept sorted.
#[derive(Debug, Clone, Default)]
pub struct FactStore {
    by_pred: Vec<BTreeSet<Args>>,
}

impl FactStore {
    pub fn with_predicates(count: usize) -> Self {
        FactStore { by_pred: vec![BTreeSet::new(); count] }
    }

    pub fn contains(&self, pred: usize, args: &Args) -> bool {
        self.by_pred.get(pred).is_some_and(|s| s.contains(args))
    }

    pub fn insert(&mut self, pred: usize, args: Args) {
        if pred >= self.by_pred.len() {
            self.by_pred.resize(pred + 1, BTreeSet::new());
        }
        self.by_pred[pred].insert(args);
    }

    pub fn remove(&mut self, pred: usize, args: &Args) {
        if let Some(s) = self.by_pred.get_mut(pred) {
            s.remove(args);
        }
    }

    pub fn count(&self, pred: usize) -> usize {
        self.by_pred.get(pred).map_or(0, BTreeSet::len)
    }

    /// Facts of `pred` in sorted order; when `first` is given, only those whose
    /// first argument is `first` (still in sorted order).
    pub fn iter(&self, pred: usize, first: Option<u32>) -> Box<dyn Iterator<Item = &Args> + '_> {
        let Some(set) = self.by_pred.get(pred) else { return Box::new(std::iter::empty()) };
        match first {
            None => Box::new(set.iter()),
            Some(f) => {
                let lo = [f, 0, 0, 0];
                let hi = [f, NO_ARG, NO_ARG, NO_ARG];
                Box::new(set.range(lo..=hi))
            }
        }
    }

    pub fn len(&self) -> usize {
        self.by_pred.iter().map(BTreeSet::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_by_first_argument_keeps_order() {
        let mut s = FactStore::with_predicates(1);
        for (a, b) in [(2, 1), (1, 5), (1, 3), (0, 9)] {
            s.insert(0, args_of(&[a, b]));
        }
        let got: Vec<_> = s.iter(0, Some(1)).map(|a| a[1]).collect();
        assert_eq!(got, vec![3, 5]);
        let all: Vec<_> = s.iter(0, None).map(|a| (a[0], a[1])).collect();
        assert_eq!(all, vec![(0, 9), (1, 3), (1, 5), (2, 1)]);
        s.remove(0, &args_of(&[1, 3]));
        assert!(!s.contains(0, &args_of(&[1, 3])));
        assert_eq!(s.len(), 3);
    }
}
