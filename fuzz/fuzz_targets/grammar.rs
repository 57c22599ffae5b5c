//! The text-grammar parsers on arbitrary text.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = textworld::grammar::Grammar::parse(text);
    let _ = textworld::grammar::parse_symbols(text);
    let _ = textworld::grammar::parse_query(text);
    let _ = textworld::grammar::parse_expr(text);
    let _ = textworld::pddl::parse_domain(text);
    let _ = textworld::pddl::parse_problem(text);
});
