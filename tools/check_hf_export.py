"""Check that transformers loads a folder saved by rlvmr's `checkpoint::save_model` and agrees
with rlvmr on it: same token ids from the saved tokenizer.json, the same ChatML text from the
saved chat template, and the same logits at every position.

Input: the folder written by `cargo run --release -p policy --example export_hf -- MODEL DIR`
(DIR/model/, DIR/prompts.json, DIR/logits.safetensors). Run by hand through
tools/check_hf_export.sh, which makes the venv and runs the export; needs torch, transformers
and safetensors. Exit status 1 when anything disagrees (logits: max |diff| above --tol times
the largest |logit|).
"""

import argparse
import json
import os
import sys

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", help="the export_hf output folder")
    ap.add_argument("--tol", type=float, default=1e-5, help="relative logit tolerance")
    args = ap.parse_args()
    folder = os.path.join(args.dir, "model")
    with open(os.path.join(args.dir, "prompts.json")) as f:
        meta = json.load(f)
    ours = load_file(os.path.join(args.dir, "logits.safetensors"))

    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32,
                                                 attn_implementation="eager")
    model.eval()
    print(f"{folder}: {type(model).__name__}, {sum(p.numel() for p in model.parameters())} "
          f"parameters, tokenizer {type(tok).__name__} ({len(tok)} tokens)")
    ok = True

    chat = tok.apply_chat_template(meta["chat_messages"], tokenize=False,
                                   add_generation_prompt=True)
    same_chat = chat == meta["chat_text"]
    ok &= same_chat
    print(f"chat template renders the same text: {same_chat}")

    for i, (text, ids) in enumerate(zip(meta["prompts"], meta["ids"])):
        hf_ids = tok(text, add_special_tokens=False)["input_ids"]
        same_ids = hf_ids == ids
        ok &= same_ids
        scored = ours[f"logits_{i}"].shape[0]  # a prefix when the context is short
        with torch.no_grad():
            logits = model(torch.tensor([ids[:scored]])).logits[0]
        diff = (logits - ours[f"logits_{i}"]).abs().max().item()
        scale = logits.abs().max().item()
        same_argmax = bool((logits.argmax(-1) == ours[f"logits_{i}"].argmax(-1)).all())
        good = diff <= args.tol * scale and same_argmax
        ok &= good
        print(f"prompt {i}: {len(ids)} tokens ({scored} scored), ids equal: {same_ids}, max |diff| {diff:.3e}, "
              f"max |logit| {scale:.2f}, relative {diff / scale:.3e}, "
              f"argmax equal at every position: {same_argmax}")
    print("OK" if ok else "MISMATCH")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
