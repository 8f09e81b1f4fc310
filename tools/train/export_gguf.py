"""Writes a trained checkpoint as GGUF v3 (architecture "llama", F32 tensors, tokenizer inside).

  /usr/bin/python3 tools/train/export_gguf.py --ckpt build-train/refmodel-4l/final.pt \
      --tokenizer build-train/refmodel-4l/tok2048.model --name refmodel-4l --out models/refmodel-4l.gguf

Layout facts (GGUF spec / llama.cpp conventions):
- A PyTorch Linear weight [out, in] is stored row-major; its ggml shape is ne = [in, out].
- Q/K are exported as trained: the model already rotates adjacent pairs (no HF permutation).
- Tied embeddings: no output.weight tensor; the engine reuses token_embd.weight.
- Tokenizer: tokenizer.ggml.model "llama" with tokens/scores/token_type taken from the SentencePiece
  model (types: 1 normal, 2 unknown, 3 control, 6 byte), BOS 1, EOS 2, UNK 0, as stories260K.gguf.
"""
import argparse
import os
import struct

import numpy as np
import sentencepiece as spm
import torch

ALIGN = 32
T_UINT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY, T_INT32 = 4, 6, 7, 8, 9, 5


def _str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _kv(key, vtype, value):
    out = _str(key) + struct.pack("<I", vtype)
    if vtype == T_STRING:
        return out + _str(value)
    if vtype == T_UINT32:
        return out + struct.pack("<I", value)
    if vtype == T_INT32:
        return out + struct.pack("<i", value)
    if vtype == T_FLOAT32:
        return out + struct.pack("<f", value)
    if vtype == T_BOOL:
        return out + struct.pack("<?", value)
    raise ValueError(vtype)


def _kv_array(key, etype, values):
    out = _str(key) + struct.pack("<IIQ", T_ARRAY, etype, len(values))
    if etype == T_STRING:
        return out + b"".join(_str(v) for v in values)
    fmt = {T_FLOAT32: "f", T_INT32: "i", T_UINT32: "I"}[etype]
    return out + struct.pack(f"<{len(values)}{fmt}", *values)


def tokenizer_kvs(sp_path):
    sp = spm.SentencePieceProcessor(model_file=sp_path)
    tokens, scores, types = [], [], []
    for i in range(sp.vocab_size()):
        tokens.append(sp.id_to_piece(i))
        scores.append(sp.get_score(i))
        if sp.is_unknown(i):
            types.append(2)
        elif sp.is_control(i):
            types.append(3)
        elif sp.is_byte(i):
            types.append(6)
        elif sp.is_unused(i):
            types.append(5)
        else:
            types.append(1)
    return [
        _kv("tokenizer.ggml.model", T_STRING, "llama"),
        _kv_array("tokenizer.ggml.tokens", T_STRING, tokens),
        _kv_array("tokenizer.ggml.scores", T_FLOAT32, scores),
        _kv_array("tokenizer.ggml.token_type", T_INT32, types),
        _kv("tokenizer.ggml.bos_token_id", T_UINT32, sp.bos_id()),
        _kv("tokenizer.ggml.eos_token_id", T_UINT32, sp.eos_id()),
        _kv("tokenizer.ggml.unknown_token_id", T_UINT32, sp.unk_id()),
        _kv("tokenizer.ggml.add_bos_token", T_BOOL, True),
        _kv("tokenizer.ggml.add_eos_token", T_BOOL, False),
    ], sp.vocab_size()


def gguf_tensors(state, n_layers):
    """(gguf name, float32 numpy array in PyTorch shape) in file order."""
    def t(k):
        return state[k].detach().cpu().float().numpy()
    out = [("token_embd.weight", t("tok_embeddings.weight"))]
    names = [("attention_norm.weight", "attn_norm.weight"), ("attention.wq.weight", "attn_q.weight"),
             ("attention.wk.weight", "attn_k.weight"), ("attention.wv.weight", "attn_v.weight"),
             ("attention.wo.weight", "attn_output.weight"), ("ffn_norm.weight", "ffn_norm.weight"),
             ("feed_forward.w1.weight", "ffn_gate.weight"), ("feed_forward.w3.weight", "ffn_up.weight"),
             ("feed_forward.w2.weight", "ffn_down.weight")]
    for i in range(n_layers):
        for src, dst in names:
            out.append((f"blk.{i}.{dst}", t(f"layers.{i}.{src}")))
    out.append(("output_norm.weight", t("norm.weight")))
    return out


def export(ckpt_path, sp_path, name, out_path, force=False):
    if os.path.exists(out_path) and not force:
        raise SystemExit(f"{out_path} exists; pass --force to overwrite")
    st = torch.load(ckpt_path, map_location="cpu")
    c = st["config"]
    tok_kvs, n_vocab = tokenizer_kvs(sp_path)
    if n_vocab != c["vocab_size"]:
        raise SystemExit(f"tokenizer has {n_vocab} tokens, model {c['vocab_size']}")
    head_dim = c["dim"] // c["n_heads"]
    kvs = [
        _kv("general.architecture", T_STRING, "llama"),
        _kv("general.name", T_STRING, name),
        _kv("general.alignment", T_UINT32, ALIGN),
        _kv("llama.context_length", T_UINT32, c["max_seq_len"]),
        _kv("llama.embedding_length", T_UINT32, c["dim"]),
        _kv("llama.block_count", T_UINT32, c["n_layers"]),
        _kv("llama.feed_forward_length", T_UINT32, c["ffn_dim"]),
        _kv("llama.rope.dimension_count", T_UINT32, head_dim),
        _kv("llama.attention.head_count", T_UINT32, c["n_heads"]),
        _kv("llama.attention.head_count_kv", T_UINT32, c["n_kv_heads"]),
        _kv("llama.attention.layer_norm_rms_epsilon", T_FLOAT32, c["norm_eps"]),
        _kv("llama.rope.freq_base", T_FLOAT32, c["rope_theta"]),
        _kv("llama.vocab_size", T_UINT32, c["vocab_size"]),
    ] + tok_kvs
    tensors = gguf_tensors(st["model"], c["n_layers"])
    infos, blobs, off = [], [], 0
    for tname, arr in tensors:
        ne = list(reversed(arr.shape))  # ggml ne[0] is the fastest-varying (last PyTorch) dimension
        infos.append(_str(tname) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
                     + struct.pack("<IQ", 0, off))  # type 0 = F32
        data = np.ascontiguousarray(arr, dtype="<f4").tobytes()
        pad = (-len(data)) % ALIGN
        blobs.append(data + b"\0" * pad)
        off += len(data) + pad
    header = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs) + b"".join(infos)
    header += b"\0" * ((-len(header)) % ALIGN)
    tmp = out_path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(header)
        for b in blobs:
            f.write(b)
    os.replace(tmp, out_path)
    return out_path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args()
    print(export(a.ckpt, a.tokenizer, a.name, a.out, a.force), os.path.getsize(a.out), "bytes")


if __name__ == "__main__":
    main()
