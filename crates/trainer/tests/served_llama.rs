//! A real peer: llama.cpp's OpenAI-compatible server (`llama-cpp-python[server]` from PyPI,
//! in the venv `tools/llama_server_venv.sh` makes) serving the embedded SmolLM2 GGUF.
//! A few ALFWorld episodes are played through it with greedy decoding, and the first
//! step's reply must equal our own decoder's greedy reply on the same GGUF.
//!
//! The venv is made once by `tools/llama_server_venv.sh` (llama.cpp is compiled: minutes
//! on two cores) and cached in `$RLVMR_CACHE/llama-server-venv`; `RLVMR_LLAMA_SERVER_PYTHON`
//! names another python that has the package.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use policy::chat::{apply_chatml, ChatMessage};
use policy::sample::{sample_batch_with, SampleOptions};
use serde_json::{json, Map};
use trainer::collector::CollectorOptions;
use trainer::eval::{eval_tasks, evaluate};
use trainer::served::{ServedPolicy, ServedSampling};
use trainer::served::ServedOptions;

/// What SmolLM2's chat template (in the GGUF) puts first when a chat has no system message.
const SMOLLM2_DEFAULT_SYSTEM: &str = "You are a helpful AI assistant named SmolLM, trained by Hugging Face";
const MAX_TOKENS: usize = 96;

/// The server's python: `RLVMR_LLAMA_SERVER_PYTHON`, else the venv
/// `tools/llama_server_venv.sh` makes (once; later calls find it made).
fn server_python() -> &'static PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        if let Ok(p) = std::env::var("RLVMR_LLAMA_SERVER_PYTHON") {
            return PathBuf::from(p);
        }
        let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
        let out = Command::new("bash")
            .arg("tools/llama_server_venv.sh")
            .current_dir(&repo)
            .stderr(Stdio::inherit())
            .output()
            .expect("bash runs tools/llama_server_venv.sh");
        assert!(out.status.success(), "tools/llama_server_venv.sh failed");
        let stdout = String::from_utf8_lossy(&out.stdout);
        PathBuf::from(stdout.lines().last().expect("the script prints the python").trim())
    })
}

/// The server process, killed when dropped. It holds the lock that lets one server run at
/// a time: llama.cpp's worker threads spin while they wait for each other, so two servers
/// on two cores can starve each other past any timeout (a CI run saw both tests' requests
/// time out twice over).
struct LlamaServer {
    child: Child,
    url: String,
    log_path: PathBuf,
    _one_at_a_time: MutexGuard<'static, ()>,
}

impl LlamaServer {
    /// The end of the server's log, for failure messages.
    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.log_path).unwrap_or_default();
        let chars: Vec<char> = log.chars().collect();
        chars[chars.len().saturating_sub(2000)..].iter().collect()
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_server(python: &Path, gguf: &Path) -> LlamaServer {
    static ONE_SERVER: Mutex<()> = Mutex::new(());
    // A test that failed while holding the lock poisons it; the next one may still run.
    let one_at_a_time = ONE_SERVER.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).to_string();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let log_path = std::env::temp_dir().join(format!("rlvmr-llama-server-{port}.log"));
    let log = std::fs::File::create(&log_path).unwrap();
    let child = Command::new(python)
        .args(["-m", "llama_cpp.server", "--host", "127.0.0.1", "--n_ctx", "4096", "--n_threads"])
        .arg(&threads)
        .arg("--port")
        .arg(port.to_string())
        .arg("--model")
        .arg(gguf)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("the llama.cpp server starts");
    let mut server = LlamaServer {
        child,
        url: format!("http://127.0.0.1:{port}/v1"),
        log_path,
        _one_at_a_time: one_at_a_time,
    };
    let start = Instant::now();
    loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            panic!("the llama.cpp server exited with {status}:\n{}", server.log_tail());
        }
        if ureq::get(&format!("{}/models", server.url)).call().is_ok() {
            return server;
        }
        assert!(start.elapsed() < Duration::from_secs(180), "the llama.cpp server did not come up");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// How the tests reach `server`: no key, log-probs asked for.
fn options(server: &LlamaServer) -> ServedOptions {
    ServedOptions {
        base_url: server.url.clone(),
        model: "smollm2".into(),
        api_key_env: "RLVMR_TEST_NO_KEY".into(),
        max_in_flight: 2,
        // Generous: two requests queue on one server, and CI machines are shared.
        timeout: Duration::from_secs(300),
        retries: 1,
        backoff: Duration::from_millis(100),
        logprobs: true,
        extra: Map::new(),
    }
}

/// Our decoder's greedy reply to `prompt`, rendered as the GGUF's template renders a chat
/// of one user message.
fn local_greedy_reply(gguf: &Path, prompt: &str) -> String {
    let (model, tokenizer) = trainer::checkpoints::load_model(&gguf.display().to_string(), &candle_core::Device::Cpu).unwrap();
    let chat = [ChatMessage::system(SMOLLM2_DEFAULT_SYSTEM), ChatMessage::user(prompt)];
    let ids = tokenizer.encode(&apply_chatml(&chat, true)).unwrap();
    let opts = SampleOptions {
        max_new_tokens: MAX_TOKENS,
        temperature: 0.0,
        stop_strings: vec!["</action>".into()],
        ..SampleOptions::chat_defaults(&tokenizer)
    };
    let sampled = sample_batch_with(&model.inference().unwrap(), &tokenizer, &[ids], &opts).unwrap();
    tokenizer.decode(&sampled[0].ids, true).unwrap()
}

#[test]
fn llama_cpp_server_plays_alfworld_with_our_greedy_reply() {
    let gguf = policy::assets::default_model_path().expect("the embedded SmolLM2 GGUF");
    let server = start_server(server_python(), &gguf);
    let mut options = options(&server);
    // llama-cpp-python's default repeat penalty is 1.1; greedy means none.
    options.extra.insert("repeat_penalty".into(), json!(1.0));
    let sampling = ServedSampling {
        max_tokens: MAX_TOKENS,
        temperature: 0.0,
        top_p: 1.0,
        seed: 0,
    };
    let mut policy = ServedPolicy::connect(options, sampling).unwrap();
    let provider = common::alfworld("L0");
    let tasks = eval_tasks(provider.as_ref(), Some(2), 0);
    let collector = CollectorOptions {
        max_steps: 3,
        progress: false,
        ..CollectorOptions::default()
    };
    let evaluation = evaluate(provider.as_ref(), &mut policy, &tasks, "L0", &collector, 0).unwrap();
    let summary = &evaluation.summary;
    assert_eq!(
        summary.failed_episodes,
        0,
        "{:?}\nserver log:\n{}",
        evaluation.episodes.iter().map(|e| &e.error).collect::<Vec<_>>(),
        server.log_tail()
    );
    let requests = summary.requests.as_ref().unwrap();
    assert_eq!(requests.failed, 0);
    assert!(requests.prompt_tokens > 0 && requests.completion_tokens > 0);
    let first = &evaluation.episodes[0].steps[0];
    let usage = first.usage.expect("llama.cpp counts tokens");
    assert_eq!(first.logprobs.len(), usage.completion_tokens, "one log-prob per generated token");
    assert!(first.logprobs.iter().all(|&lp| lp <= 0.0));
    eprintln!("first reply ({} tokens): {:?}", usage.completion_tokens, first.output);
    assert_eq!(first.output, local_greedy_reply(&gguf, &first.prompt));
}

#[test]
fn llama_cpp_server_as_a_cold_start_teacher() {
    let gguf = policy::assets::default_model_path().expect("the embedded SmolLM2 GGUF");
    let server = start_server(server_python(), &gguf);
    let teacher = trainer::coldstart::teacher::Teacher::connect(options(&server), 0.0, 192).unwrap();
    let provider = common::alfworld("L0");
    let collector = CollectorOptions {
        progress: false,
        ..CollectorOptions::default()
    };
    let run = trainer::coldstart::coldstart(provider.as_ref(), 2, 0, trainer::coldstart::Detours::mistakes(0.0), trainer::envs::Protocol::Strict, 0, &collector, Some(&teacher)).unwrap();
    let report = run.teacher.unwrap();
    eprintln!("{report:?}");
    let steps: usize = run.episodes.iter().map(|e| e.steps.len()).sum();
    assert_eq!(report.trajectories, 2);
    assert_eq!(
        (report.requests.requests, report.requests.failed),
        (2, 0),
        "server log:\n{}",
        server.log_tail()
    );
    assert_eq!(report.teacher_steps + report.fallback_steps, steps);
    assert!(run.episodes.iter().all(|e| e.won));
}
