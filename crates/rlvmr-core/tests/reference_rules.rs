//! The reference code's string handling (`[env] validity = "reference"`, `[reward] matching =
//! "reference"`) against this project's defaults: each named difference shown on a reply that
//! exposes it, and agreement on replies that expose none.

use proptest::prelude::*;
use rlvmr_core::format::{parse_output, remove_markup, InvalidReason, OutputStyle, Validity};
use rlvmr_core::reward::{reference_actions, reference_tag};
use rlvmr_core::{compute_rewards, EpisodeFacts, Matching, RewardConfig, StepFacts, Tag};

fn parse(text: &str, validity: Validity) -> rlvmr_core::ParsedOutput {
    parse_output(text, OutputStyle::Tagged, validity)
}

#[test]
fn markup_is_removed_as_python_re_sub_removes_it() {
    assert_eq!(remove_markup("a<br>b"), "ab");
    assert_eq!(remove_markup("<planning><br/></planning>"), "");
    assert_eq!(remove_markup("<<x>>"), ">", "the first '<' opens, the first '>' closes");
    assert_eq!(remove_markup("a<b\nc>d"), "a<b\nc>d", "no DOTALL: a line break ends the attempt");
    assert_eq!(remove_markup("x < y and y > z"), "x  z");
    assert_eq!(remove_markup("1 < 2"), "1 < 2");
}

#[test]
fn a_block_of_markup_only_is_empty_for_the_reference_and_not_for_strict() {
    let text = "<planning><br></planning><action>look</action>";
    assert!(parse(text, Validity::Strict).format_valid());
    assert_eq!(parse(text, Validity::Reference).invalid, vec![InvalidReason::EmptyReasoning]);
}

#[test]
fn python_whitespace_is_stripped_everywhere() {
    // 0x1c..0x1f are whitespace to Python's str.strip, not to Rust's trim.
    let text = "<monitor>\u{1c}\u{1f} </monitor><action>\u{1d}look\u{1e}</action>";
    for validity in [Validity::Strict, Validity::Reference] {
        let p = parse(text, validity);
        assert_eq!(p.invalid, vec![InvalidReason::EmptyReasoning], "{validity:?}");
        assert_eq!(p.action, "look");
    }
    let p = parse("<monitor>\u{1f}go\u{1c}</monitor><action>look</action>", Validity::Strict);
    assert_eq!(p.reasoning.as_deref(), Some("go"));
}

#[test]
fn the_reference_counts_empty_blocks_but_places_only_full_ones() {
    // Two blocks, one of them empty: one too many under both rules.
    let text = "<explore></explore><monitor>go on</monitor><action>look</action>";
    assert_eq!(parse(text, Validity::Reference).invalid, vec![InvalidReason::MultipleReasoningBlocks(2)]);
    // An empty block after the action is not "a reasoning block after the action" there.
    let p = parse("<action>look</action><monitor> </monitor>", Validity::Reference);
    assert_eq!(p.invalid, vec![InvalidReason::EmptyReasoning]);
    let p = parse("<action>look</action><monitor> </monitor>", Validity::Strict);
    assert_eq!(p.invalid, vec![InvalidReason::EmptyReasoning, InvalidReason::ReasoningAfterAction]);
}

#[test]
fn the_reference_tag_is_a_case_sensitive_substring_test() {
    assert_eq!(reference_tag("<planning>p</planning><action>a</action>"), Some(Tag::Planning));
    assert_eq!(reference_tag("<monitor>my <planning> said so</monitor><action>a</action>"), Some(Tag::Planning));
    assert_eq!(reference_tag("<Planning>p</Planning><action>a</action>"), None);
    assert_eq!(reference_tag("<monitor>m</monitor><action>a</action>"), None, "no monitor branch");
    assert_eq!(reference_tag("<reflection>r <explore></reflection>"), Some(Tag::Explore), "explore is tested first");
}

#[test]
fn reference_actions_are_raw_case_sensitive_and_single_line() {
    assert_eq!(reference_actions("<action> go to desk 1 </action>"), [" go to desk 1 "]);
    assert_eq!(reference_actions("<ACTION>look</ACTION>"), Vec::<&str>::new());
    assert_eq!(reference_actions("<action>go to\ndesk 1</action>"), Vec::<&str>::new());
    assert_eq!(reference_actions("<action>x\n<action>y</action>"), ["y"], "the search resumes after a failed start");
    assert_eq!(reference_actions("<action>a</action><action>b</action>"), ["a", "b"]);
}

fn step<'a>(output: &'a str, action: &'a str, tag: Tag, admissible: bool) -> StepFacts<'a> {
    StepFacts { format_valid: true, tag: Some(tag), action, admissible, observation: "o", output }
}

fn mr(matching: Matching, steps: Vec<StepFacts<'_>>) -> Vec<f64> {
    let config = RewardConfig { matching, ..RewardConfig::default() };
    compute_rewards(&config, &EpisodeFacts { uid: "u", won: true, steps }).steps.iter().map(|s| s.mr_reward).collect()
}

#[test]
fn unstripped_actions_differ_for_the_reference_rules() {
    // The same stripped action, written with a space: not new for us, new for the reference.
    let steps = || {
        vec![
            step("<explore>e</explore><action>go to desk 1</action>", "go to desk 1", Tag::Explore, true),
            step("<explore>e</explore><action>go to desk 1 </action>", "go to desk 1", Tag::Explore, true),
        ]
    };
    assert_eq!(mr(Matching::Parsed, steps()), [1.0, 0.0]);
    assert_eq!(mr(Matching::Reference, steps()), [1.0, 1.0]);
    // A reflection after an inadmissible step that repeats it, with a trailing space.
    let steps = || {
        vec![
            step("<monitor>m</monitor><action>open box</action>", "open box", Tag::Monitor, false),
            step("<reflection>r</reflection><action>open box </action>", "open box", Tag::Reflection, true),
        ]
    };
    assert_eq!(mr(Matching::Parsed, steps()), [0.0, 0.0]);
    assert_eq!(mr(Matching::Reference, steps()), [0.0, 1.0]);
    // A monitor reply quoting its plan's tag is a planning step there, paid in a won episode.
    let quoting = vec![step("<monitor>as <planning> said</monitor><action>look</action>", "look", Tag::Monitor, true)];
    assert_eq!(mr(Matching::Reference, quoting), [1.0]);
}

fn reply() -> impl Strategy<Value = (String, String, Tag)> {
    let tag = prop::sample::select(Tag::ALL.to_vec());
    let action = prop::sample::select(vec!["look", "go to desk 1", "take apple 1 from desk 1", "open drawer 2"]);
    (tag, action, "[a-z ]{1,20}").prop_map(|(tag, action, reason)| {
        let t = tag.name();
        (format!("<{t}>{reason}.</{t}>\n<action>{action}</action>"), action.to_string(), tag)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// On replies the differences cannot show in (lower-case tags, one-line actions without
    /// surrounding spaces, no tag quoted in the reasoning), the two readings pay the same.
    #[test]
    fn both_readings_agree_where_no_difference_shows(
        replies in prop::collection::vec(reply(), 1..12),
        admissible in prop::collection::vec(any::<bool>(), 12),
        won in any::<bool>(),
    ) {
        let steps: Vec<StepFacts<'_>> = replies
            .iter()
            .zip(&admissible)
            .map(|((output, action, tag), &adm)| {
                let p = parse(output, Validity::Reference);
                assert!(p.format_valid() && parse(output, Validity::Strict).format_valid());
                StepFacts { format_valid: true, tag: Some(*tag), action, admissible: adm, observation: "o", output }
            })
            .collect();
        let rewards = |matching| {
            let config = RewardConfig { matching, ..RewardConfig::default() };
            compute_rewards(&config, &EpisodeFacts { uid: "u", won, steps: steps.clone() })
        };
        let (ours, theirs) = (rewards(Matching::Parsed), rewards(Matching::Reference));
        for (a, b) in ours.steps.iter().zip(&theirs.steps) {
            prop_assert_eq!(a.mr_reward, b.mr_reward);
            // Monitor counts as untagged there; every other tag is the same.
            let expected = if a.tag == Some(Tag::Monitor) { None } else { a.tag };
            prop_assert_eq!(expected, b.tag);
        }
    }
}
