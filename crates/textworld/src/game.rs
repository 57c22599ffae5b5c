//! A loaded game and a session playing it, with the reference's observable
//! behaviour: the intro, `Nothing happens.` for anything not admissible, the
//! admissible list sorted and deduplicated, won when the goal holds.

use std::sync::{Arc, Mutex};

use crate::error::GameError;
use crate::facts::FactStore;
use crate::grammar::{parse_symbols, py_space, Grammar};
use crate::logic::{ObjId, Operator, World};
use crate::pddl;
use crate::render::{Ctx, Renderer};

/// The static part of a game, shared by every session that plays it.
#[derive(Debug, Clone)]
pub struct Game {
    pub world: World,
    pub grammar: Grammar,
    /// Display name per object (by default its id, as the reference's PddlEnv does).
    pub names: Vec<String>,
    /// Objects that appear in some initial fact, sorted: the reference's entities.
    pub entities: Vec<ObjId>,
    pub walkthrough: Vec<String>,
}

fn string_key<'a>(data: &'a serde_json::Value, key: &'static str) -> Result<&'a str, GameError> {
    data.get(key).and_then(|v| v.as_str()).ok_or(GameError::MissingKey(key))
}

/// Games of one family share their domain text (every ALFWorld game has the
/// same one): keep the last parse.
fn cached_domain(text: &str) -> Result<Arc<pddl::Domain>, GameError> {
    static LAST: Mutex<Option<(String, Arc<pddl::Domain>)>> = Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((cached_text, domain)) = last.as_ref() {
        if cached_text == text {
            return Ok(domain.clone());
        }
    }
    let domain = Arc::new(pddl::parse_domain(text).map_err(GameError::Domain)?);
    *last = Some((text.to_string(), domain.clone()));
    Ok(domain)
}

impl Game {
    /// Loads a `.tw-pddl` document (JSON text).
    pub fn from_json(text: &str) -> Result<Game, GameError> {
        let data: serde_json::Value = serde_json::from_str(text)?;
        let domain = cached_domain(string_key(&data, "pddl_domain")?)?;
        let problem = pddl::parse_problem(string_key(&data, "pddl_problem")?).map_err(GameError::Problem)?;
        let grammar = Grammar::parse(string_key(&data, "grammar")?)?;
        let world = World::compile(&domain, &problem).map_err(GameError::Problem)?;
        let walkthrough = data
            .get("walkthrough")
            .and_then(|w| w.as_array())
            .map(|w| w.iter().filter_map(|c| c.as_str().map(str::to_string)).collect())
            .unwrap_or_default();
        for action in &world.actions {
            if !grammar.actions.contains_key(&action.name) {
                return Err(GameError::Render(format!("the grammar has no template for the PDDL action '{}'", action.name)));
            }
        }
        let mut entities: Vec<ObjId> = world.init.iter().flat_map(|(_, a)| a.iter().copied().filter(|&o| o != crate::facts::NO_ARG)).collect();
        entities.sort_unstable();
        entities.dedup();
        let names = world.objects.clone();
        Ok(Game { world, grammar, names, entities, walkthrough })
    }

    /// Ids of the entities, sorted (what a name demangler works from).
    pub fn entity_ids(&self) -> Vec<&str> {
        self.entities.iter().map(|&o| self.world.objects[o as usize].as_str()).collect()
    }

    /// Sets display names; `name_of` gets each entity id and returns its name.
    pub fn set_names(&mut self, mut name_of: impl FnMut(&str) -> String) {
        for &o in &self.entities {
            self.names[o as usize] = name_of(&self.world.objects[o as usize]);
        }
    }
}

/// What the player sees after a reset or a step.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    pub feedback: String,
    pub admissible_commands: Vec<String>,
    pub won: bool,
    pub done: bool,
}

/// One play-through of a game.
#[derive(Debug, Clone)]
pub struct Session {
    game: Arc<Game>,
    /// The planner's state: PDDL semantics.
    state: FactStore,
    /// The facts text is rendered from: initial facts plus every reported effect,
    /// deletions kept as `not_` facts.
    display: FactStore,
    operators: Vec<Operator>,
    commands: Vec<String>,
    admissible: Vec<String>,
    won: bool,
    moves: usize,
}

/// Python's `str.strip()`.
pub fn py_strip(s: &str) -> &str {
    s.trim_matches(py_space)
}

impl Session {
    /// Starts the game: returns the session and the intro.
    pub fn start(game: Arc<Game>) -> Result<(Session, Observation), GameError> {
        let state = game.world.initial_state();
        let mut display = FactStore::with_predicates(2 * game.world.predicates.len());
        for (p, a) in &game.world.init {
            display.insert(2 * p, *a);
        }
        let mut session = Session { game, state, display, operators: Vec::new(), commands: Vec::new(), admissible: Vec::new(), won: false, moves: 0 };
        let intro = parse_symbols("#intro#")?;
        let mut feedback = String::new();
        session.renderer().derive(&intro, &Ctx::default(), &mut feedback)?;
        let obs = session.observe(feedback)?;
        Ok((session, obs))
    }

    pub fn game(&self) -> &Arc<Game> {
        &self.game
    }

    fn renderer(&self) -> Renderer<'_> {
        Renderer { world: &self.game.world, grammar: &self.game.grammar, facts: &self.display, names: &self.game.names, depth: Default::default() }
    }

    fn op_context<'g>(game: &'g Game, op: &Operator) -> Ctx<'g> {
        let action = &game.world.actions[op.action];
        let mut ctx = Ctx::default();
        for ((name, ty), &o) in action.parameters.iter().zip(&op.args) {
            ctx.mapping.push((name.as_str(), game.world.types[*ty].as_str(), o));
            ctx.variables.push((name.as_str(), o));
        }
        ctx
    }

    fn observe(&mut self, feedback: String) -> Result<Observation, GameError> {
        self.won = self.game.world.goal_holds(&self.state);
        self.operators = self.game.world.applicable(&self.state);
        let mut commands = Vec::with_capacity(self.operators.len());
        for op in &self.operators {
            let action = &self.game.world.actions[op.action];
            let text = &self.game.grammar.actions[&action.name];
            let mut command = String::new();
            self.renderer().derive(&text.template, &Self::op_context(&self.game, op), &mut command)?;
            commands.push(command);
        }
        let mut admissible = commands.clone();
        admissible.sort();
        admissible.dedup();
        self.commands = commands;
        self.admissible = admissible;
        Ok(Observation { feedback, admissible_commands: self.admissible.clone(), won: self.won, done: self.won })
    }

    /// Plays one command (stripped first); anything not admissible answers
    /// `Nothing happens.` and changes nothing.
    pub fn step(&mut self, command: &str) -> Result<Observation, GameError> {
        let command = py_strip(command);
        let Some(index) = self.commands.iter().position(|c| c == command) else {
            return self.observe("Nothing happens.".to_string());
        };
        let op = self.operators[index].clone();
        let effects = self.game.world.apply(&op, &mut self.state);
        let (adds, deletes): (Vec<_>, Vec<_>) = effects.iter().partition(|e| e.add);
        for e in adds.iter().chain(&deletes) {
            let (on, off) = if e.add { (2 * e.pred, 2 * e.pred + 1) } else { (2 * e.pred + 1, 2 * e.pred) };
            self.display.remove(off, &e.args);
            self.display.insert(on, e.args);
        }
        self.moves += 1;
        let action = &self.game.world.actions[op.action];
        let text = &self.game.grammar.actions[&action.name];
        let mut feedback = String::new();
        self.renderer().derive(&text.feedback, &Self::op_context(&self.game, &op), &mut feedback)?;
        self.observe(feedback)
    }

    pub fn admissible_commands(&self) -> &[String] {
        &self.admissible
    }

    pub fn won(&self) -> bool {
        self.won
    }

    pub fn moves(&self) -> usize {
        self.moves
    }
}
