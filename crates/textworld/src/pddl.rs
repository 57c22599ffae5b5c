//! PDDL domain and problem syntax (the subset TextWorld games use): typing,
//! negation, equality, `or`, `imply`, `exists`, `forall`, conditional effects
//! (`when`) and action costs (ignored: they never change what a player sees).

use crate::error::PddlError;
use crate::sexpr::{self, Sexpr};

#[derive(Debug, Clone, PartialEq)]
pub struct TypedName {
    pub name: String,
    pub type_name: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Term {
    /// `?x`, stored without the question mark.
    Var(String),
    Const(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct AtomExpr {
    pub predicate: String,
    pub args: Vec<Term>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Formula {
    True,
    Atom(AtomExpr),
    Equal(Term, Term),
    Not(Box<Formula>),
    And(Vec<Formula>),
    Or(Vec<Formula>),
    Imply(Box<Formula>, Box<Formula>),
    Exists(Vec<TypedName>, Box<Formula>),
    Forall(Vec<TypedName>, Box<Formula>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    Add(AtomExpr),
    Delete(AtomExpr),
    And(Vec<Effect>),
    Forall(Vec<TypedName>, Box<Effect>),
    When(Formula, Box<Effect>),
    /// Numeric effects such as `(increase (total-cost) 1)`.
    Numeric,
}

#[derive(Debug, Clone)]
pub struct ActionDef {
    pub name: String,
    pub parameters: Vec<TypedName>,
    pub precondition: Formula,
    pub effect: Effect,
}

#[derive(Debug, Clone)]
pub struct Domain {
    pub name: String,
    /// (type, parent type); every type without a declared parent has parent `object`.
    pub types: Vec<(String, String)>,
    pub constants: Vec<TypedName>,
    pub actions: Vec<ActionDef>,
}

#[derive(Debug, Clone)]
pub struct Problem {
    pub name: String,
    pub objects: Vec<TypedName>,
    /// Ground initial atoms (numeric fluents are dropped).
    pub init: Vec<(String, Vec<String>)>,
    pub goal: Formula,
}

fn atom_of<'a>(e: &'a Sexpr, what: &str) -> Result<&'a str, PddlError> {
    e.as_atom().ok_or_else(|| PddlError::structure(format!("expected a name for {what}, found a list")))
}

fn list_of<'a>(e: &'a Sexpr, what: &str) -> Result<&'a [Sexpr], PddlError> {
    e.as_list().ok_or_else(|| PddlError::structure(format!("expected a list for {what}, found '{}'", e.as_atom().unwrap_or(""))))
}

/// `a b - t c - u d` → [(a,t),(b,t),(c,u),(d,object)].
fn typed_list(items: &[Sexpr], what: &str) -> Result<Vec<TypedName>, PddlError> {
    let mut out = Vec::new();
    let mut pending: Vec<String> = Vec::new();
    let mut i = 0;
    while i < items.len() {
        let token = atom_of(&items[i], what)?;
        if token == "-" {
            let type_name = items
                .get(i + 1)
                .ok_or_else(|| PddlError::structure(format!("'-' without a type in {what}")))?;
            let type_name = match type_name {
                Sexpr::Atom(t) => t.clone(),
                // `(either a b)`: keep the first alternative.
                Sexpr::List(l) => atom_of(l.get(1).unwrap_or(&Sexpr::Atom("object".into())), what)?.to_string(),
            };
            for name in pending.drain(..) {
                out.push(TypedName { name, type_name: type_name.clone() });
            }
            i += 2;
        } else {
            pending.push(token.to_string());
            i += 1;
        }
    }
    for name in pending {
        out.push(TypedName { name, type_name: "object".into() });
    }
    Ok(out)
}

fn variables(items: &[Sexpr], what: &str) -> Result<Vec<TypedName>, PddlError> {
    let mut vars = typed_list(items, what)?;
    for v in &mut vars {
        v.name = v.name.strip_prefix('?').unwrap_or(&v.name).to_string();
    }
    Ok(vars)
}

fn term(e: &Sexpr) -> Result<Term, PddlError> {
    let t = atom_of(e, "an argument")?;
    Ok(match t.strip_prefix('?') {
        Some(v) => Term::Var(v.to_string()),
        None => Term::Const(t.to_string()),
    })
}

fn atom_expr(items: &[Sexpr]) -> Result<AtomExpr, PddlError> {
    let predicate = atom_of(&items[0], "a predicate")?.to_string();
    let args = items[1..].iter().map(term).collect::<Result<_, _>>()?;
    Ok(AtomExpr { predicate, args })
}

pub fn formula(e: &Sexpr) -> Result<Formula, PddlError> {
    let items = list_of(e, "a condition")?;
    let Some(head) = items.first() else { return Ok(Formula::True) };
    let head = atom_of(head, "a condition")?;
    let sub = |i: usize| -> Result<Formula, PddlError> {
        formula(items.get(i).ok_or_else(|| PddlError::structure(format!("'{head}' lacks an argument")))?)
    };
    Ok(match head {
        "and" => Formula::And(items[1..].iter().map(formula).collect::<Result<_, _>>()?),
        "or" => Formula::Or(items[1..].iter().map(formula).collect::<Result<_, _>>()?),
        "not" => Formula::Not(Box::new(sub(1)?)),
        "imply" => Formula::Imply(Box::new(sub(1)?), Box::new(sub(2)?)),
        "exists" | "forall" => {
            let vars = variables(list_of(items.get(1).ok_or_else(|| PddlError::structure(format!("'{head}' lacks variables")))?, "quantified variables")?, head)?;
            let body = Box::new(sub(2)?);
            if head == "exists" { Formula::Exists(vars, body) } else { Formula::Forall(vars, body) }
        }
        "=" => {
            if items.len() != 3 {
                return Err(PddlError::structure("'=' needs two arguments"));
            }
            Formula::Equal(term(&items[1])?, term(&items[2])?)
        }
        _ => Formula::Atom(atom_expr(items)?),
    })
}

fn effect(e: &Sexpr) -> Result<Effect, PddlError> {
    let items = list_of(e, "an effect")?;
    let Some(head) = items.first() else { return Ok(Effect::And(vec![])) };
    let head = atom_of(head, "an effect")?;
    Ok(match head {
        "and" => Effect::And(items[1..].iter().map(effect).collect::<Result<_, _>>()?),
        "not" => {
            let inner = list_of(items.get(1).ok_or_else(|| PddlError::structure("'not' lacks an argument"))?, "a negated effect")?;
            Effect::Delete(atom_expr(inner)?)
        }
        "forall" => {
            let vars = variables(list_of(items.get(1).ok_or_else(|| PddlError::structure("'forall' lacks variables"))?, "quantified variables")?, "forall")?;
            Effect::Forall(vars, Box::new(effect(items.get(2).ok_or_else(|| PddlError::structure("'forall' lacks a body"))?)?))
        }
        "when" => {
            let cond = formula(items.get(1).ok_or_else(|| PddlError::structure("'when' lacks a condition"))?)?;
            Effect::When(cond, Box::new(effect(items.get(2).ok_or_else(|| PddlError::structure("'when' lacks an effect"))?)?))
        }
        "increase" | "decrease" | "assign" | "scale-up" | "scale-down" => Effect::Numeric,
        _ => Effect::Add(atom_expr(items)?),
    })
}

fn action(items: &[Sexpr]) -> Result<ActionDef, PddlError> {
    let name = atom_of(items.get(1).ok_or_else(|| PddlError::structure("':action' without a name"))?, "an action name")?.to_string();
    let mut parameters = Vec::new();
    let mut precondition = Formula::True;
    let mut eff = Effect::And(vec![]);
    let mut i = 2;
    while i < items.len() {
        let key = atom_of(&items[i], "an action section")?;
        let value = items.get(i + 1).ok_or_else(|| PddlError::structure(format!("action '{name}': '{key}' without a value")))?;
        match key {
            ":parameters" => parameters = variables(list_of(value, "parameters")?, "parameters")?,
            ":precondition" => precondition = formula(value).map_err(|e| PddlError::structure(format!("action '{name}' precondition: {e}")))?,
            ":effect" => eff = effect(value).map_err(|e| PddlError::structure(format!("action '{name}' effect: {e}")))?,
            _ => {}
        }
        i += 2;
    }
    Ok(ActionDef { name, parameters, precondition, effect: eff })
}

fn define_sections<'a>(root: &'a Sexpr, kind: &str) -> Result<(String, &'a [Sexpr]), PddlError> {
    let items = list_of(root, "the top level")?;
    if items.first().and_then(Sexpr::as_atom) != Some("define") {
        return Err(PddlError::structure("the text does not start with '(define'"));
    }
    let header = items.get(1).and_then(Sexpr::as_list).ok_or_else(|| PddlError::structure(format!("missing '({kind} NAME)'")))?;
    if header.first().and_then(Sexpr::as_atom) != Some(kind) {
        return Err(PddlError::structure(format!("expected '({kind} NAME)' after define")));
    }
    let name = header.get(1).and_then(Sexpr::as_atom).unwrap_or("").to_string();
    Ok((name, &items[2..]))
}

pub fn parse_domain(text: &str) -> Result<Domain, PddlError> {
    let root = sexpr::parse(text)?;
    let (name, sections) = define_sections(&root, "domain")?;
    let mut domain = Domain { name, types: Vec::new(), constants: Vec::new(), actions: Vec::new() };
    for section in sections {
        let items = list_of(section, "a domain section")?;
        let Some(key) = items.first().and_then(Sexpr::as_atom) else { continue };
        match key {
            ":types" => {
                for t in typed_list(&items[1..], "types")? {
                    domain.types.push((t.name, t.type_name));
                }
            }
            ":constants" => domain.constants = typed_list(&items[1..], "constants")?,
            ":action" => domain.actions.push(action(items)?),
            ":derived" => return Err(PddlError::structure("derived predicates (':derived') are not supported")),
            _ => {}
        }
    }
    Ok(domain)
}

pub fn parse_problem(text: &str) -> Result<Problem, PddlError> {
    let root = sexpr::parse(text)?;
    let (name, sections) = define_sections(&root, "problem")?;
    let mut problem = Problem { name, objects: Vec::new(), init: Vec::new(), goal: Formula::True };
    let mut saw_goal = false;
    for section in sections {
        let items = list_of(section, "a problem section")?;
        let Some(key) = items.first().and_then(Sexpr::as_atom) else { continue };
        match key {
            ":objects" => problem.objects = typed_list(&items[1..], "objects")?,
            ":init" => {
                for fact in &items[1..] {
                    let parts = list_of(fact, "an initial fact")?;
                    let Some(pred) = parts.first().and_then(Sexpr::as_atom) else {
                        return Err(PddlError::structure("an initial fact without a predicate"));
                    };
                    if pred == "=" {
                        continue; // numeric fluent such as (= (total-cost) 0)
                    }
                    let args = parts[1..]
                        .iter()
                        .map(|a| atom_of(a, "an initial fact argument").map(str::to_string))
                        .collect::<Result<_, _>>()?;
                    problem.init.push((pred.to_string(), args));
                }
            }
            ":goal" => {
                problem.goal = formula(items.get(1).ok_or_else(|| PddlError::structure("empty ':goal'"))?)?;
                saw_goal = true;
            }
            _ => {}
        }
    }
    if !saw_goal {
        return Err(PddlError::structure("the problem has no ':goal'"));
    }
    Ok(problem)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOMAIN: &str = "(define (domain d) (:types item place) (:predicates (at ?i - item ?p - place))
      (:action move :parameters (?i - item ?from ?to - place)
        :precondition (and (at ?i ?from) (not (= ?from ?to)))
        :effect (and (not (at ?i ?from)) (at ?i ?to) (increase (total-cost) 1))))";

    #[test]
    fn parses_a_small_domain() {
        let d = parse_domain(DOMAIN).unwrap();
        assert_eq!(d.types, vec![("item".into(), "object".into()), ("place".into(), "object".into())]);
        let a = &d.actions[0];
        assert_eq!(a.parameters.iter().map(|p| (p.name.as_str(), p.type_name.as_str())).collect::<Vec<_>>(), vec![("i", "item"), ("from", "place"), ("to", "place")]);
        assert!(matches!(&a.effect, Effect::And(v) if v.len() == 3));
    }

    #[test]
    fn problem_needs_a_goal() {
        let err = parse_problem("(define (problem p) (:domain d) (:objects a - item))").unwrap_err();
        assert!(err.to_string().contains(":goal"));
    }

    #[test]
    fn problem_skips_numeric_init() {
        let p = parse_problem("(define (problem p) (:domain d) (:objects a - item b - place) (:init (at a b) (= (total-cost) 0)) (:goal (at a b)))").unwrap();
        assert_eq!(p.init, vec![("at".to_string(), vec!["a".to_string(), "b".to_string()])]);
    }
}
