//! A served model as the policy, against a fake OpenAI-compatible server that misbehaves
//! on purpose: retries on 429, 5xx and dropped connections, a refused key, bodies that are
//! not JSON, a reply that never ends, an unreachable server, a server that dies mid-run.

mod common;

use std::time::{Duration, Instant};

use common::fake_openai::{Answer, FakeServer};
use serde_json::Map;
use trainer::collector::CollectorOptions;
use trainer::eval::{eval_tasks, evaluate};
use trainer::served::{ServedPolicy, ServedSampling};
use trainer::served::{Client, Message, RequestError, Sampling, ServedOptions};

const REPLY: &str = "<planning>Look around first.</planning>\n<action>look";

fn options(url: &str, key_env: &str) -> ServedOptions {
    ServedOptions {
        base_url: url.into(),
        model: "fake-model".into(),
        api_key_env: key_env.into(),
        max_in_flight: 4,
        timeout: Duration::from_secs(2),
        retries: 3,
        backoff: Duration::from_millis(5),
        logprobs: true,
        extra: Map::new(),
    }
}

fn sampling() -> Sampling {
    Sampling {
        max_tokens: 64,
        temperature: 0.0,
        top_p: 1.0,
        seed: Some(1),
        stop: vec!["</action>".into()],
    }
}

fn chat(client: &Client) -> Result<String, RequestError> {
    client
        .chat(&[Message::user("hello")], &sampling())
        .map(|c| c.text)
}

#[test]
fn rate_limits_server_errors_and_dropped_connections_are_retried() {
    let server = FakeServer::start(|n, _| match n {
        0 => Answer::Reply(429, vec![("Retry-After".into(), "0".into())], r#"{"error":{"message":"slow down"}}"#.into()),
        1 => Answer::status(503, "busy"),
        2 => Answer::Drop,
        _ => Answer::chat("done"),
    });
    let client = Client::new(options(&server.url, "RLVMR_TEST_NO_KEY")).unwrap();
    assert_eq!(chat(&client).unwrap(), "done");
    let stats = client.stats();
    assert_eq!((stats.requests, stats.retries, stats.failed), (1, 3, 0));
    assert_eq!((stats.prompt_tokens, stats.completion_tokens), (100, 2));
    assert_eq!(server.seen().len(), 4);
    // No key in the environment: no Authorization header.
    assert!(server.seen()[0].authorization.is_none());
}

#[test]
fn retries_run_out_into_a_failed_request_that_says_why() {
    let server = FakeServer::start(|_, _| Answer::status(500, r#"{"error":{"message":"kaput"}}"#));
    let client = Client::new(options(&server.url, "RLVMR_TEST_NO_KEY")).unwrap();
    let err = chat(&client).unwrap_err();
    assert!(matches!(err, RequestError::Failed(_)), "{err:?}");
    assert!(err.to_string().contains("500") && err.to_string().contains("kaput"), "{err}");
    assert!(err.to_string().contains("4 attempts"), "{err}");
    assert_eq!(client.stats().failed, 1);
}

#[test]
fn a_refused_key_stops_the_run_and_never_shows_the_key() {
    std::env::set_var("RLVMR_TEST_KEY_401", "sk-very-secret-0001");
    let server = FakeServer::start(|_, _| Answer::status(401, r#"{"error":{"message":"bad key"}}"#));
    let client = Client::new(options(&server.url, "RLVMR_TEST_KEY_401")).unwrap();
    let err = chat(&client).unwrap_err();
    let RequestError::Fatal(message) = &err else { panic!("{err:?}") };
    assert!(message.contains("401") && message.contains("$RLVMR_TEST_KEY_401"), "{message}");
    assert!(!message.contains("sk-very-secret"), "{message}");
    assert!(!format!("{:?}", client.options()).contains("sk-very-secret"));
    // The key went to the server, once: a refused key is not retried.
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].authorization.as_deref(), Some("Bearer sk-very-secret-0001"));
}

#[test]
fn a_body_that_is_not_json_is_retried_then_fails_the_request() {
    let server = FakeServer::start(|_, _| Answer::Reply(200, vec![], "<html>proxy error".into()));
    let client = Client::new(options(&server.url, "RLVMR_TEST_NO_KEY")).unwrap();
    let err = chat(&client).unwrap_err();
    assert!(err.to_string().contains("not JSON"), "{err}");
    assert_eq!(client.stats().retries, 3);
}

#[test]
fn a_reply_that_never_ends_is_cut_by_the_timeout() {
    let server = FakeServer::start(|n, _| if n == 0 { Answer::NeverEnds } else { Answer::chat("late") });
    let mut opts = options(&server.url, "RLVMR_TEST_NO_KEY");
    opts.timeout = Duration::from_millis(500);
    let client = Client::new(opts).unwrap();
    let start = Instant::now();
    assert_eq!(chat(&client).unwrap(), "late");
    assert!(start.elapsed() < Duration::from_secs(10), "{:?}", start.elapsed());
    assert_eq!(client.stats().retries, 1);
}

#[test]
fn an_unreachable_server_is_a_clear_error_before_any_episode() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}/v1");
    let sampling = ServedSampling {
        max_tokens: 8,
        temperature: 0.0,
        top_p: 1.0,
        seed: 0,
    };
    let err = ServedPolicy::connect(options(&url, "RLVMR_TEST_NO_KEY"), sampling)
        .err()
        .expect("nothing listens there");
    assert!(err.to_string().contains("cannot reach the served model at http://127.0.0.1:"), "{err}");
}

fn served_policy(url: &str) -> ServedPolicy {
    let sampling = ServedSampling {
        max_tokens: 64,
        temperature: 0.7,
        top_p: 1.0,
        seed: 3,
    };
    ServedPolicy::connect(options(url, "RLVMR_TEST_NO_KEY"), sampling).unwrap()
}

fn collector(max_steps: usize) -> CollectorOptions {
    CollectorOptions {
        max_steps,
        progress: false,
        ..CollectorOptions::default()
    }
}

#[test]
fn episodes_played_through_a_server_record_its_prompts_tokens_and_logprobs() {
    let server = FakeServer::start(|_, _| Answer::chat(REPLY));
    let provider = common::alfworld("L0");
    let tasks = eval_tasks(provider.as_ref(), Some(3), 0);
    let mut policy = served_policy(&server.url);
    let evaluation = evaluate(provider.as_ref(), &mut policy, &tasks, "L0", &collector(4), 0).unwrap();
    let steps: Vec<_> = evaluation.episodes.iter().flat_map(|e| &e.steps).collect();
    assert_eq!(steps.len(), 12);
    let seen = server.seen();
    assert_eq!(seen.len(), 12);
    // Each request is the turn's prompt as the one user message, with the run's sampling.
    for step in &steps {
        let sent = seen
            .iter()
            .find(|s| s.body["messages"][0]["content"] == step.prompt.as_str())
            .expect("every step's prompt was sent");
        assert_eq!(sent.body["messages"].as_array().unwrap().len(), 1);
        assert_eq!(sent.body["model"], "fake-model");
        assert_eq!(sent.body["temperature"], 0.7);
        assert_eq!(sent.body["stop"][0], "</action>");
        // The server dropped the stop string; the record has it back.
        assert_eq!(step.output, format!("{REPLY}</action>"));
        assert!(step.format_valid && step.action == "look");
        assert_eq!(step.logprobs, vec![-0.25, -0.5]);
        assert_eq!(step.usage.unwrap().completion_tokens, 2);
    }
    // Every (episode, step) gets its own seed, the same in a second run.
    let seeds: std::collections::BTreeSet<u64> = seen.iter().map(|s| s.body["seed"].as_u64().unwrap()).collect();
    assert_eq!(seeds.len(), 12);
    let mut again = served_policy(&server.url);
    evaluate(provider.as_ref(), &mut again, &tasks, "L0", &collector(4), 0).unwrap();
    let seeds_again: std::collections::BTreeSet<u64> =
        server.seen()[12..].iter().map(|s| s.body["seed"].as_u64().unwrap()).collect();
    assert_eq!(seeds, seeds_again);
    let summary = &evaluation.summary;
    let requests = summary.requests.as_ref().expect("a served policy reports its requests");
    assert_eq!((requests.requests, requests.retries, requests.failed), (12, 0, 0));
    assert_eq!(summary.throughput.generated_tokens, 24);
    assert!(trainer::eval::table(summary).contains("requests: 12 sent, 0 retries, 0 failed"));
    assert!(summary.policy.starts_with("openai:fake-model"));
}

#[test]
fn a_server_that_dies_mid_run_fails_episodes_not_the_run() {
    let server = FakeServer::start(|_, _| Answer::chat(REPLY));
    let provider = common::alfworld("L0");
    let tasks = eval_tasks(provider.as_ref(), Some(4), 0);
    let mut policy = served_policy(&server.url);
    let evaluation = std::thread::scope(|scope| {
        // Kill the server once the first steps are answered.
        scope.spawn(|| {
            let start = Instant::now();
            while server.seen().len() < 8 && start.elapsed() < Duration::from_secs(60) {
                std::thread::sleep(Duration::from_millis(1));
            }
            server.stop();
        });
        evaluate(provider.as_ref(), &mut policy, &tasks, "L0", &collector(6), 0)
    })
    .expect("a dead server fails episodes, not the run");
    let summary = &evaluation.summary;
    assert_eq!(summary.overall.episodes, 4);
    assert_eq!(summary.failed_episodes, 4);
    for e in &evaluation.episodes {
        let error = e.error.as_deref().unwrap();
        assert!(error.contains("policy failed at step") && error.contains("gave up after 4 attempts"), "{error}");
        assert!(!e.steps.is_empty(), "steps before the server died are kept");
    }
    let requests = summary.requests.as_ref().unwrap();
    assert_eq!(requests.failed, 4);
    assert_eq!(requests.retries, 12);
    assert!(trainer::eval::table(summary).contains("failed episodes (environment or policy error): 4"));
}

#[test]
fn sciworld_is_played_through_a_server_too() {
    let server = FakeServer::start(|_, _| Answer::chat("<explore>Find out what is here.</explore>\n<action>look around"));
    let provider = trainer::envs::open_env("sciworld", "L0", None, false).unwrap();
    let tasks = eval_tasks(provider.as_ref(), Some(1), 0);
    let mut policy = served_policy(&server.url);
    let evaluation = evaluate(provider.as_ref(), &mut policy, &tasks, "L0", &collector(2), 0).unwrap();
    let episode = &evaluation.episodes[0];
    assert!(episode.error.is_none(), "{:?}", episode.error);
    assert_eq!(episode.steps.len(), 2);
    assert!(episode.steps.iter().all(|s| s.action == "look around" && s.format_valid));
    assert_eq!(server.seen()[0].body["messages"][0]["content"], episode.steps[0].prompt.as_str());
    assert_eq!(evaluation.summary.env, "sciworld");
}

#[test]
fn a_refusal_after_answers_fails_episodes_and_keeps_what_was_played() {
    // The key is revoked mid-run: the first turn is answered, every later request is 401.
    let server = FakeServer::start(|n, _| if n < 3 { Answer::chat(REPLY) } else { Answer::status(401, "revoked") });
    let provider = common::alfworld("L0");
    let tasks = eval_tasks(provider.as_ref(), Some(3), 0);
    let mut policy = served_policy(&server.url);
    let evaluation = evaluate(provider.as_ref(), &mut policy, &tasks, "L0", &collector(5), 0).unwrap();
    assert_eq!(evaluation.summary.failed_episodes, 3);
    for e in &evaluation.episodes {
        assert_eq!(e.steps.len(), 1, "the answered step is kept");
        assert!(e.error.as_deref().unwrap().contains("401"), "{:?}", e.error);
    }
    assert_eq!(evaluation.summary.requests.as_ref().unwrap().retries, 0, "a refusal is not retried");
}
