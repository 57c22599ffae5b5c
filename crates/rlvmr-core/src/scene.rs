//! ScienceWorld's room and inventory texts, shortened for the prompts of small models.
//!
//! A "look around" answer lists the room's contents one per line, with the agent, the air and
//! an article on every line, and a door line per neighbouring room:
//!
//! ```text
//! This room is called the kitchen. In it, you see:
//! 	the agent
//! 	a substance called air
//! 	a fridge. The fridge door is closed.
//! You also see:
//! 	A door to the hallway (that is open)
//! ```
//!
//! Outdoors the first line reads `This outside location is called the outside. Here you
//! see:`.
//!
//! [`compact_room`] keeps every object as the simulator wrote it (containers and states
//! included: the names the agent must type come from there) and drops only what never
//! changes: `In the kitchen: fridge. The fridge door is closed. | Doors: hallway`. Texts that
//! are not a room description come back on one line, unchanged otherwise.

/// The openings of room descriptions: indoors and outdoors.
const ROOM_HEADERS: [&str; 2] = ["This room is called the ", "This outside location is called the "];
/// Lines present in every room, which the agent never acts on.
const ALWAYS_THERE: [&str; 2] = ["the agent", "a substance called air"];
/// The line that opens the doors and other things seen from the room.
const ALSO_SEE: &str = "You also see:";
/// The opening of the inventory's text.
const INVENTORY_HEADER: &str = "In your inventory, you see:";

/// Whether `text` is a room description ("look around" or the free look).
pub fn is_room(text: &str) -> bool {
    room_name(text).is_some()
}

/// The room's name in a room description (`kitchen`), if `text` is one.
pub fn room_name(text: &str) -> Option<&str> {
    let text = text.trim_start();
    let rest = ROOM_HEADERS.iter().find_map(|header| text.strip_prefix(header))?;
    let end = rest.find('.')?;
    Some(rest[..end].trim()).filter(|name| !name.is_empty() && !name.contains('\n'))
}

/// A room description on one line: `In the ROOM: item | item | Doors: a, b (closed)`.
/// Other texts: their non-blank lines joined by ` | `.
pub fn compact_room(text: &str) -> String {
    let Some(name) = room_name(text) else {
        return one_line(text);
    };
    let mut items = Vec::new();
    let mut doors = Vec::new();
    let mut seen_also = false;
    for line in text.lines().skip(1).map(str::trim).filter(|l| !l.is_empty()) {
        if line == ALSO_SEE {
            seen_also = true;
        } else if ALWAYS_THERE.contains(&line) {
            continue;
        } else if let Some(door) = seen_also.then(|| door(line)).flatten() {
            doors.push(door);
        } else {
            items.push(without_article(line).trim_end_matches('.').trim_end());
        }
    }
    let mut out = format!("In the {name}: ");
    out.push_str(&if items.is_empty() { "nothing".to_string() } else { items.join(" | ") });
    if !doors.is_empty() {
        out.push_str(" | Doors: ");
        out.push_str(&doors.join(", "));
    }
    out
}

/// `In the ROOM.` for a room description (a history line: the room itself is shown apart),
/// else the text on one line.
pub fn room_header(text: &str) -> String {
    match room_name(text) {
        Some(name) => format!("In the {name}."),
        None => one_line(text),
    }
}

/// The inventory's items on one line (`orange | seed jar (containing ...)`), `nothing` when
/// it is empty; other texts on one line.
pub fn compact_inventory(text: &str) -> String {
    let Some(rest) = text.trim_start().strip_prefix(INVENTORY_HEADER) else {
        return one_line(text);
    };
    let items: Vec<&str> = rest
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(without_article)
        .collect();
    if items.is_empty() {
        "nothing".to_string()
    } else {
        items.join(" | ")
    }
}

/// `A door to the hallway (that is open)` -> `hallway`; a closed door keeps `(closed)`.
fn door(line: &str) -> Option<String> {
    let rest = line.strip_prefix("A door to ")?;
    let rest = rest.strip_prefix("the ").unwrap_or(rest);
    Some(match rest.split_once(" (that is ") {
        Some((room, "open)")) => room.to_string(),
        Some((room, state)) => format!("{room} ({}", state),
        None => rest.to_string(),
    })
}

/// The item without its article; ScienceWorld capitalises some ("A metal fork").
fn without_article(line: &str) -> &str {
    ["a ", "an ", "the ", "A ", "An ", "The "]
        .iter()
        .find_map(|article| line.strip_prefix(article))
        .unwrap_or(line)
}

fn one_line(text: &str) -> String {
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    lines.join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const KITCHEN: &str = "This room is called the kitchen. In it, you see: \n\tthe agent\n\ta \
substance called air\n\ta chair. On the chair is: nothing.\n\ta freezer. The freezer door is \
closed. \n\tan orange\nYou also see:\n\tA door to the bathroom (that is open)\n\tA door to the \
hallway (that is closed)";

    #[test]
    fn rooms_keep_their_objects_and_lose_the_constant_lines() {
        assert_eq!(room_name(KITCHEN), Some("kitchen"));
        assert_eq!(
            compact_room(KITCHEN),
            "In the kitchen: chair. On the chair is: nothing | freezer. The freezer door is \
             closed | orange | Doors: bathroom, hallway (closed)"
        );
        assert_eq!(room_header(KITCHEN), "In the kitchen.");
    }

    #[test]
    fn the_outside_is_a_room_too() {
        let text = "This outside location is called the outside. Here you see: \n\tthe agent\n\ta \
substance called air\n\tan axe\n\ta fire pit (containing nothing)\nYou also see:\n\tA door to the \
foundry (that is open)\n\tA door to the greenhouse (that is open)";
        assert_eq!(room_name(text), Some("outside"));
        assert_eq!(compact_room(text), "In the outside: axe | fire pit (containing nothing) | Doors: foundry, greenhouse");
        assert_eq!(room_header(text), "In the outside.");
    }

    #[test]
    fn other_texts_come_back_on_one_line() {
        let text = "You move the jug\n\n to the sink.";
        assert!(!is_room(text));
        assert_eq!(compact_room(text), "You move the jug | to the sink.");
        assert_eq!(room_header(text), "You move the jug | to the sink.");
        assert_eq!(compact_room(""), "");
        assert_eq!(compact_room("This room is called the "), "This room is called the");
    }

    #[test]
    fn inventories() {
        assert_eq!(
            compact_inventory("In your inventory, you see:\n\tan orange\n\ta seed jar (containing a apple seed)\n"),
            "orange | seed jar (containing a apple seed)"
        );
        assert_eq!(compact_inventory("In your inventory, you see:\n\tA metal fork\n\tan orange\n"), "metal fork | orange");
        assert_eq!(compact_inventory("In your inventory, you see:\n"), "nothing");
        assert_eq!(compact_inventory("odd\ntext"), "odd | text");
    }

    #[test]
    fn an_empty_room_says_so() {
        let text = "This room is called the hallway. In it, you see: \n\tthe agent\n\ta substance called air\n";
        assert_eq!(compact_room(text), "In the hallway: nothing");
    }
}
