//! ALFWorld's display names for PDDL ids, as its `AlfredDemangler(shuffle=False)`
//! gives them: `cabinet_bar__minus_00_dot_48_bar_...` → `cabinet 3`.
//!
//! The name is the text before the first `_bar_`, plus `basin` when the id
//! contains it (sinkbasin, bathtubbasin). Numbers count per name over the sorted
//! ids, the first sorted id getting the highest number. Ids without `_bar_` keep
//! their text and get a trailing space (the reference formats `"{name} {number}"`
//! with an empty number).

use std::collections::HashMap;

fn readable(id: &str) -> String {
    id.replace("_bar_", "|").replace("_minus_", "-").replace("_plus_", "+").replace("_dot_", ".").replace("_comma_", ",")
}

fn base_name(id: &str) -> Option<String> {
    let (prefix, _) = id.split_once("_bar_")?;
    let mut name = readable(prefix);
    if id.contains("basin") {
        name.push_str("basin");
    }
    Some(name)
}

/// Display names for `ids` (which must be sorted), in the same order.
pub fn demangle(ids: &[&str]) -> Vec<String> {
    let mut remaining: HashMap<String, usize> = HashMap::new();
    for id in ids {
        if let Some(name) = base_name(id) {
            *remaining.entry(name).or_default() += 1;
        }
    }
    ids.iter()
        .map(|id| match base_name(id) {
            Some(name) => {
                let n = remaining.get_mut(&name).map(|n| std::mem::replace(n, *n - 1)).unwrap_or(0);
                format!("{name} {n}")
            }
            None => format!("{} ", readable(id)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_sorted_id_gets_the_highest_number() {
        let ids = ["agent1", "cabinet_bar__minus_00_dot_10", "cabinet_bar__plus_00_dot_20", "sink_bar__plus_01_bar_sinkbasin"];
        assert_eq!(demangle(&ids), vec!["agent1 ", "cabinet 2", "cabinet 1", "sinkbasin 1"]);
    }
}
