"""Trains the reference model. Resumable: rerunning with the same --out continues from the last
checkpoint (data batches are a function of (seed, step), so the result equals an uninterrupted run
up to floating-point nondeterminism of threaded BLAS).

  /usr/bin/python3 tools/train/train.py --config tools/train/configs/refmodel-4l.json --out build-train/refmodel-4l

Uses CUDA when available, the CPU otherwise (set --threads to the cores you may use).
"""
import os

# On a CPU shared with other jobs, OpenMP threads that spin while waiting burn the small share the
# scheduler gives a niced process. Measured here (2 cores, load ~20, nice 15): ~100 tokens/s before,
# ~1,000 after setting it (a niced build of ours also ended then; passive waiting is most of the
# gain). Must be set before torch starts its thread pool.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import argparse
import json
import math
import os
import time

import numpy as np
import torch
import torch.nn.functional as F

from corpus import DEFAULT_DATA_DIR, HELD_OUT_FILES, read_text
from data import TokenCorpus
from model import Llama, ModelConfig
from tokenizer import train_tokenizer


def lr_at(step, total, o):
    """Warm-up, stable, decay ("WSD"): linear warm-up, constant peak, then a cosine decay to min_lr
    over the last decay_steps steps. The LR of a step depends only on (step, total - step), so the
    length of the stable part can be changed while a run is in it without changing the past."""
    if step < o["warmup"]:
        return o["lr"] * (step + 1) / o["warmup"]
    start = total - o["decay_steps"]
    if step < start:
        return o["lr"]
    t = (step - start) / max(1, o["decay_steps"])
    return o["min_lr"] + 0.5 * (o["lr"] - o["min_lr"]) * (1 + math.cos(math.pi * min(1.0, t)))


def phase_at(step, phases):
    for ph in phases:
        if step < ph["steps"]:
            return ph
        step -= ph["steps"]
    return phases[-1]


def layers_at(cfg, step):
    """Layers of the model during `step`: a phase may train a shallower model ("n_layers"); the
    config's model.n_layers is the final depth."""
    return phase_at(step, cfg["phases"]).get("n_layers", cfg["model"]["n_layers"])


def grown_at(cfg, step):
    """First step of the run of phases with the current depth (0 if the depth never changed)."""
    start, s = 0, 0
    for ph in cfg["phases"]:
        if s > step:
            break
        if s > 0 and ph.get("n_layers", cfg["model"]["n_layers"]) != layers_at(cfg, s - 1):
            start = s
        s += ph["steps"]
    return start


def grow(model, n_layers):
    """Depth growth: the trained layers stay at the bottom, new layers go on top with their residual
    outputs (wo, w2) zeroed, so the grown model computes exactly what the shallow one did and the
    circuits it learned (induction heads) survive. Why: measured here, 2-layer models of this width
    leave the induction plateau on repeated random tokens within ~1,300 steps of 16x128 tokens, while
    4-layer ones had not after 2,400 (tools/train/configs/refmodel-4l.notes.md)."""
    cfg = ModelConfig(**dict(model.cfg.to_dict(), n_layers=n_layers))
    big = Llama(cfg)
    sd = big.state_dict()
    sd.update(model.state_dict())  # embeddings, final norm, old layers
    for i in range(model.cfg.n_layers, n_layers):
        sd[f"layers.{i}.attention.wo.weight"].zero_()
        sd[f"layers.{i}.feed_forward.w2.weight"].zero_()
    big.load_state_dict(sd)
    return big


def make_optimizer(model, o):
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": o["weight_decay"]},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=o["lr"], betas=(o["beta1"], o["beta2"]))


def weighted_loss(logits, targets, weights):
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none")
    w = weights.reshape(-1)
    return (ce * w).sum() / w.sum(), ce.mean()


@torch.no_grad()
def heldout_loss(model, ids, seq_len, n_seq, device):
    """Mean next-token loss on the first n_seq windows of held-out text (each BOS + seq_len tokens)."""
    model.eval()
    tot, cnt = 0.0, 0
    for i in range(n_seq):
        chunk = ids[i * seq_len:(i + 1) * seq_len]
        x = torch.tensor([[1] + chunk], device=device)
        logits = model(x[:, :-1])
        tot += F.cross_entropy(logits[0], x[0, 1:], reduction="sum").item()
        cnt += len(chunk)
    model.train()
    return tot / cnt


@torch.no_grad()
def induction_probe(model, vocab, device, n_seq=16, seq_len=256):
    """Top-1 accuracy on the repeats of random-token segments (period 8..64, BOS first): the share of
    tokens the model copies from one period back. ~0 before induction heads form, near 1 after."""
    g = torch.Generator().manual_seed(4242)  # the same probe at every evaluation
    hits = cnt = 0
    model.eval()
    for _ in range(n_seq):
        period = int(torch.randint(8, 65, (1,), generator=g))
        seg = torch.randint(259, vocab, (period,), generator=g)
        x = torch.cat([torch.tensor([1]), seg.repeat(seq_len // period + 1)[:seq_len]])[None].to(device)
        pred = model(x[:, :-1])[0].argmax(-1)
        hits += (pred[period:] == x[0, period + 1:]).sum().item()  # targets after the first period
        cnt += seq_len - period
    model.train()
    return hits / cnt


def save(path, model, opt, step, tokens, elapsed, history):
    tmp = path + ".tmp"
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "tokens": tokens,
                "elapsed": elapsed, "history": history, "config": model.cfg.to_dict()}, tmp)
    os.replace(tmp, path)  # atomic: a kill during save never leaves a broken checkpoint


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--out", required=True, help="work folder: tokenizer, token cache, checkpoints, log")
    ap.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=None, help="stop early (for smoke tests)")
    args = ap.parse_args()
    cfg = json.load(open(args.config))
    depths = [ph.get("n_layers", cfg["model"]["n_layers"]) for ph in cfg["phases"]]
    if depths != sorted(depths) or depths[-1] != cfg["model"]["n_layers"]:
        raise SystemExit(f"{args.config}: phase n_layers must not decrease and must end at model.n_layers "
                         f"({cfg['model']['n_layers']}); got {depths}")
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(args.threads)
    device = "cuda" if torch.cuda.is_available() else "cpu"

    sp_model = os.path.join(args.out, f"tok{cfg['vocab_size']}.model")
    if not os.path.exists(sp_model):
        train_tokenizer(args.data_dir, sp_model[:-len(".model")], cfg["vocab_size"], cfg["seed"])
    corpus = TokenCorpus(sp_model, args.data_dir, args.out, cfg["mix"], cfg["answer_weight"])
    alice_ids = corpus.enc(read_text(args.data_dir, HELD_OUT_FILES["alice"]))

    torch.manual_seed(cfg["seed"])
    o = cfg["optim"]
    total = sum(ph["steps"] for ph in cfg["phases"])
    ckpt = os.path.join(args.out, "ckpt.pt")
    step, tokens, elapsed, history = 0, 0, 0.0, []
    st = torch.load(ckpt, map_location=device) if os.path.exists(ckpt) else None
    start_layers = st["config"]["n_layers"] if st else layers_at(cfg, 0)
    model = Llama(ModelConfig(vocab_size=cfg["vocab_size"], **dict(cfg["model"], n_layers=start_layers))).to(device)
    opt = make_optimizer(model, o)
    if st:
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        step, tokens, elapsed, history = st["step"], st["tokens"], st["elapsed"], st["history"]
        print(f"resumed at step {step} ({tokens} tokens, {elapsed:.0f}s)", flush=True)
    print(f"device {device}, params {model.num_params()}, corpus {corpus.total_tokens()} tokens, "
          f"{total} steps", flush=True)
    log = open(os.path.join(args.out, "train_log.jsonl"), "a")
    stop = total if args.max_steps is None else min(total, args.max_steps)
    t_last, tok_last = time.time(), 0
    while step < stop:
        ph = phase_at(step, cfg["phases"])
        if layers_at(cfg, step) != model.cfg.n_layers:  # a phase with more layers starts: grow
            model = grow(model, layers_at(cfg, step)).to(device)
            opt = make_optimizer(model, o)
            print(f"step {step}: grew to {model.cfg.n_layers} layers, {model.num_params()} params", flush=True)
        x, w = corpus.batch(cfg["seed"], step, ph["batch"], ph["seq_len"], ph.get("mix", cfg["mix"]),
                            ph.get("copy_random", 0.2), ph.get("repeat_small_alphabet", 0.0))
        x = torch.from_numpy(x).to(device)
        w = torch.from_numpy(w).to(device)
        lr = lr_at(step, total, dict(o, lr=ph.get("lr", o["lr"])))  # a phase may set its peak LR
        grew = grown_at(cfg, step)
        if grew > 0 and step - grew < o["warmup"]:  # fresh Adam moments: warm up again
            lr *= (step - grew + 1) / o["warmup"]
        for g in opt.param_groups:
            g["lr"] = lr
        logits = model(x[:, :-1])
        loss, plain = weighted_loss(logits, x[:, 1:], w[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), o["grad_clip"]).item()
        opt.step()
        step += 1
        n_tok = ph["batch"] * ph["seq_len"]
        tokens += n_tok
        tok_last += n_tok
        now = time.time()
        elapsed += now - t_last if step > 1 or tok_last else 0
        rate = n_tok / max(1e-9, now - t_last)
        t_last = now
        rec = {"step": step, "tokens": tokens, "seq_len": ph["seq_len"], "lr": lr, "loss": loss.item(),
               "plain_loss": plain.item(), "gnorm": gnorm, "elapsed_s": round(elapsed, 1),
               "tok_per_s": round(rate)}
        if step % cfg["eval_every"] == 0 or step == total:
            rec["alice_loss_512"] = heldout_loss(model, alice_ids, 512, 8, device)
            rec["induction_top1"] = induction_probe(model, cfg["vocab_size"], device)
            history.append(rec)
        log.write(json.dumps(rec) + "\n")
        log.flush()
        if step % 10 == 0 or "alice_loss_512" in rec:
            print(json.dumps(rec), flush=True)
        if step % cfg["ckpt_every"] == 0 or step == total:
            save(ckpt, model, opt, step, tokens, elapsed, history)
            t_last = time.time()  # checkpoint I/O is not training time
        if step == total:
            torch.save({"model": model.state_dict(), "config": model.cfg.to_dict(), "step": step,
                        "tokens": tokens, "elapsed": elapsed, "history": history},
                       os.path.join(args.out, "final.pt"))
    print("done", flush=True)


if __name__ == "__main__":
    main()
