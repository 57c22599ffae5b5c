"""Check our LoRA against PEFT: same adapter, same base, same logits.

Reads what `cargo run --release -p policy --example lora_peft_export -- OUT` wrote into OUT:
loads OUT/base with transformers, puts OUT/adapter on it with `peft.PeftModel.from_pretrained`,
and compares its logits on the stored ids with ours (OUT/expected.safetensors), to a tolerance
relative to the largest logit (float32 sums over 30 layers differ in their last bits). Also checks
that OUT/merged (our merged HF checkpoint) loads in transformers with the same logits, and that
PEFT's own `merge_and_unload` gives the weights we merged.

Run through tools/peft_check.sh, which builds the export and provides a venv with torch,
transformers, peft and safetensors. Exit status 1 when a difference exceeds the tolerance.
Usage: python3 tools/peft_check.py OUT [--rtol 2e-5]
"""

import argparse
import sys

import torch
from peft import PeftModel
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM


def max_abs(a, b):
    return (a.double() - b.double()).abs().max().item()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument(
        "--rtol", type=float, default=2e-5, help="max abs difference / max(1, max |logit|)"
    )
    args = parser.parse_args()
    torch.manual_seed(0)

    expected = load_file(f"{args.out}/expected.safetensors")
    ids, ours = expected["ids"], expected["logits"]

    base = AutoModelForCausalLM.from_pretrained(f"{args.out}/base", dtype=torch.float32)
    base.eval()
    with torch.no_grad():
        plain = base(input_ids=ids).logits
    peft_model = PeftModel.from_pretrained(base, f"{args.out}/adapter")
    peft_model.eval()
    with torch.no_grad():
        theirs = peft_model(input_ids=ids).logits
    merged_peft = peft_model.merge_and_unload()
    merged_ours = AutoModelForCausalLM.from_pretrained(
        f"{args.out}/merged", dtype=torch.float32
    )
    merged_ours.eval()
    with torch.no_grad():
        merged_logits = merged_ours(input_ids=ids).logits
    ours_state = merged_ours.state_dict()
    weight_diff = max(
        max_abs(w, ours_state[name]) for name, w in merged_peft.state_dict().items()
    )

    rows = [
        ("ours (LoRA forward) vs PEFT", max_abs(ours, theirs)),
        ("our merged checkpoint in transformers vs PEFT", max_abs(merged_logits, theirs)),
        ("PEFT merge_and_unload vs our merged weights", weight_diff),
    ]
    largest = ours.abs().max().item()
    tol = args.rtol * max(1.0, largest)
    print(f"logits shape {tuple(ours.shape)}, max |logit| {largest:.3f}, tolerance {tol:.2e}")
    print(f"adapter effect: max |PEFT - base| {max_abs(theirs, plain):.4f}")
    failed = False
    for what, diff in rows:
        ok = diff <= tol
        failed |= not ok
        print(f"{what}: max abs diff {diff:.3e} {'ok' if ok else 'FAIL'}")
    same_argmax = bool((ours.argmax(-1) == theirs.argmax(-1)).all())
    print(f"same greedy token at every position: {same_argmax}")
    return 1 if failed or not same_argmax else 0


if __name__ == "__main__":
    sys.exit(main())
