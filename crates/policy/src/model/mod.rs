//! The model, in three files: its shape ([`config`]), the trainable decoder ([`training`])
//! and the fast sampling copy with its KV cache ([`inference`]). All of them sit on the
//! kernels of [`crate::ops`].

pub mod config;
pub mod inference;
pub mod training;

pub use config::{Family, LlamaConfig};
pub use inference::{quant_dtype, swap_remove_order, InferenceModel, KvCache, GROW_COLUMNS};
pub use training::Llama;
