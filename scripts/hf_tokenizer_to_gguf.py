#!/usr/bin/env python3
"""Hugging Face tokenizer.json + tokenizer_config.json -> a GGUF file holding
tokenizer metadata only (no tensors), with the keys llama.cpp's converter
(convert_hf_to_gguf.py) writes for a byte-level BPE vocabulary:

  tokenizer.ggml.model        "gpt2"
  tokenizer.ggml.pre          the pre-tokenizer name ("llama-bpe", "qwen2",
                              "deepseek-v3"), recognised from the
                              pre_tokenizer regexes in tokenizer.json (llama.cpp
                              recognises it by hashing a test tokenization;
                              both name the same split rules), or --pre
  tokenizer.ggml.tokens       every id from 0 to the largest, added tokens
                              included; a hole becomes "[PAD<id>]" (unused)
  tokenizer.ggml.token_type   1 normal, 3 control (special added tokens and
                              added tokens that look special: <|...|>,
                              <｜...｜>), 4 user-defined (other added tokens),
                              5 unused
  tokenizer.ggml.merges       "a b" strings, in rank order
  tokenizer.ggml.{bos,eos,unknown,padding}_token_id  from tokenizer_config.json
  tokenizer.ggml.add_bos_token / add_eos_token       from tokenizer_config.json,
                              else from a TemplateProcessing post-processor
  tokenizer.chat_template     tokenizer_config.json's chat_template

SentencePiece vocabularies (Llama 2, Gemma: a BPE model with byte_fallback,
pieces spelled with "▁" for a space) get the keys llama.cpp's converter writes
from a tokenizer.model:

  tokenizer.ggml.model        "llama"
  tokenizer.ggml.tokens       the pieces by id ("▁" kept, bytes as <0xNN>)
  tokenizer.ggml.scores       the merge priority: SentencePiece BPE merges the
                              adjacent pair whose joined piece scores highest,
                              and Hugging Face's converter wrote tokenizer.json's
                              merges in that order (best first), so a piece made
                              by merge rank r scores -r (its first merge), added
                              tokens included; pieces no merge makes (characters,
                              bytes, most added tokens) score -1e9, never preferred
  tokenizer.ggml.token_type   1 normal, 2 unknown, 3 control (added tokens marked
                              special), 4 user-defined (other added tokens),
                              6 byte (<0xNN>)
  tokenizer.ggml.add_space_prefix  true when the normalizer prepends "▁"
                              (Llama 2), false otherwise (Gemma 3)
  and the same bos/eos/unk/pad ids, add_bos/add_eos and chat template.

hqekv (and llama.cpp) load such a file as a tokenizer: `hqekv tokenize -m
OUT.gguf`. With --arch-stub the file also names architecture "llama" with a
one-layer geometry (no tensors), so that llama.cpp loads it vocabulary-only
(node-llama-cpp: loadModel({vocabOnly: true})).

Usage: hf_tokenizer_to_gguf.py TOKENIZER_JSON TOKENIZER_CONFIG_JSON OUT.gguf [--pre NAME] [--arch-stub]
Standard library only.
"""
import argparse
import json
import os
import struct
import sys
import tempfile

# GGUF value types (gguf.h).
T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY = 4, 5, 6, 7, 8, 9

TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNUSED, TOKEN_BYTE = 1, 2, 3, 4, 5, 6

# Score of SentencePiece pieces that no merge makes: below every merge rank.
SCORE_NO_MERGE = -1e9

# Split regexes of the pre-tokenizers hqekv implements, as tokenizer.json
# spells them (the Split steps of the pre_tokenizer, in order).
KNOWN_PRE = {
    "llama-bpe": [
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
    ],
    "qwen2": [
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
    ],
}


def split_regexes(pre):
    """The Split regexes of a pre_tokenizer, in order."""
    if not pre:
        return []
    if pre.get("type") == "Sequence":
        out = []
        for p in pre.get("pretokenizers", []):
            out += split_regexes(p)
        return out
    if pre.get("type") == "Split":
        pat = pre.get("pattern", {})
        return [pat.get("Regex", pat.get("String", ""))]
    return []


def detect_pre(tok):
    regexes = split_regexes(tok.get("pre_tokenizer"))
    for name, want in KNOWN_PRE.items():
        if regexes == want:
            return name
    # DeepSeek V3: digits in threes, CJK runs, then its word regex.
    if len(regexes) == 3 and regexes[0] == "\\p{N}{1,3}" and "\u4e00" in regexes[1]:
        return "deepseek-v3"
    return None


def token_text(v):
    """A tokenizer_config special-token entry: a string or an AddedToken dict."""
    if isinstance(v, dict):
        return v.get("content")
    return v


def looks_special(t):
    return (t.startswith("<|") and t.endswith("|>")) or (t.startswith("<｜") and t.endswith("｜>"))


def pieces_by_id(tok):
    """vocab (piece -> id, added tokens included), added (id -> entry) and the
    pieces by id, None in the holes."""
    vocab = dict(tok["model"]["vocab"])
    added = {a["id"]: a for a in tok.get("added_tokens", [])}
    for i, a in added.items():
        vocab[a["content"]] = i
    tokens = [None] * (max(vocab.values()) + 1)
    for t, i in vocab.items():
        tokens[i] = t
    return vocab, added, tokens


def is_spm(tok):
    """A SentencePiece-style BPE: byte fallback, pieces with "▁" for spaces."""
    model = tok.get("model", {})
    return model.get("type") == "BPE" and bool(model.get("byte_fallback"))


def normalizers(tok):
    n = tok.get("normalizer") or {}
    return n.get("normalizers", []) if n.get("type") == "Sequence" else [n]


def build_spm(tok, cfg):
    """tokenizer.ggml.* keys of a SentencePiece vocabulary ("llama" model)."""
    model = tok["model"]
    norms = normalizers(tok)
    if not any(n.get("type") == "Replace" and n.get("pattern", {}).get("String") == " "
               and n.get("content") == "\u2581" for n in norms):
        raise SystemExit("error: a byte-fallback BPE whose normalizer does not turn ' ' into '\u2581': "
                         "not a SentencePiece vocabulary this converter knows")
    if tok.get("pre_tokenizer") and not (tok["pre_tokenizer"].get("type") == "Split" and
                                         tok["pre_tokenizer"].get("pattern", {}).get("String") == " "):
        # Gemma 3's Split on " " runs after the normalizer has replaced every
        # space, so it splits nothing; any other pre-tokenizer changes the pieces.
        raise SystemExit(f"error: SentencePiece vocabulary with pre_tokenizer "
                         f"{tok['pre_tokenizer'].get('type')!r}: not converted")
    add_space_prefix = any(n.get("type") == "Prepend" and n.get("prepend") == "\u2581" for n in norms)
    vocab, added, tokens = pieces_by_id(tok)
    n = len(tokens)
    rank = {}
    for r, m in enumerate(model.get("merges", [])):
        piece = "".join(m) if isinstance(m, list) else m.replace(" ", "", 1)
        rank.setdefault(piece, r)
    unk = model.get("unk_token")
    scores, types = [], []
    for i in range(n):
        t = tokens[i]
        if t is None:
            tokens[i] = t = f"[PAD{i}]"
            types.append(TOKEN_UNUSED)
        elif i in added and t != unk:
            types.append(TOKEN_CONTROL if added[i].get("special") else TOKEN_USER_DEFINED)
        elif t == unk:
            types.append(TOKEN_UNKNOWN)
        elif len(t) == 6 and t.startswith("<0x") and t.endswith(">"):
            types.append(TOKEN_BYTE)
        else:
            types.append(TOKEN_NORMAL)
        # Gemma 3's whitespace runs ("▁▁", ...) are added tokens that merges make too.
        scores.append(-float(rank[t]) if t in rank else SCORE_NO_MERGE)
    kv = [("tokenizer.ggml.model", T_STRING, "llama"),
          ("tokenizer.ggml.tokens", T_ARRAY, (T_STRING, tokens)),
          ("tokenizer.ggml.scores", T_ARRAY, (T_FLOAT32, scores)),
          ("tokenizer.ggml.token_type", T_ARRAY, (T_INT32, types)),
          ("tokenizer.ggml.add_space_prefix", T_BOOL, add_space_prefix)]
    return kv + special_keys(tok, cfg, vocab)


def build(tok, cfg, pre):
    model = tok.get("model", {})
    if model.get("type") != "BPE":
        raise SystemExit(f"error: tokenizer.json model type {model.get('type')!r}: only BPE is converted")
    if is_spm(tok):
        return build_spm(tok, cfg)
    vocab, added, tokens = pieces_by_id(tok)
    n = len(tokens)
    types = []
    for i in range(n):
        if tokens[i] is None:
            tokens[i] = f"[PAD{i}]"
            types.append(TOKEN_UNUSED)
        elif i in added:
            types.append(TOKEN_CONTROL if added[i].get("special") or looks_special(tokens[i])
                         else TOKEN_USER_DEFINED)
        else:
            types.append(TOKEN_NORMAL)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]

    kv = [("tokenizer.ggml.model", T_STRING, "gpt2"), ("tokenizer.ggml.pre", T_STRING, pre),
          ("tokenizer.ggml.tokens", T_ARRAY, (T_STRING, tokens)),
          ("tokenizer.ggml.token_type", T_ARRAY, (T_INT32, types)),
          ("tokenizer.ggml.merges", T_ARRAY, (T_STRING, merges))]
    return kv + special_keys(tok, cfg, vocab)


def special_keys(tok, cfg, vocab):
    """bos/eos/unk/pad ids, add_bos/add_eos and the chat template."""
    kv = []
    for key, name in (("bos_token", "bos"), ("eos_token", "eos"), ("unk_token", "unknown"),
                      ("pad_token", "padding")):
        t = token_text(cfg.get(key))
        if t is not None and t in vocab:
            kv.append((f"tokenizer.ggml.{name}_token_id", T_UINT32, vocab[t]))
    add_bos, add_eos = cfg.get("add_bos_token"), cfg.get("add_eos_token")
    post = tok.get("post_processor") or {}
    procs = post.get("processors", [post]) if post.get("type") == "Sequence" else [post]
    for p in procs:
        if p.get("type") == "TemplateProcessing":
            single = p.get("single", [])
            bos = token_text(cfg.get("bos_token"))
            eos = token_text(cfg.get("eos_token"))
            first = single[0].get("SpecialToken", {}).get("id") if single else None
            last = single[-1].get("SpecialToken", {}).get("id") if single else None
            if add_bos is None:
                add_bos = first is not None and first == bos
            if add_eos is None:
                add_eos = last is not None and last == eos
    if add_bos is not None:
        kv.append(("tokenizer.ggml.add_bos_token", T_BOOL, bool(add_bos)))
    if add_eos is not None:
        kv.append(("tokenizer.ggml.add_eos_token", T_BOOL, bool(add_eos)))
    tmpl = cfg.get("chat_template")
    if isinstance(tmpl, list):  # named templates: the default one
        tmpl = next((t["template"] for t in tmpl if t.get("name") == "default"), None)
    if isinstance(tmpl, str):
        kv.append(("tokenizer.chat_template", T_STRING, tmpl))
    return kv


# The keys llama.cpp needs before it reads a vocabulary (architecture llama,
# one layer of width 64): no tensors follow, so only a vocabulary-only load works.
ARCH_STUB = [("general.architecture", T_STRING, "llama"), ("general.name", T_STRING, "tokenizer-only"),
             ("llama.context_length", T_UINT32, 4096), ("llama.embedding_length", T_UINT32, 64),
             ("llama.block_count", T_UINT32, 1), ("llama.feed_forward_length", T_UINT32, 128),
             ("llama.attention.head_count", T_UINT32, 1), ("llama.attention.head_count_kv", T_UINT32, 1),
             ("llama.attention.layer_norm_rms_epsilon", T_FLOAT32, 1e-5),
             ("llama.rope.dimension_count", T_UINT32, 64)]


def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def gguf_value(vtype, value):
    if vtype == T_STRING:
        return gguf_string(value)
    if vtype == T_UINT32:
        return struct.pack("<I", value)
    if vtype == T_BOOL:
        return struct.pack("<?", value)
    if vtype == T_FLOAT32:
        return struct.pack("<f", value)
    if vtype == T_ARRAY:
        etype, items = value
        out = [struct.pack("<IQ", etype, len(items))]
        if etype == T_STRING:
            out += [gguf_string(x) for x in items]
        elif etype == T_INT32:
            out.append(struct.pack(f"<{len(items)}i", *items))
        elif etype == T_FLOAT32:
            out.append(struct.pack(f"<{len(items)}f", *items))
        return b"".join(out)
    raise ValueError(vtype)


def write_gguf(path, kv):
    body = [b"GGUF", struct.pack("<IQQ", 3, 0, len(kv))]
    for key, vtype, value in kv:
        body += [gguf_string(key), struct.pack("<I", vtype), gguf_value(vtype, value)]
    data = b"".join(body)
    # Atomic: a temporary file in the same directory, then rename.
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tokenizer_json")
    ap.add_argument("tokenizer_config_json")
    ap.add_argument("out")
    ap.add_argument("--pre", help="pre-tokenizer name (default: recognised from tokenizer.json)")
    ap.add_argument("--arch-stub", action="store_true",
                    help="also name architecture llama with a 1-layer geometry, so that llama.cpp "
                         "loads the file vocabulary-only")
    a = ap.parse_args()
    with open(a.tokenizer_json, encoding="utf-8") as f:
        tok = json.load(f)
    with open(a.tokenizer_config_json, encoding="utf-8") as f:
        cfg = json.load(f)
    stub = ARCH_STUB if a.arch_stub else []
    if is_spm(tok):
        kv = build(tok, cfg, None)
        write_gguf(a.out, stub + kv)
        print(f"{a.out}: llama (SentencePiece), {len(kv[1][2][1])} tokens, space prefix "
              f"{kv[4][2]}, {len(stub + kv)} keys")
        return
    pre = a.pre or detect_pre(tok)
    if pre is None:
        sys.exit(f"error: {a.tokenizer_json}: pre_tokenizer not recognised "
                 f"(known: {', '.join(KNOWN_PRE)}, deepseek-v3); name one with --pre")
    kv = build(tok, cfg, pre)
    write_gguf(a.out, stub + kv)
    n_tokens = len(kv[2][2][1])
    print(f"{a.out}: gpt2 / {pre}, {n_tokens} tokens, {len(kv[4][2][1])} merges, {len(stub + kv)} keys")


if __name__ == "__main__":
    main()
