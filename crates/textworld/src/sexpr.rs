//! A tiny S-expression reader for PDDL text.
//!
//! Like Fast Downward's lisp parser (which the reference engine uses), tokens are
//! lower-cased and `;` starts a comment that runs to the end of the line.
//! Parentheses are the only delimiters besides whitespace, so a stray comma stays
//! glued to its neighbour (`location,`): the ALFRED domain depends on that.

use crate::error::PddlError;

#[derive(Debug, Clone, PartialEq)]
pub enum Sexpr {
    Atom(String),
    List(Vec<Sexpr>),
}

impl Sexpr {
    pub fn as_atom(&self) -> Option<&str> {
        match self {
            Sexpr::Atom(s) => Some(s),
            Sexpr::List(_) => None,
        }
    }

    pub fn as_list(&self) -> Option<&[Sexpr]> {
        match self {
            Sexpr::List(items) => Some(items),
            Sexpr::Atom(_) => None,
        }
    }
}

/// Deeper nesting than this is rejected (PDDL files nest a few dozen levels).
pub const MAX_DEPTH: usize = 256;

/// Parses exactly one top-level expression (trailing whitespace and comments allowed).
pub fn parse(text: &str) -> Result<Sexpr, PddlError> {
    let mut stack: Vec<Vec<Sexpr>> = Vec::new();
    let mut result: Option<Sexpr> = None;
    let mut line = 1usize;
    let mut chars = text.char_indices().peekable();
    while let Some(&(start, c)) = chars.peek() {
        match c {
            '\n' => {
                line += 1;
                chars.next();
            }
            c if c.is_whitespace() => {
                chars.next();
            }
            ';' => {
                while let Some(&(_, c)) = chars.peek() {
                    if c == '\n' {
                        break;
                    }
                    chars.next();
                }
            }
            '(' => {
                chars.next();
                if result.is_some() {
                    return Err(PddlError::syntax(line, "text after the closing parenthesis"));
                }
                if stack.len() >= MAX_DEPTH {
                    return Err(PddlError::syntax(line, format!("parentheses nest deeper than {MAX_DEPTH} levels")));
                }
                stack.push(Vec::new());
            }
            ')' => {
                chars.next();
                let list = stack
                    .pop()
                    .ok_or_else(|| PddlError::syntax(line, "unbalanced ')'"))?;
                let node = Sexpr::List(list);
                match stack.last_mut() {
                    Some(parent) => parent.push(node),
                    None => result = Some(node),
                }
            }
            _ => {
                let mut end = start;
                while let Some(&(i, c)) = chars.peek() {
                    if c.is_whitespace() || c == '(' || c == ')' || c == ';' {
                        break;
                    }
                    end = i + c.len_utf8();
                    chars.next();
                }
                let token = text[start..end].to_lowercase();
                match stack.last_mut() {
                    Some(parent) => parent.push(Sexpr::Atom(token)),
                    None => return Err(PddlError::syntax(line, format!("unexpected token '{token}' outside parentheses"))),
                }
            }
        }
    }
    if !stack.is_empty() {
        return Err(PddlError::syntax(line, "missing ')' at end of text (truncated?)"));
    }
    result.ok_or_else(|| PddlError::syntax(line, "empty PDDL text"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowercases_and_skips_comments() {
        let e = parse("(Define (Domain X) ; hi\n (:types a b))").unwrap();
        assert_eq!(
            e,
            Sexpr::List(vec![
                Sexpr::Atom("define".into()),
                Sexpr::List(vec![Sexpr::Atom("domain".into()), Sexpr::Atom("x".into())]),
                Sexpr::List(vec![Sexpr::Atom(":types".into()), Sexpr::Atom("a".into()), Sexpr::Atom("b".into())]),
            ])
        );
    }

    #[test]
    fn comma_stays_in_token() {
        let e = parse("(?l - location, ?r)").unwrap();
        assert_eq!(e.as_list().unwrap()[2], Sexpr::Atom("location,".into()));
    }

    #[test]
    fn unbalanced_is_an_error_with_line() {
        let err = parse("(a\n(b)").unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
        assert!(parse("a)").is_err());
        assert!(parse("").is_err());
        assert!(parse("(a))").is_err());
    }
}
