//! Sentence helpers the annotators share, and renaming in texts.

/// `a, b and c` with at most `n` items (`a, b, c and others` beyond).
pub(crate) fn list_some(items: &[&str], n: usize) -> String {
    match items.len() {
        0 => String::new(),
        1 => items[0].to_string(),
        len if len <= n => format!("{} and {}", items[..len - 1].join(", "), items[len - 1]),
        _ => format!("{} and others", items[..n].join(", ")),
    }
}

/// `text` with its first letter in upper case.
pub fn capitalise(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// `text` with every whole-word `from` replaced by `to`, matched as written and in lower case
/// (actions write names in lower case: `unknown substance b`).
pub fn rename(text: &str, from: &str, to: &str) -> String {
    let once = replace_words(text, from, to);
    let lower = from.to_lowercase();
    if lower == from {
        once
    } else {
        replace_words(&once, &lower, &to.to_lowercase())
    }
}

fn replace_words(text: &str, from: &str, to: &str) -> String {
    if from.is_empty() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut before: Option<char> = None;
    while let Some(at) = rest.find(from) {
        let prev = rest[..at].chars().next_back().or(before);
        let next = rest[at + from.len()..].chars().next();
        let whole = !prev.is_some_and(char::is_alphanumeric) && !next.is_some_and(char::is_alphanumeric);
        let (head, tail) = rest.split_at(at + from.len());
        if whole {
            out.push_str(&head[..at]);
            out.push_str(to);
        } else {
            out.push_str(head);
        }
        before = head.chars().next_back();
        rest = tail;
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_words_in_both_cases_are_renamed() {
        let text = "determine if unknown substance B is ... <action>pick up unknown substance b</action> unknown substance BB";
        assert_eq!(
            rename(text, "unknown substance B", "unknown substance R"),
            "determine if unknown substance R is ... <action>pick up unknown substance r</action> unknown substance BB"
        );
        assert_eq!(rename("a metal forks, metal fork.", "metal fork", "tavomi"), "a metal forks, tavomi.");
        assert_eq!(rename("xmetal fork metal fork", "metal fork", "ka"), "xmetal fork ka");
        assert_eq!(rename("abc", "", "x"), "abc");
    }
}
