//! What a served model's server counted: plain data kept in episode records and summaries,
//! so that neither depends on the HTTP client that fills it in.

use serde::{Deserialize, Serialize};

/// Tokens a request used, as the server counted them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
}

/// Request counts over a client's life.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestStats {
    pub requests: usize,
    /// Attempts after a retryable failure.
    pub retries: usize,
    /// Requests that gave no completion, retries spent.
    pub failed: usize,
    /// Tokens as the server counted them (replies without usage add nothing).
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
}
