//! Cold-start demonstrations on real ALFWorld training games.

mod common;

use std::collections::BTreeSet;

use rlvmr_core::{parse_output, OutputStyle, Tag, Validity};
use trainer::coldstart::coldstart;
use trainer::CollectorOptions;

#[test]
fn l2_demonstrations_are_tagged_expert_wins_on_training_games_with_real_recoveries() {
    let provider = common::alfworld("L2");
    let options = CollectorOptions::default();
    let run = coldstart(provider.as_ref(), 30, 0.5, 7, &options, None).unwrap();
    assert_eq!(run.episodes.len(), 30);
    for e in &run.episodes {
        assert!(e.game.starts_with("json_2.1.1/train/"), "{}", e.game);
        assert!(
            ["pick", "look", "clean", "heat"].contains(&e.task_type.as_str()),
            "an L2 run never sees {}",
            e.task_type
        );
        assert!(e.won && e.steps.len() < 30);
        assert_eq!(e.steps[0].tag, Some(Tag::Planning));
        for (i, s) in e.steps.iter().enumerate() {
            let parsed = parse_output(&s.output, OutputStyle::Tagged, Validity::Strict);
            assert!(
                parsed.format_valid() && parsed.reasoning_blocks == 1,
                "{}",
                s.output
            );
            let reason = parsed.reasoning.unwrap_or_default();
            assert!(
                reason.ends_with('.') && reason.matches(". ").count() == 0,
                "one sentence: {reason}"
            );
            if s.mistake {
                let next = &e.steps[i + 1];
                assert_eq!(
                    next.tag,
                    Some(Tag::Reflection),
                    "a mistake is followed by a reflection"
                );
                let said = next.output.to_lowercase();
                let detour_place = s.action.strip_prefix("go to ").unwrap_or("\u{0}");
                assert!(
                    said.contains(&format!("'{}'", s.action)) || said.contains(detour_place),
                    "the reflection names the mistake: {}",
                    next.output
                );
            }
            if s.tag == Some(Tag::Explore) && !s.mistake {
                let place = s
                    .action
                    .split_once(' ')
                    .map(|(_, p)| p.trim_start_matches("to "))
                    .unwrap_or("");
                assert!(
                    reason.contains(place),
                    "explore names where it looks: {reason}"
                );
            }
        }
    }
    let mistakes: usize = run
        .episodes
        .iter()
        .flat_map(|e| &e.steps)
        .filter(|s| s.mistake)
        .count();
    let inadmissible = run
        .episodes
        .iter()
        .flat_map(|e| &e.steps)
        .filter(|s| s.mistake && s.admissible == Some(false))
        .count();
    assert!(
        (5..=25).contains(&mistakes),
        "about half the episodes carry one mistake: {mistakes}"
    );
    assert!(
        inadmissible > 0 && inadmissible < mistakes,
        "both kinds of mistake occur"
    );
    let steps: usize = run.episodes.iter().map(|e| e.steps.len()).sum();
    assert_eq!(
        run.samples.len(),
        steps - mistakes,
        "mistakes are never SFT targets"
    );
    let responses: BTreeSet<&str> = run.samples.iter().map(|s| s.response.as_str()).collect();
    assert!(responses.len() > run.samples.len() * 9 / 10, "reasons vary");
    let again = coldstart(provider.as_ref(), 30, 0.5, 7, &options, None).unwrap();
    assert_eq!(again.samples, run.samples, "same seed, same data");
    let other = coldstart(provider.as_ref(), 30, 0.5, 8, &options, None).unwrap();
    assert_ne!(other.samples, run.samples);
}

#[test]
fn think_style_demonstrations_carry_the_same_steps_and_reasons_in_think_blocks() {
    let provider = common::alfworld("L2");
    let tagged = coldstart(provider.as_ref(), 12, 0.5, 3, &CollectorOptions::default(), None).unwrap();
    let mut options = CollectorOptions::default();
    options.prompt.style = rlvmr_core::PromptStyle::Think;
    let think = coldstart(provider.as_ref(), 12, 0.5, 3, &options, None).unwrap();
    assert_eq!(think.samples.len(), tagged.samples.len());
    for (t, g) in think.episodes.iter().zip(&tagged.episodes) {
        assert_eq!(t.game, g.game);
        for (ts, gs) in t.steps.iter().zip(&g.steps) {
            assert_eq!(ts.action, gs.action, "the same expert steps and mistakes");
            let parsed = parse_output(&ts.output, OutputStyle::Think, Validity::Strict);
            assert!(parsed.format_valid(), "{}", ts.output);
            let tagged_reason = parse_output(&gs.output, OutputStyle::Tagged, Validity::Strict).reasoning;
            assert_eq!(parsed.reasoning, tagged_reason, "the same reasoning, untagged");
            assert!(
                !parse_output(&ts.output, OutputStyle::Tagged, Validity::Strict).format_valid(),
                "no meta-reasoning tag: {}",
                ts.output
            );
        }
    }
    for s in &think.samples {
        assert!(s.response.starts_with("<think>"), "{}", s.response);
        assert!(s.prompt.contains("<think>"), "the prompt asks for the think format");
    }
}
