//! Derives text from grammar symbols against the displayed facts, following the
//! reference's context-sensitive grammar: queries enumerate facts in sorted order,
//! placeholders bind distinct objects, the first rule whose condition holds wins,
//! and lists read `a, b, and c` through `list_separator`/`list_last_separator`.

use crate::error::GameError;
use crate::facts::{FactStore, MAX_ARITY, NO_ARG};
use crate::grammar::{CondBody, Expr, Grammar, Query, QueryLiteral, Symbol};
use crate::logic::{ObjId, World};

/// What a rendering can see: the bound placeholders and named variables.
#[derive(Debug, Clone, Default)]
pub struct Ctx<'a> {
    /// (placeholder name, placeholder type, object).
    pub mapping: Vec<(&'a str, &'a str, ObjId)>,
    /// Variable name → object; later entries shadow earlier ones.
    pub variables: Vec<(&'a str, ObjId)>,
}

impl Ctx<'_> {
    fn variable(&self, name: &str) -> Option<ObjId> {
        self.variables.iter().rev().find(|(n, _)| *n == name).map(|&(_, o)| o)
    }

    fn bound(&self, name: &str, ty: &str) -> Option<ObjId> {
        self.mapping.iter().find(|(n, t, _)| *n == name && *t == ty).map(|&(_, _, o)| o)
    }
}

/// Placeholders a query match binds: (name, type, object).
type Bindings<'g> = [(&'g str, &'g str, ObjId)];

/// Display facts are keyed `2 * predicate` (true) and `2 * predicate + 1` (`not_`).
pub fn display_pred(world: &World, name: &str) -> Option<usize> {
    match name.strip_prefix("not_") {
        Some(base) => world.pred_id(base).map(|p| 2 * p + 1),
        None => world.pred_id(name).map(|p| 2 * p),
    }
}

pub struct Renderer<'a> {
    pub world: &'a World,
    pub grammar: &'a Grammar,
    pub facts: &'a FactStore,
    pub names: &'a [String],
    /// Current symbol-expansion depth, to stop a self-recursive grammar.
    pub depth: std::cell::Cell<usize>,
}

/// Nested symbol expansions allowed (ALFRED's grammar nests about five deep).
pub const MAX_EXPANSION_DEPTH: usize = 64;

enum Value<'g> {
    Str(std::borrow::Cow<'g, str>),
    Entity(ObjId),
}

impl<'g> Renderer<'g> {
    pub fn derive(&self, symbols: &'g [Symbol], ctx: &Ctx<'g>, out: &mut String) -> Result<(), GameError> {
        for symbol in symbols {
            match symbol {
                Symbol::Text(t) => out.push_str(t),
                Symbol::Nonterminal(name) => self.expand(name, ctx, out)?,
                Symbol::Cond { body, given } => {
                    for c in self.contexts(given.as_ref(), ctx)? {
                        self.derive_body(body, &c, out)?;
                    }
                }
                Symbol::List { body, given } => {
                    let items = self.contexts(given.as_ref(), ctx)?;
                    let n = items.len();
                    if n == 0 {
                        self.expand("list_empty", ctx, out)?;
                    }
                    for (i, c) in items.iter().enumerate() {
                        if i > 0 {
                            let sep = if i + 1 == n { "list_last_separator" } else { "list_separator" };
                            self.expand(sep, ctx, out)?;
                        }
                        self.derive_body(body, c, out)?;
                    }
                }
            }
        }
        Ok(())
    }

    pub fn expand(&self, name: &str, ctx: &Ctx<'g>, out: &mut String) -> Result<(), GameError> {
        if self.depth.get() >= MAX_EXPANSION_DEPTH {
            return Err(GameError::Render(format!("the grammar expands '#{name}#' more than {MAX_EXPANSION_DEPTH} levels deep (a rule that refers to itself?)")));
        }
        self.depth.set(self.depth.get() + 1);
        let result = self.expand_rules(name, ctx, out);
        self.depth.set(self.depth.get() - 1);
        result
    }

    fn expand_rules(&self, name: &str, ctx: &Ctx<'g>, out: &mut String) -> Result<(), GameError> {
        let rules = self
            .grammar
            .rules
            .get(name)
            .filter(|r| !r.is_empty())
            .ok_or_else(|| GameError::Render(format!("can't find symbol '#{name}#' in the grammar")))?;
        for rule in rules {
            let applicable = match &rule.condition {
                None => true,
                Some(q) => {
                    let mut any = false;
                    self.assignments(q, ctx, &mut |_| {
                        any = true;
                        true
                    });
                    any
                }
            };
            if applicable {
                return self.derive(&rule.rhs, ctx, out);
            }
        }
        Err(GameError::Render(format!("no rule of '#{name}#' applies here")))
    }

    fn derive_body(&self, body: &'g CondBody, ctx: &Ctx<'g>, out: &mut String) -> Result<(), GameError> {
        match body {
            CondBody::Nonterminal(name) => self.expand(name, ctx, out),
            CondBody::Eval(expr) => {
                match self.eval(expr, ctx)? {
                    Value::Str(s) => out.push_str(&s),
                    Value::Entity(o) => out.push_str(&self.names[o as usize]),
                }
                Ok(())
            }
        }
    }

    fn eval(&self, expr: &'g Expr, ctx: &Ctx<'g>) -> Result<Value<'g>, GameError> {
        use std::borrow::Cow;
        let var = |v: &str| ctx.variable(v).ok_or_else(|| GameError::Render(format!("name '{v}' is not defined in a template")));
        Ok(match expr {
            Expr::Str(s) => Value::Str(Cow::Borrowed(s)),
            Expr::Var(v) => Value::Entity(var(v)?),
            Expr::Attr(v, attr) => {
                let o = var(v)?;
                Value::Str(match attr.as_str() {
                    "name" => Cow::Borrowed(self.names[o as usize].as_str()),
                    "id" => Cow::Borrowed(self.world.objects[o as usize].as_str()),
                    "indefinite" => Cow::Borrowed("a"),
                    "definite" => Cow::Borrowed("the"),
                    other => return Err(GameError::Render(format!("unknown attribute '{v}.{other}'"))),
                })
            }
            Expr::Add(parts) => {
                let mut s = String::new();
                for p in parts {
                    match self.eval(p, ctx)? {
                        Value::Str(x) => s.push_str(&x),
                        Value::Entity(_) => return Err(GameError::Render("cannot add an entity to text".into())),
                    }
                }
                Value::Str(Cow::Owned(s))
            }
            Expr::Or(parts) => {
                let mut last = Value::Str(Cow::Borrowed(""));
                for p in parts {
                    last = self.eval(p, ctx)?;
                    let truthy = match &last {
                        Value::Str(s) => !s.is_empty(),
                        Value::Entity(_) => true,
                    };
                    if truthy {
                        break;
                    }
                }
                last
            }
        })
    }

    fn contexts(&self, given: Option<&'g Query>, ctx: &Ctx<'g>) -> Result<Vec<Ctx<'g>>, GameError> {
        let Some(query) = given else { return Ok(vec![ctx.clone()]) };
        let mut out = Vec::new();
        self.assignments(query, ctx, &mut |new: &Bindings<'g>| {
            let mut c = ctx.clone();
            c.mapping.extend_from_slice(new);
            // The reference refreshes a variable for every placeholder of the match.
            let refreshed: Vec<(&'g str, ObjId)> = c.mapping.iter().map(|&(n, _, o)| (n, o)).collect();
            c.variables.extend(refreshed);
            out.push(c);
            false
        });
        Ok(out)
    }

    /// Calls `on` with the newly bound placeholders of each match, in the
    /// reference's order; `on` returns true to stop.
    fn assignments(&self, query: &'g Query, ctx: &Ctx<'g>, on: &mut dyn FnMut(&Bindings<'g>) -> bool) {
        let mut used: Vec<ObjId> = ctx.mapping.iter().map(|m| m.2).collect();
        let mut new: Vec<(&'g str, &'g str, ObjId)> = Vec::new();
        self.match_from(query, 0, ctx, &mut used, &mut new, on);
    }

    fn match_from(
        &self,
        query: &'g [QueryLiteral],
        depth: usize,
        ctx: &Ctx<'g>,
        used: &mut Vec<ObjId>,
        new: &mut Vec<(&'g str, &'g str, ObjId)>,
        on: &mut dyn FnMut(&Bindings<'g>) -> bool,
    ) -> bool {
        let Some(lit) = query.get(depth) else { return on(new) };
        let Some(pred) = display_pred(self.world, &lit.predicate) else { return false };
        if lit.placeholders.len() > MAX_ARITY {
            return false;
        }
        let mut types = [0usize; MAX_ARITY];
        for (i, (_, t)) in lit.placeholders.iter().enumerate() {
            match self.world.type_id(t) {
                Some(id) => types[i] = id,
                None => return false,
            }
        }
        let lookup = |new: &[(&str, &str, ObjId)], name: &str, ty: &str| -> Option<ObjId> {
            ctx.bound(name, ty).or_else(|| new.iter().find(|(n, t, _)| *n == name && *t == ty).map(|m| m.2))
        };
        let first = lit.placeholders.first().and_then(|(n, t)| lookup(new, n, t));
        for fact in self.facts.iter(pred, first) {
            let before = new.len();
            let mut ok = true;
            for (i, (name, ty)) in lit.placeholders.iter().enumerate() {
                let v = fact[i];
                if v == NO_ARG || !self.world.is_subtype(self.world.object_types[v as usize], types[i]) {
                    ok = false;
                    break;
                }
                match lookup(new, name, ty) {
                    Some(existing) if existing != v => ok = false,
                    Some(_) => {}
                    None if used.contains(&v) => ok = false,
                    None => {
                        new.push((name.as_str(), ty.as_str(), v));
                        used.push(v);
                    }
                }
                if !ok {
                    break;
                }
            }
            if ok && self.match_from(query, depth + 1, ctx, used, new, on) {
                return true;
            }
            while new.len() > before {
                let (_, _, v) = new.pop().unwrap_or_default();
                if let Some(pos) = used.iter().rposition(|&u| u == v) {
                    used.remove(pos);
                }
            }
        }
        false
    }
}
