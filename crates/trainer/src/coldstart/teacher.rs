//! Cold-start annotation by a served teacher, the published recipe: a model behind an
//! OpenAI-compatible server writes each step's tag and one-sentence reason for an expert
//! trajectory whose actions are fixed. An annotation whose length differs from the
//! trajectory's is rejected whole; otherwise a step is rejected when its action differs,
//! its tag is not one of the four, or its reason is empty or holds markup. Rejected steps
//! keep the built-in annotator's reply, and every rejection is counted by kind.
//!
//! Later prompts show earlier replies (recent outputs, the carried plan), so the annotated
//! trajectories are replayed through the collector with the new replies: each SFT sample's
//! prompt is then exactly what the agent would have seen.

use std::collections::{BTreeMap, HashMap};

use rlvmr_core::{OutputStyle, Tag};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::agent::{Policy, Reply, Turn};
use crate::collector::{collect, CollectorOptions};
use crate::envs::EnvProvider;
use crate::error::{Result, TrainerError};
use crate::agent::annotated_reply;
use crate::record::{EpisodeRecord, EpisodeSpec, TaskRef};
use crate::served::client::{map_in_flight, Client, Message, RequestError, RequestStats, Sampling, ServedOptions};

/// The longest reason kept, in characters (the recipe asks for one sentence).
pub const MAX_REASON_CHARS: usize = 400;

/// What the teacher did to a cold start.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TeacherReport {
    pub teacher: String,
    pub trajectories: usize,
    /// Steps whose tag and reason are the teacher's.
    pub teacher_steps: usize,
    /// Steps that kept the built-in annotation.
    pub fallback_steps: usize,
    /// Trajectories whose whole annotation was rejected (or whose request failed).
    pub rejected_trajectories: usize,
    /// Rejections by kind (a whole-trajectory rejection counts once).
    pub rejections: BTreeMap<String, usize>,
    pub requests: RequestStats,
}

/// One step's annotation, or why it was rejected.
pub type StepAnnotation = std::result::Result<(Tag, String), Rejection>;

/// Why an annotation (or one step of it) was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    RequestFailed(String),
    NotJson(String),
    WrongLength { expected: usize, got: usize },
    ActionChanged,
    UnknownTag(String),
    EmptyReason,
    Markup,
}

impl Rejection {
    /// The counting key.
    pub fn kind(&self) -> &'static str {
        match self {
            Rejection::RequestFailed(_) => "request failed",
            Rejection::NotJson(_) => "not a JSON array",
            Rejection::WrongLength { .. } => "wrong number of steps",
            Rejection::ActionChanged => "action changed",
            Rejection::UnknownTag(_) => "unknown tag",
            Rejection::EmptyReason => "empty reason",
            Rejection::Markup => "markup in the reason",
        }
    }
}

/// The request asking for one trajectory's annotation.
pub fn teacher_prompt(episode: &EpisodeRecord) -> String {
    let mut out = String::from(
        "You annotate an expert's trajectory in a text-based environment, to teach an agent to \
         label its reasoning. The actions are fixed: copy each one exactly. For every step, \
         choose exactly one tag for the thinking that led to its action:\n\
         - planning: decompose the whole task into steps, or re-plan it;\n\
         - explore: list candidate locations, objects or actions when information is missing;\n\
         - reflection: diagnose why an earlier step failed and change course;\n\
         - monitor: track progress against the plan and pick the next concrete action.\n\
         Write the reason as one sentence, as the agent would think it before acting: it may \
         use what was observed so far, never what comes later. No tags or angle brackets in \
         the reason.\n\n",
    );
    out.push_str(&format!("Task: {}\n\n", episode.task.trim()));
    for (i, step) in episode.steps.iter().enumerate() {
        out.push_str(&format!(
            "Step {}\nObservation: {}\nAction: {}\n\n",
            i + 1,
            step.observation.trim(),
            step.action
        ));
    }
    if let Some(last) = episode.steps.last() {
        out.push_str(&format!("After the last step: {}\n\n", last.next_observation.trim()));
    }
    out.push_str(&format!(
        "Answer with only a JSON array of exactly {} objects, one per step in order, each \
         {{\"step\": <number>, \"tag\": \"planning|explore|reflection|monitor\", \"reason\": \
         \"<one sentence>\", \"action\": \"<the step's action, copied exactly>\"}}.",
        episode.steps.len()
    ));
    out
}

/// Reads a teacher's answer for a trajectory with `actions`: an error when it is not a
/// JSON array of as many objects (a fenced code block around it is fine), else one
/// verdict per step.
pub fn parse_annotation(text: &str, actions: &[&str]) -> std::result::Result<Vec<StepAnnotation>, Rejection> {
    let json = json_array_text(text).ok_or_else(|| Rejection::NotJson(excerpt(text)))?;
    let items: Vec<Value> =
        serde_json::from_str(json).map_err(|e| Rejection::NotJson(format!("{e}: {}", excerpt(json))))?;
    if items.len() != actions.len() {
        return Err(Rejection::WrongLength {
            expected: actions.len(),
            got: items.len(),
        });
    }
    Ok(items.iter().zip(actions).map(|(item, action)| step_annotation(item, action)).collect())
}

fn step_annotation(item: &Value, action: &str) -> StepAnnotation {
    let field = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or("").trim();
    if field("action") != action.trim() {
        return Err(Rejection::ActionChanged);
    }
    let tag = Tag::from_name(field("tag")).ok_or_else(|| Rejection::UnknownTag(field("tag").to_string()))?;
    let reason = field("reason").split_whitespace().collect::<Vec<_>>().join(" ");
    if reason.is_empty() {
        return Err(Rejection::EmptyReason);
    }
    if reason.contains(['<', '>']) || reason.chars().count() > MAX_REASON_CHARS {
        return Err(Rejection::Markup);
    }
    Ok((tag, reason))
}

/// The text from the first `[` to the last `]`.
fn json_array_text(text: &str) -> Option<&str> {
    let start = text.find('[')?;
    let end = text.rfind(']')?;
    (end > start).then(|| &text[start..=end])
}

fn excerpt(text: &str) -> String {
    text.chars().take(80).collect()
}

/// A served teacher.
pub struct Teacher {
    client: Client,
    temperature: f64,
    max_tokens: usize,
}

impl Teacher {
    /// Connects (one `GET /models`), so a wrong URL or key fails before any request.
    pub fn connect(options: ServedOptions, temperature: f64, max_tokens: usize) -> Result<Teacher> {
        Ok(Teacher {
            client: Client::connect(options)?,
            temperature,
            max_tokens,
        })
    }

    /// Each episode's per-step verdicts, or the rejection of its whole annotation. A
    /// refused key or a wrong model stops the cold start.
    pub fn annotate(&self, episodes: &[EpisodeRecord]) -> Result<Vec<std::result::Result<Vec<StepAnnotation>, Rejection>>> {
        let in_flight = self.client.options().max_in_flight;
        let answers = map_in_flight(episodes, in_flight, |e| self.annotate_one(e));
        answers.into_iter().collect()
    }

    fn annotate_one(&self, episode: &EpisodeRecord) -> Result<std::result::Result<Vec<StepAnnotation>, Rejection>> {
        let sampling = Sampling {
            max_tokens: self.max_tokens,
            temperature: self.temperature,
            top_p: 1.0,
            seed: Some(episode.rollout_seed),
            stop: Vec::new(),
        };
        let actions: Vec<&str> = episode.steps.iter().map(|s| s.action.as_str()).collect();
        match self.client.chat(&[Message::user(teacher_prompt(episode))], &sampling) {
            Ok(completion) => Ok(parse_annotation(&completion.text, &actions)),
            Err(RequestError::Fatal(message)) => Err(TrainerError::Invalid(format!("cold-start teacher: {message}"))),
            Err(RequestError::Failed(message)) => Ok(Err(Rejection::RequestFailed(message))),
        }
    }

    pub fn name(&self) -> String {
        self.client.name()
    }

    pub fn stats(&self) -> RequestStats {
        self.client.stats()
    }
}

/// Replaces the built-in annotations of `episodes` by the teacher's where accepted, and
/// replays them so later prompts show the new replies. A replay that does not take the
/// same actions to the same end keeps the built-in episode (counted as `replay differs`).
pub fn reannotate(
    provider: &dyn EnvProvider,
    teacher: &Teacher,
    episodes: Vec<EpisodeRecord>,
    style: OutputStyle,
    options: &CollectorOptions,
) -> Result<(Vec<EpisodeRecord>, TeacherReport)> {
    let verdicts = teacher.annotate(&episodes)?;
    let mut report = TeacherReport {
        teacher: teacher.name(),
        trajectories: episodes.len(),
        ..TeacherReport::default()
    };
    let mut scripts = Vec::with_capacity(episodes.len());
    let mut teacher_steps = Vec::with_capacity(episodes.len());
    for (episode, verdict) in episodes.iter().zip(verdicts) {
        let (steps, whole_rejected) = match verdict {
            Ok(steps) => (steps, false),
            Err(rejection) => {
                count(&mut report.rejections, rejection.kind());
                report.rejected_trajectories += 1;
                (vec![Err(rejection); episode.steps.len()], true)
            }
        };
        for rejection in steps.iter().filter_map(|v| v.as_ref().err()) {
            if !whole_rejected {
                count(&mut report.rejections, rejection.kind());
            }
        }
        teacher_steps.push(steps.iter().filter(|v| v.is_ok()).count());
        let replies = episode
            .steps
            .iter()
            .zip(&steps)
            .map(|(step, verdict)| match verdict {
                Ok((tag, reason)) => options.prompt.layout.apply(&annotated_reply(style, *tag, reason, &step.action)),
                Err(_) => step.output.clone(),
            })
            .collect();
        scripts.push(replies);
    }
    let replayed = replay(provider, &episodes, scripts, options)?;
    let mut out = Vec::with_capacity(episodes.len());
    for ((original, new), accepted) in episodes.into_iter().zip(replayed).zip(teacher_steps) {
        let same = new.error.is_none()
            && new.won == original.won
            && new.steps.len() == original.steps.len()
            && new.steps.iter().zip(&original.steps).all(|(a, b)| a.action == b.action);
        if same {
            report.teacher_steps += accepted;
            report.fallback_steps += new.steps.len() - accepted;
            out.push(new);
        } else {
            report.fallback_steps += original.steps.len();
            count(&mut report.rejections, "replay differs");
            out.push(original);
        }
    }
    report.requests = teacher.stats();
    Ok((out, report))
}

fn count(counts: &mut BTreeMap<String, usize>, kind: &str) {
    *counts.entry(kind.to_string()).or_insert(0) += 1;
}

/// Plays each episode again with its replies in order (mistake flags kept).
fn replay(
    provider: &dyn EnvProvider,
    episodes: &[EpisodeRecord],
    scripts: Vec<Vec<String>>,
    options: &CollectorOptions,
) -> Result<Vec<EpisodeRecord>> {
    let specs: Vec<EpisodeSpec> = episodes
        .iter()
        .map(|e| EpisodeSpec {
            task: TaskRef {
                game: e.game.clone(),
                task_type: e.task_type.clone(),
            },
            uid: e.uid.clone(),
            env_seed: e.env_seed,
            rollout_seed: e.rollout_seed,
        })
        .collect();
    let mistakes = episodes.iter().map(|e| e.steps.iter().map(|s| s.mistake).collect()).collect();
    let mut script = Scripted {
        scripts,
        mistakes,
        by_spec: specs.iter().enumerate().map(|(i, s)| ((s.uid.clone(), s.rollout_seed), i)).collect(),
        slots: HashMap::new(),
    };
    Ok(collect(provider, &mut script, &specs, options)?.episodes)
}

/// Replies fixed in advance, one list per episode.
struct Scripted {
    scripts: Vec<Vec<String>>,
    mistakes: Vec<Vec<bool>>,
    by_spec: HashMap<(String, u64), usize>,
    slots: HashMap<usize, usize>,
}

impl Policy for Scripted {
    fn name(&self) -> String {
        "teacher replay".into()
    }

    fn start_episode(&mut self, slot: usize, spec: &EpisodeSpec) -> Result<()> {
        let episode = self.by_spec.get(&(spec.uid.clone(), spec.rollout_seed)).copied().ok_or_else(|| {
            TrainerError::Invalid(format!("no script for episode {} (seed {})", spec.uid, spec.rollout_seed))
        })?;
        self.slots.insert(slot, episode);
        Ok(())
    }

    fn act(&mut self, turns: &[Turn]) -> Result<Vec<Result<Reply, String>>> {
        Ok(turns
            .iter()
            .map(|t| {
                let episode = self.slots[&t.slot];
                let output = self.scripts[episode]
                    .get(t.step)
                    .ok_or_else(|| format!("the script of episode {episode} ended at step {}", t.step))?;
                Ok(Reply {
                    output: output.clone().into_bytes(),
                    mistake: self.mistakes[episode].get(t.step).copied().unwrap_or(false),
                    ..Reply::default()
                })
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ACTIONS: [&str; 2] = ["go to desk 1", "take pen 1 from desk 1"];

    #[test]
    fn a_fenced_json_annotation_is_read_step_by_step() {
        let text = "Here you go:\n```json\n[{\"step\":1,\"tag\":\"planning\",\"reason\":\"First find the pen,\\n then use it.\",\"action\":\"go to desk 1\"},\n {\"step\":2,\"tag\":\"Monitor\",\"reason\":\"The pen is here.\",\"action\":\"take pen 1 from desk 1\"}]\n```";
        let steps = parse_annotation(text, &ACTIONS).unwrap();
        assert_eq!(steps[0], Ok((Tag::Planning, "First find the pen, then use it.".into())));
        assert_eq!(steps[1], Ok((Tag::Monitor, "The pen is here.".into())));
    }

    #[test]
    fn wrong_length_or_no_json_rejects_the_whole_annotation() {
        let one = r#"[{"tag":"planning","reason":"r","action":"go to desk 1"}]"#;
        assert_eq!(
            parse_annotation(one, &ACTIONS),
            Err(Rejection::WrongLength { expected: 2, got: 1 })
        );
        assert!(matches!(parse_annotation("I cannot help.", &ACTIONS), Err(Rejection::NotJson(_))));
        assert!(matches!(parse_annotation("[1, 2", &ACTIONS), Err(Rejection::NotJson(_))));
    }

    #[test]
    fn bad_steps_are_rejected_one_by_one() {
        let text = r#"[{"tag":"planning","reason":"ok","action":"go to desk 2"},
                      {"tag":"musing","reason":"ok","action":"take pen 1 from desk 1"}]"#;
        let steps = parse_annotation(text, &ACTIONS).unwrap();
        assert_eq!(steps[0], Err(Rejection::ActionChanged));
        assert_eq!(steps[1], Err(Rejection::UnknownTag("musing".into())));
        let text = r#"[{"tag":"explore","reason":"  ","action":"go to desk 1"},
                      {"tag":"explore","reason":"<action>x</action>","action":"take pen 1 from desk 1"}]"#;
        let steps = parse_annotation(text, &ACTIONS).unwrap();
        assert_eq!(steps[0], Err(Rejection::EmptyReason));
        assert_eq!(steps[1], Err(Rejection::Markup));
    }
}
