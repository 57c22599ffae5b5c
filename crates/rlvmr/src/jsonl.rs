//! Reading JSON-lines input the same way in every command: lines are numbered
//! from 1, blank lines are skipped, and a line that is not UTF-8 is handed on as
//! an error message (so the caller reports it and carries on with the rest).

use std::io::BufRead;

use anyhow::{Context, Result};

pub const NOT_UTF8: &str = "the line is not valid UTF-8";

/// Calls `f(line_number, line)` for every non-blank line of `reader`.
pub fn for_each_line(mut reader: impl BufRead, mut f: impl FnMut(usize, Result<&str, String>) -> Result<()>) -> Result<()> {
    let mut buf = Vec::new();
    let mut n = 0;
    loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf).context("reading input")? == 0 {
            return Ok(());
        }
        n += 1;
        match std::str::from_utf8(&buf) {
            Ok(text) if text.trim().is_empty() => {}
            Ok(text) => f(n, Ok(text))?,
            Err(_) => f(n, Err(NOT_UTF8.to_string()))?,
        }
    }
}
