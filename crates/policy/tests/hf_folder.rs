//! The embedded SmolLM2 GGUF saved as a Hugging Face folder (`checkpoint::save_model`) reloads
//! through the HF path (`policy::load_model` on the folder) with identical logits and the same
//! tokenizer ids. (That transformers reads the same folder is checked by
//! `tools/check_hf_export.sh`, outside CI.)

mod common;

use candle_core::{DType, Tensor};
use policy::chat::{apply_chatml, ChatMessage};

#[test]
fn smollm2_gguf_saved_as_hf_folder_reloads_identically() {
    let dev = common::device();
    let gguf = policy::assets::default_model_path().expect("fetch the default model");
    let (model, tok) = policy::gguf::load(&gguf, DType::F32, &dev).unwrap();
    let dir = common::fresh_dir("smollm2-hf");
    policy::checkpoint::save_model(&model, &tok, &dir).unwrap();
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
    assert_eq!(config["architectures"][0], "LlamaForCausalLM");
    let (back, back_tok) = policy::load_model(dir.to_str().unwrap(), DType::F32, &dev).unwrap();
    assert_eq!(back.config(), model.config());

    let texts = [
        apply_chatml(
            &[ChatMessage::user("Put a clean mug in the coffee machine.")],
            true,
        ),
        "Tabs\tand  spaces, CRLF\r\n, digits 12345, émojis 🙂, <|endoftext|>".to_string(),
    ];
    for text in &texts {
        assert_eq!(
            back_tok.encode(text).unwrap(),
            tok.encode(text).unwrap(),
            "{text:?}"
        );
    }
    let ids = tok.encode(&texts[0]).unwrap();
    let input = Tensor::new(ids.as_slice(), &dev)
        .unwrap()
        .unsqueeze(0)
        .unwrap();
    let a = model.forward(&input).unwrap();
    let b = back.forward(&input).unwrap();
    let diff = (a - b)
        .unwrap()
        .abs()
        .unwrap()
        .max_all()
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    assert_eq!(
        diff, 0.0,
        "logits changed by the GGUF -> HF folder -> reload round trip"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
