#!/usr/bin/env python3
"""PyTorch side of the policy benchmark (docs/policy.md, "Policy benchmarks").

Loads the SmolLM2-135M weights that `bench_model save-hf DIR` wrote (the same f32 weights the
Rust benchmark uses, plus bench_ids.json with the token ids both feed) with transformers'
LlamaForCausalLM on the CPU and measures, like crates/policy/examples/bench_model.rs:

  train:  forward + SFT loss (mean -log p over the 256 response tokens of a 512-token row),
          backward, clip_grad_norm_(1.0) and one torch.optim.AdamW step (lr 1e-5); one
          untimed warm-up step, then --repeats timed steps (median).
  decode: prefill of 256 tokens (batch 1), then 64 greedy steps with the KV cache at batch 1
          and 8 (left-padded prompts of 16..30 tokens), tokens/s.

Prints one JSON line; peak_rss_mb is the process's RSS high-water mark (VmHWM), so run one
mode per process. Threads: --threads (default 2), for torch's intra-op pool.

    python tools/bench_torch.py train  --model DIR [--repeats 3] [--threads 2]
    python tools/bench_torch.py decode --model DIR [--repeats 3] [--threads 2]

tools/bench_policy.sh makes a CPU PyTorch venv and runs both benchmarks back to back.
"""

import argparse
import json
import statistics
import time

import torch


def peak_rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def load(model_dir):
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32)
    with open(f"{model_dir}/bench_ids.json") as f:
        ids = json.load(f)
    return model, ids


def bench_train(model, ids, repeats):
    model.train()
    row = torch.tensor([ids["train"]], dtype=torch.long)
    n = row.shape[1]
    # Targets j+1 for positions j; the response is the second half of the row.
    mask = torch.zeros(1, n - 1)
    mask[0, n // 2 - 1 :] = 1.0
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    fwd, bwd, upd, total, losses = [], [], [], [], []
    for step in range(repeats + 1):
        t0 = time.perf_counter()
        logits = model(row).logits[:, :-1]
        logp = torch.log_softmax(logits, dim=-1)
        picked = logp.gather(-1, row[:, 1:].unsqueeze(-1)).squeeze(-1)
        loss = -(picked * mask).sum() / mask.sum()
        losses.append(loss.item())
        t1 = time.perf_counter()
        loss.backward()
        del logits, logp, picked, loss
        t2 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        t3 = time.perf_counter()
        if step > 0:
            fwd.append(t1 - t0)
            bwd.append(t2 - t1)
            upd.append(t3 - t2)
            total.append(t3 - t0)
    return {
        "mode": "train",
        "tokens": n,
        "repeats": repeats,
        "forward_s": statistics.median(fwd),
        "backward_s": statistics.median(bwd),
        "optimizer_s": statistics.median(upd),
        "step_s": statistics.median(total),
        "step_s_all": total,
        "losses": losses,
    }


@torch.inference_mode()
def decode_rate(model, prompts, steps):
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts], dtype=torch.long)
    attn = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], dtype=torch.long)
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=ids, attention_mask=attn, position_ids=pos, use_cache=True)
    past, logits = out.past_key_values, out.logits[:, -1]
    t0 = time.perf_counter()
    for _ in range(steps):
        nxt = logits.argmax(-1, keepdim=True)
        attn = torch.cat([attn, torch.ones_like(nxt)], dim=-1)
        pos = pos[:, -1:] + 1
        out = model(
            input_ids=nxt, attention_mask=attn, position_ids=pos, past_key_values=past, use_cache=True
        )
        past, logits = out.past_key_values, out.logits[:, -1]
    return len(prompts) * steps / (time.perf_counter() - t0)


@torch.inference_mode()
def bench_decode(model, ids, repeats, steps=64, n_prefill=256):
    model.eval()
    text = ids["text"]
    prompt = torch.tensor([text[:n_prefill]], dtype=torch.long)
    prompts8 = [text[i : i + 16 + 2 * i] for i in range(8)]
    model(prompt, use_cache=True)  # warm-up
    prefill, b1, b8 = [], [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        model(prompt, use_cache=True)
        prefill.append(n_prefill / (time.perf_counter() - t0))
        b1.append(decode_rate(model, prompts8[:1], steps))
        b8.append(decode_rate(model, prompts8, steps))
    return {
        "mode": "decode",
        "weights": "f32",
        "prefill_tokens": n_prefill,
        "decode_steps": steps,
        "prefill_tok_s": statistics.median(prefill),
        "decode_b1_tok_s": statistics.median(b1),
        "decode_b8_tok_s": statistics.median(b8),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["train", "decode"])
    ap.add_argument("--model", required=True, help="folder written by `bench_model save-hf`")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model, ids = load(args.model)
    if args.mode == "train":
        result = bench_train(model, ids, max(1, args.repeats))
    else:
        result = bench_decode(model, ids, max(1, args.repeats))
    result["impl"] = f"pytorch-{torch.__version__}"
    result["threads"] = args.threads
    result["peak_rss_mb"] = peak_rss_mb()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
