//! The prompt builder: the text the agent reads at every step.
//!
//! The prompt is built fresh at each environment step from the episode so far; it is not a
//! growing chat. [`render`] returns plain text (the user message); the caller wraps it in the
//! model's chat template.
//!
//! # Slots
//!
//! In the order they appear:
//!
//! - **environment**: one or two sentences on the world the agent acts in ([`PromptEnv`]).
//! - **task**: the task sentence ([`PromptInput::task`]).
//! - **tags** (tagged style only; an instruction): what each of the four meta-reasoning tags
//!   ([`Tag`](crate::Tag)) is for.
//! - **step count**: how many steps were taken ([`PromptInput::step`]).
//! - **history window**: the most recent (observation, action) pairs, oldest first; how many is
//!   [`PromptConfig::history`] ([`HistoryWindow::Last`]`(n)` or [`HistoryWindow::All`]).
//!   Each [`HistoryEntry`] pairs the observation the agent saw with the action it then took.
//!   Their observations lose their blank lines (full prompts indent the continuation lines,
//!   compact ones join the lines with ` | `).
//! - **recent replies**: the raw model outputs of the last [`PromptConfig::recent_outputs`]
//!   steps, verbatim (trimmed), oldest first.
//! - **plan** (tagged style only): the agent's current plan, or `No plan.` before its first
//!   non-empty `<planning>` block; [`carried_plan`] keeps it up to date step by step.
//! - **current observation**: the latest observation, verbatim but for surrounding blank space
//!   and trailing spaces (compact prompts also drop its blank lines).
//! - **actions**: ALFWorld: the admissible actions, one per line, with `help` dropped when
//!   [`PromptConfig::drop_help`] is set. ScienceWorld: the action templates (placeholders `OBJ`
//!   and `LOC`) and the objects in view instead of the (very long) list of valid
//!   combinations; if no templates are given, the admissible list is shown instead.
//! - **format** (an instruction): the required reply format, last, right before the model
//!   answers.
//! - **reminder** (cold start only; an instruction): a one-line reminder of the reply format.
//!
//! [`PromptConfig::instructions`] `= false` leaves the three instruction slots out.
//!
//! Slots with nothing to show (an empty history window, no recent replies) are left out.
//!
//! # Variants
//!
//! - **first step** (`step == 0`): environment, task, tags, plan, observation, actions and
//!   format; no step count, no history, no replies (any history passed is ignored).
//! - **normal** (`step >= 1`): every slot above.
//! - **cold start** ([`PromptConfig::cold_start`]): the normal or first-step prompt plus a
//!   final one-line reminder of the format; used for the SFT data of the cold start.
//! - **think** ([`PromptStyle::Think`]): the GRPO/GiGPO baselines. The model answers
//!   `<think>...</think><action>...</action>`; there is no tag list and no plan slot (the
//!   baselines have no planning tag, so it would always read `No plan.`).
//! - **compact** ([`PromptConfig::compact`]): the same slots with minimal instructions and
//!   short labels, one line per history step, for small models with short contexts.
//!   [`PromptConfig::small`] pairs it with a 3-step window and one recent reply, which keeps an
//!   ALFWorld prompt to a few hundred tokens.
//!
//! # Contract
//!
//! Rendering is deterministic, linear in the size of its input, and never panics: empty lists,
//! empty strings, huge observations or a history at step 0 all render. Nothing is truncated;
//! fitting the prompt into a token budget is the caller's business.
//!
//! # Defaults
//!
//! [`PromptConfig::default`]: ALFWorld, tagged, the last 5 (observation, action) pairs, the last
//! 3 replies, full instructions, no cold-start reminder, `help` dropped. The plan is taken
//! from raw outputs ([`planning_text`]) whether or not the rest of the output is well formed.
//!
//! # Step numbers
//!
//! Steps are numbered from 1. The history may be the whole episode or only its tail: entry
//! `i` of `history` is step `max(step, history.len()) - history.len() + i + 1`, so the last
//! entry is always the last step taken.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use crate::format::ReplyLayout;
use crate::scene;

/// What the plan slot shows before the agent's first non-empty `<planning>` block.
pub const NO_PLAN: &str = "No plan.";

/// The environment the prompt describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PromptEnv {
    /// ALFWorld: a text household; the admissible actions are listed.
    #[default]
    AlfWorld,
    /// ScienceWorld: a text science world; action templates and objects are listed.
    ScienceWorld,
}

/// What the model is asked to answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PromptStyle {
    /// RLVMR: one `<planning>`, `<explore>`, `<reflection>` or `<monitor>` block, then
    /// `<action>...</action>`.
    #[default]
    Tagged,
    /// The GRPO/GiGPO baselines: `<think>...</think><action>...</action>`.
    Think,
}

/// How many past (observation, action) pairs the prompt shows.
///
/// In a config file: a number of steps (`history = 3`) or `history = "all"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HistoryWindow {
    /// The last `n` steps (`Last(0)`: none).
    Last(usize),
    /// Every step taken so far.
    All,
}

impl Default for HistoryWindow {
    /// The last 5 steps.
    fn default() -> Self {
        HistoryWindow::Last(5)
    }
}

impl HistoryWindow {
    /// How many of `available` entries the window shows.
    pub fn len_of(self, available: usize) -> usize {
        match self {
            HistoryWindow::Last(n) => n.min(available),
            HistoryWindow::All => available,
        }
    }
}

impl Serialize for HistoryWindow {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match *self {
            HistoryWindow::Last(n) => serializer.serialize_u64(n as u64),
            HistoryWindow::All => serializer.serialize_str("all"),
        }
    }
}

impl<'de> Deserialize<'de> for HistoryWindow {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct WindowVisitor;

        impl Visitor<'_> for WindowVisitor {
            type Value = HistoryWindow;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number of steps or \"all\"")
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<HistoryWindow, E> {
                usize::try_from(v)
                    .map(HistoryWindow::Last)
                    .map_err(|_| E::invalid_value(de::Unexpected::Unsigned(v), &self))
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<HistoryWindow, E> {
                u64::try_from(v)
                    .map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
                    .and_then(|v| self.visit_u64(v))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<HistoryWindow, E> {
                if v == "all" {
                    Ok(HistoryWindow::All)
                } else {
                    Err(E::invalid_value(de::Unexpected::Str(v), &self))
                }
            }
        }

        deserializer.deserialize_any(WindowVisitor)
    }
}

/// How prompts are rendered; one per run. Every field has a default, unknown keys are
/// rejected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PromptConfig {
    /// Which environment the prompt describes. Default: ALFWorld.
    pub env: PromptEnv,
    /// Tagged (RLVMR) or think (baselines). Default: tagged.
    pub style: PromptStyle,
    /// How many past (observation, action) pairs to show. Default: the last 5.
    pub history: HistoryWindow,
    /// How many of the latest raw model outputs to show. Default: 3.
    pub recent_outputs: usize,
    /// Minimal instructions and short labels, for small models. Default: false.
    pub compact: bool,
    /// Add a one-line format reminder at the end (the SFT prompts of the cold start).
    /// Default: false.
    pub cold_start: bool,
    /// Leave `help` out of the admissible actions. Default: true.
    pub drop_help: bool,
    /// Show the instructions: what each tag is for, the reply format and the cold-start
    /// reminder. Default: true. A model trained from scratch cannot read them (it learns the
    /// format from the demonstrations), and for it they are only tokens to attend over.
    pub instructions: bool,
    /// How the replies the prompt asks for lay out their blocks: `inline` (default) or `lines`
    /// (each block's body on a line of its own, as the authors' prompts). The cold start's
    /// demonstrations are written in it, and the format instructions, when shown, show it.
    pub layout: ReplyLayout,
    /// ScienceWorld: show the room the agent is in and its inventory at every step (each on
    /// one line, see [`crate::scene`]) instead of the action templates and objects; history
    /// lines then name a room description's room only. Default: false.
    pub room: bool,
    /// Where compact prompts show the task: on the first line (default), before the
    /// current observation, or last. See [`TaskLine`].
    pub task_line: TaskLine,
    /// ScienceWorld compact prompts: repeat the task's sentences that name a box on a line
    /// after the room and the inventory (`Boxes: ...`). See [`BoxLine`].
    pub box_line: BoxLine,
}

/// Which ScienceWorld tasks get their boxes repeated after the compact prompt's room and
/// inventory lines (its last line without instructions), next to the reply, where a small
/// model copies names best. With `any`, the 1.3M model named the task's box in 99% of its box
/// moves (48% without) but the find tasks' room objects less often; `choice` leaves the find
/// tasks' prompts as they were (docs/experiments.md, 2026-11-28).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BoxLine {
    /// No line (default).
    #[default]
    None,
    /// Every task that names a box.
    Any,
    /// Tasks whose choice is between boxes: two sentences naming a box or more (a
    /// conductivity or melting-point verdict, a genetics trait), not the find tasks' one.
    Choice,
}

/// Where a compact prompt shows the task. A small model copies a name far more often from
/// the lines nearest its reply than from the prompt's first line: on ScienceWorld, with the
/// task moved next to the reply, the 1.3M model named the task's box in 82-89% of its box
/// moves against 48%, but the room's objects (an animal, a plant) less often, and won fewer
/// games, so the preset keeps `first` (docs/experiments.md, 2026-11-28).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskLine {
    /// `Text science game. Task: ...` as the first line.
    #[default]
    First,
    /// After the plan, before `Now:`.
    BeforeNow,
    /// The last line, after the room and inventory.
    Last,
}

impl PromptConfig {
    /// Compact prompts for small models: a 3-step window and the last reply only, help
    /// dropped. Everything else as [`PromptConfig::default`].
    pub fn small() -> Self {
        PromptConfig {
            compact: true,
            history: HistoryWindow::Last(3),
            recent_outputs: 1,
            ..PromptConfig::default()
        }
    }
}

impl Default for PromptConfig {
    fn default() -> Self {
        PromptConfig {
            env: PromptEnv::AlfWorld,
            style: PromptStyle::Tagged,
            history: HistoryWindow::default(),
            recent_outputs: 3,
            compact: false,
            cold_start: false,
            drop_help: true,
            instructions: true,
            layout: ReplyLayout::Inline,
            room: false,
            task_line: TaskLine::First,
            box_line: BoxLine::None,
        }
    }
}

/// One past step: what the agent saw, what it did, what it wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HistoryEntry<'a> {
    /// The observation the agent saw when it chose `action`.
    pub observation: &'a str,
    /// The command sent to the environment (may be empty when the reply had no action).
    pub action: &'a str,
    /// The model's raw output at that step.
    pub output: &'a str,
}

/// Everything one prompt shows. `Default` gives an empty input to fill with struct update
/// syntax.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PromptInput<'a> {
    /// The task sentence.
    pub task: &'a str,
    /// How many steps were taken before this one (0 at the first step).
    pub step: usize,
    /// The past steps, oldest first: the whole episode or its tail.
    pub history: &'a [HistoryEntry<'a>],
    /// The current observation.
    pub observation: &'a str,
    /// The admissible actions (ALFWorld; for ScienceWorld only shown when `templates` is empty).
    pub admissible: &'a [String],
    /// The current plan; `None` or blank shows [`NO_PLAN`]. See [`carried_plan`].
    pub plan: Option<&'a str>,
    /// ScienceWorld: the action templates, e.g. `open OBJ`, `teleport to LOC`.
    pub templates: &'a [String],
    /// ScienceWorld: the objects and locations that can fill the templates' placeholders.
    pub objects: &'a [String],
    /// ScienceWorld with [`PromptConfig::room`]: the room's description (a free look).
    pub room: &'a str,
    /// ScienceWorld with [`PromptConfig::room`]: the inventory's text.
    pub inventory: &'a str,
}

/// The trimmed inner text of the last non-empty `<planning>...</planning>` block of a raw
/// model output, if any.
///
/// Tags match case-insensitively and the block may span lines. A block runs from an opening
/// tag to the next closing tag (like a non-greedy regular expression); an opening tag without
/// a closing one is ignored. Blank blocks do not count.
pub fn planning_text(output: &str) -> Option<&str> {
    const OPEN: &str = "<planning>";
    const CLOSE: &str = "</planning>";
    // ASCII lowercasing keeps every byte offset (and char boundary) of `output`.
    let lower = output.to_ascii_lowercase();
    let mut found = None;
    let mut pos = 0;
    while let Some(open) = lower[pos..].find(OPEN) {
        let start = pos + open + OPEN.len();
        let Some(close) = lower[start..].find(CLOSE) else {
            break;
        };
        let end = start + close;
        let inner = output[start..end].trim();
        if !inner.is_empty() {
            found = Some(inner);
        }
        pos = end + CLOSE.len();
    }
    found
}

/// The plan to show at the next step: the latest non-empty `<planning>` block of this step's
/// raw `output`, or else the `previous` plan.
///
/// Used step by step: `plan = carried_plan(plan.as_deref(), &completion)`, starting from
/// `None` (which the prompt shows as [`NO_PLAN`]). The block counts whether or not the rest of
/// the output is well formed: it is what the agent last wrote as its plan.
pub fn carried_plan(previous: Option<&str>, output: &str) -> Option<String> {
    planning_text(output).or(previous).map(str::to_owned)
}

/// Renders the prompt for one step. See the module docs for the slots and variants.
pub fn render(cfg: &PromptConfig, input: &PromptInput) -> String {
    let mut out = String::new();
    if cfg.compact {
        render_compact(cfg, input, &mut out);
    } else {
        render_full(cfg, input, &mut out);
    }
    if !cfg.instructions {
        // The blank space that separated the actions from the format text.
        out.truncate(out.trim_end().len());
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Texts.

fn env_intro(env: PromptEnv) -> &'static str {
    match env {
        PromptEnv::AlfWorld => {
            "You are an agent acting in a simulated household through text. You can walk to \
             furniture and appliances, open and close them, take objects and place them \
             elsewhere, and use appliances on the objects you carry."
        }
        PromptEnv::ScienceWorld => {
            "You are an agent acting in a simulated world of connected rooms (a kitchen, a \
             workshop, a greenhouse, the outdoors and more) through text. You carry out \
             elementary science tasks by moving between rooms, handling objects and \
             containers, and operating devices."
        }
    }
}

const TAGS_FULL: &str = "\
Before every action you reason in one of four modes, and you mark the reasoning with the tag of its mode:
- <planning>: lay out the whole task as ordered sub-goals, or rewrite the plan when it no longer fits.
- <explore>: some information is missing (where an object is, what an action does); list the places, objects or actions worth trying and pick one you have not tried yet.
- <reflection>: your last action failed or changed nothing; say what went wrong and how you will act differently.
- <monitor>: compare your progress with the plan and choose the next concrete action.";

const TAGS_COMPACT: &str = "Tags: planning = plan or re-plan the task; explore = try something new when information is missing; reflection = recover from a failure; monitor = follow the plan.";

fn action_rule(env: PromptEnv) -> &'static str {
    match env {
        PromptEnv::AlfWorld => {
            "exactly one action, copied word for word from the admissible actions"
        }
        PromptEnv::ScienceWorld => {
            "exactly one action: an action template with each OBJ or LOC replaced by one of \
             the objects in view"
        }
    }
}

const FOCUS_WARNING: &str = "Use \"focus on\" only on what the task tells you to focus on: focusing on anything else fails the task.";

// ---------------------------------------------------------------------------------------------
// Full prompts (first step and normal).

fn render_full(cfg: &PromptConfig, input: &PromptInput, out: &mut String) {
    let tagged = cfg.style == PromptStyle::Tagged;
    out.push_str(env_intro(cfg.env));
    out.push_str("\n\nTask: ");
    out.push_str(or_none(input.task.trim()));
    out.push_str("\n\n");
    if tagged && cfg.instructions {
        out.push_str(TAGS_FULL);
        out.push_str("\n\n");
    }

    if input.step == 0 {
        out.push_str("This is your first step.\n\n");
    } else {
        let taken = steps_taken(input);
        out.push_str(&format!("You have taken {} so far.", plural(taken, "step")));
        let history = numbered_tail(input, cfg.history.len_of(input.history.len()));
        if history.len() == 0 {
            out.push_str("\n\n");
        } else {
            if history.len() == taken {
                out.push_str(" All of them, oldest first:\n");
            } else if history.len() == 1 {
                out.push_str(" The last one:\n");
            } else {
                out.push_str(&format!(" The last {}, oldest first:\n", history.len()));
            }
            for (n, entry) in history {
                out.push_str(&format!("[Step {n}] Observation: "));
                if room_view(cfg) {
                    out.push_str(or_none(&scene::room_header(entry.observation)));
                } else {
                    push_indented(out, entry.observation);
                }
                out.push_str(&format!("\n[Step {n}] Action: "));
                out.push_str(or_none(entry.action.trim()));
                out.push('\n');
            }
            out.push('\n');
        }

        let replies = numbered_tail(input, cfg.recent_outputs);
        if replies.len() > 0 {
            if replies.len() == 1 {
                out.push_str("Your reply at the last step:\n");
            } else {
                out.push_str(&format!(
                    "Your replies at the last {} steps, oldest first:\n",
                    replies.len()
                ));
            }
            for (n, entry) in replies {
                out.push_str(&format!("[Step {n}]\n"));
                out.push_str(or_empty_reply(entry.output.trim()));
                out.push('\n');
            }
            out.push('\n');
        }
    }

    if tagged {
        out.push_str("Current plan: ");
        out.push_str(plan_text(input.plan));
        out.push_str("\n\n");
    }

    out.push_str("Current observation:\n");
    push_trimmed_lines(out, input.observation);
    out.push_str("\n\n");

    push_actions_full(cfg, input, out);
    if cfg.instructions {
        push_format_full(cfg, out);
    }
}

fn push_format_full(cfg: &PromptConfig, out: &mut String) {
    let tagged = cfg.style == PromptStyle::Tagged;
    out.push_str("Reply with exactly two blocks, in this order, and nothing else:\n");
    if tagged {
        out.push_str(&cfg.layout.apply("<tag>your reasoning</tag>\n<action>your action</action>\n"));
        out.push_str(
            "In place of \"tag\" write one of planning, explore, reflection or monitor, the \
             same name in the opening and the closing tag. ",
        );
    } else {
        out.push_str(&cfg.layout.apply("<think>your reasoning</think>\n<action>your action</action>\n"));
        out.push_str("Think the step through in the first block. ");
    }
    out.push_str("The action block holds ");
    out.push_str(if room_view(cfg) {
        "exactly one command, naming objects as the room and the inventory show them"
    } else {
        action_rule(cfg.env)
    });
    out.push('.');
    if cfg.cold_start {
        out.push('\n');
        out.push_str(reminder(cfg.style));
    }
}

fn push_actions_full(cfg: &PromptConfig, input: &PromptInput, out: &mut String) {
    if room_view(cfg) {
        push_room_compact(input, out);
        out.push('\n');
        out.push_str(FOCUS_WARNING);
        out.push_str("\n\n");
    } else if cfg.env == PromptEnv::ScienceWorld && !input.templates.is_empty() {
        out.push_str(
            "Action templates (replace each OBJ or LOC with one of the objects in view):\n",
        );
        for t in input.templates {
            out.push_str("- ");
            out.push_str(t.trim());
            out.push('\n');
        }
        out.push_str("\nObjects in view: ");
        push_joined(out, input.objects.iter().map(String::as_str), ", ");
        out.push_str("\n\n");
        out.push_str(FOCUS_WARNING);
        out.push_str("\n\n");
    } else {
        out.push_str("Admissible actions:\n");
        let mut any = false;
        for a in admissible(cfg, input) {
            out.push_str("- ");
            out.push_str(a);
            out.push('\n');
            any = true;
        }
        if !any {
            out.push_str("(none)\n");
        }
        out.push('\n');
        if cfg.env == PromptEnv::ScienceWorld {
            out.push_str(FOCUS_WARNING);
            out.push_str("\n\n");
        }
    }
}

fn reminder(style: PromptStyle) -> &'static str {
    match style {
        PromptStyle::Tagged => {
            "Reminder: one <planning>, <explore>, <reflection> or <monitor> block with a \
             one-sentence reason, then one <action> block."
        }
        PromptStyle::Think => "Reminder: one <think> block, then one <action> block.",
    }
}

// ---------------------------------------------------------------------------------------------
// Compact prompts.

fn render_compact(cfg: &PromptConfig, input: &PromptInput, out: &mut String) {
    let tagged = cfg.style == PromptStyle::Tagged;
    out.push_str(match cfg.env {
        PromptEnv::AlfWorld => "Text household game.",
        PromptEnv::ScienceWorld => "Text science game.",
    });
    if cfg.task_line == TaskLine::First {
        push_task_compact(input, " ", out);
    } else {
        out.push('\n');
    }
    if tagged && cfg.instructions {
        out.push_str(TAGS_COMPACT);
        out.push('\n');
    }

    if input.step > 0 {
        out.push_str(&format!("Steps taken: {}.", steps_taken(input)));
        let history = numbered_tail(input, cfg.history.len_of(input.history.len()));
        if history.len() == 0 {
            out.push('\n');
        } else {
            out.push_str(" Recent (observation > action):\n");
            for (n, entry) in history {
                out.push_str(&format!("{n}: "));
                if room_view(cfg) {
                    out.push_str(or_none(&scene::room_header(entry.observation)));
                } else {
                    push_one_line(out, entry.observation);
                }
                out.push_str(" > ");
                out.push_str(or_none(entry.action.trim()));
                out.push('\n');
            }
        }
        let replies = numbered_tail(input, cfg.recent_outputs);
        if replies.len() > 0 {
            out.push_str(if replies.len() == 1 {
                "Your last reply:\n"
            } else {
                "Your last replies:\n"
            });
            for (n, entry) in replies {
                out.push_str(&format!("{n}: "));
                out.push_str(or_empty_reply(entry.output.trim()));
                out.push('\n');
            }
        }
    }

    if tagged {
        out.push_str("Plan: ");
        out.push_str(plan_text(input.plan));
        out.push('\n');
    }
    if cfg.task_line == TaskLine::BeforeNow {
        push_task_compact(input, "", out);
    }
    out.push_str("Now: ");
    if room_view(cfg) && scene::is_room(input.observation) {
        out.push_str(&scene::compact_room(input.observation));
    } else {
        push_lines(out, input.observation);
    }
    out.push('\n');

    if room_view(cfg) {
        push_room_compact(input, out);
    } else if cfg.env == PromptEnv::ScienceWorld && !input.templates.is_empty() {
        out.push_str("Templates: ");
        push_joined(out, input.templates.iter().map(String::as_str), ", ");
        out.push_str("\nObjects: ");
        push_joined(out, input.objects.iter().map(String::as_str), ", ");
        out.push('\n');
    } else {
        out.push_str("Actions: ");
        push_joined(out, admissible(cfg, input), ", ");
        out.push('\n');
    }
    if cfg.task_line == TaskLine::Last {
        push_task_compact(input, "", out);
    }
    push_box_line(input.task, cfg.box_line, out);
    if cfg.env == PromptEnv::ScienceWorld && (cfg.instructions || !cfg.room) {
        out.push_str("Focus only on what the task names.\n");
    }

    if cfg.instructions {
        push_format_compact(cfg, input, out);
    }
}

/// The compact prompt's task line, after `before`.
fn push_task_compact(input: &PromptInput, before: &str, out: &mut String) {
    out.push_str(before);
    out.push_str("Task: ");
    out.push_str(or_none(input.task.trim()));
    out.push('\n');
}

/// The task's sentences that name a box (`... place it in the green box.`), on one line
/// after `Boxes: `, as `which` asks: nothing for [`BoxLine::None`], nor when no sentence
/// names a box, nor, for [`BoxLine::Choice`], when only one does.
fn push_box_line(task: &str, which: BoxLine, out: &mut String) {
    let least = match which {
        BoxLine::None => return,
        BoxLine::Any => 1,
        BoxLine::Choice => 2,
    };
    let naming_a_box: Vec<&str> = sentences(task.trim())
        .filter(|sentence| sentence.split(|c: char| !c.is_alphanumeric()).any(|word| word == "box"))
        .collect();
    if naming_a_box.len() >= least {
        out.push_str("Boxes: ");
        out.push_str(&naming_a_box.join(" "));
        out.push('\n');
    }
}

/// A text's sentences, each with its closing period: split after every `. `.
fn sentences(text: &str) -> impl Iterator<Item = &str> {
    text.split_inclusive(". ").map(str::trim).filter(|sentence| !sentence.is_empty())
}

/// ScienceWorld's room (unless the current observation already is its description) and
/// inventory, each on one line.
fn push_room_compact(input: &PromptInput, out: &mut String) {
    if !scene::is_room(input.observation) && !input.room.trim().is_empty() {
        out.push_str("Room: ");
        out.push_str(&scene::compact_room(input.room));
        out.push('\n');
    }
    if !input.inventory.trim().is_empty() {
        out.push_str("Inventory: ");
        out.push_str(&scene::compact_inventory(input.inventory));
        out.push('\n');
    }
}

/// ScienceWorld prompts that show the room and inventory ([`PromptConfig::room`]).
fn room_view(cfg: &PromptConfig) -> bool {
    cfg.room && cfg.env == PromptEnv::ScienceWorld
}

fn push_format_compact(cfg: &PromptConfig, input: &PromptInput, out: &mut String) {
    let tagged = cfg.style == PromptStyle::Tagged;
    let action = match (cfg.env, input.templates.is_empty()) {
        (PromptEnv::ScienceWorld, _) if cfg.room => "one command for the room and inventory",
        (PromptEnv::ScienceWorld, false) => "a template with OBJ/LOC filled from Objects",
        _ => "one of Actions",
    };
    if tagged {
        out.push_str(&cfg.layout.apply(&format!(
            "Reply: <tag>reason</tag><action>{action}</action>, tag = planning, explore, reflection or monitor."
        )));
    } else {
        out.push_str(&cfg.layout.apply(&format!(
            "Reply: <think>reason</think><action>{action}</action>."
        )));
    }
    if cfg.cold_start {
        out.push('\n');
        out.push_str(reminder(cfg.style));
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers.

/// Steps taken, never fewer than the history holds.
fn steps_taken(input: &PromptInput) -> usize {
    input.step.max(input.history.len())
}

/// The last `n` history entries with their step numbers, oldest first.
fn numbered_tail<'a>(
    input: &PromptInput<'a>,
    n: usize,
) -> impl ExactSizeIterator<Item = (usize, &'a HistoryEntry<'a>)> + 'a {
    let history = input.history;
    let offset = steps_taken(input) - history.len();
    let skip = history.len() - n.min(history.len());
    history
        .iter()
        .enumerate()
        .skip(skip)
        .map(move |(i, e)| (offset + i + 1, e))
}

fn admissible<'i>(cfg: &PromptConfig, input: &PromptInput<'i>) -> impl Iterator<Item = &'i str> {
    let drop_help = cfg.drop_help;
    input
        .admissible
        .iter()
        .map(|a| a.trim())
        .filter(move |a| !(drop_help && a.eq_ignore_ascii_case("help")))
}

fn plan_text(plan: Option<&str>) -> &str {
    match plan.map(str::trim) {
        Some(p) if !p.is_empty() => p,
        _ => NO_PLAN,
    }
}

fn or_none(text: &str) -> &str {
    if text.is_empty() {
        "(none)"
    } else {
        text
    }
}

fn or_empty_reply(text: &str) -> &str {
    if text.is_empty() {
        "(empty reply)"
    } else {
        text
    }
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// Trimmed items joined by `sep`; `(none)` when there are none.
fn push_joined<'s>(out: &mut String, items: impl Iterator<Item = &'s str>, sep: &str) {
    push_joined_raw(out, items.map(str::trim), sep);
}

/// Items joined by `sep`; `(none)` when there are none.
fn push_joined_raw<'s>(out: &mut String, items: impl Iterator<Item = &'s str>, sep: &str) {
    let mut any = false;
    for item in items {
        if any {
            out.push_str(sep);
        }
        out.push_str(item);
        any = true;
    }
    if !any {
        out.push_str("(none)");
    }
}

/// A multi-line text without its blank lines or trailing spaces; lines after the first are
/// indented by two more spaces (their own indentation is kept).
fn push_indented(out: &mut String, text: &str) {
    let mut any = false;
    for line in text
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
    {
        if any {
            out.push_str("\n  ");
            out.push_str(line);
        } else {
            out.push_str(line.trim_start());
        }
        any = true;
    }
    if !any {
        out.push_str("(none)");
    }
}

/// A text without leading or trailing blank space, and without trailing spaces on its lines.
fn push_trimmed_lines(out: &mut String, text: &str) {
    push_joined_raw(out, text.trim().lines().map(str::trim_end), "\n");
}

/// A multi-line text without its blank lines or trailing spaces.
fn push_lines(out: &mut String, text: &str) {
    let lines = text.trim_start().lines().map(str::trim_end);
    push_joined_raw(out, lines.filter(|l| !l.trim().is_empty()), "\n");
}

/// A multi-line text on one line: its non-blank lines joined by " | ".
fn push_one_line(out: &mut String, text: &str) {
    push_joined(out, text.lines().filter(|l| !l.trim().is_empty()), " | ");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    fn entry<'a>(observation: &'a str, action: &'a str, output: &'a str) -> HistoryEntry<'a> {
        HistoryEntry {
            observation,
            action,
            output,
        }
    }

    #[test]
    fn help_is_dropped_by_default_and_kept_on_request() {
        let admissible = strings(&["go to cabinet 1", "help", "inventory", "look"]);
        let input = PromptInput {
            task: "t",
            admissible: &admissible,
            ..Default::default()
        };
        let cfg = PromptConfig::default();
        let text = render(&cfg, &input);
        assert!(!text.contains("- help\n"), "{text}");
        assert!(
            text.contains("- go to cabinet 1\n- inventory\n- look\n"),
            "{text}"
        );
        let keep = PromptConfig {
            drop_help: false,
            ..PromptConfig::default()
        };
        assert!(render(&keep, &input).contains("- help\n"));
        let compact = PromptConfig {
            compact: true,
            ..PromptConfig::default()
        };
        assert!(render(&compact, &input).contains("Actions: go to cabinet 1, inventory, look\n"));
    }

    #[test]
    fn window_size_is_honoured() {
        let actions: Vec<String> = (1..=8).map(|i| format!("action number {i}")).collect();
        let history: Vec<HistoryEntry> = actions
            .iter()
            .map(|a| entry("an observation", a, ""))
            .collect();
        let input = PromptInput {
            task: "t",
            step: 8,
            history: &history,
            ..Default::default()
        };
        for (w, shown) in [
            (HistoryWindow::Last(0), 0),
            (HistoryWindow::Last(3), 3),
            (HistoryWindow::Last(8), 8),
            (HistoryWindow::Last(100), 8),
            (HistoryWindow::All, 8),
        ] {
            for compact in [false, true] {
                let cfg = PromptConfig {
                    history: w,
                    recent_outputs: 0,
                    compact,
                    ..Default::default()
                };
                let text = render(&cfg, &input);
                for i in 1..=8 {
                    let visible = text.contains(&format!("action number {i}\n"));
                    assert_eq!(
                        visible,
                        i > 8 - shown,
                        "{w:?} compact={compact} step {i}\n{text}"
                    );
                }
            }
        }
    }

    #[test]
    fn recent_outputs_count_is_honoured() {
        let outputs: Vec<String> = (1..=6)
            .map(|i| format!("<monitor>reply {i}</monitor>"))
            .collect();
        let history: Vec<HistoryEntry> = outputs.iter().map(|o| entry("obs", "look", o)).collect();
        let input = PromptInput {
            task: "t",
            step: 6,
            history: &history,
            ..Default::default()
        };
        for k in [0, 1, 3, 6, 10] {
            let cfg = PromptConfig {
                recent_outputs: k,
                ..Default::default()
            };
            let text = render(&cfg, &input);
            for i in 1..=6 {
                let visible = text.contains(&format!("reply {i}<"));
                assert_eq!(visible, i + k.min(6) > 6, "k={k} step {i}\n{text}");
            }
        }
    }

    #[test]
    fn steps_are_numbered_from_the_end_of_a_partial_history() {
        let history = [entry("o6", "a6", ""), entry("o7", "a7", "")];
        let input = PromptInput {
            task: "t",
            step: 7,
            history: &history,
            ..Default::default()
        };
        let text = render(&PromptConfig::default(), &input);
        assert!(
            text.contains("[Step 6] Observation: o6\n[Step 6] Action: a6\n"),
            "{text}"
        );
        assert!(text.contains("[Step 7] Action: a7\n"), "{text}");
        assert!(
            text.contains("You have taken 7 steps so far. The last 2, oldest first:"),
            "{text}"
        );
    }

    #[test]
    fn plan_comes_from_the_latest_non_empty_planning_block() {
        assert_eq!(
            planning_text("<monitor>x</monitor><action>look</action>"),
            None
        );
        assert_eq!(
            planning_text("<planning>  </planning><action>look</action>"),
            None
        );
        assert_eq!(planning_text("<planning>a</planning>"), Some("a"));
        assert_eq!(
            planning_text("<planning>a</planning> <planning>\n</planning>"),
            Some("a")
        );
        assert_eq!(
            planning_text("<planning>a</planning><PLANNING>\n b \n</Planning>"),
            Some("b")
        );
        assert_eq!(planning_text("<planning>unclosed"), None);
        assert_eq!(
            planning_text("<planning>a</planning><planning>unclosed"),
            Some("a")
        );
        assert_eq!(
            planning_text("</planning><planning>é 1\n2</planning>"),
            Some("é 1\n2")
        );

        let outputs = [
            "<explore>look around</explore><action>look</action>",
            "<planning>1. find the lettuce 2. clean it 3. put it on the table</planning><action>go to countertop 1</action>",
            "<monitor>on track</monitor><action>take lettuce 1 from countertop 1</action>",
            "<planning></planning><action>look</action>",
            "<planning>1. clean the lettuce 2. put it on the table</planning><action>go to sinkbasin 1</action>",
            "garbage without tags",
        ];
        let mut plan: Option<String> = None;
        let mut seen = Vec::new();
        for o in outputs {
            seen.push(plan_text(plan.as_deref()).to_string());
            plan = carried_plan(plan.as_deref(), o);
        }
        seen.push(plan_text(plan.as_deref()).to_string());
        assert_eq!(
            seen,
            [
                NO_PLAN,
                NO_PLAN,
                "1. find the lettuce 2. clean it 3. put it on the table",
                "1. find the lettuce 2. clean it 3. put it on the table",
                "1. find the lettuce 2. clean it 3. put it on the table",
                "1. clean the lettuce 2. put it on the table",
                "1. clean the lettuce 2. put it on the table",
            ]
        );
    }

    #[test]
    fn no_plan_before_any() {
        let input = PromptInput {
            task: "t",
            step: 0,
            ..Default::default()
        };
        for compact in [false, true] {
            let cfg = PromptConfig {
                compact,
                ..Default::default()
            };
            assert!(render(&cfg, &input).contains(NO_PLAN));
            let blank = PromptInput {
                plan: Some("  \n"),
                ..input
            };
            assert!(render(&cfg, &blank).contains(NO_PLAN));
        }
        let think = PromptConfig {
            style: PromptStyle::Think,
            ..Default::default()
        };
        assert!(!render(&think, &input).contains(NO_PLAN));
        assert!(!render(
            &think,
            &PromptInput {
                plan: Some("p"),
                ..input
            }
        )
        .contains("plan"));
    }

    #[test]
    fn format_instructions_show_the_reply_layout() {
        let input = PromptInput { task: "put a pen in desk.", admissible: &strings(&["look"]), ..Default::default() };
        let lines = |compact| PromptConfig { compact, layout: ReplyLayout::Lines, ..Default::default() };
        assert!(render(&lines(false), &input).contains("<tag>\nyour reasoning\n</tag>\n<action>\nyour action\n</action>\n"));
        assert!(render(&lines(true), &input).contains("Reply: <tag>\nreason\n</tag><action>\none of Actions\n</action>, tag ="));
        assert!(render(&PromptConfig::default(), &input).contains("<tag>your reasoning</tag>\n<action>your action</action>\n"));
    }

    #[test]
    fn compact_is_shorter_than_normal() {
        let obs =
            "You arrive at countertop 1. On the countertop 1, you see a lettuce 1, and a knife 1.";
        let history = [entry(
            obs,
            "go to countertop 1",
            "<monitor>go</monitor><action>go to countertop 1</action>",
        ); 6];
        let admissible = strings(&[
            "go to cabinet 1",
            "take lettuce 1 from countertop 1",
            "look",
        ]);
        let input = PromptInput {
            task: "put a clean lettuce in diningtable.",
            step: 6,
            history: &history,
            observation: obs,
            admissible: &admissible,
            ..Default::default()
        };
        for env in [PromptEnv::AlfWorld, PromptEnv::ScienceWorld] {
            for style in [PromptStyle::Tagged, PromptStyle::Think] {
                for step in [0, 6] {
                    let normal = PromptConfig {
                        env,
                        style,
                        ..Default::default()
                    };
                    let compact = PromptConfig {
                        compact: true,
                        ..normal.clone()
                    };
                    let input = PromptInput { step, ..input };
                    let (n, c) = (render(&normal, &input), render(&compact, &input));
                    assert!(
                        c.len() < n.len(),
                        "{env:?} {style:?} step {step}: {} >= {}",
                        c.len(),
                        n.len()
                    );
                }
            }
        }
    }

    /// Without instructions a prompt is the same prompt with the tag list, the reply format
    /// and the reminder left out: its lines are the full prompt's lines, in order.
    #[test]
    fn instructions_off_leaves_out_only_the_instructions() {
        let obs = "You arrive at countertop 1. On the countertop 1, you see a knife 1.";
        let history = [entry(obs, "look", "<monitor>m</monitor><action>look</action>"); 4];
        let admissible = strings(&["go to cabinet 1", "look"]);
        let templates = strings(&["go to LOC", "look at OBJ"]);
        let input = PromptInput {
            task: "put a knife in cabinet.",
            history: &history,
            observation: obs,
            admissible: &admissible,
            ..Default::default()
        };
        let instruction_words = [
            "Tags:",
            "Reply",
            "Reminder",
            "<planning>",
            "<think>",
            "<tag>",
        ];
        for env in [PromptEnv::AlfWorld, PromptEnv::ScienceWorld] {
            for style in [PromptStyle::Tagged, PromptStyle::Think] {
                for (compact, cold_start, step) in [
                    (false, true, 0),
                    (true, true, 4),
                    (true, false, 0),
                    (false, false, 4),
                ] {
                    let with = PromptConfig {
                        env,
                        style,
                        compact,
                        cold_start,
                        ..Default::default()
                    };
                    let without = PromptConfig {
                        instructions: false,
                        ..with.clone()
                    };
                    let sci = env == PromptEnv::ScienceWorld;
                    let input = PromptInput {
                        step,
                        templates: if sci { &templates } else { &[] },
                        ..input
                    };
                    let (full, bare) = (render(&with, &input), render(&without, &input));
                    let case = format!("{env:?} {style:?} compact={compact} step {step}");
                    assert!(bare.len() < full.len(), "{case}");
                    assert_eq!(bare, bare.trim_end(), "{case}: trailing blank space");
                    for word in instruction_words {
                        assert!(!bare.contains(word), "{case}: {word}\n{bare}");
                    }
                    let mut full_lines = full.lines();
                    for line in bare.lines() {
                        assert!(full_lines.any(|l| l == line), "{case}: {line:?}\n{full}");
                    }
                }
            }
        }
    }

    #[test]
    fn first_step_ignores_history() {
        let history = [entry("zebra observation", "zebra action", "zebra reply")];
        let input = PromptInput {
            task: "t",
            step: 0,
            history: &history,
            ..Default::default()
        };
        for compact in [false, true] {
            let text = render(
                &PromptConfig {
                    compact,
                    ..Default::default()
                },
                &input,
            );
            assert!(!text.contains("zebra"), "{text}");
        }
    }

    #[test]
    fn odd_inputs_render_without_panicking() {
        let huge = "é漢 ".repeat(20_000);
        let weird = strings(&["", " ", "help", "HELP", "\n"]);
        let history = [
            entry("", "", ""),
            entry(&huge, &huge, &huge),
            entry("\n\n", "\t", "<planning>"),
        ];
        for env in [PromptEnv::AlfWorld, PromptEnv::ScienceWorld] {
            for style in [PromptStyle::Tagged, PromptStyle::Think] {
                for compact in [false, true] {
                    for cold_start in [false, true] {
                        for step in [0, 1, 2, 3, 50, usize::MAX] {
                            for history in [&history[..], &[]] {
                                for history_window in [
                                    HistoryWindow::Last(0),
                                    HistoryWindow::Last(usize::MAX),
                                    HistoryWindow::All,
                                ] {
                                    let cfg = PromptConfig {
                                        env,
                                        style,
                                        compact,
                                        cold_start,
                                        history: history_window,
                                        recent_outputs: usize::MAX,
                                        drop_help: true,
                                        instructions: step % 2 == 0,
                                        layout: if compact { ReplyLayout::Lines } else { ReplyLayout::Inline },
                                        room: step % 3 == 0,
                                        task_line: [TaskLine::First, TaskLine::BeforeNow, TaskLine::Last][step % 3],
                                        box_line: [BoxLine::None, BoxLine::Any, BoxLine::Choice][step % 3],
                                    };
                                    let input = PromptInput {
                                        task: "",
                                        step,
                                        history,
                                        observation: &huge,
                                        admissible: &weird,
                                        plan: Some(""),
                                        templates: &weird,
                                        objects: &[],
                                        room: &huge,
                                        inventory: "In your inventory, you see:",
                                    };
                                    let a = render(&cfg, &input);
                                    assert_eq!(a, render(&cfg, &input));
                                }
                            }
                        }
                    }
                }
            }
        }
        assert_eq!(planning_text(&huge), None);
    }

    #[test]
    fn history_window_deserialises_from_a_number_or_all() {
        use serde::de::value::{Error, I64Deserializer, StrDeserializer, U64Deserializer};
        let from_u64 = |v| HistoryWindow::deserialize(U64Deserializer::<Error>::new(v));
        let from_i64 = |v| HistoryWindow::deserialize(I64Deserializer::<Error>::new(v));
        let from_str = |v| HistoryWindow::deserialize(StrDeserializer::<Error>::new(v));
        assert_eq!(from_u64(3).unwrap(), HistoryWindow::Last(3));
        assert_eq!(from_i64(0).unwrap(), HistoryWindow::Last(0));
        assert!(from_i64(-1).is_err());
        assert_eq!(from_str("all").unwrap(), HistoryWindow::All);
        assert!(from_str("everything").is_err());
    }

    #[test]
    fn config_rejects_unknown_keys_and_fills_defaults() {
        use serde::de::value::{Error, MapDeserializer};
        let from = |pairs: Vec<(&'static str, &'static str)>| {
            PromptConfig::deserialize(MapDeserializer::<_, Error>::new(pairs.into_iter()))
        };
        let cfg = from(vec![
            ("env", "scienceworld"),
            ("style", "think"),
            ("history", "all"),
        ])
        .unwrap();
        assert_eq!(
            cfg,
            PromptConfig {
                env: PromptEnv::ScienceWorld,
                style: PromptStyle::Think,
                history: HistoryWindow::All,
                ..PromptConfig::default()
            }
        );
        let err = from(vec![("window", "all")]).unwrap_err().to_string();
        assert!(err.contains("unknown field `window`"), "{err}");
        assert_eq!(from(vec![]).unwrap(), PromptConfig::default());
    }
}
