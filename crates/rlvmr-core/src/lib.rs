//! The pure core of RLVMR: deterministic functions from records to numbers.
//! No ML and no I/O: environments, models and the trainer build on it.

pub mod advantage;
pub mod env;
pub mod format;
pub mod metrics;
pub mod prompt;
pub mod reward;
pub mod scene;
pub mod score;
pub mod tag;

pub use advantage::{compute_advantage_terms, compute_advantages, AdvantageConfig, AdvantageTerms};
pub use env::{Env, EnvError, StepResult};
pub use format::{parse_output, InvalidReason, OutputStyle, ParsedOutput, ReplyLayout, Validity};
pub use prompt::{
    render as render_prompt, HistoryEntry, HistoryWindow, PromptConfig, PromptEnv, PromptInput,
    BoxLine, PromptStyle, TaskLine,
};
pub use reward::{compute_rewards, EpisodeFacts, EpisodeRewards, Matching, RewardConfig, StepFacts, StepReward};
pub use score::{batch_metrics, score, score_json, EpisodeIn, EpisodeScore, ScoreConfig, StepIn, StepScore};
pub use tag::Tag;
