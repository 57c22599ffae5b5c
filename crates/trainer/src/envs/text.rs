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

/// `text` with the renamings done all at once: each whole-word `from`, as written or in lower
/// case (actions write names in lower case: `unknown substance b`), becomes its `to` (in
/// lower case for a lower-case match), the longest name first where
/// names overlap, and no replacement is renamed again, so a permutation (`dove` to `frog`,
/// `frog` to `dove`) swaps names.
pub fn rename_all(text: &str, renamings: &[(String, String)]) -> String {
    let mut forms: Vec<(String, String)> = Vec::new();
    for (from, to) in renamings.iter().filter(|(from, _)| !from.is_empty()) {
        forms.push((from.clone(), to.clone()));
        if from.to_lowercase() != *from {
            forms.push((from.to_lowercase(), to.to_lowercase()));
        }
    }
    forms.sort_by(|a, b| b.0.len().cmp(&a.0.len()));
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    let mut prev: Option<char> = None;
    while at < text.len() {
        let rest = &text[at..];
        let starts_word = !prev.is_some_and(char::is_alphanumeric);
        let hit = starts_word
            .then(|| {
                forms.iter().find(|(from, _)| {
                    rest.starts_with(from.as_str())
                        && !rest[from.len()..].chars().next().is_some_and(char::is_alphanumeric)
                })
            })
            .flatten();
        match hit {
            Some((from, to)) => {
                out.push_str(to);
                at += from.len();
                prev = from.chars().next_back();
            }
            None => {
                let c = rest.chars().next().expect("at < len");
                out.push(c);
                at += c.len_utf8();
                prev = Some(c);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rename(text: &str, from: &str, to: &str) -> String {
        rename_all(text, &[(from.to_string(), to.to_string())])
    }

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

    fn pairs(names: &[(&str, &str)]) -> Vec<(String, String)> {
        names.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    }

    #[test]
    fn renamings_are_done_at_once_longest_first() {
        let swap = pairs(&[("dove egg", "frog egg"), ("frog egg", "dove egg"), ("dove", "frog"), ("frog", "dove")]);
        assert_eq!(
            rename_all("a dove egg | a frog egg. You move the dove to the inventory. doves", &swap),
            "a frog egg | a dove egg. You move the frog to the inventory. doves"
        );
        let nested = pairs(&[("turtle", "wolf"), ("giant turtle", "baby ant")]);
        assert_eq!(rename_all("giant turtle, turtle", &nested), "baby ant, wolf");
        assert_eq!(rename_all("Pick up X", &pairs(&[("X", "Ab")])), "Pick up Ab");
        assert_eq!(rename_all("ünknown ü", &pairs(&[("ü", "u")])), "ünknown u");
        assert_eq!(rename_all("", &swap), "");
    }

    proptest::proptest! {
        /// A permutation of names, then its inverse, gives the text back.
        #[test]
        fn a_permutation_and_its_inverse_cancel(
            words in proptest::collection::vec(0usize..8, 0..30),
            seps in proptest::collection::vec(proptest::sample::select(vec![" ", ", ", " | ", ". ", "x", " (a "]), 30),
            shift in 1usize..5,
        ) {
            let names = ["ant", "dove", "frog", "wolf", "giant tortoise", "blue jay", "Zed", "pea"];
            let text: String = words.iter().zip(&seps).map(|(w, s)| format!("{}{s}", names[*w])).collect();
            let forward: Vec<(String, String)> =
                (0..names.len()).map(|i| (names[i].to_string(), names[(i + shift) % names.len()].to_string())).collect();
            let back: Vec<(String, String)> = forward.iter().map(|(a, b)| (b.clone(), a.clone())).collect();
            let there = rename_all(&text, &forward);
            proptest::prop_assert_eq!(rename_all(&there, &back), text);
        }
    }
}
