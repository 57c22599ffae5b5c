//! `rlvmr logprobs` and `rlvmr generate`: thin wrappers over the `policy` crate.

use std::io::{self, BufRead, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use candle_core::{DType, Device};
use policy::chat::{apply_chatml, ChatMessage};
use policy::sample::{sample_cached, SampleOptions};

fn load(model: &str) -> Result<(policy::Llama, policy::Tokenizer)> {
    policy::load_model(model, DType::F32, &Device::Cpu)
        .with_context(|| format!("loading model `{model}`"))
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct LogprobsRequest {
    prompt: String,
    response: String,
}

/// Read JSON lines `{"prompt", "response"}` (from `input` or stdin), write one JSON line per
/// input line (to stdout): the scored ids and log-probs, or `{"line": n, "error": ..}`.
/// Exit status 1 when any line failed.
pub fn logprobs(model: &str, input: Option<&Path>) -> Result<ExitCode> {
    let reader: Box<dyn BufRead> = match input {
        Some(p) => Box::new(io::BufReader::new(
            std::fs::File::open(p).with_context(|| format!("opening {}", p.display()))?,
        )),
        None => Box::new(io::stdin().lock()),
    };
    let (model, tok) = load(model)?;
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let mut failed = 0usize;
    crate::jsonl::for_each_line(reader, |n, line| {
        let result = line
            .and_then(|l| serde_json::from_str::<LogprobsRequest>(l).map_err(|e| format!("malformed JSON line: {e}")))
            .and_then(|req| {
                policy::logprobs::score_text(&model, &tok, &req.prompt, &req.response)
                    .map_err(|e| e.to_string())
            });
        let json = match result {
            Ok(scored) => serde_json::to_string(&scored)?,
            Err(msg) => {
                failed += 1;
                eprintln!("error: line {n}: {msg}");
                serde_json::json!({ "line": n, "error": msg }).to_string()
            }
        };
        writeln!(out, "{json}")?;
        Ok(())
    })?;
    out.flush()?;
    Ok(if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Options of `rlvmr generate`.
pub struct GenerateArgs<'a> {
    pub model: &'a str,
    pub prompt: &'a str,
    pub raw: bool,
    pub system: Option<&'a str>,
    pub max_new_tokens: usize,
    pub temperature: f64,
    pub seed: u64,
}

/// Generate one continuation and print it as a JSON line.
pub fn generate(args: &GenerateArgs) -> Result<ExitCode> {
    let (model, tok) = load(args.model)?;
    let text = if args.raw {
        args.prompt.to_string()
    } else {
        let mut msgs = Vec::new();
        if let Some(s) = args.system {
            msgs.push(ChatMessage::system(s));
        }
        msgs.push(ChatMessage::user(args.prompt));
        apply_chatml(&msgs, true)
    };
    let ids = tok.encode(&text)?;
    let opts = SampleOptions {
        max_new_tokens: args.max_new_tokens,
        temperature: args.temperature,
        seed: args.seed,
        ..SampleOptions::chat_defaults(&tok)
    };
    let s = sample_cached(&model, &tok, &ids, &opts)?;
    let json = serde_json::json!({
        "text": s.text, "ids": s.ids, "logprobs": s.logprobs, "stopped": s.stopped(),
        "stop_reason": s.stop_reason,
    });
    println!("{json}");
    Ok(ExitCode::SUCCESS)
}
