//! Models behind an OpenAI-compatible server: the HTTP client (retries, backoff, the key kept
//! out of every message) and the policy that plays episodes with it.

pub mod client;
pub mod policy;

pub use client::{
    map_in_flight, Client, Completion, Message, RequestError, RequestStats, Sampling,
    ServedOptions, TokenUsage,
};
pub use policy::{ServedPolicy, ServedSampling};
