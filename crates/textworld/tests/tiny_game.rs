//! A small hand-written TextWorld PDDL game: the engine plays games other than
//! ALFWorld's from their own domain, problem and grammar.

use std::sync::Arc;
use textworld::{Game, Session};

fn tiny_game(grammar_extra: &str) -> String {
    let domain = "(define (domain lamps) (:types room lamp)
      (:predicates (in ?l - lamp ?r - room) (on ?l - lamp) (here ?r - room))
      (:action switch :parameters (?l - lamp ?r - room)
         :precondition (and (here ?r) (in ?l ?r) (not (on ?l)))
         :effect (on ?l))
      (:action walk :parameters (?from ?to - room)
         :precondition (here ?from)
         :effect (and (not (here ?from)) (here ?to))))";
    let problem = "(define (problem p) (:domain lamps)
      (:objects hall kitchen - room red blue - lamp)
      (:init (here hall) (in red hall) (in blue kitchen))
      (:goal (and (on red) (on blue))))";
    let grammar = format!(
        r##"grammar :: """{{
  "intro": [{{"rhs": "Lamps! #look#"}}],
  "look": [{{"condition": "here(r:room)", "rhs": "You are in the [{{r.name | here(r:room)}}]. Lamps here: [{{l.name | here(r:room) & in(l:lamp, r:room)}}]."}}],
  "list_empty": [{{"rhs": "none"}}], "list_separator": [{{"rhs": ", "}}], "list_last_separator": [{{"rhs": " and "}}]
  {grammar_extra}
}}""";
action switch {{ template :: "switch on {{l}}"; feedback :: "Click: the {{l.name}} is on."; }}
action walk {{ template :: "walk to {{to}}"; feedback :: "You walk to the {{to.name}}."; }}
"##
    );
    serde_json::json!({"pddl_domain": domain, "pddl_problem": problem, "grammar": grammar, "walkthrough": []}).to_string()
}

#[test]
fn plays_a_non_alfworld_game() {
    let game = Arc::new(Game::from_json(&tiny_game("")).unwrap());
    let (mut s, intro) = Session::start(game).unwrap();
    assert_eq!(intro.feedback, "Lamps! You are in the hall. Lamps here: red.");
    // walk to hall would be a no-op operator, so it does not exist.
    assert_eq!(intro.admissible_commands, vec!["switch on red", "walk to kitchen"]);
    assert_eq!(s.step("  switch on red\n").unwrap().feedback, "Click: the red is on.");
    assert_eq!(s.step("switch on red").unwrap().feedback, "Nothing happens.");
    let o = s.step("walk to kitchen").unwrap();
    assert_eq!(o.feedback, "You walk to the kitchen.");
    assert!(!o.won);
    let o = s.step("switch on blue").unwrap();
    assert!(o.won && o.done);
}

#[test]
fn a_self_recursive_grammar_is_an_error_not_a_hang() {
    let text = tiny_game(r##", "loop": [{"rhs": "#loop#"}], "intro": [{"rhs": "#loop#"}]"##);
    let game = Arc::new(Game::from_json(&text).unwrap());
    let err = Session::start(game).unwrap_err();
    assert!(err.to_string().contains("levels deep"), "{err}");
}
