//! The simulator's JVM: started with a capped heap, its output drained, shut down cleanly.
//!
//! The gateway exits when its stdin closes (`--die-on-broken-pipe`). We hold the write end of
//! that pipe and nothing else does (Rust opens pipes close-on-exec), so the JVM also exits when
//! our process dies for any reason, SIGKILL included: the kernel closes the pipe. Dropping a
//! [`Jvm`] closes stdin, waits briefly, then kills.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::{Result, SciError};

/// How to start a simulator JVM.
#[derive(Debug, Clone)]
pub struct JvmConfig {
    /// The `java` executable (default: `$RLVMR_JAVA`, else `$JAVA_HOME/bin/java`, else `java`).
    pub java: PathBuf,
    /// `scienceworld.jar` (see [`crate::assets::jar_path`]).
    pub jar: PathBuf,
    /// `-Xmx` in MiB. 128 keeps the resident size near 220 MB; the default heap grows to GBs.
    pub max_heap_mb: u32,
    /// Further JVM flags, after `-Xmx` (default [`JvmConfig::DEFAULT_FLAGS`]).
    pub flags: Vec<String>,
    /// Time allowed for the JVM to print its port and answer the first constructor.
    pub start_timeout: Duration,
    /// Time allowed for one ordinary call (step, load, list).
    pub call_timeout: Duration,
    /// Time allowed for a load that generates the gold path (up to 14 s on mendelian tasks).
    pub gold_timeout: Duration,
}

impl JvmConfig {
    /// One GC thread and no concurrent collector (a small, predictable footprint), at most two
    /// JIT compiler threads, 1 MB thread stacks, and every identity hash code 1
    /// (`-XX:hashCode=2`). Under the JVM's default (a per-thread random stream) the room's
    /// listing order, which object an ambiguous name picks, thermometer readings, circuits and
    /// bees change with the JVM and with what it played before; with one constant hash code
    /// an episode is a function of its task, variation and commands (`tests/transcripts.rs`;
    /// the transcripts' 60 episodes replay byte for byte in either order, where the default
    /// changes 24 of them), for about 15% more time in that replay.
    pub const DEFAULT_FLAGS: [&'static str; 5] = [
        "-XX:+UseSerialGC",
        "-XX:CICompilerCount=2",
        "-Xss1m",
        "-XX:+UnlockExperimentalVMOptions",
        "-XX:hashCode=2",
    ];

    /// Defaults for a given jar.
    pub fn new(jar: PathBuf) -> JvmConfig {
        JvmConfig {
            java: default_java(),
            jar,
            max_heap_mb: 128,
            flags: Self::DEFAULT_FLAGS.iter().map(|f| f.to_string()).collect(),
            start_timeout: Duration::from_secs(60),
            call_timeout: Duration::from_secs(30),
            gold_timeout: Duration::from_secs(120),
        }
    }
}

/// The directory holding the jar ("." for a bare file name).
fn jar_dir(jar: &std::path::Path) -> PathBuf {
    match jar.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn default_java() -> PathBuf {
    if let Some(java) = std::env::var_os("RLVMR_JAVA").filter(|j| !j.is_empty()) {
        return PathBuf::from(java);
    }
    if let Some(home) = std::env::var_os("JAVA_HOME").filter(|j| !j.is_empty()) {
        let java = PathBuf::from(home).join("bin").join("java");
        if java.is_file() {
            return java;
        }
    }
    PathBuf::from("java")
}

/// A running gateway JVM.
pub struct Jvm {
    child: Child,
    /// Held open for the JVM's lifetime: closing it is the shutdown signal.
    stdin: Option<ChildStdin>,
    port: u16,
    /// The last few KB of stderr, for error messages.
    stderr_tail: Arc<Mutex<String>>,
}

const STDERR_TAIL_BYTES: usize = 4096;

impl Jvm {
    /// Start `java ... py4j.GatewayServer --die-on-broken-pipe 0` and read its port.
    pub fn start(config: &JvmConfig) -> Result<Jvm> {
        if !config.jar.is_file() {
            return Err(SciError::Start(format!(
                "jar {} does not exist",
                config.jar.display()
            )));
        }
        // Absolute, because the JVM runs in the jar's directory.
        let jar = std::fs::canonicalize(&config.jar)
            .map_err(|e| SciError::StartIo { what: format!("jar {}", config.jar.display()), source: e })?;
        let mut child = Command::new(&config.java)
            .arg(format!("-Xmx{}m", config.max_heap_mb))
            .args(&config.flags)
            .arg("-cp")
            .arg(&jar)
            .args(["py4j.GatewayServer", "--die-on-broken-pipe", "0"])
            // The simulator writes object_type_ids.tsv into its working directory; run it
            // beside the jar, as the official client does, not in the caller's directory.
            .current_dir(jar_dir(&jar))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                SciError::Start(format!(
                    "cannot run `{}` ({e}): install Java 17, or set RLVMR_JAVA or JAVA_HOME",
                    config.java.display()
                ))
            })?;
        let stdin = child.stdin.take();
        let stderr_tail = Arc::new(Mutex::new(String::new()));
        if let Some(stderr) = child.stderr.take() {
            spawn_stderr_keeper(stderr, Arc::clone(&stderr_tail));
        }
        let port_line = match child.stdout.take() {
            Some(stdout) => spawn_stdout_drain(stdout),
            None => return Err(SciError::Start("no stdout pipe".to_string())),
        };
        let mut jvm = Jvm {
            child,
            stdin,
            port: 0,
            stderr_tail,
        };
        jvm.port = jvm.wait_for_port(port_line, config.start_timeout)?;
        Ok(jvm)
    }

    fn wait_for_port(
        &mut self,
        port_line: mpsc::Receiver<String>,
        timeout: Duration,
    ) -> Result<u16> {
        let line = match port_line.recv_timeout(timeout) {
            Ok(line) => line,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                return Err(SciError::Start(format!(
                    "no port printed within {timeout:?}{}",
                    self.stderr_note()
                )))
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                // Give stderr's reader a moment to collect the reason.
                std::thread::sleep(Duration::from_millis(100));
                return Err(SciError::Start(format!(
                    "the JVM exited before printing its port{}",
                    self.stderr_note()
                )));
            }
        };
        line.trim().parse().map_err(|_| {
            SciError::Start(format!(
                "expected a port number as the first output line, got {line:?}{}",
                self.stderr_note()
            ))
        })
    }

    /// The gateway's TCP port on localhost.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The JVM's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// True while the process runs.
    pub fn is_alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// " (stderr: ...)" when the JVM wrote anything to stderr, else "".
    pub fn stderr_note(&self) -> String {
        let tail = self
            .stderr_tail
            .lock()
            .map(|t| t.trim().to_string())
            .unwrap_or_default();
        if tail.is_empty() {
            String::new()
        } else {
            format!(" (stderr: {tail})")
        }
    }

    /// Kill at once (a hung JVM gets no second chance).
    pub fn kill(&mut self) {
        self.stdin = None;
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Close stdin (the gateway's shutdown signal), wait up to `grace`, then kill.
    pub fn shutdown(&mut self, grace: Duration) {
        self.stdin = None;
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            match self.child.try_wait() {
                Ok(Some(_)) | Err(_) => return,
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
        self.kill();
    }
}

impl Drop for Jvm {
    fn drop(&mut self) {
        self.shutdown(Duration::from_secs(2));
    }
}

/// Send the first stdout line (the port) on the channel, then keep reading so the simulator
/// never blocks on a full pipe (it prints kilobytes per step).
fn spawn_stdout_drain(stdout: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut first = String::new();
        if reader.read_line(&mut first).unwrap_or(0) == 0 {
            return;
        }
        let _ = tx.send(first);
        let mut sink = [0u8; 64 * 1024];
        while matches!(reader.read(&mut sink), Ok(n) if n > 0) {}
    });
    rx
}

fn spawn_stderr_keeper(stderr: impl Read + Send + 'static, tail: Arc<Mutex<String>>) {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stderr);
        let mut chunk = [0u8; 4096];
        while let Ok(n) = reader.read(&mut chunk) {
            if n == 0 {
                break;
            }
            if let Ok(mut kept) = tail.lock() {
                kept.push_str(&String::from_utf8_lossy(&chunk[..n]));
                if kept.len() > STDERR_TAIL_BYTES {
                    let mut cut = kept.len() - STDERR_TAIL_BYTES;
                    while !kept.is_char_boundary(cut) {
                        cut += 1;
                    }
                    kept.drain(..cut);
                }
            }
        }
    });
}
