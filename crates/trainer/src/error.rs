//! The crate's error type: every failure names what was wrong (file, line, key, value).

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum TrainerError {
    #[error("config {path}: {message}")]
    Config { path: String, message: String },
    #[error("config key `{key}`: {message}")]
    ConfigValue { key: String, message: String },
    #[error("unknown environment `{0}`: use alfworld or sciworld")]
    UnknownEnv(String),
    #[error("unknown split `{split}` for {env}: use L0, L1 or L2")]
    UnknownSplit { env: String, split: String },
    #[error("ALFWorld data: {0}")]
    Data(#[from] alfworld::DataError),
    #[error("model: {0}")]
    Model(#[from] policy::PolicyError),
    #[error("tensor: {0}")]
    Tensor(#[from] candle_core::Error),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}, line {line}: {message}")]
    Line {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error(transparent)]
    Sciworld(#[from] sciworld::SciError),
    #[error(transparent)]
    Env(#[from] rlvmr_core::EnvError),
    /// Another error, with what was being done when it happened (the cause kept as the source).
    #[error("{what}: {source}")]
    Context {
        what: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("{0}")]
    Invalid(String),
}

impl TrainerError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        TrainerError::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn context(what: impl Into<String>, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        TrainerError::Context {
            what: what.into(),
            source: Box::new(source),
        }
    }

    pub(crate) fn value(key: &str, message: impl Into<String>) -> Self {
        TrainerError::ConfigValue {
            key: key.to_string(),
            message: message.into(),
        }
    }
}

pub type Result<T, E = TrainerError> = std::result::Result<T, E>;
