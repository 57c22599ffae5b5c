//! A client for OpenAI-compatible chat-completion servers (vLLM, SGLang, llama.cpp's server,
//! hosted APIs): one request per turn, retried with exponential backoff on 429, 5xx, a
//! dropped connection, a timeout or a malformed reply; 401, 403 and 404 stop the run (every
//! later request would fail the same way). The API key is read from an environment variable
//! and never appears in an error, a log line or a `Debug` print.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::error::{Result, TrainerError};
pub use crate::usage::{RequestStats, TokenUsage};

/// Where the server is and how to talk to it.
#[derive(Clone, PartialEq)]
pub struct ServedOptions {
    /// The API root, e.g. `http://127.0.0.1:8000/v1` (`/chat/completions` is appended).
    pub base_url: String,
    /// The `model` field of every request.
    pub model: String,
    /// The environment variable holding the API key (a missing variable sends no key).
    pub api_key_env: String,
    /// Requests sent at once at most.
    pub max_in_flight: usize,
    /// The whole request's time limit, connecting and reading included.
    pub timeout: Duration,
    /// Attempts after the first one on a retryable failure.
    pub retries: usize,
    /// The first retry's wait; each later one doubles it (a `Retry-After` header wins).
    pub backoff: Duration,
    /// Ask for the sampled tokens' log-probs.
    pub logprobs: bool,
    /// More request fields (e.g. vLLM's `top_k`, llama.cpp's `repeat_penalty`).
    pub extra: Map<String, Value>,
}

impl std::fmt::Debug for ServedOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServedOptions")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key_env", &self.api_key_env)
            .field("max_in_flight", &self.max_in_flight)
            .field("timeout", &self.timeout)
            .field("retries", &self.retries)
            .finish_non_exhaustive()
    }
}

/// The longest wait between two attempts, whatever a `Retry-After` header asks.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// How much of a server's error body an error message quotes.
const QUOTED_CHARS: usize = 300;

/// One chat message.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn user(content: impl Into<String>) -> Message {
        Message {
            role: "user".into(),
            content: content.into(),
        }
    }

    pub fn system(content: impl Into<String>) -> Message {
        Message {
            role: "system".into(),
            content: content.into(),
        }
    }
}

/// How one reply is sampled.
#[derive(Debug, Clone, PartialEq)]
pub struct Sampling {
    pub max_tokens: usize,
    pub temperature: f64,
    pub top_p: f64,
    /// Sent as `seed` (servers that honour it sample reproducibly).
    pub seed: Option<u64>,
    pub stop: Vec<String>,
}

/// One parsed reply.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Completion {
    pub text: String,
    /// `stop`, `length`, ... as the server said.
    pub finish_reason: Option<String>,
    pub usage: Option<TokenUsage>,
    /// Each generated token's log-prob, when the server returned them.
    pub logprobs: Vec<f32>,
}

/// Why a request gave no completion.
#[derive(Debug, Clone, PartialEq)]
pub enum RequestError {
    /// The run cannot go on (bad key, wrong URL or model): every request would fail.
    Fatal(String),
    /// This request failed (after its retries); the others may succeed.
    Failed(String),
}

impl std::fmt::Display for RequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestError::Fatal(m) | RequestError::Failed(m) => f.write_str(m),
        }
    }
}

/// What one attempt's failure means.
enum Attempt {
    /// Try again, after the given wait when the server named one.
    Retry(String, Option<Duration>),
    Fail(String),
    Fatal(String),
}

#[derive(Default)]
struct Counters {
    requests: AtomicUsize,
    retries: AtomicUsize,
    failed: AtomicUsize,
    prompt_tokens: AtomicUsize,
    completion_tokens: AtomicUsize,
}

/// A connection pool to one server; `chat` may be called from many threads at once.
pub struct Client {
    agent: ureq::Agent,
    chat_url: String,
    models_url: String,
    api_key: Option<String>,
    options: ServedOptions,
    counters: Counters,
}

impl Client {
    /// Checks the options and reads the key from the environment (nothing is sent yet).
    pub fn new(options: ServedOptions) -> Result<Client> {
        let base = options.base_url.trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(TrainerError::Invalid(format!(
                "a served model's URL must start with http:// or https://, got {base:?}"
            )));
        }
        let api_key = std::env::var(&options.api_key_env)
            .ok()
            .filter(|k| !k.trim().is_empty());
        let agent = ureq::AgentBuilder::new()
            .timeout(options.timeout)
            .max_idle_connections_per_host(options.max_in_flight.max(1))
            .build();
        Ok(Client {
            agent,
            chat_url: format!("{base}/chat/completions"),
            models_url: format!("{base}/models"),
            api_key,
            options,
            counters: Counters::default(),
        })
    }

    /// [`Client::new`], then [`Client::check`]: a wrong URL or key fails before any request.
    pub fn connect(options: ServedOptions) -> Result<Client> {
        let client = Client::new(options)?;
        client.check()?;
        Ok(client)
    }

    pub fn options(&self) -> &ServedOptions {
        &self.options
    }

    /// `openai:MODEL (BASE_URL)`, for logs and summaries.
    pub fn name(&self) -> String {
        format!("openai:{} ({})", self.options.model, self.options.base_url)
    }

    /// Asks `GET /models` once, so an unreachable server or a refused key is a clear error
    /// before any episode starts. Other answers (a server without that route) pass.
    pub fn check(&self) -> Result<()> {
        let request = self.authorised(self.agent.get(&self.models_url));
        match request.call() {
            Ok(_) => Ok(()),
            Err(ureq::Error::Status(status @ (401 | 403), response)) => {
                Err(TrainerError::Invalid(self.fatal_status(status, &body_of(response))))
            }
            Err(ureq::Error::Status(..)) => Ok(()),
            Err(ureq::Error::Transport(t)) => Err(TrainerError::Invalid(format!(
                "cannot reach the served model at {}: {}",
                self.options.base_url,
                transport_message(&t)
            ))),
        }
    }

    /// One chat completion, retried as the module says.
    pub fn chat(&self, messages: &[Message], sampling: &Sampling) -> Result<Completion, RequestError> {
        let body = self.request_body(messages, sampling).to_string();
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        let mut attempt = 0;
        loop {
            let failure = match self.send_once(&body) {
                Ok(completion) => {
                    if let Some(u) = completion.usage {
                        self.counters.prompt_tokens.fetch_add(u.prompt_tokens, Ordering::Relaxed);
                        self.counters
                            .completion_tokens
                            .fetch_add(u.completion_tokens, Ordering::Relaxed);
                    }
                    return Ok(completion);
                }
                Err(failure) => failure,
            };
            let error = match failure {
                Attempt::Retry(_, wait) if attempt < self.options.retries => {
                    self.counters.retries.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(wait.unwrap_or_else(|| self.backoff(attempt)).min(MAX_BACKOFF));
                    attempt += 1;
                    continue;
                }
                Attempt::Retry(message, _) => RequestError::Failed(format!(
                    "{message} (gave up after {} attempts)",
                    attempt + 1
                )),
                Attempt::Fail(message) => RequestError::Failed(message),
                Attempt::Fatal(message) => RequestError::Fatal(message),
            };
            self.counters.failed.fetch_add(1, Ordering::Relaxed);
            return Err(error);
        }
    }

    /// The counts so far.
    pub fn stats(&self) -> RequestStats {
        let c = &self.counters;
        let get = |a: &AtomicUsize| a.load(Ordering::Relaxed);
        RequestStats {
            requests: get(&c.requests),
            retries: get(&c.retries),
            failed: get(&c.failed),
            prompt_tokens: get(&c.prompt_tokens),
            completion_tokens: get(&c.completion_tokens),
        }
    }

    fn backoff(&self, attempt: usize) -> Duration {
        self.options.backoff.saturating_mul(1 << attempt.min(16))
    }

    fn authorised(&self, request: ureq::Request) -> ureq::Request {
        match &self.api_key {
            Some(key) => request.set("Authorization", &format!("Bearer {key}")),
            None => request,
        }
    }

    fn request_body(&self, messages: &[Message], sampling: &Sampling) -> Value {
        let mut body = json!({
            "model": self.options.model,
            "messages": messages,
            "max_tokens": sampling.max_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "stream": false,
        });
        let fields = body.as_object_mut().expect("a JSON object literal");
        if !sampling.stop.is_empty() {
            fields.insert("stop".into(), json!(sampling.stop));
        }
        if let Some(seed) = sampling.seed {
            // 31 bits: some servers keep the seed in an int32.
            fields.insert("seed".into(), json!(seed & 0x7fff_ffff));
        }
        if self.options.logprobs {
            fields.insert("logprobs".into(), json!(true));
            fields.insert("top_logprobs".into(), json!(0));
        }
        for (key, value) in &self.options.extra {
            fields.insert(key.clone(), value.clone());
        }
        body
    }

    fn send_once(&self, body: &str) -> Result<Completion, Attempt> {
        let request = self
            .authorised(self.agent.post(&self.chat_url))
            .set("Content-Type", "application/json");
        match request.send_string(body) {
            Ok(response) => {
                let text = response
                    .into_string()
                    .map_err(|e| Attempt::Retry(format!("reading the reply: {e}"), None))?;
                parse_completion(&text).map_err(|e| Attempt::Retry(e, None))
            }
            Err(ureq::Error::Status(status, response)) => {
                let retry_after = response
                    .header("retry-after")
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .filter(|s| s.is_finite() && *s >= 0.0)
                    .map(Duration::from_secs_f64);
                let body = body_of(response);
                Err(match status {
                    401 | 403 | 404 => Attempt::Fatal(self.fatal_status(status, &body)),
                    408 | 429 | 500..=599 => {
                        Attempt::Retry(format!("the server answered {status}: {body}"), retry_after)
                    }
                    _ => Attempt::Fail(format!("the server answered {status}: {body}")),
                })
            }
            Err(ureq::Error::Transport(t)) => Err(Attempt::Retry(transport_message(&t), None)),
        }
    }

    fn fatal_status(&self, status: u16, body: &str) -> String {
        let hint = match status {
            401 | 403 => format!(
                "the key was refused; it is read from ${}{}",
                self.options.api_key_env,
                if self.api_key.is_some() { "" } else { ", which is not set" }
            ),
            _ => format!(
                "check the URL and the model name {:?}",
                self.options.model
            ),
        };
        format!(
            "served model at {}: the server answered {status} ({hint}): {body}",
            self.options.base_url
        )
    }
}

/// `f` of every item, at most `in_flight` running at once (one thread each), in order.
pub fn map_in_flight<T: Sync, R: Send>(
    items: &[T],
    in_flight: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let done: std::sync::Mutex<Vec<Option<R>>> =
        std::sync::Mutex::new(items.iter().map(|_| None).collect());
    let worker = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(item) = items.get(i) else { return };
        let result = f(item);
        done.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(result);
    };
    std::thread::scope(|scope| {
        for _ in 1..in_flight.clamp(1, items.len().max(1)) {
            scope.spawn(worker);
        }
        worker();
    });
    done.into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|r| r.expect("every item was taken by a worker"))
        .collect()
}

/// A failed connection in words (ureq's own message, which names the host, not the key).
fn transport_message(t: &ureq::Transport) -> String {
    format!("connection failed: {t}")
}

/// The start of an error reply's body: its `error.message` when it is OpenAI's JSON.
fn body_of(response: ureq::Response) -> String {
    let text = response.into_string().unwrap_or_default();
    let message = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| {
            let error = v.get("error").or_else(|| v.get("detail"))?;
            Some(match error.get("message").and_then(Value::as_str) {
                Some(m) => m.to_string(),
                None => error.to_string(),
            })
        })
        .unwrap_or(text);
    let message = message.trim();
    match message.char_indices().nth(QUOTED_CHARS) {
        Some((cut, _)) => format!("{}...", &message[..cut]),
        None if message.is_empty() => "(empty body)".into(),
        None => message.to_string(),
    }
}

/// Reads a chat-completion reply: the first choice's text and finish reason, the usage,
/// and the log-probs in the chat layout (`logprobs.content[].logprob`) or the completions
/// one (`logprobs.token_logprobs`).
pub fn parse_completion(body: &str) -> Result<Completion, String> {
    let value: Value = serde_json::from_str(body).map_err(|e| {
        let start: String = body.chars().take(80).collect();
        format!("the reply is not JSON ({e}): {start:?}")
    })?;
    let choice = value
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| "the reply has no choices[0]".to_string())?;
    let text = match (choice.pointer("/message/content"), choice.get("text")) {
        (Some(Value::String(s)), _) | (None, Some(Value::String(s))) => s.clone(),
        // A message without text (e.g. a refusal or a tool call) is an empty reply.
        (Some(Value::Null), _) => String::new(),
        (Some(other), _) => return Err(format!("choices[0].message.content is not text: {other}")),
        (None, _) => return Err("choices[0] has no message.content".into()),
    };
    let finish_reason = choice
        .get("finish_reason")
        .and_then(Value::as_str)
        .map(str::to_string);
    let usage = value.get("usage").and_then(|u| {
        Some(TokenUsage {
            prompt_tokens: u.get("prompt_tokens")?.as_u64()? as usize,
            completion_tokens: u.get("completion_tokens")?.as_u64()? as usize,
        })
    });
    Ok(Completion {
        text,
        finish_reason,
        usage,
        logprobs: logprobs_of(choice),
    })
}

fn logprobs_of(choice: &Value) -> Vec<f32> {
    let Some(lp) = choice.get("logprobs").filter(|v| !v.is_null()) else {
        return Vec::new();
    };
    if let Some(content) = lp.get("content").and_then(Value::as_array) {
        return content
            .iter()
            .filter_map(|t| t.get("logprob").and_then(Value::as_f64))
            .map(|x| x as f32)
            .collect();
    }
    lp.get("token_logprobs")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_f64).map(|x| x as f32).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_chat_reply_with_usage_and_logprobs() {
        let body = r#"{"choices":[{"message":{"role":"assistant","content":"<planning>x</planning>"},
            "finish_reason":"stop","logprobs":{"content":[{"token":"<","logprob":-0.5},{"token":"p","logprob":-1.25}]}}],
            "usage":{"prompt_tokens":12,"completion_tokens":2,"total_tokens":14}}"#;
        let c = parse_completion(body).unwrap();
        assert_eq!(c.text, "<planning>x</planning>");
        assert_eq!(c.finish_reason.as_deref(), Some("stop"));
        assert_eq!(
            c.usage,
            Some(TokenUsage {
                prompt_tokens: 12,
                completion_tokens: 2
            })
        );
        assert_eq!(c.logprobs, vec![-0.5, -1.25]);
    }

    #[test]
    fn null_content_and_no_logprobs_or_usage_are_fine() {
        let c = parse_completion(r#"{"choices":[{"message":{"content":null},"logprobs":null}]}"#).unwrap();
        assert_eq!(c, Completion::default());
    }

    #[test]
    fn malformed_replies_say_what_is_wrong() {
        assert!(parse_completion("<html>oops").unwrap_err().contains("not JSON"));
        assert!(parse_completion(r#"{"choices":[]}"#).unwrap_err().contains("choices[0]"));
        assert!(parse_completion(r#"{"choices":[{"message":{"content":3}}]}"#)
            .unwrap_err()
            .contains("not text"));
    }

    fn options(base_url: &str) -> ServedOptions {
        ServedOptions {
            base_url: base_url.into(),
            model: "m".into(),
            api_key_env: "RLVMR_TEST_UNSET_KEY".into(),
            max_in_flight: 2,
            timeout: Duration::from_secs(1),
            retries: 0,
            backoff: Duration::from_millis(1),
            logprobs: true,
            extra: Map::new(),
        }
    }

    #[test]
    fn the_request_carries_sampling_seed_stop_and_extra_fields() {
        let mut opts = options("http://h/v1/");
        opts.extra.insert("repeat_penalty".into(), json!(1.0));
        let client = Client::new(opts).unwrap();
        assert_eq!(client.chat_url, "http://h/v1/chat/completions");
        let body = client.request_body(
            &[Message::user("hi")],
            &Sampling {
                max_tokens: 7,
                temperature: 0.0,
                top_p: 1.0,
                seed: Some(u64::MAX),
                stop: vec!["</action>".into()],
            },
        );
        assert_eq!(body["messages"], json!([{"role": "user", "content": "hi"}]));
        assert_eq!(body["max_tokens"], 7);
        assert_eq!(body["seed"], 0x7fff_ffffu64);
        assert_eq!(body["stop"], json!(["</action>"]));
        assert_eq!(body["logprobs"], true);
        assert_eq!(body["repeat_penalty"], 1.0);
    }

    #[test]
    fn map_in_flight_keeps_order_and_bounds_concurrency() {
        let running = AtomicUsize::new(0);
        let peak = AtomicUsize::new(0);
        let items: Vec<usize> = (0..40).collect();
        let out = map_in_flight(&items, 3, |&i| {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(2));
            running.fetch_sub(1, Ordering::SeqCst);
            i * 2
        });
        assert_eq!(out, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        assert!(peak.load(Ordering::SeqCst) <= 3);
        assert!(map_in_flight(&[] as &[usize], 4, |&i| i).is_empty());
    }

    #[test]
    fn a_url_without_a_scheme_is_refused() {
        let err = Client::new(options("localhost:8000/v1")).err().unwrap();
        assert!(err.to_string().contains("\"localhost:8000/v1\""), "{err}");
    }
}
