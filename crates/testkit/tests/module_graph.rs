//! No import cycles between the source files of any crate: a file's `use` and path
//! references (`crate::a::b`, `super::x`, a child module's name) name the files they depend
//! on, and the graph of those edges has no cycle. Doc comments and `#[cfg(test)]` modules
//! at the end of a file are left out (tests may look anywhere).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A file's module path inside its crate (`["envs", "alfworld"]`); the root is empty.
type Module = Vec<String>;

fn crates_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `.rs` file under `src` by its module path.
fn modules(src: &Path) -> BTreeMap<Module, PathBuf> {
    let mut out = BTreeMap::new();
    for (path, _) in testkit::files_under(src) {
        let Ok(rel) = path.strip_prefix(src) else { continue };
        let Some(stem) = rel.to_str().and_then(|r| r.strip_suffix(".rs")) else { continue };
        let mut module: Module = stem.split('/').map(str::to_string).collect();
        if matches!(module.last().map(String::as_str), Some("mod" | "lib" | "main")) {
            module.pop();
        }
        out.insert(module, path);
    }
    out
}

/// The source a file's dependencies are read from: no comment lines, no trailing tests.
fn code_of(text: &str) -> String {
    let body = text.split("\n#[cfg(test)]").next().unwrap_or("");
    body.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

/// The `a::b::c` paths in `code`, with `use x::{a, b::c}` groups expanded (one level).
fn paths_in(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let bytes: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        if !word(bytes[i]) || (i > 0 && (word(bytes[i - 1]) || bytes[i - 1] == ':')) {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < bytes.len() && (word(bytes[j]) || (bytes[j] == ':' && bytes.get(j + 1) == Some(&':'))) {
            j += if bytes[j] == ':' { 2 } else { 1 };
        }
        let text: String = bytes[i..j].iter().collect();
        let prefix: Vec<String> = text.trim_end_matches("::").split("::").map(str::to_string).collect();
        if text.ends_with("::") && bytes.get(j) == Some(&'{') {
            let close = bytes[j..].iter().position(|&c| c == '}').map_or(bytes.len(), |p| j + p);
            let group: String = bytes[j + 1..close].iter().collect();
            for item in group.split(',') {
                let item = item.split_whitespace().next().unwrap_or("");
                if !item.is_empty() {
                    out.push(prefix.iter().cloned().chain(item.split("::").map(str::to_string)).collect());
                }
            }
            i = close;
        } else if prefix.len() > 1 {
            out.push(prefix);
        }
        i = j.max(i + 1);
    }
    out
}

/// The file `path` (seen from `from`) depends on: the deepest module of the path that is a
/// file; `None` for other crates and for paths into the file itself.
fn target(files: &BTreeMap<Module, PathBuf>, from: &Module, path: &[String]) -> Option<Module> {
    let (mut base, mut rest) = (from.clone(), path);
    match path.first().map(String::as_str) {
        Some("crate") => (base, rest) = (Vec::new(), &path[1..]),
        Some("self") => rest = &path[1..],
        Some("super") => {
            while rest.first().map(String::as_str) == Some("super") {
                base.pop();
                rest = &rest[1..];
            }
        }
        Some(first) if files.contains_key(&[from.clone(), vec![first.to_string()]].concat()) => {}
        _ => return None,
    }
    let mut found = files.contains_key(&base).then(|| base.clone());
    for segment in rest {
        base.push(segment.clone());
        if !files.contains_key(&base) {
            break;
        }
        found = Some(base.clone());
    }
    found.filter(|t| t != from)
}

/// The cycles of a crate's file graph (each a list of files, empty when there are none).
fn cycles(src: &Path) -> Vec<Vec<String>> {
    let files = modules(src);
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (module, path) in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let deps = paths_in(&code_of(&text)).iter().filter_map(|p| target(&files, module, p)).collect();
        edges.insert(module.clone(), deps);
    }
    strongly_connected(&edges)
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|c| c.iter().map(|m| if m.is_empty() { "lib".into() } else { m.join("/") }).collect())
        .collect()
}

/// Kosaraju's strongly connected components.
fn strongly_connected(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    fn finish(v: &Module, edges: &BTreeMap<Module, BTreeSet<Module>>, seen: &mut BTreeSet<Module>, order: &mut Vec<Module>) {
        if !seen.insert(v.clone()) {
            return;
        }
        for w in edges.get(v).into_iter().flatten() {
            finish(w, edges, seen, order);
        }
        order.push(v.clone());
    }
    let mut reverse: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (v, ws) in edges {
        for w in ws {
            reverse.entry(w.clone()).or_default().insert(v.clone());
        }
    }
    let (mut seen, mut order) = (BTreeSet::new(), Vec::new());
    for v in edges.keys() {
        finish(v, edges, &mut seen, &mut order);
    }
    let mut assigned = BTreeSet::new();
    let mut components = Vec::new();
    for v in order.iter().rev() {
        let mut component = Vec::new();
        finish(v, &reverse, &mut assigned, &mut component);
        if !component.is_empty() {
            components.push(component);
        }
    }
    components
}

#[test]
fn no_crate_has_an_import_cycle_between_its_files() {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(crates_dir()).unwrap().flatten() {
        let src = entry.path().join("src");
        if src.is_dir() {
            for cycle in cycles(&src) {
                found.push(format!("{}: {}", entry.file_name().to_string_lossy(), cycle.join(" <-> ")));
            }
        }
    }
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

#[test]
fn the_detector_sees_a_cycle_and_no_more() {
    let dir = std::env::temp_dir().join(format!("module-graph-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("b")).unwrap();
    std::fs::write(dir.join("lib.rs"), "pub mod a;\npub mod b;\n").unwrap();
    std::fs::write(dir.join("a.rs"), "use crate::b::{c::Thing, Other};\npub struct X;\n").unwrap();
    std::fs::write(dir.join("b/mod.rs"), "pub mod c;\npub struct Other;\n").unwrap();
    std::fs::write(dir.join("b/c.rs"), "pub struct Thing(super::super::a::X);\n").unwrap();
    let mut found = cycles(&dir);
    found.iter_mut().for_each(|c| c.sort());
    assert_eq!(found, vec![vec!["a".to_string(), "b/c".to_string()]]);
    // A doc comment or a test module naming the other file is no dependency.
    std::fs::write(dir.join("b/c.rs"), "/// See crate::a::X.\npub struct Thing;\n#[cfg(test)]\nmod tests { use crate::a::X; }\n").unwrap();
    assert!(cycles(&dir).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}
