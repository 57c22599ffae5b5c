//! Recorded playable gold paths ([`GoldOracle::playable_path`]). Generating a path costs a
//! JVM with a 1 GB heap up to seconds (the gold path's search, then replays that name the
//! objects as the room shows them): more than half the CPU of a cold start. A recorded path
//! is also the same whatever else was generated: in a JVM, the conductivity tasks' order of
//! wires and some searches' order of containers come from a random stream that every
//! generation advances, so a generated path depends on the variations generated before it
//! in the same JVM. `rlvmr sciworld gold-paths` records them.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::gold::{gunzipped, GoldOracle, PlayablePath};
use crate::tasks::{check_variation, resolve_task};

/// One recorded path: a JSON line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoldPathRecord {
    pub task: String,
    pub variation: usize,
    /// The simplifications the path was generated under.
    pub simplifications: String,
    /// The cut the path was asked for with (`null`: none).
    pub cut_at: Option<usize>,
    /// The whole gold path, not an opening cut from a longer one.
    pub whole: bool,
    pub description: String,
    pub path: Vec<String>,
}

impl GoldPathRecord {
    /// The path `oracle` plays for a task's variation with `cut_at`, as a record.
    pub fn generate(oracle: &mut GoldOracle, task: &str, variation: usize, cut_at: Option<usize>) -> crate::error::Result<GoldPathRecord> {
        let name = resolve_task(task)?.name;
        let PlayablePath { path, whole, description } = oracle.playable_path(name, variation, cut_at)?;
        Ok(GoldPathRecord {
            task: name.to_string(),
            variation,
            simplifications: oracle.simplifications().to_string(),
            cut_at,
            whole,
            description,
            path,
        })
    }

    /// The path as [`GoldOracle::playable_path`] gives it.
    pub fn playable(&self) -> PlayablePath {
        PlayablePath { path: self.path.clone(), whole: self.whole, description: self.description.clone() }
    }

    /// Whether this record answers a request for the path with `cut_at`: an opening only a
    /// request with the same cut, a whole path any request that would not cut it.
    fn answers(&self, cut_at: Option<usize>) -> bool {
        match (self.whole, cut_at) {
            (true, None) => true,
            (true, Some(limit)) => self.path.len() <= limit,
            (false, _) => cut_at == self.cut_at,
        }
    }
}

/// Recorded playable gold paths per (simplifications, task index, variation).
#[derive(Debug, Clone, Default)]
pub struct GoldPaths {
    records: HashMap<(String, usize, usize), Vec<GoldPathRecord>>,
}

/// The recording committed with this crate: every training variation of the 30 tasks
/// under the "easy" simplifications, cut at 30 actions (the presets' step limit).
const RECORDED_TRAIN: &[u8] = include_bytes!("../data/gold_paths_train.jsonl.gz");

impl GoldPaths {
    /// Parses JSON lines of [`GoldPathRecord`]s; an error names the line and what was wrong.
    pub fn parse(text: &str) -> std::result::Result<GoldPaths, String> {
        let mut paths = GoldPaths::default();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let bad = |what: String| format!("line {}: {what}", i + 1);
            let record: GoldPathRecord = serde_json::from_str(line).map_err(|e| bad(e.to_string()))?;
            let task = resolve_task(&record.task).map_err(|e| bad(e.to_string()))?;
            check_variation(&task, record.variation).map_err(|e| bad(e.to_string()))?;
            if record.path.is_empty() {
                return Err(bad(format!("the path of {} {} is empty", record.task, record.variation)));
            }
            if let Some(limit) = record.cut_at.filter(|&limit| record.path.len() > limit) {
                return Err(bad(format!(
                    "the path of {} {} has {} actions, more than its cut_at {limit}",
                    record.task,
                    record.variation,
                    record.path.len()
                )));
            }
            paths.insert(task.index, record);
        }
        Ok(paths)
    }

    /// Adds a record (it replaces one asked for with the same cut).
    pub fn insert(&mut self, task_index: usize, record: GoldPathRecord) {
        let key = (record.simplifications.clone(), task_index, record.variation);
        let records = self.records.entry(key).or_default();
        records.retain(|r| r.cut_at != record.cut_at);
        records.push(record);
    }

    /// The committed recording of the training variations.
    pub fn recorded_train() -> &'static GoldPaths {
        static RECORDED: std::sync::OnceLock<GoldPaths> = std::sync::OnceLock::new();
        RECORDED.get_or_init(|| GoldPaths::parse(&gunzipped(RECORDED_TRAIN)).expect("the committed recording parses"))
    }

    /// The recorded path that [`GoldOracle::playable_path`] gives for a task's (name or
    /// index) variation under `simplifications` with `cut_at`, if there is one.
    pub fn get(&self, simplifications: &str, task: &str, variation: usize, cut_at: Option<usize>) -> Option<PlayablePath> {
        self.answering(simplifications, task, variation, cut_at).map(GoldPathRecord::playable)
    }

    /// Whether a path asked for with `cut_at` is recorded for the variation.
    pub fn contains(&self, simplifications: &str, task: &str, variation: usize, cut_at: Option<usize>) -> bool {
        self.answering(simplifications, task, variation, cut_at).is_some()
    }

    /// The record answering a request for a variation's path with `cut_at`, if any.
    fn answering(&self, simplifications: &str, task: &str, variation: usize, cut_at: Option<usize>) -> Option<&GoldPathRecord> {
        let task = resolve_task(task).ok()?;
        let records = self.records.get(&(simplifications.to_string(), task.index, variation))?;
        records.iter().find(|r| r.answers(cut_at))
    }

    /// Every record, sorted by task index, variation and cut.
    pub fn sorted_records(&self) -> Vec<&GoldPathRecord> {
        let mut records: Vec<(&(String, usize, usize), &GoldPathRecord)> =
            self.records.iter().flat_map(|(key, records)| records.iter().map(move |r| (key, r))).collect();
        records.sort_by(|(a, ra), (b, rb)| a.cmp(b).then(ra.cut_at.cmp(&rb.cut_at)));
        records.into_iter().map(|(_, r)| r).collect()
    }

    /// Recorded paths.
    pub fn len(&self) -> usize {
        self.records.values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(task: &str, variation: usize, cut_at: Option<usize>, whole: bool, path: &[&str]) -> String {
        serde_json::to_string(&GoldPathRecord {
            task: task.into(),
            variation,
            simplifications: "easy".into(),
            cut_at,
            whole,
            description: "Your task is to boil water.".into(),
            path: path.iter().map(|a| a.to_string()).collect(),
        })
        .unwrap()
    }

    #[test]
    fn a_whole_path_answers_requests_that_would_not_cut_it() {
        let text = line("boil", 0, Some(3), true, &["look around", "focus on water"]);
        let paths = GoldPaths::parse(&text).unwrap();
        assert_eq!(paths.len(), 1);
        for cut in [None, Some(2), Some(3), Some(30)] {
            assert!(paths.contains("easy", "boil", 0, cut), "{cut:?}");
        }
        assert!(!paths.contains("easy", "boil", 0, Some(1)));
        assert!(!paths.contains("", "boil", 0, None), "other simplifications");
        assert!(!paths.contains("easy", "boil", 1, None), "another variation");
        // By index as well as by name.
        let index = resolve_task("boil").unwrap().index.to_string();
        assert!(paths.contains("easy", &index, 0, None));
    }

    #[test]
    fn an_opening_answers_only_its_own_cut() {
        let text = line("boil", 0, Some(2), false, &["look around", "focus on water"]);
        let paths = GoldPaths::parse(&text).unwrap();
        assert!(paths.contains("easy", "boil", 0, Some(2)));
        for cut in [None, Some(1), Some(3)] {
            assert!(!paths.contains("easy", "boil", 0, cut), "{cut:?}");
        }
    }

    #[test]
    fn bad_lines_are_named() {
        let good = line("boil", 0, None, true, &["look around"]);
        let cases = [
            ("{\"task\": \"boil\"}".to_string(), "line 2"),
            (good.replace("\"boil\"", "\"boiling\""), "boiling"),
            (good.replace("\"variation\":0", "\"variation\":99999"), "99999"),
            (line("boil", 0, None, true, &[]), "empty"),
            (line("boil", 0, Some(1), false, &["a", "b"]), "cut_at 1"),
            (good.replace("\"whole\"", "\"hole\""), "hole"),
        ];
        for (bad, named) in cases {
            let e = GoldPaths::parse(&format!("{good}\n{bad}\n")).unwrap_err();
            assert!(e.starts_with("line 2:") && e.contains(named), "{named}: {e}");
        }
    }

    #[test]
    fn records_sort_and_a_new_record_replaces_its_cut() {
        let text = [
            line("melt", 1, Some(30), true, &["b"]),
            line("boil", 2, Some(30), true, &["c"]),
            line("boil", 2, Some(30), true, &["d"]),
        ]
        .join("\n");
        let paths = GoldPaths::parse(&text).unwrap();
        assert_eq!(paths.len(), 2);
        let order: Vec<_> = paths.sorted_records().iter().map(|r| (r.task.clone(), r.path[0].clone())).collect();
        assert_eq!(order, [("boil".to_string(), "d".to_string()), ("melt".to_string(), "b".to_string())]);
    }

    #[test]
    fn the_recording_parses() {
        let recorded = GoldPaths::recorded_train();
        for record in recorded.sorted_records() {
            assert_eq!(record.simplifications, crate::env::DEFAULT_SIMPLIFICATIONS);
        }
    }
}
