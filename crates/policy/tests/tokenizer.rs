//! The tokenizer built from the embedded model's GGUF metadata.

use policy::chat::{apply_chatml, ChatMessage};
use policy::gguf::GgufFile;

fn tokenizer() -> policy::Tokenizer {
    let path = policy::assets::default_model_path().expect("fetch the default model");
    GgufFile::open(&path).unwrap().tokenizer().unwrap()
}

#[test]
fn special_tokens_and_round_trips() {
    let tok = tokenizer();
    assert_eq!(tok.token_to_id("<|endoftext|>"), Some(0));
    assert_eq!(tok.token_to_id("<|im_start|>"), Some(1));
    assert_eq!(tok.token_to_id("<|im_end|>"), Some(2));
    assert_eq!(tok.vocab_size(), 49152);

    let chat = apply_chatml(
        &[
            ChatMessage::system("You are an agent."),
            ChatMessage::user("go north"),
        ],
        true,
    );
    let ids = tok.encode(&chat).unwrap();
    assert_eq!(ids[0], 1);
    assert_eq!(ids.iter().filter(|&&i| i == 1).count(), 3);
    assert_eq!(ids.iter().filter(|&&i| i == 2).count(), 2);
    assert_eq!(tok.decode(&ids, false).unwrap(), chat);

    // Digits are split one by one.
    let ids = tok.encode("12345").unwrap();
    assert_eq!(ids.len(), 5, "{ids:?}");

    for s in [
        "Hello, world!",
        "  leading and trailing spaces  ",
        "tabs\tand\r\nCRLF\nnewlines\n\n",
        "unicode: héllo wörld — 日本語のテキスト, emoji 🤖👍🏽",
        "numbers 3.14159 and 2024-01-01, x=42",
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>ok</think><action>open door</action><|im_end|><|endoftext|>",
        "",
    ] {
        let ids = tok.encode(s).unwrap();
        assert_eq!(tok.decode(&ids, false).unwrap(), s, "round trip of {s:?} via {ids:?}");
    }
    // Special markup is one token each; skipping specials drops them.
    let ids = tok.encode("<|im_start|>assistant\nhi<|im_end|>").unwrap();
    assert_eq!(ids.first(), Some(&1));
    assert_eq!(ids.last(), Some(&2));
    assert_eq!(tok.decode(&ids, true).unwrap(), "assistant\nhi");
}
