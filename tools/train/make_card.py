"""Writes the model card (markdown + an SVG loss curve) from the config, training log and eval JSON.

  /usr/bin/python3 tools/train/make_card.py --config tools/train/configs/refmodel-4l.json \
      --work build-train/refmodel-4l --out models/refmodel-4l.md
"""
import argparse
import hashlib
import json
import os

import torch

from corpus import DEFAULT_DATA_DIR, HELD_OUT_FILES, TRAIN_FILES, sha256

LICENCES = {"gutenberg": "public domain", "kjv": "public domain", "tinyshakespeare": "public domain",
            "dictd": "public domain"}


def svg_curve(points, w=640, h=300):
    """points: list of (tokens, loss, seq_len); returns an SVG line chart (no dependencies)."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, x1, y0, y1 = 0, max(xs), min(ys) * 0.95, max(ys) * 1.02
    px = lambda x: 50 + (w - 70) * (x - x0) / (x1 - x0)
    py = lambda y: h - 40 - (h - 60) * (y - y0) / (y1 - y0)
    path = " ".join(f"{'M' if i == 0 else 'L'}{px(x):.1f},{py(y):.1f}" for i, (x, y) in enumerate(zip(xs, ys)))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<path d="{path}" fill="none" stroke="#1f77b4" stroke-width="1.2"/>',
           f'<line x1="50" y1="{h-40}" x2="{w-20}" y2="{h-40}" stroke="black"/>',
           f'<line x1="50" y1="20" x2="50" y2="{h-40}" stroke="black"/>',
           f'<text x="{w/2}" y="{h-8}" text-anchor="middle">training tokens (M)</text>',
           f'<text x="12" y="{h/2}" transform="rotate(-90 12 {h/2})" text-anchor="middle">train loss (weighted, 20-step mean)</text>']
    for k in range(6):
        y = y0 + (y1 - y0) * k / 5
        out.append(f'<text x="45" y="{py(y)+4:.1f}" text-anchor="end">{y:.2f}</text>')
        x = x0 + (x1 - x0) * k / 5
        out.append(f'<text x="{px(x):.1f}" y="{h-26}" text-anchor="middle">{x/1e6:.2f}</text>')
    prev = None
    for x, _, t in points:  # phase boundaries
        if prev is not None and t != prev:
            out.append(f'<line x1="{px(x):.1f}" y1="20" x2="{px(x):.1f}" y2="{h-40}" stroke="#aaa" stroke-dasharray="3,3"/>')
            out.append(f'<text x="{px(x)+3:.1f}" y="30">ctx {t}</text>')
        prev = t
    out.append("</svg>")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    a = ap.parse_args()
    cfg = json.load(open(a.config))
    name = cfg["name"]
    by_step = {}
    for line in open(os.path.join(a.work, "train_log.jsonl")):  # a resumed run re-logs a few steps
        r = json.loads(line)
        by_step[r["step"]] = r
    log = [by_step[k] for k in sorted(by_step)]
    ev_path = os.path.join(a.work, "eval.json")
    ev = json.load(open(ev_path)) if os.path.exists(ev_path) else None
    gguf = os.path.join(os.path.dirname(os.path.abspath(a.out)), name + ".gguf")
    if not os.path.exists(gguf):
        gguf = os.path.join("models", name + ".gguf")
    tok = os.path.join(a.work, f"tok{cfg['vocab_size']}.model")
    m = cfg["model"]
    last = log[-1]
    # 20-step running means of the weighted training loss.
    pts = []
    for i in range(19, len(log), 5):
        win = log[i - 19:i + 1]
        pts.append((log[i]["tokens"], sum(r["loss"] for r in win) / 20, log[i]["seq_len"]))
    svg_name = name + ".loss.svg"
    if pts:
        with open(os.path.join(os.path.dirname(a.out), svg_name), "w") as f:
            f.write(svg_curve(pts))
    L = []
    add = L.append
    add(f"# {name}: hqekv's long-context reference model\n")
    add("A small Llama-architecture model trained by this project on a CPU (tools/train/), shipped so "
        "that KV-cache compression can be evaluated on realistic heads (head_dim 64, GQA) and on tasks "
        "where distant tokens matter. It is a research fixture, not a useful language model.\n")
    if ev is not None and (ev["passkey_mean"] < 0.9 or ev["copy_top1_from2"] < 0.9):
        add(f"> **Status: the retrieval targets of issue 7 are not met** (passkey {ev['passkey_mean']:.0%}, copy "
            f"{ev['copy_top1_from2']:.1%} at {ev['ctx']} tokens; targets 90%). The model runs in the engine and "
            "matches PyTorch; see *Evaluation* and *Outcome* below.\n")
    elif ev is not None:
        add(f"> **Status: the retrieval targets of issue 7 are met** at {ev['ctx']} tokens with full attention: "
            f"passkey {ev['passkey_mean']:.0%} exact match, copy {ev['copy_top1_from2']:.1%} top-1 (targets 90%).\n")
    add("## Architecture\n")
    st = torch.load(os.path.join(a.work, "final.pt" if os.path.exists(os.path.join(a.work, "final.pt")) else "ckpt.pt"), map_location="cpu")
    n_params = sum(v.numel() for v in st["model"].values())
    add("| | |\n|---|---|")
    for k, v in [("architecture", "llama (GGUF), decoder-only"), ("parameters", f"{n_params:,} (tied embeddings)"),
                 ("d_model", m["dim"]), ("layers", m["n_layers"]),
                 ("heads", f"{m['n_heads']} query, {m['n_kv_heads']} KV (GQA), head_dim {m['dim'] // m['n_heads']}"),
                 ("FFN", f"SwiGLU, d_ff {m['ffn_dim']}"), ("norm", f"RMSNorm, eps {m['norm_eps']}"),
                 ("RoPE", f"theta {m['rope_theta']:g}, adjacent-pair (GGUF llama) rotation, all {m['dim'] // m['n_heads']} dims"),
                 ("context", f"{m['max_seq_len']} (trained up to {max(p['seq_len'] for p in cfg['phases'])})"),
                 ("vocab", f"{cfg['vocab_size']} (SentencePiece BPE, byte fallback)"),
                 ("file", f"`models/{name}.gguf`, GGUF v3, all tensors F32, {os.path.getsize(gguf):,} bytes"
                  + (f", SHA-256 `{hashlib.sha256(open(gguf, 'rb').read()).hexdigest()}`" if os.path.exists(gguf) else ""))]:
        add(f"| {k} | {v} |")
    add("\n## Tokenizer\n")
    add(f"SentencePiece BPE, {cfg['vocab_size']} pieces, trained on the training files only "
        "(tools/train/tokenizer.py): byte fallback (`<0x00>`..`<0xFF>` = ids 3..258), identity "
        "normalisation, dummy prefix `▁`, whitespace runs kept, digits split into single tokens, every "
        "printable ASCII character a piece; `<unk>` 0, `<s>` (BOS) 1, `</s>` (EOS) 2. Stored in the GGUF "
        "as `tokenizer.ggml.model = llama` with tokens, scores and token types, like stories260K.gguf. "
        f"SHA-256 of the .model file: `{hashlib.sha256(open(tok, 'rb').read()).hexdigest()}`.\n")
    add("## Data\n")
    add(f"Seed {cfg['seed']}. Training files (from `shared/data/`, see its SOURCES.md), sampled in "
        "proportion to their token counts (KJV and the dictionaries at half weight):\n")
    add("| file | SHA-256 | licence |\n|---|---|---|")
    for rel in TRAIN_FILES:
        lic = next(v for k, v in LICENCES.items() if k in rel)
        add(f"| `{rel}` | `{sha256(a.data_dir, rel)}` | {lic} |")
    add("\nHeld out (never seen by the tokenizer or the model):\n")
    add("| file | SHA-256 | why |\n|---|---|---|")
    why = {"alice": "the held-out book (evaluation)", "wiki_test": "evaluation text (CC BY-SA 3.0)",
           "wiki_valid": "calibration text (CC BY-SA 3.0)",
           "tinystories": "evaluation text of the bundled stories model (CDLA-Sharing-1.0)"}
    for k, rel in HELD_OUT_FILES.items():
        add(f"| `{rel}` | `{sha256(a.data_dir, rel)}` | {why[k]} |")
    mix = cfg["mix"]
    add(f"\nDocument mix per training sequence (every sequence starts with BOS): "
        + ", ".join(f"{k} {v:.0%}" for k, v in mix.items()) + ". Synthetic documents "
        "(tools/train/data.py) put their facts inside filler (training-corpus text, or the classic "
        "repeated \"The grass is green. ...\" haystack): *passkey* (\"The pass key is 48213. Remember it. "
        "48213 is the pass key.\" at a uniform random depth, then \"What is the pass key? The pass key is "
        "48213.\"; also secret-number/secret-word variants and the eval harness's head sentence), *kv* "
        "(\"The special magic number for WORD is NNNNN.\" facts, one or two asked at the end), *vartrack* "
        "(chains of \"VAR ABCDE = 12345.\" / \"VAR FGHIJ = VAR ABCDE.\"), *copy* (a 16–400-token corpus "
        f"passage, or random tokens, repeated later), *repeat* (a 4–64-token random segment repeated to the end of the sequence; in phases that set a small-alphabet share, that share of repeat segments is 12–64 tokens over the ten digits or 4–16 random pieces). Answer tokens have loss weight {cfg['answer_weight']}, "
        "repeated passages 2, everything else 1. Pass keys, values and filler in the evaluation come "
        "from the held-out book, so they were never trained on.\n")
    add("## Training\n")
    o = cfg["optim"]
    peaks = sorted({ph.get("lr", o["lr"]) for ph in cfg["phases"]})
    add(f"AdamW (beta {o['beta1']}, {o['beta2']}, weight decay {o['weight_decay']} on matrices), gradient clip "
        f"{o['grad_clip']}; learning rate: {o['warmup']} linear warm-up steps, then constant at the phase's peak "
        f"({', '.join(f'{x:g}' for x in peaks)}; see the table), then a cosine decay to {o['min_lr']} over the "
        f"last {o['decay_steps']} steps. Float32 on the CPU (2 threads, OpenBLAS). Curriculum:\n")
    add("| phase | layers | context | batch | steps | tokens | peak LR | mix natural/passkey/kv/vartrack/copy/repeat | random share of copy | small-alphabet share of repeat |\n|---|---:|---:|---:|---:|---:|---:|---|---:|---:|")
    for i, ph in enumerate(cfg["phases"]):
        mx = ph.get("mix", cfg["mix"])
        mtxt = "/".join(f"{mx.get(k, 0):.2f}" for k in ("natural", "passkey", "kv", "vartrack", "copy", "repeat"))
        add(f"| {i+1} | {ph.get('n_layers', m['n_layers'])} | {ph['seq_len']} | {ph['batch']} | {ph['steps']} | {ph['steps']*ph['batch']*ph['seq_len']:,} | "
            f"{ph.get('lr', o['lr']):g} | {mtxt} | {ph.get('copy_random', 0.2):.2f} | {ph.get('repeat_small_alphabet', 0.0):.1f} |")
    add(f"\nTrained: {last['step']} steps, {last['tokens']:,} tokens, {last['elapsed_s']/60:.0f} minutes "
        "(sum of the training steps' wall-clock times, restarts and checkpoint writes not counted).\n")
    add("Loss curve (weighted training loss, and the plain next-token loss on the first 4,096 tokens "
        "of the held-out book at context 512):\n")
    probe = any("induction_top1" in r for r in log)
    add("| step | tokens | context | train loss (20-step mean) | held-out loss |"
        + (" induction probe top-1 |\n|---:|---:|---:|---:|---:|---:|" if probe else "\n|---:|---:|---:|---:|---:|"))
    for r in log:
        if "alice_loss_512" in r:
            i = r["step"] - 1
            win = log[max(0, i - 19):i + 1]
            add(f"| {r['step']} | {r['tokens']:,} | {r['seq_len']} | {sum(x['loss'] for x in win)/len(win):.3f} | "
                f"{r['alice_loss_512']:.3f} |" + (f" {r['induction_top1']:.1%} |" if probe else ""))
    if probe:
        add("\nInduction probe: top-1 accuracy on 16 fixed sequences of a random-token segment (period 8–64) "
            "repeated to 256 tokens, counted after the first period (tools/train/train.py `induction_probe`).")
    if pts:
        add(f"\n![loss curve]({svg_name})\n")
    notes = os.path.splitext(a.config)[0] + ".notes.md"
    if os.path.exists(notes):
        add(open(notes).read().strip() + "\n")
    add("## Evaluation (PyTorch, float32, full attention)\n")
    if ev is None:
        add("Not evaluated yet.\n")
    else:
        add(f"Command: `/usr/bin/python3 tools/train/{ev.get('command', 'evaluate.py')}` (seed {ev['seed']}); "
            "filler, passages and haystacks from the held-out book.\n")
        add(f"**Passkey** at {ev['ctx']} tokens, 5 digits, exact match, {ev['passkey_trials_per_depth']} "
            "trials per depth (prompt as in src/eval/tasks.cc):\n")
        add("| depth | " + " | ".join(ev["passkey"].keys()) + " | mean |")
        add("|---" * (len(ev["passkey"]) + 2) + "|")
        add(f"| ctx {ev['ctx']} | " + " | ".join(f"{v:.0%}" for v in ev["passkey"].values()) + f" | {ev['passkey_mean']:.1%} |")
        for k in ev:
            if k.startswith("passkey_ctx"):
                add(f"| ctx {k[11:]} | " + " | ".join(f"{v:.0%}" for v in ev[k].values()) + " | |")
        add(f"\n**Copy**: a 200-token passage repeated at the end of a {ev['ctx']}-token context, "
            f"{ev['copy_trials']} trials: top-1 accuracy {ev['copy_top1_from2']:.1%} over the repeat's "
            f"tokens 2..200 ({ev['copy_top1_all']:.1%} counting the first).\n")
        add(f"**Multi-key** (4 keys, \"special magic number\"), {ev['ctx']} tokens: {ev['multikey4']:.0%} exact match.\n")
        if "ppl" in ev:
            cut = (f" Texts longer than {ev['ppl_max_tokens']:,} tokens were cut at a line end to about their first "
                   f"{ev['ppl_max_tokens']:,} tokens to fit the CPU time (the tokens column gives what was scored)."
                   if ev.get("ppl_max_tokens") else "")
            add(f"**Held-out perplexity** (non-overlapping windows of {ev['ctx']} tokens, BOS first, every token "
                f"scored; per byte/char of the LF-normalised text).{cut}\n")
            add("| text | tokens | ppl / token | bits / byte | ppl / char |\n|---|---:|---:|---:|---:|")
            for k, v in ev["ppl"].items():
                add(f"| {k} | {v['tokens']:,} | {v['ppl_token']:.2f} | {v['bits_per_byte']:.3f} | {v['ppl_char']:.3f} |")
        add("")
    add("## Reproduce\n")
    add("```\nbash tools/train/setup.sh      # Debian python3-torch, sentencepiece, OpenBLAS\n"
        f"FORCE=1 nice -n 15 bash tools/train/train.sh   # config tools/train/configs/{name}.json\n```\n")
    add("The run is resumable (rerun the same command) and uses CUDA when present. Data batches are a "
        "pure function of (seed, step); threaded BLAS makes float sums, hence the weights, not bit-exact "
        "between runs.\n")
    add("## Licence\n")
    add("Training data: Project Gutenberg books, the King James Bible, Tiny Shakespeare, Bierce's *Devil's "
        "Dictionary* and the Jargon File 4.4.7 are public domain. WikiText-2 (CC BY-SA) and the "
        "TinyStories subset (CDLA-Sharing-1.0) were not trained on. The weights are released with the "
        "project's code.\n")
    add("## Golden logits\n")
    add(f"`tests/data/{name}.golden.json` / `.golden.f32`: logits of the PyTorch model for a fixed 16-token "
        "prompt (tools/train/golden.py); `tests/model/refmodel_golden_test.cc` checks the engine "
        "against them (max abs difference <= 1e-3).\n")
    with open(a.out, "w") as f:
        f.write("\n".join(L))
    print("wrote", a.out)


if __name__ == "__main__":
    main()
