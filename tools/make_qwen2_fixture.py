"""Create the tiny random Qwen2 fixtures of crates/policy/tests/fixtures/ with PyTorch.

Run by hand through tools/make_qwen2_fixture.sh (it makes its own venv with CPU PyTorch and
transformers); `python tools/make_qwen2_fixture.py [--out DIR]` works in any venv that has
torch, transformers, tokenizers and safetensors.

Two models share one tokenizer:

- qwen2-tiny/: Qwen2ForCausalLM, hidden 32, MLP 48, 2 layers, 4 heads / 2 KV heads, untied head,
  non-zero q/k/v biases, stored in bfloat16 and sharded (two *.safetensors files plus
  model.safetensors.index.json);
- qwen2-tiny-tied/: the same family with a tied head, 1 layer, stored in float16 in a single
  model.safetensors; its reference covers the first input only.

The tokenizer is a byte-level BPE trained here on sentences this script writes itself
(256 byte tokens, a few merges, the ChatML markers <|im_start|>, <|im_end|> and <|endoftext|>).
The embedding has a few more rows than the tokenizer has tokens, as Qwen2 models do.

Weights are drawn from a seeded normal distribution with scales chosen so that the logits are
of order 1-10 (a meaningful comparison at 1e-4), then saved with save_pretrained. The reference
is computed by transformers (eager attention, float32) on the model reloaded from the saved
folder, so it sees exactly the rounded weights: {name}-reference.safetensors (beside the
folder) holds, for each input i,
`input_ids_{i}` (i64), `logits_{i}` ([seq, vocab], f32) and `greedy_{i}` (8 greedy tokens
continuing the input, recomputed with a full forward per token, no KV cache).
"""

import argparse
import json
import os
import random

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
VOCAB_TARGET = 272
EXTRA_EMBEDDING_ROWS = 4
GREEDY_TOKENS = 8
CHATML_JINJA = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content']"
    " + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
INPUTS = [
    "<|im_start|>user\nclean a mug<|im_end|>\n<|im_start|>assistant\n",
    "You see a shelf 2. Go!",
]


def corpus(seed):
    """Sentences in the style of household text games (our own templates)."""
    rng = random.Random(seed)
    verbs = ["go to", "take", "put", "open", "close", "clean", "heat", "cool", "examine", "look at"]
    things = ["mug", "apple", "drawer", "shelf", "fridge", "sinkbasin", "countertop", "knife",
              "lettuce", "cabinet", "desk lamp", "book", "coffee machine", "microwave"]
    lines = []
    for _ in range(400):
        v, a, b = rng.choice(verbs), rng.choice(things), rng.choice(things)
        n = rng.randint(1, 9)
        lines.append(f"{v} {a} {n} from {b} {rng.randint(1, 5)}. You see a {b} {n}.")
    return lines


def build_tokenizer(seed):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_TARGET,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(seed), trainer=trainer)
    return tok


def randomize(model, seed):
    """Seeded weights with logits of order 1-10; norms near 1, biases clearly non-zero."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
            elif name.endswith(".bias"):
                p.copy_(0.3 * torch.randn(p.shape, generator=gen))
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=gen))
            elif name == "lm_head.weight":
                p.copy_(0.5 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=gen))


def greedy(model, ids, n):
    seq = ids.clone()
    gaps = []
    for _ in range(n):
        with torch.no_grad():
            logits = model(seq).logits[0, -1]
        top = torch.topk(logits, 2).values
        gaps.append(float(top[0] - top[1]))
        seq = torch.cat([seq, logits.argmax().view(1, 1)], dim=1)
    return seq[0, ids.shape[1]:], min(gaps)


def make(out, tok, name, seed, tied, layers, dtype, shard, n_inputs):
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    vocab = tok.get_vocab_size() + EXTRA_EMBEDDING_ROWS
    cfg = Qwen2Config(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        rope_theta=5000.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=tied,
        use_sliding_window=False,
        bos_token_id=tok.token_to_id("<|endoftext|>"),
        eos_token_id=tok.token_to_id("<|im_end|>"),
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(cfg)
    randomize(model, seed)
    model = model.to(dtype)
    kwargs = {"max_shard_size": "50KB"} if shard else {}
    model.save_pretrained(folder, safe_serialization=True, **kwargs)
    tok.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "chat_template": CHATML_JINJA,
                   "bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
                  f, indent=1)
    for extra in ["generation_config.json"]:
        path = os.path.join(folder, extra)
        if os.path.exists(path):
            os.remove(path)

    ref = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32,
                                               attn_implementation="eager")
    ref.eval()
    tensors = {}
    for i, text in enumerate(INPUTS[:n_inputs]):
        ids = torch.tensor([tok.encode(text).ids], dtype=torch.long)
        with torch.no_grad():
            logits = ref(ids).logits[0]
        tokens, gap = greedy(ref, ids, GREEDY_TOKENS)
        tensors[f"input_ids_{i}"] = ids[0].contiguous()
        tensors[f"logits_{i}"] = logits.contiguous()
        tensors[f"greedy_{i}"] = tokens.contiguous()
        print(f"{name} input {i}: {ids.shape[1]} tokens, max |logit| {logits.abs().max():.2f}, "
              f"smallest greedy top-2 gap {gap:.3f}")
    # Beside the folder, not in it: a loader globbing *.safetensors must not pick it up.
    save_file(tensors, os.path.join(out, f"{name}-reference.safetensors"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates",
                               "policy", "tests", "fixtures")
    ap.add_argument("--out", default=default_out)
    ap.add_argument("--seed", type=int, default=20261122)
    args = ap.parse_args()
    tok = build_tokenizer(args.seed)
    make(args.out, tok, "qwen2-tiny", args.seed, tied=False, layers=2, dtype=torch.bfloat16,
         shard=True, n_inputs=2)
    make(args.out, tok, "qwen2-tiny-tied", args.seed + 1, tied=True, layers=1,
         dtype=torch.float16, shard=False, n_inputs=1)


if __name__ == "__main__":
    main()
