//! Sentence helpers the annotators share.

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
