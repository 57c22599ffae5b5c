//! A py4j client: the line protocol py4j's `GatewayServer` speaks, from Rust.
//!
//! A command is a few UTF-8 lines ending with `e\n`; the answer is one line starting with `!`.
//! Several commands may be written at once and their answers read in order (the server reads a
//! connection sequentially), which is how [`Connection::pipeline`] turns a step (step, score,
//! completed, moves) into a single round trip.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::error::{Result, SciError};

/// One argument of a call. Every argument is sent with its type prefix (an untyped argument
/// hangs the connection).
#[derive(Debug, Clone, PartialEq)]
pub enum Arg<'a> {
    Str(&'a str),
    Int(i32),
    Long(i64),
    Double(f64),
    Bool(bool),
    Null,
    /// A reference to a Java object the server holds (`o<N>`).
    Ref(&'a str),
}

/// A decoded answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(String),
    Int(i64),
    Double(f64),
    Bool(bool),
    Void,
    Null,
    /// An object, list, set, map or iterator the server keeps until it is released.
    Ref(JavaRef),
}

/// A Java object id on the server side (`o12`) and its kind letter (`r` object, `l` list, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JavaRef {
    pub id: String,
    pub kind: char,
}

/// Escape a string argument the way py4j does: `\` first, then CR and LF.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            _ => out.push(c),
        }
    }
    out
}

/// Undo [`escape`] on a string answer. An unknown escape keeps its character (py4j's own
/// decoder does the same).
pub fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

/// The wire form of a method call on `target` (`o<N>`, or `z:<class>` for a static method).
pub fn call_message(target: &str, method: &str, args: &[Arg]) -> String {
    let mut msg = format!("c\n{target}\n{method}\n");
    push_args(&mut msg, args);
    msg.push_str("e\n");
    msg
}

/// The wire form of a constructor call.
pub fn constructor_message(class: &str, args: &[Arg]) -> String {
    let mut msg = format!("i\n{class}\n");
    push_args(&mut msg, args);
    msg.push_str("e\n");
    msg
}

/// The wire form of releasing a server-side reference.
pub fn release_message(id: &str) -> String {
    format!("m\nd\n{id}\ne\n")
}

fn push_args(msg: &mut String, args: &[Arg]) {
    for arg in args {
        match arg {
            Arg::Str(s) => {
                msg.push('s');
                msg.push_str(&escape(s));
            }
            Arg::Int(i) => msg.push_str(&format!("i{i}")),
            Arg::Long(l) => msg.push_str(&format!("L{l}")),
            Arg::Double(d) => msg.push_str(&format!("d{d:?}")),
            Arg::Bool(b) => msg.push_str(if *b { "btrue" } else { "bfalse" }),
            Arg::Null => msg.push('n'),
            Arg::Ref(id) => {
                msg.push('r');
                msg.push_str(id);
            }
        }
        msg.push('\n');
    }
}

/// Decode one answer line (without its `\n`). `method` names the call in errors.
pub fn parse_reply(line: &str, method: &str) -> Result<Value> {
    let protocol = |detail: String| SciError::Protocol {
        method: method.to_string(),
        detail,
    };
    if let Some(err) = line.strip_prefix("!x") {
        return Err(SciError::Java {
            method: method.to_string(),
            detail: unescape(err),
        });
    }
    let body = line.strip_prefix("!y").ok_or_else(|| {
        protocol(format!(
            "answer does not start with !y or !x: {:.200}",
            line
        ))
    })?;
    let mut chars = body.chars();
    let kind = chars
        .next()
        .ok_or_else(|| protocol("empty answer".to_string()))?;
    let rest = chars.as_str();
    let number = |what: &str| protocol(format!("bad {what} in answer {line:.200}"));
    Ok(match kind {
        's' => Value::Str(unescape(rest)),
        'i' | 'L' => Value::Int(rest.parse().map_err(|_| number("integer"))?),
        'd' => Value::Double(rest.parse().map_err(|_| number("double"))?),
        'b' => Value::Bool(match rest {
            "true" => true,
            "false" => false,
            _ => return Err(number("boolean")),
        }),
        'v' => Value::Void,
        'n' => Value::Null,
        'r' | 'l' | 'a' | 'h' | 'u' | 'g' | 'p' | 'f' | 'o' => Value::Ref(JavaRef {
            id: rest.to_string(),
            kind,
        }),
        other => {
            return Err(protocol(format!(
                "unknown answer type `{other}` in {line:.200}"
            )))
        }
    })
}

/// One TCP connection to a gateway. Every read has a deadline: a JVM that stops answering
/// gives [`SciError::Timeout`], never a hang.
pub struct Connection {
    stream: TcpStream,
    /// Bytes read but not yet consumed (the start of the next answer line).
    pending: Vec<u8>,
    /// The JVM's pid, for error messages.
    pid: u32,
}

impl Connection {
    /// Connect to a gateway on localhost, with TCP_NODELAY set (the Java side writes large
    /// answers in 8 KB chunks; without it each chunk waits for a delayed ACK).
    pub fn connect(port: u16, pid: u32, timeout: Duration) -> Result<Connection> {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let stream = TcpStream::connect_timeout(&addr, timeout).map_err(|e| {
            SciError::StartIo { what: format!("cannot connect to the gateway on port {port}"), source: e }
        })?;
        stream
            .set_nodelay(true)
            .map_err(|e| SciError::StartIo { what: "setting TCP_NODELAY".into(), source: e })?;
        Ok(Connection {
            stream,
            pending: Vec::new(),
            pid,
        })
    }

    /// Send one message and decode its answer.
    pub fn request(&mut self, message: &str, method: &str, timeout: Duration) -> Result<Value> {
        let mut answers = self.pipeline(&[(message, method)], timeout)?;
        Ok(answers.remove(0))
    }

    /// Send several messages in one write and decode their answers, in order. Every answer is
    /// read even when an earlier one is an error, so the connection stays in step; the first
    /// error is then returned.
    pub fn pipeline(&mut self, messages: &[(&str, &str)], timeout: Duration) -> Result<Vec<Value>> {
        let deadline = Instant::now() + timeout;
        let first_method = messages.first().map_or("", |m| m.1);
        let joined: String = messages.iter().map(|m| m.0).collect();
        self.stream
            .write_all(joined.as_bytes())
            .map_err(|e| self.io_error(first_method, timeout, e))?;
        let mut lines = Vec::with_capacity(messages.len());
        for (_, method) in messages {
            lines.push(self.read_line(method, deadline, timeout)?);
        }
        lines
            .iter()
            .zip(messages)
            .map(|(line, (_, method))| parse_reply(line, method))
            .collect()
    }

    fn io_error(&self, method: &str, timeout: Duration, e: std::io::Error) -> SciError {
        match e.kind() {
            ErrorKind::WouldBlock | ErrorKind::TimedOut => SciError::Timeout {
                pid: self.pid,
                method: method.to_string(),
                timeout,
            },
            _ => SciError::Crashed {
                pid: self.pid,
                detail: format!("during `{method}`: {e}"),
            },
        }
    }

    /// Read up to the next `\n`, within the deadline.
    fn read_line(&mut self, method: &str, deadline: Instant, timeout: Duration) -> Result<String> {
        let mut scanned = 0;
        loop {
            if let Some(pos) = self.pending[scanned..].iter().position(|&b| b == b'\n') {
                let end = scanned + pos;
                let line: Vec<u8> = self.pending.drain(..=end).collect();
                return String::from_utf8(line[..end].to_vec()).map_err(|_| SciError::Protocol {
                    method: method.to_string(),
                    detail: "answer is not UTF-8".to_string(),
                });
            }
            scanned = self.pending.len();
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(self.io_error(method, timeout, ErrorKind::TimedOut.into()));
            }
            self.stream
                .set_read_timeout(Some(left))
                .map_err(|e| self.io_error(method, timeout, e))?;
            // Linux clears QUICKACK after a while; set it before every read so the server's
            // next chunk is acknowledged at once.
            set_quickack(&self.stream);
            let mut chunk = [0u8; 64 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    return Err(SciError::Crashed {
                        pid: self.pid,
                        detail: format!("connection closed during `{method}`"),
                    })
                }
                Ok(n) => self.pending.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(self.io_error(method, timeout, e)),
            }
        }
    }
}

#[cfg(target_os = "linux")]
fn set_quickack(stream: &TcpStream) {
    use std::os::fd::AsRawFd;
    let one: libc::c_int = 1;
    // SAFETY: a valid socket fd and a pointer to a c_int of the size given. A failure only
    // costs latency, so the result is ignored.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_QUICKACK,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn set_quickack(_stream: &TcpStream) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_round_trips_backslashes_and_newlines() {
        let text = "a\\b\nc\rd\\n";
        let escaped = escape(text);
        assert_eq!(escaped, "a\\\\b\\nc\\rd\\\\n");
        assert!(!escaped.contains('\n'));
        assert_eq!(unescape(&escaped), text);
    }

    #[test]
    fn calls_are_type_prefixed() {
        let msg = call_message(
            "o3",
            "load",
            &[
                Arg::Str("boil"),
                Arg::Int(2),
                Arg::Str("easy"),
                Arg::Bool(false),
                Arg::Null,
                Arg::Ref("o9"),
                Arg::Long(-4),
                Arg::Double(0.5),
            ],
        );
        assert_eq!(
            msg,
            "c\no3\nload\nsboil\ni2\nseasy\nbfalse\nn\nro9\nL-4\nd0.5\ne\n"
        );
        assert_eq!(constructor_message("a.B", &[]), "i\na.B\ne\n");
        assert_eq!(release_message("o7"), "m\nd\no7\ne\n");
    }

    #[test]
    fn replies_decode_by_type() {
        assert_eq!(
            parse_reply("!ysa\\nb", "m").unwrap(),
            Value::Str("a\nb".into())
        );
        assert_eq!(parse_reply("!yi-3", "m").unwrap(), Value::Int(-3));
        assert_eq!(parse_reply("!yd0.25", "m").unwrap(), Value::Double(0.25));
        assert_eq!(parse_reply("!ybtrue", "m").unwrap(), Value::Bool(true));
        assert_eq!(parse_reply("!yv", "m").unwrap(), Value::Void);
        assert_eq!(parse_reply("!yn", "m").unwrap(), Value::Null);
        assert_eq!(
            parse_reply("!ylo12", "m").unwrap(),
            Value::Ref(JavaRef {
                id: "o12".into(),
                kind: 'l'
            })
        );
    }

    #[test]
    fn bad_replies_are_errors_naming_the_method() {
        let err = parse_reply("!xro5", "getScore").unwrap_err();
        assert!(matches!(err, SciError::Java { .. }), "{err}");
        assert!(err.to_string().contains("getScore"));
        let err = parse_reply("hello", "step").unwrap_err();
        assert!(
            err.to_string().contains("step") && err.to_string().contains("hello"),
            "{err}"
        );
        assert!(parse_reply("!yifoo", "m").is_err());
        assert!(parse_reply("!ybmaybe", "m").is_err());
        assert!(parse_reply("!y", "m").is_err());
        assert!(parse_reply("!yQ1", "m").is_err());
    }
}
