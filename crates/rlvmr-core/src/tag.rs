//! The four meta-reasoning tags an RLVMR agent labels each step with.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tag {
    /// Decompose or re-plan the whole task.
    Planning,
    /// List candidate locations, objects or actions when information is missing.
    Explore,
    /// Diagnose a failure and change course.
    Reflection,
    /// Track progress against the plan and pick the next concrete action.
    Monitor,
}

impl Tag {
    pub const ALL: [Tag; 4] = [Tag::Planning, Tag::Explore, Tag::Reflection, Tag::Monitor];

    /// The tag's name as it appears in `<name>...</name>`.
    pub fn name(self) -> &'static str {
        match self {
            Tag::Planning => "planning",
            Tag::Explore => "explore",
            Tag::Reflection => "reflection",
            Tag::Monitor => "monitor",
        }
    }

    pub fn from_name(name: &str) -> Option<Tag> {
        Tag::ALL.into_iter().find(|t| t.name().eq_ignore_ascii_case(name))
    }
}

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
