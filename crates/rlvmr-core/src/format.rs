//! Parsing a model's step output: one reasoning block, then one action block.
//!
//! RLVMR's agents answer `<planning>...</planning><action>go to desk 1</action>`
//! (or `explore`, `reflection`, `monitor`); the GRPO/GiGPO baselines answer
//! `<think>...</think><action>...</action>`. A block is what a non-greedy,
//! case-insensitive match `<name>(.*?)</name>` finds, spanning newlines (the
//! reference code forgot that flag in its reward code; we do not copy the bug).
//!
//! **Strict** validity (the reference code for ALFWorld) fails a step when any of:
//! not exactly one action block; not exactly one reasoning block over all
//! reasoning tags; the reasoning block is empty (after Python's `strip`); the reasoning
//! block starts after the action block; the text contains a CJK character
//! (U+4E00..=U+9FFF). **Lenient** validity (the paper's words; the reference code
//! for ScienceWorld) asks for at least one complete reasoning block, at least one
//! action block, and no CJK.
//!
//! The executed action is the stripped text of the action block whenever there is
//! exactly one action block, valid format or not; otherwise the empty command.
//! Parsing is linear in the text's length.

use crate::tag::Tag;

/// Which validity rule applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Validity {
    #[default]
    Strict,
    Lenient,
    /// Strict as the reference code's ALFWorld projection writes it, string for string:
    /// a block is empty when nothing but markup (`<br>`, any `<...>` on one line) and
    /// whitespace is left once its tags are removed; empty blocks still count towards the
    /// one reasoning block; only non-empty blocks must come before the first `<action>`.
    Reference,
}

/// Which reasoning blocks the output should carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputStyle {
    /// RLVMR: one of the four meta-reasoning tags.
    #[default]
    Tagged,
    /// The GRPO/GiGPO baselines: `<think>`.
    Think,
}

/// How a scripted reply lays its blocks out (the cold start's demonstrations). Parsing reads
/// both alike; the reference code's reward rules do not (their `findall` of the action has no
/// DOTALL, so an action on lines of its own is no action to them: docs/method.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplyLayout {
    /// Each block on one line: `<explore>reason</explore>\n<action>look</action>`.
    #[default]
    Inline,
    /// Each block's body on a line of its own, as the authors' prompts lay replies out:
    /// `<explore>\nreason\n</explore>\n<action>\nlook\n</action>`.
    Lines,
}

/// The blocks [`ReplyLayout::Lines`] breaks open.
/// `tag` is the placeholder the format instructions write for the four tags.
const LAYOUT_BLOCKS: [&str; 7] = ["planning", "explore", "reflection", "monitor", "think", "action", "tag"];

impl ReplyLayout {
    /// `reply` (written inline) in this layout: under `Lines` every opening tag of a reasoning
    /// or action block is followed by a line break and every closing tag preceded by one.
    pub fn apply(self, reply: &str) -> String {
        match self {
            ReplyLayout::Inline => reply.to_string(),
            ReplyLayout::Lines => LAYOUT_BLOCKS.iter().fold(reply.to_string(), |text, name| {
                text.replace(&format!("<{name}>"), &format!("<{name}>\n")).replace(&format!("</{name}>"), &format!("\n</{name}>"))
            }),
        }
    }
}

/// Why a step's format is invalid.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InvalidReason {
    NoActionBlock,
    MultipleActionBlocks(usize),
    NoReasoningBlock,
    MultipleReasoningBlocks(usize),
    EmptyReasoning,
    ReasoningAfterAction,
    ContainsCjk,
}

impl std::fmt::Display for InvalidReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InvalidReason::NoActionBlock => write!(f, "no <action> block"),
            InvalidReason::MultipleActionBlocks(n) => write!(f, "{n} <action> blocks"),
            InvalidReason::NoReasoningBlock => write!(f, "no reasoning block"),
            InvalidReason::MultipleReasoningBlocks(n) => write!(f, "{n} reasoning blocks"),
            InvalidReason::EmptyReasoning => write!(f, "the reasoning block is empty"),
            InvalidReason::ReasoningAfterAction => write!(f, "the reasoning block comes after the action"),
            InvalidReason::ContainsCjk => write!(f, "the output contains CJK characters"),
        }
    }
}

/// A parsed step output.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ParsedOutput {
    /// The tag of the first reasoning block (`None` for the think style or when
    /// there is none). Use [`ParsedOutput::step_tag`] for the tag a step counts as.
    pub tag: Option<Tag>,
    /// Inner text of the first reasoning block, trimmed.
    pub reasoning: Option<String>,
    /// The command to execute: the stripped action text when there is exactly
    /// one action block, else empty.
    pub action: String,
    pub action_blocks: usize,
    pub reasoning_blocks: usize,
    /// Every rule the output breaks, in the order of the module docs; empty when valid.
    pub invalid: Vec<InvalidReason>,
}

impl ParsedOutput {
    pub fn format_valid(&self) -> bool {
        self.invalid.is_empty()
    }

    /// The tag a step counts as: its reasoning tag when the format is valid, else none.
    pub fn step_tag(&self) -> Option<Tag> {
        if self.format_valid() { self.tag } else { None }
    }
}

/// One `<name>...</name>` match: where it starts and its inner text.
#[derive(Debug, Clone, Copy)]
struct Block<'a> {
    start: usize,
    inner: &'a str,
}

/// All non-overlapping blocks of `name`, as a non-greedy case-insensitive regex finds them.
fn blocks<'a>(text: &'a str, lower: &str, name: &str) -> Vec<Block<'a>> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(rel) = lower[from..].find(&open) {
        let start = from + rel;
        let inner_start = start + open.len();
        let Some(rel_end) = lower[inner_start..].find(&close) else { break };
        let inner_end = inner_start + rel_end;
        out.push(Block { start, inner: &text[inner_start..inner_end] });
        from = inner_end + close.len();
    }
    out
}

fn is_cjk(c: char) -> bool {
    ('\u{4E00}'..='\u{9FFF}').contains(&c)
}

/// Python's `str.strip()` whitespace (Unicode whitespace plus 0x1c..0x1f).
pub fn strip(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c))
}

/// `text` without its markup: every `<...>` that closes before a line break, as Python's
/// `re.sub(r"<.*?>", "", text)` removes it (no DOTALL: a `<` whose `>` comes after a newline
/// stays).
pub fn remove_markup(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('<') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find(['>', '\n']) {
            Some(end) if after.as_bytes()[end] == b'>' => rest = &after[end + 1..],
            _ => {
                out.push('<');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// [`Validity::Reference`]'s checks after the CJK test: one action block; over all reasoning
/// blocks (empty ones included) exactly one; at least one with text left after
/// [`remove_markup`] and [`strip`]; no such block after the first `<action>` (found in the
/// lower-cased text, -1 when absent, as `str.find` gives), each block placed where its exact
/// text first occurs.
fn reference_validity(text: &str, lower: &str, actions: &[Block<'_>], reasoning: &[(Option<Tag>, Block<'_>)], invalid: &mut Vec<InvalidReason>) {
    match actions.len() {
        0 => invalid.push(InvalidReason::NoActionBlock),
        1 => {}
        n => invalid.push(InvalidReason::MultipleActionBlocks(n)),
    }
    let first_action = lower.find("<action>").map_or(-1, |p| p as i64);
    let mut non_empty = 0;
    let mut after_action = false;
    for (tag, block) in reasoning {
        let name = tag.map_or("think", |t| t.name());
        let whole = &text[block.start..block.start + name.len() * 2 + 5 + block.inner.len()];
        if strip(&remove_markup(whole)).is_empty() {
            continue;
        }
        non_empty += 1;
        if text.find(whole).is_some_and(|p| p as i64 > first_action) {
            after_action = true;
        }
    }
    match reasoning.len() {
        0 => invalid.push(InvalidReason::NoReasoningBlock),
        1 => {}
        n => invalid.push(InvalidReason::MultipleReasoningBlocks(n)),
    }
    if !reasoning.is_empty() && non_empty == 0 {
        invalid.push(InvalidReason::EmptyReasoning);
    }
    if after_action {
        invalid.push(InvalidReason::ReasoningAfterAction);
    }
}

/// Parses one step output.
pub fn parse_output(text: &str, style: OutputStyle, validity: Validity) -> ParsedOutput {
    // ASCII lower-casing keeps byte offsets, so matches index the original text.
    let lower = text.to_ascii_lowercase();
    let actions = blocks(text, &lower, "action");
    let mut reasoning: Vec<(Option<Tag>, Block)> = match style {
        OutputStyle::Tagged => Tag::ALL.iter().flat_map(|&t| blocks(text, &lower, t.name()).into_iter().map(move |b| (Some(t), b))).collect(),
        OutputStyle::Think => blocks(text, &lower, "think").into_iter().map(|b| (None, b)).collect(),
    };
    reasoning.sort_by_key(|(_, b)| b.start);

    let mut invalid = Vec::new();
    match validity {
        Validity::Strict => {
            match actions.len() {
                0 => invalid.push(InvalidReason::NoActionBlock),
                1 => {}
                n => invalid.push(InvalidReason::MultipleActionBlocks(n)),
            }
            match reasoning.len() {
                0 => invalid.push(InvalidReason::NoReasoningBlock),
                1 => {}
                n => invalid.push(InvalidReason::MultipleReasoningBlocks(n)),
            }
            if let [(_, r)] = reasoning.as_slice() {
                if strip(r.inner).is_empty() {
                    invalid.push(InvalidReason::EmptyReasoning);
                }
                if let [a] = actions.as_slice() {
                    if r.start > a.start {
                        invalid.push(InvalidReason::ReasoningAfterAction);
                    }
                }
            }
        }
        Validity::Reference => reference_validity(text, &lower, &actions, &reasoning, &mut invalid),
        Validity::Lenient => {
            if actions.is_empty() {
                invalid.push(InvalidReason::NoActionBlock);
            }
            if reasoning.is_empty() {
                invalid.push(InvalidReason::NoReasoningBlock);
            }
        }
    }
    if text.chars().any(is_cjk) {
        invalid.push(InvalidReason::ContainsCjk);
    }

    let first = reasoning.first();
    ParsedOutput {
        tag: first.and_then(|(t, _)| *t),
        reasoning: first.map(|(_, b)| strip(b.inner).to_string()),
        action: match actions.as_slice() {
            [a] => strip(a.inner).to_string(),
            _ => String::new(),
        },
        action_blocks: actions.len(),
        reasoning_blocks: reasoning.len(),
        invalid,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strict(text: &str) -> ParsedOutput {
        parse_output(text, OutputStyle::Tagged, Validity::Strict)
    }

    #[test]
    fn lines_layout_breaks_each_block_open_and_parses_the_same() {
        let inline = "<explore>where is it?</explore>\n<action>go to desk 1</action>";
        let lines = ReplyLayout::Lines.apply(inline);
        assert_eq!(lines, "<explore>\nwhere is it?\n</explore>\n<action>\ngo to desk 1\n</action>");
        assert_eq!(ReplyLayout::Inline.apply(inline), inline);
        let (a, b) = (strict(inline), strict(&lines));
        assert_eq!((a.tag, a.action, a.invalid), (b.tag, b.action, b.invalid));
        let think = ReplyLayout::Lines.apply("<think>hm</think><action>look</action>");
        assert_eq!(think, "<think>\nhm\n</think><action>\nlook\n</action>");
    }

    #[test]
    fn a_valid_step() {
        let p = strict("<planning>step 1: find the apple\nstep 2: heat it</planning>\n<action> go to countertop 1 \n</action>");
        assert!(p.format_valid(), "{:?}", p.invalid);
        assert_eq!(p.step_tag(), Some(Tag::Planning));
        assert_eq!(p.reasoning.as_deref(), Some("step 1: find the apple\nstep 2: heat it"));
        assert_eq!(p.action, "go to countertop 1");
    }

    #[test]
    fn matching_ignores_case_and_spans_newlines() {
        let p = strict("<Monitor>\nthe apple is hot\n</MONITOR><ACTION>\nmove apple 1 to\ndiningtable 1\n</action>");
        assert!(p.format_valid());
        assert_eq!(p.tag, Some(Tag::Monitor));
        assert_eq!(p.action, "move apple 1 to\ndiningtable 1");
    }

    #[test]
    fn every_strict_failure_has_its_reason() {
        assert_eq!(strict("<explore>x</explore>").invalid, vec![InvalidReason::NoActionBlock]);
        assert_eq!(strict("<explore>x</explore><action>a</action><action>b</action>").invalid, vec![InvalidReason::MultipleActionBlocks(2)]);
        assert_eq!(strict("<action>a</action>").invalid, vec![InvalidReason::NoReasoningBlock]);
        assert_eq!(strict("<explore>x</explore><monitor>y</monitor><action>a</action>").invalid, vec![InvalidReason::MultipleReasoningBlocks(2)]);
        assert_eq!(strict("<reflection>  \n </reflection><action>a</action>").invalid, vec![InvalidReason::EmptyReasoning]);
        assert_eq!(strict("<action>a</action><reflection>why</reflection>").invalid, vec![InvalidReason::ReasoningAfterAction]);
        assert_eq!(strict("<monitor>好</monitor><action>a</action>").invalid, vec![InvalidReason::ContainsCjk]);
    }

    #[test]
    fn the_action_is_executed_even_when_the_format_is_invalid() {
        let p = strict("no reasoning <action> look </action>");
        assert!(!p.format_valid());
        assert_eq!(p.step_tag(), None);
        assert_eq!(p.action, "look");
        assert_eq!(strict("<action>a</action><action>b</action>").action, "");
        assert_eq!(strict("<action>unclosed").action, "");
    }

    #[test]
    fn non_greedy_blocks() {
        // The first close tag ends the block, as `(.*?)` does.
        let p = strict("<monitor>m</monitor><action>a<action>b</action></action>");
        assert_eq!(p.action_blocks, 1);
        assert_eq!(p.action, "a<action>b");
    }

    #[test]
    fn lenient_accepts_extra_blocks() {
        let text = "<planning>p</planning><monitor>m</monitor><action>a</action><action>b</action>";
        let p = parse_output(text, OutputStyle::Tagged, Validity::Lenient);
        assert!(p.format_valid());
        assert_eq!(p.tag, Some(Tag::Planning));
        assert_eq!(p.action, "", "two action blocks: no single action to execute");
        let p = parse_output("<action>a</action>", OutputStyle::Tagged, Validity::Lenient);
        assert_eq!(p.invalid, vec![InvalidReason::NoReasoningBlock]);
    }

    #[test]
    fn think_style_for_baselines() {
        let p = parse_output("<think>find it</think><action>look</action>", OutputStyle::Think, Validity::Strict);
        assert!(p.format_valid());
        assert_eq!((p.tag, p.action.as_str()), (None, "look"));
        let p = parse_output("<planning>x</planning><action>look</action>", OutputStyle::Think, Validity::Strict);
        assert_eq!(p.invalid, vec![InvalidReason::NoReasoningBlock]);
    }

    #[test]
    fn python_strip_whitespace() {
        assert_eq!(strip("\u{1f} look\u{a0}\u{3000}\n"), "look");
    }
}
