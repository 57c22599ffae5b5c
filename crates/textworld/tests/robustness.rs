//! Arbitrary input never panics: the parsers return errors, the engine answers.

use proptest::prelude::*;
use textworld::grammar::{parse_expr, parse_query, parse_symbols, Grammar};
use textworld::{pddl, sexpr, Game};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn sexpr_never_panics(text in "[()a-z?;\\- \n,]{0,200}") {
        let _ = sexpr::parse(&text);
        let _ = pddl::parse_domain(&text);
        let _ = pddl::parse_problem(&text);
    }

    #[test]
    fn grammar_pieces_never_panic(text in "\\PC{0,120}") {
        let _ = parse_symbols(&text);
        let _ = parse_query(&text);
        let _ = parse_expr(&text);
        let _ = Grammar::parse(&text);
    }

    #[test]
    fn rule_syntax_never_panics(text in "[#{}\\[\\]|&:()a-z. \t\n\"';<>]{0,80}") {
        let _ = parse_symbols(&text);
    }

    #[test]
    fn game_json_never_panics(text in "\\PC{0,200}") {
        let _ = Game::from_json(&text);
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let deep = "(".repeat(100_000) + &")".repeat(100_000);
    let err = sexpr::parse(&deep).unwrap_err();
    assert!(err.to_string().contains("nest deeper"), "{err}");
}
