#!/usr/bin/env python3
"""PyTorch side of the paired GPU benchmark (docs/policy.md, "GPU benchmark").

Reads what `rlvmr bench-policy --weights DIR` wrote: config.json, model.safetensors (the same
random weights; without it, PyTorch draws its own of the same shape) and bench_inputs.json
(the same step samples and prompts), and times on the GPU with transformers' model:

  update:   one mini-batch of step samples in micro-batches grouped by length (right-padded,
            no attention mask needed: padding only follows the real tokens), the reply
            positions' hidden states gathered before the LM head, log-softmax, the PPO-clip
            loss as policy::ppo computes it (clip 0.2/0.2, dual clip 3, k3 KL 0.01 clamped at
            10, entropy 0.001, token mean over the mini-batch), backward per micro-batch,
            clip_grad_norm_(1.0), torch.optim.AdamW (lr 1e-6, weight decay 0.01); and its
            forward, backward and optimizer parts timed apart;
  logprobs: the same samples' reply log-probs under torch.no_grad();
  sample:   model.generate on the prompts left-padded in one batch, temperature 0.7, every
            reply run to --new-tokens (min_new_tokens), KV cache; the prefill timed apart.

f32 weights; matrix products in f32 unless --tf32 (then TF32 for matmuls, as the Rust side's
--tf32). Prints one JSON object (and writes it to --out).
"""

import argparse
import json
import statistics
import time

import torch


def load(weights, device):
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.from_pretrained(weights)
    try:
        model = AutoModelForCausalLM.from_pretrained(weights, dtype=torch.float32)
        source = "model.safetensors"
    except OSError:
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
        source = "random (config.json only)"
    with open(f"{weights}/bench_inputs.json") as f:
        inputs = json.load(f)
    return model.to(device), inputs, source


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(f):
    sync()
    t0 = time.perf_counter()
    out = f()
    sync()
    return time.perf_counter() - t0, out


def median_of(repeats, warm_up, f):
    warm_up()
    times = [timed(f)[0] for _ in range(max(1, repeats))]
    return statistics.median(times), times


def micro_batches(pairs, rows):
    order = sorted(range(len(pairs)), key=lambda i: (len(pairs[i][0]) + len(pairs[i][1]), i))
    return [order[k : k + rows] for k in range(0, len(order), rows)]


def reply_scores(model, pairs, rows, device, temperature=1.0):
    """Log-probs and entropies of the reply tokens of `rows`, flattened in row order."""
    width = max(len(pairs[i][0]) + len(pairs[i][1]) for i in rows)
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    positions, targets = [], []
    for r, i in enumerate(rows):
        p, a = pairs[i]
        ids[r, : len(p) + len(a)] = torch.tensor(p + a)
        positions += [r * width + len(p) - 1 + k for k in range(len(a))]
        targets += a
    ids = ids.to(device)
    hidden = model.model(input_ids=ids).last_hidden_state
    hidden = hidden.reshape(-1, hidden.shape[-1])[torch.tensor(positions, device=device)]
    logits = model.lm_head(hidden / temperature)
    logp_all = torch.log_softmax(logits, dim=-1)
    targets = torch.tensor(targets, device=device)
    logp = logp_all.gather(-1, targets[:, None]).squeeze(-1)
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logp, entropy


def ppo_loss(logp, entropy, old, ref, adv, denom):
    """policy::ppo's objective with the published settings (the default PpoLossConfig)."""
    log_ratio = (logp - old).clamp(-20.0, 20.0)
    ratio = log_ratio.exp()
    pg1 = -adv * ratio
    pg2 = -adv * ratio.clamp(1 - 0.2, 1 + 0.2)
    clipped = torch.maximum(pg1, pg2)
    dual = torch.minimum(-adv * 3.0, clipped)
    pg = torch.where(adv < 0, dual, clipped)
    d = ref - logp
    kl = (d.exp() - d - 1).clamp(-10.0, 10.0)
    return (pg + 0.01 * kl - 0.001 * entropy).sum() / denom


def bench_update(model, pairs, rows, repeats, device):
    model.train()
    batches = micro_batches(pairs, rows)
    adv_of = [1.0 if i % 2 == 0 else -0.5 for i in range(len(pairs))]
    with torch.no_grad():
        old = {}
        for mb in batches:
            logp, _ = reply_scores(model, pairs, mb, device)
            old[tuple(mb)] = logp.detach()
    denom = float(sum(len(a) for _, a in pairs))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6, weight_decay=0.01)

    def step(mbs):
        for mb in mbs:
            logp, entropy = reply_scores(model, pairs, mb, device)
            adv = torch.tensor([adv_of[i] for i in mb for _ in pairs[i][1]], device=device)
            o = old[tuple(mb)]
            ppo_loss(logp, entropy, o, o, adv, denom).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    seconds, all_ = median_of(repeats, lambda: step(batches[:1]), lambda: step(batches))
    # The parts, apart.
    fwd = bwd = 0.0
    for mb in batches:
        adv = torch.tensor([adv_of[i] for i in mb for _ in pairs[i][1]], device=device)
        t, loss = timed(lambda: ppo_loss(*reply_scores(model, pairs, mb, device), old[tuple(mb)], old[tuple(mb)], adv, denom))
        fwd += t
        bwd += timed(loss.backward)[0]
    opt_s, _ = timed(lambda: (torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0), opt.step(), opt.zero_grad(set_to_none=True)))
    tokens = sum(len(p) + len(a) for p, a in pairs)
    return {
        "samples": len(pairs), "micro_batch": rows, "tokens": tokens, "reply_tokens": int(denom),
        "seconds": seconds, "seconds_all": all_, "tokens_per_s": tokens / seconds,
        "forward_s": fwd, "backward_s": bwd, "optimizer_s": opt_s,
    }


@torch.no_grad()
def bench_logprobs(model, pairs, rows, repeats, device):
    model.eval()
    batches = micro_batches(pairs, rows)

    def run(mbs):
        return sum(reply_scores(model, pairs, mb, device)[0].double().sum() for mb in mbs)

    seconds, all_ = median_of(repeats, lambda: run(batches[:1]), lambda: run(batches))
    tokens = sum(len(p) + len(a) for p, a in pairs)
    return {"samples": len(pairs), "micro_batch": rows, "tokens": tokens, "seconds": seconds,
            "seconds_all": all_, "tokens_per_s": tokens / seconds, "logprob_sum": float(run(batches))}


@torch.no_grad()
def bench_sample(model, prompts, new_tokens, repeats, device):
    model.eval()
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts], device=device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)

    def generate(n, rows=None):
        sl = slice(None) if rows is None else slice(0, rows)
        out = model.generate(input_ids=ids[sl], attention_mask=mask[sl], do_sample=True, temperature=0.7,
                             top_k=0, top_p=1.0, max_new_tokens=n, min_new_tokens=n, pad_token_id=0,
                             eos_token_id=None, use_cache=True)
        assert out.shape[1] == width + n, out.shape
        return out

    seconds, all_ = median_of(repeats, lambda: generate(4, 4), lambda: generate(new_tokens))
    prefill_s, _ = timed(lambda: model(input_ids=ids, attention_mask=mask, use_cache=True, logits_to_keep=1))
    new = len(prompts) * new_tokens
    return {"prompts": len(prompts), "prompt_tokens": sum(map(len, prompts)), "new_tokens": new_tokens,
            "temperature": 0.7, "seconds": seconds, "seconds_all": all_, "new_tokens_per_s": new / seconds,
            "prefill_s": prefill_s, "decode_tokens_per_s": new / (seconds - prefill_s)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weights", required=True, help="the folder `rlvmr bench-policy --weights` wrote")
    ap.add_argument("--phases", default="update,logprobs,sample")
    ap.add_argument("--micro-batch", type=int, default=None, help="default: the Rust run's")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--tf32", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--device", default="cuda", help="cuda, or cpu to try the script on a small case")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    device = torch.device(args.device)
    torch.manual_seed(0)
    model, inputs, source = load(args.weights, device)
    pairs = [tuple(p) for p in inputs["pairs"]]
    rows = args.micro_batch or inputs["micro_batch"]
    name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    report = {"impl": f"pytorch-{torch.__version__}", "device": name,
              "weights": source, "dtype": "f32", "matmul": "tf32" if args.tf32 else "f32",
              "attention": model.config._attn_implementation}
    for phase in [p for p in args.phases.split(",") if p]:
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
        if phase == "update":
            figures = bench_update(model, pairs, rows, args.repeats, device)
        elif phase == "logprobs":
            figures = bench_logprobs(model, pairs, rows, args.repeats, device)
        elif phase == "sample":
            figures = bench_sample(model, inputs["prompts"], inputs["new_tokens"], args.repeats, device)
        else:
            raise SystemExit(f"unknown phase {phase!r}: expected update, logprobs or sample")
        if device.type == "cuda":
            figures["peak_allocated_gb"] = torch.cuda.max_memory_allocated() / 1e9
        report[phase] = figures
        print(phase, json.dumps(figures), flush=True)
    print(json.dumps(report))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f)


if __name__ == "__main__":
    main()
