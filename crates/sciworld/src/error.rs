//! The crate's one error type.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Everything that can go wrong talking to ScienceWorld.
#[derive(Debug, thiserror::Error)]
pub enum SciError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// `SCIWORLD_JAR` names no file.
    #[error("scienceworld jar: {0}")]
    Asset(String),
    /// The simulator jar could not be fetched or verified.
    #[error("scienceworld jar: {0}")]
    Fetch(#[from] pypi_asset::AssetError),
    /// The JVM could not be started (no java, bad jar, no port line).
    #[error("starting the simulator JVM: {0}")]
    Start(String),
    /// Starting the JVM or the reference failed on an I/O error (the cause kept as the source).
    #[error("starting the simulator JVM: {what}: {source}")]
    StartIo {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// The JVM died or closed the connection.
    #[error("the simulator JVM (pid {pid}) went away: {detail}")]
    Crashed { pid: u32, detail: String },
    /// The JVM did not answer in time (hung, or stopped); it is killed.
    #[error("the simulator JVM (pid {pid}) did not answer `{method}` within {timeout:?}")]
    Timeout {
        pid: u32,
        method: String,
        timeout: Duration,
    },
    /// The answer broke the py4j protocol.
    #[error("py4j protocol error in `{method}`: {detail}")]
    Protocol { method: String, detail: String },
    /// The Java side threw.
    #[error("java exception in `{method}`: {detail}")]
    Java { method: String, detail: String },
    /// The simulator refused a load (its error string, e.g. "ERROR: Unknown task").
    #[error("the simulator refused to load task `{task}` variation {variation}: {message}")]
    Load {
        task: String,
        variation: usize,
        message: String,
    },
    /// A task name or index that ScienceWorld does not have.
    #[error(
        "unknown task `{0}`: give one of the 30 names (`rlvmr sciworld tasks`) or an index 0-29"
    )]
    UnknownTask(String),
    /// A variation outside the task's range.
    #[error("variation {variation} is out of range for task `{task}`: it has {max} variations, numbered from 0")]
    VariationOutOfRange {
        task: String,
        variation: usize,
        max: usize,
    },
    /// A command the simulator must not be sent.
    #[error("bad command: {0}")]
    BadCommand(String),
    /// Stepping before any reset.
    #[error("no task loaded: call reset_to(task, variation) first")]
    NoTask,
}

impl SciError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        SciError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// True when the JVM behind the error is unusable (crashed, hung, garbled, out of memory)
    /// and must be restarted; false for errors about the caller's input.
    pub fn jvm_is_broken(&self) -> bool {
        match self {
            SciError::Crashed { .. } | SciError::Timeout { .. } | SciError::Protocol { .. } => true,
            SciError::Java { detail, .. } => detail.contains("OutOfMemoryError"),
            _ => false,
        }
    }
}

pub type Result<T, E = SciError> = std::result::Result<T, E>;
