//! The ways of acting behind [`crate::agent::Policy`].

pub mod expert;
pub mod gold;
pub mod model;
pub mod random;
pub mod served;

pub use expert::ExpertPolicy;
pub use gold::GoldPolicy;
pub use model::{ModelPolicy, ModelPolicyOptions};
pub use random::RandomPolicy;
pub use served::{ServedPolicy, ServedSampling};

use rlvmr_core::{OutputStyle, Tag};

/// `<tag>reason</tag>\n<action>command</action>`, the reply format RLVMR asks for.
pub fn tagged_reply(tag: Tag, reason: &str, action: &str) -> String {
    annotated_reply(OutputStyle::Tagged, tag, reason, action)
}

/// An annotated step in the reply format `style` asks for: the tagged one, or for the
/// published baselines `<think>reason</think>\n<action>command</action>` (the same reasoning
/// without its tag).
pub fn annotated_reply(style: OutputStyle, tag: Tag, reason: &str, action: &str) -> String {
    match style {
        OutputStyle::Tagged => format!("<{tag}>{reason}</{tag}>\n<action>{action}</action>"),
        OutputStyle::Think => format!("<think>{reason}</think>\n<action>{action}</action>"),
    }
}
