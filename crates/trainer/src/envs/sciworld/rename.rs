//! Renamed demonstrations: ScienceWorld's test variations test things the training ones never
//! name (the conductivity tasks test other objects and other unknown substances' letters), so
//! a model that learned to write the training names fails there. Demonstrations in which the
//! tested object carries a made-up name teach it to copy the name the task gives instead.
//! [`renaming`] picks the name (pure, seeded); [`crate::envs::text::rename`] applies it.

use rand::Rng;

/// Syllables of made-up words (`"tavomi"`): no word of the simulator.
const SYLLABLES: &[&str] = &[
    "ka", "to", "mi", "ru", "ve", "lo", "sa", "ne", "pi", "du", "ga", "ri", "zo", "be", "fu",
    "ta", "ki", "mo", "le", "nu", "sho", "va", "tri", "pel", "dor", "qua", "ben", "sil", "wex",
];

/// Everyday materials and things, for names like the simulator's own (`copper spoon`).
const MATERIALS: &[&str] = &[
    "wooden", "copper", "rubber", "cotton", "silver", "steel", "paper", "plastic", "ceramic",
    "leather", "wool", "iron", "brass", "stone", "clay", "bamboo", "nylon", "tin", "gold",
    "marble", "cork", "felt", "zinc", "bronze", "velvet", "granite", "foam", "wax", "lead",
];
const THINGS: &[&str] = &[
    "spoon", "cup", "coin", "ring", "key", "nail", "button", "rod", "plate", "block", "bead",
    "tube", "ball", "sheet", "string", "pin", "bottle", "bowl", "comb", "whistle", "bell",
    "brush", "hook", "chain", "dice", "mug", "card", "wheel", "sponge", "ruler",
];

/// The renaming of one demonstration of `task` (its description): the tested object's name
/// and the one to write instead, or none when the task tests no named object. An unknown
/// substance keeps its kind and gets another letter (`unknown substance B` -> `unknown
/// substance R`); any other object gets a made-up name ([`made_up_name`]).
pub fn renaming(task: &str, rng: &mut impl Rng) -> Option<(String, String)> {
    let object = tested_object(task)?;
    let new = match object.strip_prefix("unknown substance ") {
        Some(letter) => {
            let mut other = letter.to_string();
            while other == letter {
                other = char::from(b'A' + rng.gen_range(0..26u8)).to_string();
            }
            format!("unknown substance {other}")
        }
        None => made_up_name(rng),
    };
    Some((object.to_string(), new))
}

/// The object a conductivity task tests: `determine if OBJECT is electrically conductive`;
/// none for a titled book (`book (The Foundations of the Origin of Species)`), which the
/// commands call `book`.
fn tested_object(task: &str) -> Option<&str> {
    let rest = task.split("determine if ").nth(1)?;
    let object = rest.split(" is electrically").next()?;
    (!object.is_empty() && object.len() < rest.len() && !object.contains('(')).then_some(object)
}

/// A material and a thing (`copper spoon`), or made-up words (`rel kusa`), half and half.
fn made_up_name(rng: &mut impl Rng) -> String {
    match rng.gen_range(0..4) {
        0 | 1 => format!(
            "{} {}",
            MATERIALS[rng.gen_range(0..MATERIALS.len())],
            THINGS[rng.gen_range(0..THINGS.len())]
        ),
        2 => made_up_word(rng, 3),
        _ => {
            let first = rng.gen_range(2..4);
            let second = rng.gen_range(1..3);
            format!("{} {}", made_up_word(rng, first), made_up_word(rng, second))
        }
    }
}

fn made_up_word(rng: &mut impl Rng, syllables: usize) -> String {
    (0..syllables)
        .map(|_| SYLLABLES[rng.gen_range(0..SYLLABLES.len())])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    const FORK: &str = "Your task is to determine if metal fork is electrically conductive. The metal fork is located around the kitchen.";
    const SUBSTANCE: &str = "Your task is to determine if unknown substance B is electrically conductive.";

    #[test]
    fn the_tested_object_gets_another_name() {
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let (from, to) = renaming(FORK, &mut rng).unwrap();
        assert_eq!(from, "metal fork");
        assert!(!to.is_empty() && to != from && to.chars().all(|c| c.is_ascii_lowercase() || c == ' '), "{to}");
        for _ in 0..50 {
            let (from, to) = renaming(SUBSTANCE, &mut rng).unwrap();
            assert_eq!(from, "unknown substance B");
            assert!(to.starts_with("unknown substance ") && to != from && to.len() == from.len(), "{to}");
        }
        assert_eq!(renaming("Your task is to find a(n) animal.", &mut rng), None);
        let book = "Your task is to determine if book (The Foundations of the Origin of Species) is electrically conductive.";
        assert_eq!(renaming(book, &mut rng), None);
    }

    #[test]
    fn renaming_is_seeded() {
        let pick = |seed| renaming(FORK, &mut ChaCha8Rng::seed_from_u64(seed));
        assert_eq!(pick(7), pick(7));
        let names: std::collections::BTreeSet<_> = (0..20).map(|s| pick(s).unwrap().1).collect();
        assert!(names.len() > 15, "{names:?}");
    }
}
