//! Property tests for the output parser.

use proptest::prelude::*;
use rlvmr_core::format::{parse_output, strip, OutputStyle, Validity};
use rlvmr_core::Tag;

fn tag_strategy() -> impl Strategy<Value = Tag> {
    prop::sample::select(Tag::ALL.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,300}") {
        for style in [OutputStyle::Tagged, OutputStyle::Think] {
            for validity in [Validity::Strict, Validity::Lenient, Validity::Reference] {
                let p = parse_output(&text, style, validity);
                prop_assert_eq!(p.format_valid(), p.invalid.is_empty());
            }
        }
    }

    #[test]
    fn tag_soup_never_panics(text in "(<|</|>|action|planning|monitor|think|explore|reflection|x| |\n|好){0,60}") {
        let p = parse_output(&text, OutputStyle::Tagged, Validity::Strict);
        if p.format_valid() {
            prop_assert_eq!(p.action_blocks, 1);
            prop_assert_eq!(p.reasoning_blocks, 1);
            prop_assert!(p.tag.is_some());
        }
    }

    #[test]
    fn well_formed_outputs_parse_back(tag in tag_strategy(), reason in "[a-z ,.:0-9\n]{1,80}", action in "[a-z0-9 ]{0,40}", pad in "[ \t\n]{0,3}") {
        prop_assume!(!reason.trim().is_empty());
        let text = format!("{pad}<{t}>{reason}</{t}>{pad}<action>{pad}{action}{pad}</action>", t = tag.name());
        let p = parse_output(&text, OutputStyle::Tagged, Validity::Strict);
        prop_assert!(p.format_valid(), "{:?}", p.invalid);
        prop_assert_eq!(p.step_tag(), Some(tag));
        prop_assert_eq!(p.action, strip(&action).to_string());
        prop_assert_eq!(p.reasoning.unwrap(), reason.trim().to_string());
    }

    #[test]
    fn upper_case_tags_match_too(tag in tag_strategy()) {
        let t = tag.name().to_uppercase();
        let p = parse_output(&format!("<{t}>why</{t}><ACTION>look</ACTION>"), OutputStyle::Tagged, Validity::Strict);
        prop_assert!(p.format_valid());
        prop_assert_eq!(p.action, "look");
    }
}

#[test]
fn parsing_is_linear_in_practice() {
    // 200k nested opens must not blow up (a quadratic scan would take minutes).
    let text = "<action>".repeat(200_000) + "</action>";
    let p = parse_output(&text, OutputStyle::Tagged, Validity::Strict);
    assert_eq!(p.action_blocks, 1);
}
