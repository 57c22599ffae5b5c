//! The TextWorld text grammar of a game: the logic file (`grammar :: """{json}""";`
//! and `action NAME { template :: "..."; feedback :: "..."; grammar :: """..."""; }`)
//! and the context-sensitive rule language inside it (`#symbol#`, `{expr | query}`,
//! `[{...}]` lists). Parsing mirrors the reference parser's quirks: leading
//! whitespace of a rule is dropped, tabs before a symbol are skipped, and parsing
//! silently stops at the first character no symbol accepts.

use std::collections::HashMap;

use crate::error::GrammarError;

/// One query literal: `pred(name:type, ...)`. Negated facts are plain predicates named `not_*`.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryLiteral {
    pub predicate: String,
    pub placeholders: Vec<(String, String)>,
}

pub type Query = Vec<QueryLiteral>;

/// A Python expression of the small kind templates use:
/// `r.name`, `o`, `o.indefinite + ' ' + o.name`, `r.name or r.id`.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Var(String),
    Attr(String, String),
    Str(String),
    Add(Vec<Expr>),
    Or(Vec<Expr>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum CondBody {
    Nonterminal(String),
    Eval(Expr),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Symbol {
    Text(String),
    Nonterminal(String),
    Cond { body: CondBody, given: Option<Query> },
    List { body: CondBody, given: Option<Query> },
}

#[derive(Debug, Clone)]
pub struct Rule {
    pub condition: Option<Query>,
    pub rhs: Vec<Symbol>,
}

#[derive(Debug, Clone)]
pub struct ActionText {
    pub name: String,
    pub template: Vec<Symbol>,
    pub feedback: Vec<Symbol>,
}

/// The parsed logic file: per-action templates and feedback, and the rules.
#[derive(Debug, Clone, Default)]
pub struct Grammar {
    pub rules: HashMap<String, Vec<Rule>>,
    /// Keyed by lower-cased action name.
    pub actions: HashMap<String, ActionText>,
}

// ---------------------------------------------------------------------------
// The outer logic file.

struct Cursor<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }

    fn line(&self) -> usize {
        self.text[..self.pos].matches('\n').count() + 1
    }

    fn err(&self, msg: &str) -> GrammarError {
        GrammarError::Syntax(format!("line {}: {msg}", self.line()))
    }

    /// Whitespace and `#` comments (to end of line) between tokens.
    fn skip(&mut self) {
        loop {
            let rest = self.rest();
            let trimmed = rest.trim_start();
            self.pos += rest.len() - trimmed.len();
            if trimmed.starts_with('#') {
                let end = trimmed.find('\n').unwrap_or(trimmed.len());
                self.pos += end;
            } else {
                return;
            }
        }
    }

    fn eat(&mut self, token: &str) -> bool {
        self.skip();
        if self.rest().starts_with(token) {
            self.pos += token.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, token: &str) -> Result<(), GrammarError> {
        if self.eat(token) { Ok(()) } else { Err(self.err(&format!("expected '{token}'"))) }
    }

    fn name(&mut self) -> Result<&'a str, GrammarError> {
        self.skip();
        let rest = self.rest();
        let len = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '/' || c == '-'))
            .unwrap_or(rest.len());
        if len == 0 {
            return Err(self.err("expected a name"));
        }
        self.pos += len;
        Ok(&rest[..len])
    }

    /// `"..."` without escapes (the reference's `str` token).
    fn string(&mut self) -> Result<&'a str, GrammarError> {
        self.skip();
        let rest = self.rest();
        if !rest.starts_with('"') {
            return Err(self.err("expected a quoted string"));
        }
        let end = rest[1..].find('"').ok_or_else(|| self.err("unterminated string"))?;
        self.pos += end + 2;
        Ok(&rest[1..end + 1])
    }

    /// `"""..."""`.
    fn block(&mut self) -> Result<&'a str, GrammarError> {
        self.skip();
        let rest = self.rest();
        if !rest.starts_with("\"\"\"") {
            return Err(self.err("expected a \"\"\" block"));
        }
        let end = rest[3..].find("\"\"\"").ok_or_else(|| self.err("unterminated \"\"\" block"))?;
        self.pos += end + 6;
        Ok(&rest[3..end + 3])
    }
}

type RawRules = Vec<(String, Vec<serde_json::Value>)>;

fn merge_json_block(into: &mut RawRules, text: &str, block: &str) -> Result<(), GrammarError> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|source| GrammarError::Json { block: block.to_string(), source })?;
    let serde_json::Value::Object(map) = value else {
        return Err(GrammarError::Syntax(format!("{block}: the grammar block is not a JSON object")));
    };
    for (name, rules) in map {
        let serde_json::Value::Array(rules) = rules else {
            return Err(GrammarError::Syntax(format!("{block}: rules of '{name}' are not a list")));
        };
        match into.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = rules, // a later block replaces the symbol, as a dict update does
            None => into.push((name, rules)),
        }
    }
    Ok(())
}

impl Grammar {
    pub fn parse(text: &str) -> Result<Grammar, GrammarError> {
        let mut cur = Cursor { text, pos: 0 };
        let mut raw: RawRules = Vec::new();
        let mut actions = HashMap::new();
        loop {
            cur.skip();
            if cur.rest().is_empty() {
                break;
            }
            if cur.eat("grammar") {
                cur.expect("::")?;
                let block = cur.block()?;
                cur.expect(";")?;
                merge_json_block(&mut raw, block, "the top-level grammar")?;
            } else if cur.eat("action") {
                let name = cur.name()?.to_string();
                cur.expect("{")?;
                let (mut template, mut feedback) = (String::new(), String::new());
                while !cur.eat("}") {
                    let key = cur.name()?;
                    cur.expect("::")?;
                    match key {
                        "template" => template = cur.string()?.to_string(),
                        "feedback" => feedback = cur.string()?.to_string(),
                        "grammar" => {
                            let block = cur.block()?;
                            let kept: Vec<&str> = block.split('\n').filter(|l| !l.trim_start().starts_with('#')).collect();
                            merge_json_block(&mut raw, &kept.join("\n"), &format!("action {name}"))?;
                        }
                        "pddl" => {
                            cur.block()?;
                        }
                        other => return Err(cur.err(&format!("unknown action section '{other}'"))),
                    }
                    cur.expect(";")?;
                }
                let text = ActionText { name: name.clone(), template: parse_symbols(&template)?, feedback: parse_symbols(&feedback)? };
                actions.insert(name.to_lowercase(), text);
            } else {
                return Err(cur.err("expected 'grammar' or 'action'"));
            }
        }
        let mut rules = HashMap::new();
        for (name, list) in raw {
            let mut parsed = Vec::with_capacity(list.len());
            for rule in list {
                let rhs = rule.get("rhs").and_then(|v| v.as_str()).ok_or_else(|| GrammarError::Syntax(format!("a rule of '{name}' has no string 'rhs'")))?;
                let condition = match rule.get("condition").and_then(|v| v.as_str()) {
                    Some(c) if !c.is_empty() => Some(parse_query(c)?),
                    _ => None,
                };
                parsed.push(Rule { condition, rhs: parse_symbols(rhs)? });
            }
            rules.insert(name, parsed);
        }
        Ok(Grammar { rules, actions })
    }
}

// ---------------------------------------------------------------------------
// Rule bodies.

/// Characters a literal may not contain (the reference's `Literal` pattern).
fn literal_char(c: char) -> bool {
    !matches!(c, ';' | '|' | '"' | '<' | '>' | '[' | ']' | '#' | '{' | '}')
}

fn tag_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c.is_whitespace() || "()/!<>-,.".contains(c)
}

/// Python's `\s` (str.isspace) also counts the information separators 0x1c..0x1f.
pub(crate) fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Parses a rule body into symbols, stopping silently at the first unparseable
/// character, as the reference does.
pub fn parse_symbols(text: &str) -> Result<Vec<Symbol>, GrammarError> {
    let mut pos = leading_comment_len(text);
    let mut out = Vec::new();
    loop {
        pos += text[pos..].len() - text[pos..].trim_start_matches('\t').len();
        let rest = &text[pos..];
        if rest.is_empty() {
            break;
        }
        let Some((symbol, used)) = parse_symbol(rest)? else { break };
        if used == 0 {
            break;
        }
        pos += used;
        if let Some(s) = symbol {
            out.push(s);
        }
    }
    Ok(out)
}

/// At the very start of a rule the reference's comment pattern `^(//.*|\s*)\n?` applies.
fn leading_comment_len(text: &str) -> usize {
    let body = if text.starts_with("//") {
        text.find('\n').unwrap_or(text.len())
    } else {
        text.len() - text.trim_start_matches(py_space).len()
    };
    body + usize::from(text[body..].starts_with('\n'))
}

fn unescape_newlines(s: &str) -> String {
    s.replace("\\n", "\n")
}

/// One symbol; `None` when nothing parses here. The inner option is `None` for an
/// empty literal (which consumes nothing and ends the loop).
fn parse_symbol(rest: &str) -> Result<Option<(Option<Symbol>, usize)>, GrammarError> {
    if let Some(inner) = rest.strip_prefix('[') {
        let Some((body, given, used)) = parse_conditional(inner)? else { return Ok(None) };
        if !inner[used..].starts_with(']') {
            return Ok(None);
        }
        return Ok(Some((Some(Symbol::List { body, given }), used + 2)));
    }
    if rest.starts_with('{') {
        let Some((body, given, used)) = parse_conditional(rest)? else { return Ok(None) };
        return Ok(Some((Some(Symbol::Cond { body, given }), used)));
    }
    if let Some((tag, used)) = parse_nonterminal(rest) {
        return Ok(Some((Some(Symbol::Nonterminal(tag)), used)));
    }
    if let Some(inner) = rest.strip_prefix('"') {
        let len = inner.find(|c| !literal_char(c)).unwrap_or(inner.len());
        if inner[len..].starts_with('"') {
            let lit = unescape_newlines(&inner[..len]);
            return Ok(Some((Some(Symbol::Text(lit)), len + 2)));
        }
    }
    let len = rest.find(|c| !literal_char(c)).unwrap_or(rest.len());
    if len == 0 {
        return Ok(None);
    }
    Ok(Some((Some(Symbol::Text(unescape_newlines(&rest[..len]))), len)))
}

fn parse_nonterminal(rest: &str) -> Option<(String, usize)> {
    let inner = rest.strip_prefix('#')?;
    let len = inner.find(|c| !tag_char(c)).unwrap_or(inner.len());
    if len == 0 || !inner[len..].starts_with('#') {
        return None;
    }
    Some((inner[..len].to_string(), len + 2))
}

/// `{expression [| given]}` starting at `{`; returns the bytes used including braces.
fn parse_conditional(rest: &str) -> Result<Option<(CondBody, Option<Query>, usize)>, GrammarError> {
    let Some(inner) = rest.strip_prefix('{') else { return Ok(None) };
    let (body, mut used) = if let Some((tag, used)) = parse_nonterminal(inner) {
        (CondBody::Nonterminal(tag), used)
    } else {
        let len = inner.find(['|', '[', ']', '{', '}', '\n', '<', '>']).unwrap_or(inner.len());
        if len == 0 {
            return Ok(None);
        }
        (CondBody::Eval(parse_expr(&inner[..len])?), len)
    };
    let mut given = None;
    let after = &inner[used..];
    let trimmed = after.trim_start_matches(py_space);
    if let Some(q) = trimmed.strip_prefix('|') {
        let q_trimmed = q.trim_start_matches(py_space);
        let len = q_trimmed.find([';', '|', '{', '}', '\n', '[', ']', '#']).unwrap_or(q_trimmed.len());
        if len == 0 {
            return Ok(None);
        }
        given = Some(parse_query(&q_trimmed[..len])?);
        used += after.len() - q_trimmed.len() + len;
    }
    if !inner[used..].starts_with('}') {
        return Ok(None);
    }
    Ok(Some((body, given, used + 2)))
}

pub fn parse_query(text: &str) -> Result<Query, GrammarError> {
    let mut out = Vec::new();
    for part in text.split('&') {
        let part = part.trim();
        let open = part.find('(').ok_or_else(|| GrammarError::Syntax(format!("query literal '{part}' lacks '('")))?;
        let close = part.rfind(')').filter(|&c| c > open).ok_or_else(|| GrammarError::Syntax(format!("query literal '{part}' lacks ')'")))?;
        let predicate = part[..open].trim().to_string();
        let mut placeholders = Vec::new();
        for arg in part[open + 1..close].split(',').map(str::trim).filter(|a| !a.is_empty()) {
            let (name, ty) = arg.split_once(':').map(|(n, t)| (n.trim(), t.trim())).unwrap_or((arg, arg));
            placeholders.push((name.to_string(), ty.to_string()));
        }
        out.push(QueryLiteral { predicate, placeholders });
    }
    Ok(out)
}

/// Parses the expression subset: `or` binds loosest, then `+`, then `x.attr`, `x`, `'str'`.
pub fn parse_expr(text: &str) -> Result<Expr, GrammarError> {
    let bad = || GrammarError::Syntax(format!("unsupported template expression '{}'", text.trim()));
    let or_parts = split_outside_quotes(text, " or ");
    if or_parts.len() > 1 {
        return Ok(Expr::Or(or_parts.iter().map(|p| parse_expr(p)).collect::<Result<_, _>>()?));
    }
    let add_parts = split_outside_quotes(text, "+");
    if add_parts.len() > 1 {
        return Ok(Expr::Add(add_parts.iter().map(|p| parse_expr(p)).collect::<Result<_, _>>()?));
    }
    let t = text.trim();
    if t.len() >= 2 && ((t.starts_with('\'') && t.ends_with('\'')) || (t.starts_with('"') && t.ends_with('"'))) {
        return Ok(Expr::Str(t[1..t.len() - 1].to_string()));
    }
    let ident = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_') && !s.starts_with(|c: char| c.is_ascii_digit());
    match t.split_once('.') {
        Some((var, attr)) if ident(var) && ident(attr) => Ok(Expr::Attr(var.to_string(), attr.to_string())),
        None if ident(t) => Ok(Expr::Var(t.to_string())),
        _ => Err(bad()),
    }
}

fn split_outside_quotes<'a>(text: &'a str, sep: &str) -> Vec<&'a str> {
    let mut parts = Vec::new();
    let mut quote: Option<char> = None;
    let mut start = 0;
    let mut i = 0;
    while i < text.len() {
        let c = text[i..].chars().next().unwrap_or(' ');
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if text[i..].starts_with(sep) => {
                parts.push(&text[start..i]);
                i += sep.len();
                start = i;
                continue;
            }
            None => {}
        }
        i += c.len_utf8();
    }
    parts.push(&text[start..]);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(s: &str) -> Vec<Symbol> {
        parse_symbols(s).unwrap()
    }

    #[test]
    fn leading_whitespace_of_a_rule_is_dropped() {
        assert_eq!(texts("\nhello\n  world"), vec![Symbol::Text("hello\n  world".into())]);
        assert_eq!(texts("\t\tz\t"), vec![Symbol::Text("z\t".into())]);
    }

    #[test]
    fn tabs_before_a_symbol_are_skipped_and_parsing_stops_at_bad_chars() {
        assert_eq!(texts("#a#\t\ty"), vec![Symbol::Nonterminal("a".into()), Symbol::Text("y".into())]);
        assert_eq!(texts("x[y"), vec![Symbol::Text("x".into())]);
        assert_eq!(texts("a # b"), vec![Symbol::Text("a ".into())]);
        assert_eq!(texts("a \"quoted\" b"), vec![Symbol::Text("a ".into()), Symbol::Text("quoted".into()), Symbol::Text(" b".into())]);
    }

    #[test]
    fn lists_and_conditionals() {
        let s = texts("go to [{r.name | receptacleatlocation(r:receptacle, lend:location)}]");
        assert_eq!(s[0], Symbol::Text("go to ".into()));
        let Symbol::List { body: CondBody::Eval(Expr::Attr(v, a)), given: Some(q) } = &s[1] else { panic!("{s:?}") };
        assert_eq!((v.as_str(), a.as_str()), ("r", "name"));
        assert_eq!(q[0].placeholders, vec![("r".to_string(), "receptacle".to_string()), ("lend".to_string(), "location".to_string())]);
        let s = texts("[{#overview(o)# | a(x:t) & not_b(o:object, x:t)}]");
        assert!(matches!(&s[0], Symbol::List { body: CondBody::Nonterminal(n), given: Some(q) } if n == "overview(o)" && q.len() == 2 && q[1].predicate == "not_b"));
    }

    #[test]
    fn expressions() {
        assert_eq!(
            parse_expr("o.indefinite + ' ' + o.name").unwrap(),
            Expr::Add(vec![Expr::Attr("o".into(), "indefinite".into()), Expr::Str(" ".into()), Expr::Attr("o".into(), "name".into())])
        );
        assert_eq!(parse_expr("r.name or r.id").unwrap(), Expr::Or(vec![Expr::Attr("r".into(), "name".into()), Expr::Attr("r".into(), "id".into())]));
        assert!(parse_expr("__import__('os')").is_err());
    }

    #[test]
    fn logic_file() {
        let g = Grammar::parse(
            "grammar :: \"\"\"{\"a\": [{\"rhs\": \"A\"}]}\"\"\";\n# comment\naction Foo {\n template :: \"foo {r}\";\n feedback :: \"#a#\";\n grammar :: \"\"\"\n{\n# dropped\n\"b\": [{\"condition\": \"p(r:x)\", \"rhs\": \"B\"}]}\"\"\";\n}\n",
        )
        .unwrap();
        assert_eq!(g.rules["a"].len(), 1);
        assert!(g.rules["b"][0].condition.is_some());
        assert_eq!(g.actions["foo"].feedback, vec![Symbol::Nonterminal("a".into())]);
        assert!(Grammar::parse("action Foo { template :: \"x\" ").is_err());
    }
}
