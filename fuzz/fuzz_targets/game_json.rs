//! Any bytes as a game file: load errors are fine, panics are not; a game that
//! loads must survive arbitrary commands.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(game) = textworld::Game::from_json(text) else { return };
    let Ok((mut session, _)) = textworld::Session::start(std::sync::Arc::new(game)) else { return };
    for line in text.lines().take(8) {
        let _ = session.step(line);
    }
});
