//! A small HTTP/1.1 server that answers OpenAI chat-completion requests the way a test
//! tells it to, misbehaving on purpose: error statuses, bodies that are not JSON, replies
//! that never end, dropped connections, and dying mid-run. It records what it was sent.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the server does with request number `n` (0-based).
pub enum Answer {
    /// A status, extra headers and a body.
    Reply(u16, Vec<(String, String)>, String),
    /// Headers promising a long body, then a byte every 50 ms, never finishing.
    NeverEnds,
    /// Close the connection without answering.
    Drop,
}

impl Answer {
    /// A 200 chat completion with `text`, finish reason `stop`, usage and log-probs.
    pub fn chat(text: &str) -> Answer {
        let body = serde_json::json!({
            "object": "chat.completion",
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
                "logprobs": {"content": [{"token": "a", "logprob": -0.25}, {"token": "b", "logprob": -0.5}]}
            }],
            "usage": {"prompt_tokens": 100, "completion_tokens": 2, "total_tokens": 102}
        });
        Answer::Reply(200, vec![], body.to_string())
    }

    pub fn status(status: u16, body: &str) -> Answer {
        Answer::Reply(status, vec![], body.to_string())
    }
}

/// One request as the server read it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub authorization: Option<String>,
    pub body: serde_json::Value,
}

type Responder = dyn Fn(usize, &Seen) -> Answer + Send + Sync;

pub struct FakeServer {
    /// The API root to give the client (`http://127.0.0.1:PORT/v1`).
    pub url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    stopped: Arc<AtomicBool>,
}

impl FakeServer {
    /// Serves on a free port; `GET /v1/models` always answers 200, every other request is
    /// numbered and answered by `answer`.
    pub fn start(answer: impl Fn(usize, &Seen) -> Answer + Send + Sync + 'static) -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stopped = Arc::new(AtomicBool::new(false));
        let answer: Arc<Responder> = Arc::new(answer);
        let count = Arc::new(AtomicUsize::new(0));
        let (seen2, stopped2) = (seen.clone(), stopped.clone());
        std::thread::spawn(move || {
            while !stopped2.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let (seen, stopped, answer, count) =
                            (seen2.clone(), stopped2.clone(), answer.clone(), count.clone());
                        std::thread::spawn(move || serve(stream, &seen, &stopped, &*answer, &count));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
            // The listener drops here: new connections are refused from now on.
        });
        FakeServer { url, seen, stopped }
    }

    /// The chat requests so far (not the `/models` checks).
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// Dies: the port refuses connections and open ones are closed unanswered.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Answers requests on one connection until the client closes it or the server dies.
fn serve(stream: TcpStream, seen: &Mutex<Vec<Seen>>, stopped: &AtomicBool, answer: &Responder, count: &AtomicUsize) {
    stream.set_nonblocking(false).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        // Wait for the next request in short slices, so a dead server notices.
        writer.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        loop {
            if stopped.load(Ordering::SeqCst) {
                return;
            }
            match reader.fill_buf() {
                Ok([]) => return,
                Ok(_) => break,
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(_) => return,
            }
        }
        writer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let Ok(Some(request)) = read_request(&mut reader) else { return };
        if stopped.load(Ordering::SeqCst) {
            return;
        }
        let reply = if request.method == "GET" && request.path.ends_with("/models") {
            Answer::Reply(200, vec![], r#"{"object":"list","data":[{"id":"fake"}]}"#.into())
        } else {
            seen.lock().unwrap().push(request.clone());
            answer(count.fetch_add(1, Ordering::SeqCst), &request)
        };
        match reply {
            Answer::Reply(status, headers, body) => {
                let mut head = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
                    body.len()
                );
                for (k, v) in headers {
                    head.push_str(&format!("{k}: {v}\r\n"));
                }
                head.push_str("\r\n");
                if writer.write_all(head.as_bytes()).and_then(|_| writer.write_all(body.as_bytes())).is_err() {
                    return;
                }
            }
            Answer::NeverEnds => {
                let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n{\"choices\":[";
                if writer.write_all(head.as_bytes()).is_err() {
                    return;
                }
                while !stopped.load(Ordering::SeqCst) {
                    if writer.write_all(b" ").and_then(|_| writer.flush()).is_err() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                return;
            }
            Answer::Drop => return,
        }
    }
}

/// One request, or `None` at a clean end of the connection.
fn read_request(reader: &mut BufReader<TcpStream>) -> std::io::Result<Option<Seen>> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let (mut length, mut authorization) = (0usize, None);
    loop {
        let mut header = String::new();
        reader.read_line(&mut header)?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap_or(0),
                "authorization" => authorization = Some(value.trim().to_string()),
                _ => {}
            }
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;
    Ok(Some(Seen {
        method,
        path,
        authorization,
        body: serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null),
    }))
}
