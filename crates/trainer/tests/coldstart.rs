//! Cold-start demonstrations on real ALFWorld training games.

mod common;

use std::collections::BTreeSet;

use rlvmr_core::{parse_output, OutputStyle, Tag, Validity};
use trainer::coldstart::{coldstart, Detours};
use trainer::envs::Protocol;
use trainer::CollectorOptions;

#[test]
fn l2_demonstrations_are_tagged_expert_wins_on_training_games_with_real_recoveries() {
    let provider = common::alfworld("L2");
    let options = CollectorOptions::default();
    let run = coldstart(provider.as_ref(), 30, 0, Detours::mistakes(0.5), Protocol::Strict, 7, &options, None).unwrap();
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
    let again = coldstart(provider.as_ref(), 30, 0, Detours::mistakes(0.5), Protocol::Strict, 7, &options, None).unwrap();
    assert_eq!(again.samples, run.samples, "same seed, same data");
    let other = coldstart(provider.as_ref(), 30, 0, Detours::mistakes(0.5), Protocol::Strict, 8, &options, None).unwrap();
    assert_ne!(other.samples, run.samples);
}

#[test]
fn think_style_demonstrations_carry_the_same_steps_and_reasons_in_think_blocks() {
    let provider = common::alfworld("L2");
    let tagged = coldstart(provider.as_ref(), 12, 0, Detours::mistakes(0.5), Protocol::Strict, 3, &CollectorOptions::default(), None).unwrap();
    let mut options = CollectorOptions::default();
    options.prompt.style = rlvmr_core::PromptStyle::Think;
    let think = coldstart(provider.as_ref(), 12, 0, Detours::mistakes(0.5), Protocol::Strict, 3, &options, None).unwrap();
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

#[test]
fn demonstrations_searching_for_the_appliance_explore_with_the_object_and_stay_on_l2_types() {
    let provider = common::alfworld("L2");
    let options = CollectorOptions::default();
    let detours = Detours { mistake_fraction: 0.0, appliance_search: 1.0, give_up_at: None, cut_at: None };
    let searching = coldstart(provider.as_ref(), 40, 0, detours, Protocol::Strict, 5, &options, None).unwrap();
    let direct = coldstart(provider.as_ref(), 40, 0, Detours::mistakes(0.0), Protocol::Strict, 5, &options, None).unwrap();
    let mut with_appliance = 0;
    let mut tried_elsewhere = 0;
    for (s, d) in searching.episodes.iter().zip(&direct.episodes) {
        assert_eq!(s.game, d.game, "the same games in the same order");
        assert!(["pick", "look", "clean", "heat"].contains(&s.task_type.as_str()), "{}", s.task_type);
        let verb = match s.task_type.as_str() {
            "heat" | "clean" => s.task_type.as_str(),
            _ => {
                // The search draws from a stream of its own: other tasks keep every reply.
                let replies = |e: &trainer::EpisodeRecord| e.steps.iter().map(|t| t.output.clone()).collect::<Vec<_>>();
                assert_eq!(replies(s), replies(d), "only appliance tasks change: {}", s.game);
                continue;
            }
        };
        with_appliance += 1;
        let plan = &s.steps[0].output;
        assert!(plan.contains(&format!("where I can {verb} it")), "{plan}");
        let took = s.steps.iter().position(|t| t.action.starts_with("take ")).unwrap();
        let processed = s.steps.iter().position(|t| t.action.starts_with(&format!("{verb} "))).unwrap();
        for step in &s.steps[took + 1..processed] {
            assert!(step.action.starts_with("go to "), "{}", step.action);
            assert_eq!(step.tag, Some(Tag::Explore), "{}", step.output);
            assert!(step.output.contains(verb), "{}", step.output);
        }
        assert_eq!(s.steps[processed].tag, Some(Tag::Monitor));
        tried_elsewhere += usize::from(processed > took + 2);
    }
    assert!(with_appliance >= 8, "{with_appliance} heat and clean demonstrations");
    assert!(tried_elsewhere * 2 >= with_appliance, "most searches try another kind first: {tried_elsewhere} of {with_appliance}");
}

#[test]
fn lines_layout_demonstrations_are_the_same_steps_with_each_block_on_lines_of_its_own() {
    let provider = common::alfworld("L2");
    let inline = coldstart(provider.as_ref(), 12, 0, Detours::mistakes(0.5), Protocol::Strict, 3, &CollectorOptions::default(), None).unwrap();
    let mut options = CollectorOptions::default();
    options.prompt.layout = rlvmr_core::ReplyLayout::Lines;
    let lines = coldstart(provider.as_ref(), 12, 0, Detours::mistakes(0.5), Protocol::Strict, 3, &options, None).unwrap();
    assert_eq!(lines.samples.len(), inline.samples.len());
    for (l, i) in lines.episodes.iter().zip(&inline.episodes) {
        assert_eq!(l.game, i.game);
        for (ls, is) in l.steps.iter().zip(&i.steps) {
            assert_eq!(ls.action, is.action, "the same expert steps and mistakes");
            assert_eq!(ls.output, rlvmr_core::ReplyLayout::Lines.apply(&is.output));
            let (lp, ip) = (parse_output(&ls.output, OutputStyle::Tagged, Validity::Strict), parse_output(&is.output, OutputStyle::Tagged, Validity::Strict));
            assert_eq!((lp.format_valid(), lp.tag, lp.reasoning, lp.action), (ip.format_valid(), ip.tag, ip.reasoning, ip.action));
            // The reference code's rules see no action in such a reply: `findall` without DOTALL.
            assert!(rlvmr_core::reward::reference_actions(&ls.output).is_empty(), "{}", ls.output);
        }
    }
    for s in &lines.samples {
        assert!(s.response.contains(">\n") && s.response.ends_with("\n</action>"), "{:?}", s.response);
    }
}

#[test]
fn openings_need_tasks_too_long_for_the_step_limit() {
    // Every ALFWorld expert path fits: asking for openings is a config error, before any
    // episode is played.
    let provider = common::alfworld("L0");
    let error = coldstart(provider.as_ref(), 2, 3, Detours::mistakes(0.0), Protocol::Strict, 0, &CollectorOptions::default(), None)
        .unwrap_err()
        .to_string();
    assert!(error.contains("coldstart.openings") && error.contains("too long"), "{error}");
}
