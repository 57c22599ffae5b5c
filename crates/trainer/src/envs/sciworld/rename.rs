//! Renamed demonstrations: ScienceWorld's test variations test things the training ones never
//! name (the conductivity tasks test other objects and other unknown substances' letters), so
//! a model that learned to write the training names fails there. Demonstrations in which the
//! tested object carries a made-up name teach it to copy the name the task gives instead.
//! The find tasks' rooms hold animals and plants in other proportions than the training
//! ones (a baby beaver in half the test rooms of find-animal, in 1% of the training ones): a
//! seeded permutation of the species in each such demonstration teaches the model to pick the
//! one the room shows, not the one seen most. [`renamings`] picks the names (pure, seeded);
//! [`crate::envs::text::rename_all`] applies them.

use rand::seq::SliceRandom;
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

/// The find tasks' animals as rooms show them (`dove egg`) and as the simulator names the
/// creature elsewhere (`You move the dove to the inventory.`).
const ANIMALS: &[[&str; 2]] = &[
    ["blue jay egg", "blue jay"],
    ["butterfly egg", "butterfly"],
    ["chameleon egg", "chameleon"],
    ["crocodile egg", "crocodile"],
    ["dove egg", "dove"],
    ["frog egg", "frog"],
    ["giant tortoise egg", "giant tortoise"],
    ["parrot egg", "parrot"],
    ["turtle egg", "turtle"],
    ["baby ant", "ant"],
    ["baby beaver", "beaver"],
    ["baby brown bear", "brown bear"],
    ["baby chipmunk", "chipmunk"],
    ["baby dragonfly", "dragonfly"],
    ["baby hedgehog", "hedgehog"],
    ["baby mouse", "mouse"],
    ["baby rabbit", "rabbit"],
    ["baby wolf", "wolf"],
];

/// The find tasks' plants (in the greenhouse's flower pots).
const PLANTS: &[[&str; 1]] = &[
    ["apple tree"], ["avocado tree"], ["banana tree"], ["cherry tree"], ["lemon tree"],
    ["orange tree"], ["peach tree"], ["pea plant"],
];

/// The renamings of one demonstration of `task` (its description), each a name it holds and
/// the one to write instead; none for other tasks. A conductivity task's tested object gets
/// another name ([`renaming`]); a find task's animals or plants (`find a(n) animal`, `plant`,
/// `living thing`: both) are permuted among themselves ([`species_permutation`]).
pub fn renamings(task: &str, rng: &mut impl Rng) -> Vec<(String, String)> {
    if let Some(one) = renaming(task, rng) {
        return vec![one];
    }
    let Some(kind) = task.split("find a(n) ").nth(1) else { return Vec::new() };
    let mut renamed = Vec::new();
    if kind.starts_with("animal") || kind.starts_with("living thing") {
        renamed.extend(species_permutation(ANIMALS, rng));
    }
    if kind.starts_with("plant") || kind.starts_with("living thing") {
        renamed.extend(species_permutation(PLANTS, rng));
    }
    renamed
}

/// A seeded permutation of `species` (each named in N forms): every form of one becomes the
/// same form of its image; a species mapped to itself is left out.
fn species_permutation<const N: usize>(species: &[[&str; N]], rng: &mut impl Rng) -> Vec<(String, String)> {
    let mut images: Vec<usize> = (0..species.len()).collect();
    images.shuffle(rng);
    let mut renamed = Vec::new();
    for (from, &to) in images.iter().enumerate().filter(|(from, to)| from != *to) {
        for form in 0..N {
            renamed.push((species[from][form].to_string(), species[to][form].to_string()));
        }
    }
    renamed
}

/// What the model is shown instead of a conductivity task's tested object under `[env]
/// tested_object_alias` (both tasks, every variation; see [`tested_object_alias`]).
pub const TESTED_OBJECT_ALIAS: &str = "tested object";

/// What an aliasing environment calls the conductivity tasks' three wires, in the order the
/// workshop's table lists them.
pub const WIRE_ALIASES: [&str; 3] = ["left wire", "middle wire", "right wire"];

/// Whether `task` (a task's name, as in its game key) is one of the two conductivity tasks,
/// the only ones whose wires an aliasing environment and its expert rename (the
/// power-component tasks wire too, under their own names).
pub fn is_conductivity_task(task: &str) -> bool {
    task.starts_with("test-conductivity")
}

/// The wires `text` names (`red wire`), each once, in the order it names them first.
fn wires_named(text: &str) -> Vec<String> {
    let words: Vec<&str> = text.split(|c: char| !c.is_alphanumeric()).collect();
    let mut wires: Vec<String> = Vec::new();
    for pair in words.windows(2).filter(|pair| pair[1] == "wire" && !pair[0].is_empty()) {
        let wire = format!("{} wire", pair[0]);
        if !wires.contains(&wire) && !WIRE_ALIASES.contains(&wire.as_str()) {
            wires.push(wire);
        }
    }
    wires
}

/// (wire, alias) pairs for the wires `text` names, in the order it names them
/// ([`WIRE_ALIASES`]); none unless it names exactly three, as on every conductivity task's
/// table.
pub fn wire_aliases(text: &str) -> Vec<(String, String)> {
    let wires = wires_named(text);
    match wires.len() == WIRE_ALIASES.len() {
        true => wires.iter().zip(WIRE_ALIASES).map(|(w, a)| (w.clone(), a.to_string())).collect(),
        false => Vec::new(),
    }
}

/// The tested object of a conductivity task (its description) and [`TESTED_OBJECT_ALIAS`],
/// the pair an aliasing environment renames; none for other tasks, a titled book, or a
/// description that already shows the alias.
pub fn tested_object_alias(task: &str) -> Option<(String, String)> {
    tested_object(task).map(|object| (object.to_string(), TESTED_OBJECT_ALIAS.to_string()))
}

/// The renaming of a conductivity task's tested object: its name and the one to write
/// instead, or none when the task tests no named object or shows it under the alias (an
/// aliasing environment already gives every variation the same name). An unknown substance keeps its kind
/// and gets another letter (`unknown substance B` -> `unknown substance R`); any other object
/// gets a made-up name ([`made_up_name`]).
fn renaming(task: &str, rng: &mut impl Rng) -> Option<(String, String)> {
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
/// commands call `book`, and for [`TESTED_OBJECT_ALIAS`] (an aliasing environment's
/// description: every variation already names its object alike).
fn tested_object(task: &str) -> Option<&str> {
    let rest = task.split("determine if ").nth(1)?;
    let object = rest.split(" is electrically").next()?;
    let named = !object.is_empty() && object.len() < rest.len() && !object.contains('(');
    (named && object != TESTED_OBJECT_ALIAS).then_some(object)
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

    #[test]
    fn three_wires_get_their_aliases_in_the_order_named() {
        let room = "On the table is: a battery, a black wire, a green light bulb, which is off, a red wire, a yellow wire.";
        let wires = wires_named(room);
        assert_eq!(wires, ["black wire", "red wire", "yellow wire"]);
        let aliases = wire_aliases(room);
        assert_eq!(aliases[0], ("black wire".to_string(), "left wire".to_string()));
        assert_eq!(aliases[2], ("yellow wire".to_string(), "right wire".to_string()));
        assert_eq!(crate::envs::text::rename_all("connect red wire terminal 2 to anode in green light bulb", &aliases), "connect middle wire terminal 2 to anode in green light bulb");
        // An alias is no wire of its own; two wires or four are not aliased.
        assert_eq!(wires_named("connect left wire terminal 1 to red wire terminal 2"), ["red wire"]);
        assert!(wire_aliases("a black wire, a red wire").is_empty());
        assert!(wire_aliases("a black wire, a blue wire, a red wire, a copper wire").is_empty());
        assert!(is_conductivity_task("test-conductivity") && is_conductivity_task("test-conductivity-of-unknown-substances"));
        assert!(!is_conductivity_task("power-component"));
    }

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
        assert_eq!(renamings(FORK, &mut ChaCha8Rng::seed_from_u64(3)).len(), 1);
        let book = "Your task is to determine if book (The Foundations of the Origin of Species) is electrically conductive.";
        assert_eq!(renaming(book, &mut rng), None);
    }

    #[test]
    fn the_alias_names_every_tested_object_alike() {
        assert_eq!(
            tested_object_alias(FORK),
            Some(("metal fork".to_string(), TESTED_OBJECT_ALIAS.to_string()))
        );
        assert_eq!(tested_object_alias(SUBSTANCE).unwrap().0, "unknown substance B");
        assert_eq!(tested_object_alias("Your task is to find a(n) animal."), None);
        let aliased = crate::envs::text::rename_all(FORK, &[tested_object_alias(FORK).unwrap()]);
        assert!(aliased.contains("determine if tested object is") && !aliased.contains("fork"), "{aliased}");
        // An aliased description needs no other name: no alias of the alias, no made-up name.
        assert_eq!(tested_object_alias(&aliased), None);
        assert!(renamings(&aliased, &mut ChaCha8Rng::seed_from_u64(0)).is_empty());
    }

    #[test]
    fn renaming_is_seeded() {
        let pick = |seed| renaming(FORK, &mut ChaCha8Rng::seed_from_u64(seed));
        assert_eq!(pick(7), pick(7));
        let names: std::collections::BTreeSet<_> = (0..20).map(|s| pick(s).unwrap().1).collect();
        assert!(names.len() > 15, "{names:?}");
    }

    #[test]
    fn find_tasks_permute_their_species() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let animal = renamings("Your task is to find a(n) animal. First, focus on the thing.", &mut rng);
        let is_shown = |name: &str| ANIMALS.iter().any(|[shown, _]| *shown == name);
        let creature = |shown: &str| ANIMALS.iter().find(|[s, _]| *s == shown).unwrap()[1].to_string();
        let is_plant = |name: &str| PLANTS.iter().any(|[plant]| *plant == name);
        let shown: std::collections::BTreeMap<_, _> = animal.iter().filter(|(a, _)| is_shown(a)).cloned().collect();
        assert!(shown.len() > ANIMALS.len() / 2, "{animal:?}");
        // A permutation: the images are the renamed names, once each; the creature follows
        // its egg or baby.
        let mut images: Vec<_> = shown.values().collect();
        images.sort();
        images.dedup();
        assert_eq!(images.len(), shown.len());
        assert!(images.iter().all(|n| shown.contains_key(n.as_str())));
        for (from, to) in &shown {
            assert!(animal.contains(&(creature(from), creature(to))), "{from} -> {to}");
        }
        assert_eq!(animal.len(), 2 * shown.len());
        let plant = renamings("Your task is to find a(n) plant. First, focus on the thing.", &mut rng);
        assert!(!plant.is_empty() && plant.iter().all(|(a, b)| is_plant(a) && is_plant(b) && a != b));
        let living = renamings("Your task is to find a(n) living thing. First, focus on the thing.", &mut rng);
        assert!(living.iter().any(|(a, _)| is_plant(a)) && living.iter().any(|(a, _)| is_shown(a)));
        assert!(renamings("Your task is to find a(n) non-living thing.", &mut rng).is_empty());
        assert!(renamings("Your task is to find the animal with the longest life span.", &mut rng).is_empty());
        assert_eq!(renamings("Your task is to find a(n) animal.", &mut ChaCha8Rng::seed_from_u64(5)), renamings("Your task is to find a(n) animal.", &mut ChaCha8Rng::seed_from_u64(5)));
    }
}
