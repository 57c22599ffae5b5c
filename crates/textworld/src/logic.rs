//! Compiled PDDL: objects, types, predicates, actions, and their evaluation on a
//! state. Applicable operators follow the reference planner front-end's rules,
//! including one that shapes what players see: an operator whose every effect is
//! a no-op given its precondition does not exist (so `go to` a receptacle at the
//! agent's own location is never admissible).

use std::collections::HashMap;

use crate::error::PddlError;
use crate::facts::{args_of, Args, FactStore, MAX_ARITY, NO_ARG};
use crate::pddl::{self, AtomExpr, Effect, Formula, Term, TypedName};

pub type ObjId = u32;
pub type TypeId = usize;
pub type PredId = usize;
type Slot = usize;

#[derive(Debug, Clone, Copy, PartialEq)]
enum CTerm {
    /// A variable slot and its declared type.
    Slot(Slot, TypeId),
    Obj(ObjId),
}

#[derive(Debug, Clone)]
struct CAtom {
    pred: PredId,
    terms: Vec<CTerm>,
}

#[derive(Debug, Clone)]
enum CFormula {
    True,
    Atom(CAtom),
    Equal(CTerm, CTerm),
    Not(Box<CFormula>),
    And(Vec<CFormula>),
    Or(Vec<CFormula>),
    Imply(Box<CFormula>, Box<CFormula>),
    Exists(Vec<(Slot, TypeId)>, Box<CFormula>, Vec<Variant>),
    Forall(Vec<(Slot, TypeId)>, Box<CFormula>),
}

#[derive(Debug, Clone)]
enum CEffect {
    Add(CAtom),
    Delete(CAtom),
    And(Vec<CEffect>),
    Forall(Vec<(Slot, TypeId)>, Box<CEffect>),
    When(CFormula, Box<CEffect>),
}

/// One way a condition can hold: positive atoms that generate bindings, plus
/// the extra (existential) slots they may bind.
#[derive(Debug, Clone, Default)]
struct Variant {
    generators: Vec<CAtom>,
    slots: Vec<(Slot, TypeId)>,
}

#[derive(Debug, Clone)]
pub struct Action {
    pub name: String,
    pub parameters: Vec<(String, TypeId)>,
    /// The parameters as (slot, type): slots 0..n.
    param_slots: Vec<(Slot, TypeId)>,
    precondition: CFormula,
    variants: Vec<Variant>,
    /// Literals the precondition requires unconditionally: (atom, must be true).
    required: Vec<(CAtom, bool)>,
    effect: CEffect,
    slot_count: usize,
    /// No effect can ever be pruned away, so every applicable binding is an operator.
    always_effective: bool,
}

/// A ground effect on one atom; `conditional` effects are reported to the text
/// layer whether or not their condition holds, as the reference does.
#[derive(Debug, Clone, PartialEq)]
pub struct GroundEffect {
    pub pred: PredId,
    pub args: Args,
    pub add: bool,
    pub conditional: bool,
}

/// A grounded applicable operator.
#[derive(Debug, Clone, PartialEq)]
pub struct Operator {
    pub action: usize,
    pub args: Vec<ObjId>,
}

#[derive(Debug, Clone)]
pub struct World {
    pub objects: Vec<String>,
    pub object_types: Vec<TypeId>,
    pub types: Vec<String>,
    type_parent: Vec<Option<TypeId>>,
    type_members: Vec<Vec<ObjId>>,
    /// `subtype[t * types + a]`: t is a (reflexive) subtype of a.
    subtype: Vec<bool>,
    type_index: HashMap<String, TypeId>,
    pred_index: HashMap<String, PredId>,
    pub predicates: Vec<String>,
    pub actions: Vec<Action>,
    pub init: Vec<(PredId, Args)>,
    goal: CFormula,
    goal_slots: usize,
}

const MAX_VARIANTS: usize = 64;

struct Compiler<'a> {
    types: &'a mut Vec<String>,
    type_ids: &'a mut HashMap<String, TypeId>,
    predicates: &'a mut Vec<String>,
    pred_ids: &'a mut HashMap<String, PredId>,
    object_ids: &'a HashMap<String, ObjId>,
    scope: Vec<(String, Slot, TypeId)>,
    slot_count: usize,
}

impl Compiler<'_> {
    fn type_id(&mut self, name: &str) -> TypeId {
        if let Some(&id) = self.type_ids.get(name) {
            return id;
        }
        self.types.push(name.to_string());
        self.type_ids.insert(name.to_string(), self.types.len() - 1);
        self.types.len() - 1
    }

    fn pred_id(&mut self, name: &str) -> PredId {
        if let Some(&id) = self.pred_ids.get(name) {
            return id;
        }
        self.predicates.push(name.to_string());
        self.pred_ids.insert(name.to_string(), self.predicates.len() - 1);
        self.predicates.len() - 1
    }

    fn bind(&mut self, vars: &[TypedName]) -> Vec<(Slot, TypeId)> {
        vars.iter()
            .map(|v| {
                let slot = self.slot_count;
                self.slot_count += 1;
                let ty = self.type_id(&v.type_name);
                self.scope.push((v.name.clone(), slot, ty));
                (slot, ty)
            })
            .collect()
    }

    fn unbind(&mut self, n: usize) {
        self.scope.truncate(self.scope.len() - n);
    }

    fn term(&self, t: &Term) -> Result<CTerm, PddlError> {
        match t {
            Term::Var(v) => self
                .scope
                .iter()
                .rev()
                .find(|(n, _, _)| n == v)
                .map(|&(_, s, t)| CTerm::Slot(s, t))
                .ok_or_else(|| PddlError::structure(format!("unknown variable '?{v}'"))),
            Term::Const(c) => self
                .object_ids
                .get(c)
                .map(|&o| CTerm::Obj(o))
                .ok_or_else(|| PddlError::structure(format!("unknown object or constant '{c}'"))),
        }
    }

    fn atom(&mut self, a: &AtomExpr) -> Result<CAtom, PddlError> {
        if a.args.len() > MAX_ARITY {
            return Err(PddlError::structure(format!("predicate '{}' has more than {MAX_ARITY} arguments", a.predicate)));
        }
        let pred = self.pred_id(&a.predicate);
        let terms = a.args.iter().map(|t| self.term(t)).collect::<Result<_, _>>()?;
        Ok(CAtom { pred, terms })
    }

    fn formula(&mut self, f: &Formula) -> Result<CFormula, PddlError> {
        Ok(match f {
            Formula::True => CFormula::True,
            Formula::Atom(a) => CFormula::Atom(self.atom(a)?),
            Formula::Equal(a, b) => CFormula::Equal(self.term(a)?, self.term(b)?),
            Formula::Not(f) => CFormula::Not(Box::new(self.formula(f)?)),
            Formula::And(fs) => CFormula::And(fs.iter().map(|f| self.formula(f)).collect::<Result<_, _>>()?),
            Formula::Or(fs) => CFormula::Or(fs.iter().map(|f| self.formula(f)).collect::<Result<_, _>>()?),
            Formula::Imply(a, b) => CFormula::Imply(Box::new(self.formula(a)?), Box::new(self.formula(b)?)),
            Formula::Exists(vars, body) | Formula::Forall(vars, body) => {
                let slots = self.bind(vars);
                let body = self.formula(body);
                self.unbind(vars.len());
                let body = Box::new(body?);
                if matches!(f, Formula::Exists(..)) {
                    let variants = variants_of(&body);
                    CFormula::Exists(slots, body, variants)
                } else {
                    CFormula::Forall(slots, body)
                }
            }
        })
    }

    fn effect(&mut self, e: &Effect) -> Result<CEffect, PddlError> {
        Ok(match e {
            Effect::Add(a) => CEffect::Add(self.atom(a)?),
            Effect::Delete(a) => CEffect::Delete(self.atom(a)?),
            Effect::And(es) => CEffect::And(es.iter().map(|e| self.effect(e)).collect::<Result<_, _>>()?),
            Effect::Forall(vars, body) => {
                let slots = self.bind(vars);
                let body = self.effect(body);
                self.unbind(vars.len());
                CEffect::Forall(slots, Box::new(body?))
            }
            Effect::When(c, body) => CEffect::When(self.formula(c)?, Box::new(self.effect(body)?)),
            Effect::Numeric => CEffect::And(vec![]),
        })
    }
}

/// Disjunctive splits of a condition, each with the atoms that can generate bindings.
fn variants_of(f: &CFormula) -> Vec<Variant> {
    match f {
        CFormula::Atom(a) => vec![Variant { generators: vec![a.clone()], slots: vec![] }],
        CFormula::And(fs) => {
            let mut acc = vec![Variant::default()];
            for sub in fs {
                let subs = variants_of(sub);
                if acc.len() * subs.len() > MAX_VARIANTS {
                    return vec![Variant::default()];
                }
                acc = acc
                    .iter()
                    .flat_map(|a| {
                        subs.iter().map(move |s| Variant {
                            generators: a.generators.iter().chain(&s.generators).cloned().collect(),
                            slots: a.slots.iter().chain(&s.slots).copied().collect(),
                        })
                    })
                    .collect();
            }
            acc
        }
        CFormula::Or(fs) => {
            let all: Vec<Variant> = fs.iter().flat_map(variants_of).collect();
            if all.len() > MAX_VARIANTS || fs.is_empty() {
                vec![Variant::default()]
            } else {
                all
            }
        }
        CFormula::Exists(slots, _, inner) => inner
            .iter()
            .map(|v| Variant { generators: v.generators.clone(), slots: slots.iter().chain(&v.slots).copied().collect() })
            .collect(),
        _ => vec![Variant::default()],
    }
}

fn required_literals(f: &CFormula, out: &mut Vec<(CAtom, bool)>) {
    match f {
        CFormula::Atom(a) => out.push((a.clone(), true)),
        CFormula::Not(inner) => {
            if let CFormula::Atom(a) = inner.as_ref() {
                out.push((a.clone(), false));
            }
        }
        CFormula::And(fs) => fs.iter().for_each(|f| required_literals(f, out)),
        _ => {}
    }
}

fn effect_atoms<'a>(e: &'a CEffect, conditional: bool, out: &mut Vec<(&'a CAtom, bool, bool)>) {
    match e {
        CEffect::Add(a) => out.push((a, true, conditional)),
        CEffect::Delete(a) => out.push((a, false, conditional)),
        CEffect::And(es) => es.iter().for_each(|e| effect_atoms(e, conditional, out)),
        CEffect::Forall(_, body) => effect_atoms(body, conditional, out),
        CEffect::When(_, body) => effect_atoms(body, true, out),
    }
}

/// True when some unconditional effect's predicate occurs in no required
/// literal and no other effect: that effect is never pruned.
fn always_effective(effect: &CEffect, required: &[(CAtom, bool)]) -> bool {
    let mut atoms = Vec::new();
    effect_atoms(effect, false, &mut atoms);
    atoms.iter().enumerate().any(|(i, (a, _, conditional))| {
        !conditional
            && !required.iter().any(|(r, _)| r.pred == a.pred)
            && !atoms.iter().enumerate().any(|(j, (b, _, _))| j != i && b.pred == a.pred)
    })
}

impl World {
    pub fn compile(domain: &pddl::Domain, problem: &pddl::Problem) -> Result<World, PddlError> {
        let mut types = vec!["object".to_string()];
        let mut type_ids: HashMap<String, TypeId> = HashMap::from([("object".to_string(), 0)]);
        let mut type_parent: Vec<Option<TypeId>> = vec![None];
        for (name, parent) in &domain.types {
            for t in [name, parent] {
                if !type_ids.contains_key(t) {
                    types.push(t.clone());
                    type_ids.insert(t.clone(), types.len() - 1);
                    type_parent.push(Some(0));
                }
            }
            let (id, pid) = (type_ids[name], type_ids[parent]);
            if id != pid {
                type_parent[id] = Some(pid);
            }
        }

        let mut declared: Vec<(String, String)> = domain
            .constants
            .iter()
            .chain(&problem.objects)
            .map(|o| (o.name.clone(), o.type_name.clone()))
            .collect();
        declared.sort();
        declared.dedup_by(|a, b| a.0 == b.0);
        let objects: Vec<String> = declared.iter().map(|(n, _)| n.clone()).collect();
        let object_ids: HashMap<String, ObjId> = objects.iter().enumerate().map(|(i, n)| (n.clone(), i as ObjId)).collect();

        let mut predicates = Vec::new();
        let mut pred_ids = HashMap::new();
        let mut c = Compiler {
            types: &mut types,
            type_ids: &mut type_ids,
            predicates: &mut predicates,
            pred_ids: &mut pred_ids,
            object_ids: &object_ids,
            scope: Vec::new(),
            slot_count: 0,
        };
        let object_types: Vec<TypeId> = declared.iter().map(|(_, t)| c.type_id(t)).collect();

        let mut init = Vec::with_capacity(problem.init.len());
        for (pred, args) in &problem.init {
            if args.len() > MAX_ARITY {
                return Err(PddlError::structure(format!("initial fact '{pred}' has more than {MAX_ARITY} arguments")));
            }
            let ids = args
                .iter()
                .map(|a| object_ids.get(a).copied().ok_or_else(|| PddlError::structure(format!("initial fact ({pred} {}) names the undeclared object '{a}'", args.join(" ")))))
                .collect::<Result<Vec<_>, _>>()?;
            init.push((c.pred_id(pred), args_of(&ids)));
        }

        let mut actions = Vec::with_capacity(domain.actions.len());
        for a in &domain.actions {
            c.slot_count = 0;
            let params = c.bind(&a.parameters);
            let precondition = c.formula(&a.precondition).map_err(|e| PddlError::structure(format!("action '{}': {e}", a.name)))?;
            let effect = c.effect(&a.effect).map_err(|e| PddlError::structure(format!("action '{}': {e}", a.name)))?;
            c.unbind(params.len());
            let mut required = Vec::new();
            required_literals(&precondition, &mut required);
            let always_effective = always_effective(&effect, &required);
            actions.push(Action {
                name: a.name.clone(),
                parameters: a.parameters.iter().zip(&params).map(|(p, &(_, t))| (p.name.clone(), t)).collect(),
                param_slots: params.clone(),
                variants: variants_of(&precondition),
                precondition,
                required,
                effect,
                slot_count: c.slot_count,
                always_effective,
            });
        }
        c.slot_count = 0;
        let goal = c.formula(&problem.goal).map_err(|e| PddlError::structure(format!("goal: {e}")))?;
        let goal_slots = c.slot_count;

        while type_parent.len() < types.len() {
            type_parent.push(None); // types only mentioned (never declared) have no members
        }
        let mut world = World {
            objects,
            object_types,
            types,
            type_parent,
            type_members: Vec::new(),
            subtype: Vec::new(),
            type_index: HashMap::new(),
            pred_index: HashMap::new(),
            predicates,
            actions,
            init,
            goal,
            goal_slots,
        };
        let n = world.types.len();
        world.subtype = (0..n * n).map(|i| world.walk_is_subtype(i / n, i % n)).collect();
        world.type_members = (0..n)
            .map(|t| (0..world.objects.len() as ObjId).filter(|&o| world.is_subtype(world.object_types[o as usize], t)).collect())
            .collect();
        world.type_index = world.types.iter().enumerate().map(|(i, t)| (t.clone(), i)).collect();
        world.pred_index = world.predicates.iter().enumerate().map(|(i, p)| (p.clone(), i)).collect();
        Ok(world)
    }

    #[inline]
    pub fn is_subtype(&self, t: TypeId, ancestor: TypeId) -> bool {
        self.subtype[t * self.types.len() + ancestor]
    }

    fn walk_is_subtype(&self, mut t: TypeId, ancestor: TypeId) -> bool {
        for _ in 0..=self.types.len() {
            if t == ancestor {
                return true;
            }
            match self.type_parent[t] {
                Some(p) => t = p,
                None => return false,
            }
        }
        false
    }

    pub fn type_id(&self, name: &str) -> Option<TypeId> {
        self.type_index.get(name).copied()
    }

    pub fn pred_id(&self, name: &str) -> Option<PredId> {
        self.pred_index.get(name).copied()
    }

    pub fn initial_state(&self) -> FactStore {
        let mut s = FactStore::with_predicates(self.predicates.len());
        for (p, a) in &self.init {
            s.insert(*p, *a);
        }
        s
    }

    pub fn goal_holds(&self, state: &FactStore) -> bool {
        let mut binding = vec![NO_ARG; self.goal_slots.max(1)];
        self.holds(&self.goal, state, &mut binding)
    }

    fn value(term: CTerm, binding: &[u32]) -> u32 {
        match term {
            CTerm::Obj(o) => o,
            CTerm::Slot(s, _) => binding[s],
        }
    }

    fn ground(atom: &CAtom, binding: &[u32]) -> Args {
        let mut args = [NO_ARG; MAX_ARITY];
        for (i, t) in atom.terms.iter().enumerate() {
            args[i] = Self::value(*t, binding);
        }
        args
    }

    fn holds(&self, f: &CFormula, state: &FactStore, binding: &mut Vec<u32>) -> bool {
        match f {
            CFormula::True => true,
            CFormula::Atom(a) => state.contains(a.pred, &Self::ground(a, binding)),
            CFormula::Equal(a, b) => Self::value(*a, binding) == Self::value(*b, binding),
            CFormula::Not(inner) => !self.holds(inner, state, binding),
            CFormula::And(fs) => fs.iter().all(|f| self.holds(f, state, binding)),
            CFormula::Or(fs) => fs.iter().any(|f| self.holds(f, state, binding)),
            CFormula::Imply(a, b) => !self.holds(a, state, binding) || self.holds(b, state, binding),
            CFormula::Exists(slots, body, variants) => {
                let mut found = false;
                for v in variants {
                    self.search(state, v, slots, binding, &mut |w, b| {
                        found = w.holds(body, state, b);
                        found
                    });
                    if found {
                        break;
                    }
                }
                for &(s, _) in slots {
                    binding[s] = NO_ARG;
                }
                found
            }
            CFormula::Forall(slots, body) => {
                let mut all = true;
                self.enumerate_free(slots, 0, binding, &mut |w, b| {
                    all = w.holds(body, state, b);
                    all
                });
                for &(s, _) in slots {
                    binding[s] = NO_ARG;
                }
                all
            }
        }
    }

    /// Binds `slots` (the ones still unbound) by joining the variant's generator
    /// atoms against `state`, then enumerating type domains for what is left.
    /// `on` returns true to stop. Leaves newly bound slots set to the last tried values.
    fn search(&self, state: &FactStore, variant: &Variant, slots: &[(Slot, TypeId)], binding: &mut Vec<u32>, on: &mut dyn FnMut(&World, &mut Vec<u32>) -> bool) -> bool {
        let mut pending: Vec<&CAtom> = variant.generators.iter().collect();
        let mut free: Vec<(Slot, TypeId)> = Vec::with_capacity(slots.len());
        self.join(state, &mut pending, binding, &mut |w, b| {
            free.clear();
            free.extend(slots.iter().copied().filter(|&(s, _)| b[s] == NO_ARG));
            if free.is_empty() {
                return on(w, b);
            }
            let stop = w.enumerate_free(&free, 0, b, on);
            for &(s, _) in &free {
                b[s] = NO_ARG;
            }
            stop
        })
    }

    fn join(&self, state: &FactStore, pending: &mut Vec<&CAtom>, binding: &mut Vec<u32>, on: &mut dyn FnMut(&World, &mut Vec<u32>) -> bool) -> bool {
        if pending.is_empty() {
            return on(self, binding);
        }
        // Most bound arguments first, then fewest facts.
        let bound = |a: &CAtom, b: &[u32]| a.terms.iter().filter(|t| matches!(t, CTerm::Obj(_)) || matches!(t, CTerm::Slot(s, _) if b[*s] != NO_ARG)).count();
        let best = (0..pending.len())
            .max_by_key(|&i| (bound(pending[i], binding), usize::MAX - state.count(pending[i].pred)))
            .unwrap_or(0);
        let atom = pending.swap_remove(best);
        let first = atom.terms.first().map(|&t| Self::value_opt(t, binding)).unwrap_or(None);
        let mut stop = false;
        for fact in state.iter(atom.pred, first) {
            let mut newly = [0usize; MAX_ARITY];
            let mut n_new = 0;
            let mut ok = true;
            for (i, t) in atom.terms.iter().enumerate() {
                let v = fact[i];
                match *t {
                    CTerm::Obj(o) => ok = o == v,
                    CTerm::Slot(s, _) if binding[s] != NO_ARG => ok = binding[s] == v,
                    CTerm::Slot(s, ty) => {
                        ok = v != NO_ARG && self.is_subtype(self.object_types[v as usize], ty);
                        if ok {
                            binding[s] = v;
                            newly[n_new] = s;
                            n_new += 1;
                        }
                    }
                }
                if !ok {
                    break;
                }
            }
            if ok {
                stop = self.join(state, pending, binding, on);
            }
            for &s in &newly[..n_new] {
                binding[s] = NO_ARG;
            }
            if stop {
                break;
            }
        }
        pending.push(atom);
        let last = pending.len() - 1;
        pending.swap(best.min(last), last);
        stop
    }

    fn value_opt(t: CTerm, binding: &[u32]) -> Option<u32> {
        match t {
            CTerm::Obj(o) => Some(o),
            CTerm::Slot(s, _) if binding[s] != NO_ARG => Some(binding[s]),
            CTerm::Slot(..) => None,
        }
    }

    fn enumerate_free(&self, free: &[(Slot, TypeId)], i: usize, binding: &mut Vec<u32>, on: &mut dyn FnMut(&World, &mut Vec<u32>) -> bool) -> bool {
        if i == free.len() {
            return on(self, binding);
        }
        let (slot, ty) = free[i];
        for &o in &self.type_members[ty] {
            binding[slot] = o;
            if self.enumerate_free(free, i + 1, binding, on) {
                return true;
            }
        }
        binding[slot] = NO_ARG;
        false
    }

    /// Every applicable operator in `state`, each once, in a stable order.
    pub fn applicable(&self, state: &FactStore) -> Vec<Operator> {
        let mut out = Vec::new();
        let mut check = Vec::new();
        for (ai, action) in self.actions.iter().enumerate() {
            let n = action.parameters.len();
            let params = &action.param_slots;
            let mut binding = vec![NO_ARG; action.slot_count.max(1)];
            let first_new = out.len();
            for variant in &action.variants {
                self.search(state, variant, params, &mut binding, &mut |w, b| {
                    check.clear();
                    check.extend_from_slice(&b[..n]);
                    check.resize(b.len(), NO_ARG);
                    if w.holds(&action.precondition, state, &mut check) && (action.always_effective || w.has_effect(action, &check)) {
                        out.push(Operator { action: ai, args: b[..n].to_vec() });
                    }
                    false
                });
            }
            // A binding reached through several variants or existential witnesses counts once.
            if action.variants.len() > 1 || action.slot_count > n {
                let mut found = out.split_off(first_new);
                found.sort_by(|a, b| a.args.cmp(&b.args));
                found.dedup();
                out.extend(found);
            }
        }
        out
    }

    fn ground_effects(&self, e: &CEffect, binding: &mut Vec<u32>, conditional: bool, out: &mut Vec<GroundEffect>) {
        match e {
            CEffect::Add(a) | CEffect::Delete(a) => out.push(GroundEffect {
                pred: a.pred,
                args: Self::ground(a, binding),
                add: matches!(e, CEffect::Add(_)),
                conditional,
            }),
            CEffect::And(es) => es.iter().for_each(|e| self.ground_effects(e, binding, conditional, out)),
            CEffect::When(_, body) => self.ground_effects(body, binding, true, out),
            CEffect::Forall(slots, body) => {
                self.enumerate_free(slots, 0, binding, &mut |w, b| {
                    w.ground_effects(body, b, conditional, out);
                    false
                });
            }
        }
    }

    /// The effects the reference keeps for an operator: a delete of an atom the
    /// operator also adds unconditionally is dropped, and so is an effect that
    /// sets an atom to the value the precondition already demands.
    fn kept_effects(&self, action: &Action, binding: &mut Vec<u32>) -> Vec<GroundEffect> {
        let mut all = Vec::new();
        self.ground_effects(&action.effect, binding, false, &mut all);
        let required: Vec<(PredId, Args, bool)> = action.required.iter().map(|(a, v)| (a.pred, Self::ground(a, binding), *v)).collect();
        let added_always: Vec<(PredId, Args)> = all.iter().filter(|e| e.add && !e.conditional).map(|e| (e.pred, e.args)).collect();
        let mut kept: Vec<GroundEffect> = Vec::with_capacity(all.len());
        for e in all {
            if !e.add && added_always.contains(&(e.pred, e.args)) {
                continue;
            }
            if required.contains(&(e.pred, e.args, e.add)) {
                continue;
            }
            if !kept.contains(&e) {
                kept.push(e);
            }
        }
        kept
    }

    fn has_effect(&self, action: &Action, binding: &[u32]) -> bool {
        !self.kept_effects(action, &mut binding.to_vec()).is_empty()
    }

    /// Applies an operator: returns the effects the text layer sees. `state` gets
    /// PDDL semantics (conditions judged before any change; adds win over deletes).
    pub fn apply(&self, op: &Operator, state: &mut FactStore) -> Vec<GroundEffect> {
        let action = &self.actions[op.action];
        let mut binding = vec![NO_ARG; action.slot_count.max(1)];
        binding[..op.args.len()].copy_from_slice(&op.args);
        let mut real = Vec::new();
        self.effects_in_state(&action.effect, state, &mut binding, &mut real);
        for e in real.iter().filter(|e| !e.add) {
            state.remove(e.pred, &e.args);
        }
        for e in real.iter().filter(|e| e.add) {
            state.insert(e.pred, e.args);
        }
        self.kept_effects(action, &mut binding)
    }

    fn effects_in_state(&self, e: &CEffect, state: &FactStore, binding: &mut Vec<u32>, out: &mut Vec<GroundEffect>) {
        match e {
            CEffect::When(cond, body) => {
                if self.holds(cond, state, binding) {
                    self.effects_in_state(body, state, binding, out);
                }
            }
            CEffect::And(es) => es.iter().for_each(|e| self.effects_in_state(e, state, binding, out)),
            CEffect::Forall(slots, body) => {
                self.enumerate_free(slots, 0, binding, &mut |w, b| {
                    w.effects_in_state(body, state, b, out);
                    false
                });
            }
            _ => self.ground_effects(e, binding, false, out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world(domain: &str, problem: &str) -> World {
        World::compile(&pddl::parse_domain(domain).unwrap(), &pddl::parse_problem(problem).unwrap()).unwrap()
    }

    const DOMAIN: &str = "(define (domain d) (:types item place)
      (:action move :parameters (?i - item ?from ?to - place)
        :precondition (and (at ?i ?from))
        :effect (and (not (at ?i ?from)) (at ?i ?to)))
      (:action peek :parameters (?i - item)
        :precondition (or (exists (?p - place) (and (at ?i ?p) (bright ?p))) (held ?i))
        :effect (seen ?i)))";

    #[test]
    fn no_op_operators_do_not_exist() {
        let w = world(DOMAIN, "(define (problem p) (:domain d) (:objects a - item x y - place) (:init (at a x)) (:goal (at a y)))");
        let state = w.initial_state();
        let ops = w.applicable(&state);
        let moves: Vec<_> = ops.iter().filter(|o| o.action == 0).map(|o| o.args.clone()).collect();
        // move a x x would delete and re-add (at a x): no effect left, so it is not an operator.
        let (a, x, y) = (0, 1, 2);
        assert_eq!(moves, vec![vec![a, x, y]]);
        assert!(!w.goal_holds(&state));
        let mut state = state;
        w.apply(&ops[0], &mut state);
        assert!(w.goal_holds(&state));
    }

    #[test]
    fn disjunctive_and_existential_preconditions() {
        let w = world(DOMAIN, "(define (problem p) (:domain d) (:objects a b - item x - place) (:init (at a x) (bright x) (held b)) (:goal (seen a)))");
        let peeks: Vec<_> = w.applicable(&w.initial_state()).into_iter().filter(|o| o.action == 1).map(|o| o.args).collect();
        assert_eq!(peeks, vec![vec![0], vec![1]]);
    }
}
