//! `rlvmr eval --policy openai:BASE_URL --model-name NAME` end to end against a fake
//! OpenAI-compatible server: the table and run directory, and clear errors for an
//! unreachable server, a refused key, a missing model name, and training a served model.

mod harness;

#[path = "../../trainer/tests/common/mod.rs"]
mod common;

use std::path::Path;

use common::fake_openai::{Answer, FakeServer};

use harness::{rlvmr_env, zip, scratch};

fn eval_args<'a>(policy: &'a str, zip: &'a str, out: &'a Path) -> Vec<&'a str> {
    vec![
        "eval", "--policy", policy, "--model-name", "fake-model", "--episodes", "2", "--max-steps", "3",
        "--data", zip, "--out", out.to_str().unwrap(),
    ]
}

#[test]
fn eval_through_a_served_model_prints_the_table_with_request_counts() {
    let server = FakeServer::start(|n, _| match n {
        0 => Answer::status(503, "warming up"),
        _ => Answer::chat("<planning>Check the room.</planning>\n<action>look"),
    });
    let dir = scratch("eval");
    let out = dir.join("run");
    let zip = zip();
    let policy = format!("openai:{}", server.url);
    let config = dir.join("served.toml");
    std::fs::write(&config, "[model.server]\nbackoff_s = 0.01\nrequest = { top_k = 20 }\n").unwrap();
    let mut args = eval_args(&policy, &zip, &out);
    args.extend(["--config", config.to_str().unwrap()]);
    let (code, stdout, err) = rlvmr_env(&args, &[("OPENAI_API_KEY", "sk-cli-secret-42")]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("policy openai:fake-model"), "{stdout}");
    assert!(stdout.contains("| all | 2 |"), "{stdout}");
    assert!(stdout.contains("requests: 6 sent, 1 retries, 0 failed"), "{stdout}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["requests"]["retries"], 1);
    assert_eq!(summary["throughput"]["generated_tokens"], 12);
    // The key reached the server, and no file the run wrote holds it.
    assert_eq!(server.seen()[0].authorization.as_deref(), Some("Bearer sk-cli-secret-42"));
    assert_eq!(server.seen()[0].body["top_k"], 20);
    for file in ["config.toml", "summary.json", "trajectories.jsonl"] {
        let text = std::fs::read_to_string(out.join(file)).unwrap();
        assert!(!text.contains("sk-cli-secret"), "{file} holds the key");
    }
    assert!(!err.contains("sk-cli-secret") && !stdout.contains("sk-cli-secret"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_default_run_directory_is_named_after_the_served_model() {
    let server = FakeServer::start(|_, _| Answer::chat("<action>look"));
    let dir = scratch("default-dir");
    let config = dir.join("c.toml");
    std::fs::write(
        &config,
        format!(
            "[run]\nout_dir = {:?}\n[model]\nbackend = \"openai\"\n[model.server]\nbase_url = {:?}\nmodel_name = \"org/some model\"\n",
            dir.display().to_string(),
            server.url
        ),
    )
    .unwrap();
    let zip = zip();
    let (code, _, err) = rlvmr_env(
        &["eval", "--config", config.to_str().unwrap(), "--episodes", "1", "--max-steps", "1", "--data", &zip],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert!(dir.join("eval-alfworld-L0-openai-some_model/summary.json").is_file(), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn served_model_errors_are_clear() {
    let zip = zip();
    let dir = scratch("errors");
    let out = dir.join("run");

    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dead = format!("openai:http://127.0.0.1:{port}/v1");
    let (code, _, err) = rlvmr_env(&eval_args(&dead, &zip, &out), &[]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot reach the served model at http://127.0.0.1:"), "{err}");

    let (code, _, err) = rlvmr_env(&["eval", "--policy", "openai:http://127.0.0.1:9/v1", "--data", &zip], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("model.server.model_name") && err.contains("--model-name"), "{err}");

    let (code, _, err) = rlvmr_env(&["eval", "--policy", "openai:localhost:8000", "--model-name", "m"], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("model.server.base_url") && err.contains("localhost:8000"), "{err}");

    let refusing = FakeServer::start(|_, _| Answer::status(401, r#"{"error":{"message":"invalid api key"}}"#));
    let policy = format!("openai:{}", refusing.url);
    let (code, _, err) = rlvmr_env(&eval_args(&policy, &zip, &out), &[("OPENAI_API_KEY", "sk-wrong-777")]);
    assert_eq!(code, 2);
    assert!(err.contains("401") && err.contains("$OPENAI_API_KEY") && err.contains("invalid api key"), "{err}");
    assert!(!err.contains("sk-wrong-777"), "{err}");

    let config = dir.join("train.toml");
    std::fs::write(&config, "[model]\nbackend = \"openai\"\n[model.server]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel_name = \"m\"\n").unwrap();
    let (code, _, err) = rlvmr_env(&["train", "--config", config.to_str().unwrap(), "--out", out.to_str().unwrap()], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("model.backend") && err.contains("rlvmr train needs the model's weights"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn coldstart_with_a_served_teacher_writes_its_report() {
    // A teacher that always answers with too few steps: every step keeps the built-in
    // annotation, and the command says so.
    let server = FakeServer::start(|_, _| Answer::chat(r#"[{"tag":"planning","reason":"r","action":"look"}]"#));
    let dir = scratch("coldstart");
    let out = dir.join("cs");
    let zip = zip();
    let annotator = format!("openai:{}", server.url);
    let (code, stdout, err) = rlvmr_env(
        &[
            "coldstart", "-n", "3", "--annotator", &annotator, "--model-name", "teacher-model", "--data", &zip,
            "--out", out.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("teacher openai:teacher-model"), "{stdout}");
    assert!(stdout.contains("0 steps annotated") && stdout.contains("3 whole trajectories rejected"), "{stdout}");
    assert!(stdout.contains("wrong number of steps 3"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("annotation.json")).unwrap()).unwrap();
    assert_eq!(report["rejected_trajectories"], 3);
    assert_eq!(server.seen().len(), 3);
    assert!(out.join("sft.jsonl").is_file());

    let (code, _, err) = rlvmr_env(&["coldstart", "--annotator", "gpt", "--data", &zip], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("coldstart.annotator") && err.contains("\"gpt\""), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
