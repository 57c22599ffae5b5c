//! The three ways of acting behind [`crate::agent::Policy`].

pub mod expert;
pub mod gold;
pub mod model;
pub mod random;

pub use expert::ExpertPolicy;
pub use gold::GoldPolicy;
pub use model::{ModelPolicy, ModelPolicyOptions};
pub use random::RandomPolicy;

use rlvmr_core::Tag;

/// `<tag>reason</tag>\n<action>command</action>`, the reply format RLVMR asks for.
pub fn tagged_reply(tag: Tag, reason: &str, action: &str) -> String {
    format!("<{tag}>{reason}</{tag}>\n<action>{action}</action>")
}
