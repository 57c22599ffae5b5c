//! One simulator object in one JVM, with typed methods. Global state in the simulator (random
//! generator, id counter, simplifications) makes one simulator per JVM the only safe layout.

use std::time::Duration;

use crate::error::{Result, SciError};
use crate::jvm::{Jvm, JvmConfig};
use crate::py4j::{call_message, constructor_message, release_message, Arg, Connection, Value};

const SIMULATOR_CLASS: &str = "scienceworld.runtime.pythonapi.PythonInterface";
/// Separator for joining string lists on the Java side; no action or object name has one.
const LIST_SEPARATOR: &str = "\u{1e}";

/// What the simulator says after one step, in one round trip.
#[derive(Debug, Clone, PartialEq)]
pub struct RawStep {
    pub observation: String,
    /// `getScore()`, 0..1 (negative when the task failed).
    pub score: f64,
    pub completed: bool,
    pub moves: i64,
    /// `getValidActionObjectCombinations()`, when asked for.
    pub valid_actions: Option<Vec<String>>,
}

/// A `PythonInterface` object in its own gateway JVM.
pub struct Simulator {
    connection: Connection,
    /// The simulator object's id on the gateway (`o0`, ...).
    object: String,
    call_timeout: Duration,
    gold_timeout: Duration,
    // Declared last: dropped after the connection, so the socket closes first.
    jvm: Jvm,
}

impl Simulator {
    /// Start a JVM and construct the simulator in it (about 1.5-2.5 s).
    pub fn start(config: &JvmConfig) -> Result<Simulator> {
        let mut jvm = Jvm::start(config)?;
        let connection = match Connection::connect(jvm.port(), jvm.pid(), config.start_timeout) {
            Ok(c) => c,
            Err(e) => {
                jvm.kill();
                return Err(e);
            }
        };
        let mut sim = Simulator {
            connection,
            object: String::new(),
            call_timeout: config.call_timeout,
            gold_timeout: config.gold_timeout,
            jvm,
        };
        let msg = constructor_message(SIMULATOR_CLASS, &[]);
        match sim
            .connection
            .request(&msg, "PythonInterface()", config.start_timeout)
        {
            Ok(Value::Ref(r)) => sim.object = r.id,
            Ok(other) => {
                return Err(SciError::Start(format!(
                    "constructing the simulator answered {other:?}{}",
                    sim.jvm.stderr_note()
                )))
            }
            Err(e) => {
                return Err(SciError::Start(format!(
                    "constructing the simulator: {e}{}",
                    sim.jvm.stderr_note()
                )))
            }
        }
        Ok(sim)
    }

    /// The JVM's process id.
    pub fn pid(&self) -> u32 {
        self.jvm.pid()
    }

    /// Change the time allowed for one ordinary call.
    pub fn set_call_timeout(&mut self, timeout: Duration) {
        self.call_timeout = timeout;
    }

    /// Kill the JVM now (used after a timeout, when it cannot be trusted).
    pub fn kill(&mut self) {
        self.jvm.kill();
    }

    fn call(&mut self, method: &str, args: &[Arg], timeout: Duration) -> Result<Value> {
        let msg = call_message(&self.object, method, args);
        let result = self.connection.request(&msg, method, timeout);
        result.map_err(|e| self.explain(e))
    }

    /// A Java exception arrives as a reference (`ro5`); replace it by the exception's text
    /// (`toString()`) and release it. Any other error passes unchanged.
    fn explain(&mut self, error: SciError) -> SciError {
        let SciError::Java { method, detail } = &error else {
            return error;
        };
        let Some(id) = detail.strip_prefix('r') else {
            return error;
        };
        let text = call_message(id, "toString", &[]);
        let release = release_message(id);
        match self.connection.pipeline(
            &[(&text, "toString"), (&release, "release")],
            self.call_timeout,
        ) {
            Ok(answers) => match &answers[0] {
                Value::Str(text) => SciError::Java {
                    method: method.clone(),
                    detail: format!("{text}{}", self.jvm.stderr_note()),
                },
                _ => error,
            },
            Err(e) if e.jvm_is_broken() => e,
            Err(_) => error,
        }
    }

    fn call_string(&mut self, method: &str, args: &[Arg]) -> Result<String> {
        match self.call(method, args, self.call_timeout)? {
            Value::Str(s) => Ok(s),
            other => Err(unexpected(method, "a string", &other)),
        }
    }

    fn call_int(&mut self, method: &str, args: &[Arg]) -> Result<i64> {
        match self.call(method, args, self.call_timeout)? {
            Value::Int(i) => Ok(i),
            other => Err(unexpected(method, "an integer", &other)),
        }
    }

    /// Call a method returning `List<String>` and fetch all elements at once: the list is joined
    /// on the Java side and released in the same write.
    fn call_string_list(
        &mut self,
        method: &str,
        args: &[Arg],
        timeout: Duration,
    ) -> Result<Vec<String>> {
        match self.call(method, args, timeout)? {
            Value::Ref(list) => self.join_and_release(&list.id, method, timeout),
            other => Err(unexpected(method, "a list", &other)),
        }
    }

    /// Call a method returning `List<Integer>`: its `toString()` ("[1, 2]") in one trip.
    fn call_int_list(&mut self, method: &str) -> Result<Vec<usize>> {
        let list = self.call(method, &[], self.call_timeout)?;
        let Value::Ref(list) = list else {
            return Err(unexpected(method, "a list", &list));
        };
        let text = call_message(&list.id, "toString", &[]);
        let release = release_message(&list.id);
        let answers = self
            .connection
            .pipeline(&[(&text, method), (&release, "release")], self.call_timeout)?;
        let Value::Str(text) = &answers[0] else {
            return Err(unexpected(method, "a list's text", &answers[0]));
        };
        parse_int_list(text).ok_or_else(|| SciError::Protocol {
            method: method.to_string(),
            detail: format!("not a list of integers: {text:.200}"),
        })
    }

    /// `load(task, variation, simplifications, genGoldPath)`; the simulator's "ERROR: ..." answer
    /// becomes [`SciError::Load`].
    pub fn load(
        &mut self,
        task: &str,
        variation: usize,
        simplifications: &str,
        gold_path: bool,
    ) -> Result<()> {
        let timeout = if gold_path {
            self.gold_timeout
        } else {
            self.call_timeout
        };
        let args = [
            Arg::Str(task),
            Arg::Int(i32::try_from(variation).unwrap_or(i32::MAX)),
            Arg::Str(simplifications),
            Arg::Bool(gold_path),
        ];
        match self.call("load", &args, timeout)? {
            Value::Str(s) if s.trim().is_empty() => Ok(()),
            Value::Str(message) => Err(SciError::Load {
                task: task.to_string(),
                variation,
                message: message.trim().to_string(),
            }),
            Value::Void | Value::Null => Ok(()),
            other => Err(unexpected("load", "a string", &other)),
        }
    }

    /// Play one command; fetch score, completion, moves (and the valid actions) in the same
    /// round trip.
    pub fn step(&mut self, command: &str, with_valid_actions: bool) -> Result<RawStep> {
        let obj = self.object.clone();
        let step = call_message(&obj, "step", &[Arg::Str(command)]);
        let score = call_message(&obj, "getScore", &[]);
        let completed = call_message(&obj, "getCompleted", &[]);
        let moves = call_message(&obj, "getNumMoves", &[]);
        let valid = call_message(&obj, "getValidActionObjectCombinations", &[]);
        let mut messages = vec![
            (step.as_str(), "step"),
            (score.as_str(), "getScore"),
            (completed.as_str(), "getCompleted"),
            (moves.as_str(), "getNumMoves"),
        ];
        if with_valid_actions {
            messages.push((valid.as_str(), "getValidActionObjectCombinations"));
        }
        let answers = match self.connection.pipeline(&messages, self.call_timeout) {
            Ok(answers) => answers,
            Err(e) => return Err(self.explain(e)),
        };
        let observation = match &answers[0] {
            Value::Str(s) => s.clone(),
            other => return Err(unexpected("step", "a string", other)),
        };
        let score = match &answers[1] {
            Value::Double(d) => *d,
            Value::Int(i) => *i as f64,
            other => return Err(unexpected("getScore", "a number", other)),
        };
        let completed = match &answers[2] {
            Value::Bool(b) => *b,
            other => return Err(unexpected("getCompleted", "a boolean", other)),
        };
        let moves = match &answers[3] {
            Value::Int(i) => *i,
            other => return Err(unexpected("getNumMoves", "an integer", other)),
        };
        let valid_actions = match answers.get(4) {
            Some(Value::Ref(list)) => {
                let timeout = self.call_timeout;
                let mut valid =
                    self.join_and_release(&list.id, "getValidActionObjectCombinations", timeout)?;
                valid.sort_unstable();
                Some(valid)
            }
            Some(other) => {
                return Err(unexpected(
                    "getValidActionObjectCombinations",
                    "a list",
                    other,
                ))
            }
            None => None,
        };
        Ok(RawStep {
            observation,
            score,
            completed,
            moves,
            valid_actions,
        })
    }

    fn join_and_release(
        &mut self,
        list_id: &str,
        method: &str,
        timeout: Duration,
    ) -> Result<Vec<String>> {
        let join = call_message(
            "z:java.lang.String",
            "join",
            &[Arg::Str(LIST_SEPARATOR), Arg::Ref(list_id)],
        );
        let release = release_message(list_id);
        let answers = self
            .connection
            .pipeline(&[(&join, method), (&release, "release")], timeout)?;
        match &answers[0] {
            Value::Str(joined) => Ok(split_joined(joined)),
            other => Err(unexpected(method, "a joined string", other)),
        }
    }

    /// The valid action strings of the current state, sorted (20-30 ms: 3-5x a step).
    pub fn valid_actions(&mut self) -> Result<Vec<String>> {
        let mut valid =
            self.call_string_list("getValidActionObjectCombinations", &[], self.call_timeout)?;
        // The simulator sorts already; sorting again makes the order a contract of ours.
        valid.sort_unstable();
        Ok(valid)
    }

    /// Action templates, e.g. "open OBJ".
    pub fn possible_actions(&mut self) -> Result<Vec<String>> {
        self.call_string_list("getPossibleActions", &[], self.call_timeout)
    }

    /// Names of the objects the agent can refer to now.
    pub fn possible_objects(&mut self) -> Result<Vec<String>> {
        self.call_string_list("getPossibleObjects", &[], self.call_timeout)
    }

    /// The 30 task names, alphabetical.
    pub fn task_names(&mut self) -> Result<Vec<String>> {
        self.call_string_list("getTaskNames", &[], self.call_timeout)
    }

    /// Number of variations of a task.
    pub fn max_variations(&mut self, task: &str) -> Result<usize> {
        let n = self.call_int("getTaskMaxVariations", &[Arg::Str(task)])?;
        usize::try_from(n).map_err(|_| SciError::Protocol {
            method: "getTaskMaxVariations".to_string(),
            detail: format!("negative count {n} for `{task}`"),
        })
    }

    /// The official train/dev/test variations of the loaded task.
    pub fn variations(&mut self, split: crate::tasks::OfficialSplit) -> Result<Vec<usize>> {
        self.call_int_list(split.method())
    }

    /// The gold action sequence of the loaded task (the load must have asked for it).
    pub fn gold_action_sequence(&mut self) -> Result<Vec<String>> {
        self.call_string_list("getGoldActionSequence", &[], self.gold_timeout)
    }

    pub fn task_description(&mut self) -> Result<String> {
        self.call_string("getTaskDescription", &[])
    }

    /// "look around" without spending a move.
    pub fn look(&mut self) -> Result<String> {
        self.call_string("freeActionLook", &[])
    }

    /// The inventory without spending a move.
    pub fn inventory(&mut self) -> Result<String> {
        self.call_string("freeActionInventory", &[])
    }

    /// The simplifications in force, as the simulator lists them.
    pub fn simplifications_used(&mut self) -> Result<String> {
        self.call_string("getSimplificationsUsed", &[])
    }
}

fn unexpected(method: &str, wanted: &str, got: &Value) -> SciError {
    SciError::Protocol {
        method: method.to_string(),
        detail: format!("expected {wanted}, got {got:?}"),
    }
}

fn split_joined(joined: &str) -> Vec<String> {
    if joined.is_empty() {
        return Vec::new();
    }
    joined.split(LIST_SEPARATOR).map(str::to_string).collect()
}

/// Parse Java's `List.toString()` of integers: "[]" or "[1, 2, 3]".
fn parse_int_list(text: &str) -> Option<Vec<usize>> {
    let inner = text.trim().strip_prefix('[')?.strip_suffix(']')?.trim();
    if inner.is_empty() {
        return Some(Vec::new());
    }
    inner.split(',').map(|n| n.trim().parse().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_lists_parse_from_java_text() {
        assert_eq!(parse_int_list("[]"), Some(vec![]));
        assert_eq!(parse_int_list("[0, 1, 25]"), Some(vec![0, 1, 25]));
        assert_eq!(parse_int_list("[0, x]"), None);
        assert_eq!(parse_int_list("0, 1"), None);
    }

    #[test]
    fn joined_lists_split_back() {
        assert!(split_joined("").is_empty());
        assert_eq!(split_joined("a b\u{1e}c"), vec!["a b", "c"]);
    }
}
