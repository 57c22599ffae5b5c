//! The chat template. ChatML for every supported model family (SmolLM2 and Qwen2 both use it);
//! this is the one place a conversation becomes prompt text.

use serde::{Deserialize, Serialize};

/// One turn of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: role.into(),
            content: content.into(),
        }
    }
    pub fn system(content: impl Into<String>) -> Self {
        Self::new("system", content)
    }
    pub fn user(content: impl Into<String>) -> Self {
        Self::new("user", content)
    }
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new("assistant", content)
    }
}

/// Start-of-turn marker.
pub const IM_START: &str = "<|im_start|>";
/// End-of-turn marker (the stop token of an assistant turn).
pub const IM_END: &str = "<|im_end|>";

/// [`apply_chatml`] as a Jinja template, written into saved model folders
/// (`tokenizer_config.json`) so that transformers' `apply_chat_template` renders the same text.
pub const CHATML_JINJA: &str = "{% for message in messages %}{{ '<|im_start|>' + message['role'] \
    + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt \
    %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/// Render `messages` as ChatML:
/// `<|im_start|>{role}\n{content}<|im_end|>\n` per message, then `<|im_start|>assistant\n`
/// when `add_generation_prompt`. No default system prompt is inserted: callers that want one
/// pass it as the first message.
pub fn apply_chatml(messages: &[ChatMessage], add_generation_prompt: bool) -> String {
    let mut out = String::new();
    for m in messages {
        out.push_str(IM_START);
        out.push_str(&m.role);
        out.push('\n');
        out.push_str(&m.content);
        out.push_str(IM_END);
        out.push('\n');
    }
    if add_generation_prompt {
        out.push_str(IM_START);
        out.push_str("assistant\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chatml_layout() {
        let msgs = [ChatMessage::system("Be brief."), ChatMessage::user("Hi")];
        assert_eq!(
            apply_chatml(&msgs, true),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
        assert_eq!(
            apply_chatml(&msgs[1..], false),
            "<|im_start|>user\nHi<|im_end|>\n"
        );
    }
}
