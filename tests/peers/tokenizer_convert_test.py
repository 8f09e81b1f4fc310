#!/usr/bin/env python3
"""scripts/hf_tokenizer_to_gguf.py on small hand-made tokenizer.json files
(offline), a byte-level BPE one and a SentencePiece-style one (byte fallback,
"▁" for spaces): the GGUF it writes holds llama.cpp's keys with the expected
values, and `hqekv tokenize` on it gives the ids the merges imply.
Usage: tokenizer_convert_test.py HQEKV_BINARY
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LLAMA3_REGEX = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
                "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")


def byte_chars():
    """GPT-2's byte -> printable character map, in byte order."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return [out[b] for b in range(256)]


def read_gguf_kv(path):
    data = open(path, "rb").read()
    assert data[:4] == b"GGUF", "not a GGUF file"
    _, n_tensors, n_kv = struct.unpack_from("<IQQ", data, 4)
    off = 24

    def string():
        nonlocal off
        (n,) = struct.unpack_from("<Q", data, off)
        off += 8
        s = data[off:off + n].decode("utf-8")
        off += n
        return s

    def value(t):
        nonlocal off
        if t == 8:
            return string()
        fmt = {4: "<I", 5: "<i", 6: "<f", 7: "<?"}[t]
        (v,) = struct.unpack_from(fmt, data, off)
        off += struct.calcsize(fmt)
        return v

    kv = {}
    for _ in range(n_kv):
        k = string()
        (t,) = struct.unpack_from("<I", data, off)
        off += 4
        if t == 9:
            et, n = struct.unpack_from("<IQ", data, off)
            off += 12
            kv[k] = [value(et) for _ in range(n)]
        else:
            kv[k] = value(t)
    return n_tensors, kv


def main():
    hqekv = sys.argv[1]
    chars = byte_chars()
    vocab = {c: i for i, c in enumerate(chars)}
    merges = [["a", "b"], ["Ġ", "ab"]]
    for a, b in merges:
        vocab[a + b] = len(vocab)
    # id len(vocab) is left out: a hole the converter fills.
    added = [{"id": len(vocab) + 1, "content": "<|end|>", "special": True},
             {"id": len(vocab) + 2, "content": "<tool>", "special": False}]
    tok = {"model": {"type": "BPE", "vocab": vocab, "merges": merges, "ignore_merges": True},
           "added_tokens": added,
           "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
               {"type": "Split", "pattern": {"Regex": LLAMA3_REGEX}, "behavior": "Isolated"},
               {"type": "ByteLevel", "add_prefix_space": False}]},
           "post_processor": {"type": "TemplateProcessing", "single": [
               {"SpecialToken": {"id": "<|end|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}]}}
    cfg = {"bos_token": "<|end|>", "eos_token": {"content": "<|end|>", "__type": "AddedToken"},
           "chat_template": "{{ messages[0].content }}"}
    with tempfile.TemporaryDirectory() as d:
        tj, cj, out = (os.path.join(d, n) for n in ("tokenizer.json", "tokenizer_config.json", "t.gguf"))
        json.dump(tok, open(tj, "w"))
        json.dump(cfg, open(cj, "w"))
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "hf_tokenizer_to_gguf.py"), tj, cj, out],
                       check=True)
        n_tensors, kv = read_gguf_kv(out)
        ab, gab, hole, end, tool = 256, 257, 258, 259, 260
        assert n_tensors == 0
        assert kv["tokenizer.ggml.model"] == "gpt2" and kv["tokenizer.ggml.pre"] == "llama-bpe", kv
        assert kv["tokenizer.ggml.tokens"][hole] == f"[PAD{hole}]"
        types = kv["tokenizer.ggml.token_type"]
        assert (types[ab], types[hole], types[end], types[tool]) == (1, 5, 3, 4), types[250:]
        assert kv["tokenizer.ggml.merges"] == ["a b", "Ġ ab"]
        assert kv["tokenizer.ggml.bos_token_id"] == end and kv["tokenizer.ggml.eos_token_id"] == end
        assert kv["tokenizer.ggml.add_bos_token"] is True  # from the TemplateProcessing
        assert kv["tokenizer.chat_template"] == cfg["chat_template"]
        texts = os.path.join(d, "texts.json")
        json.dump(["ab ab<|end|>", "ba"], open(texts, "w"))
        got = json.loads(subprocess.run([hqekv, "tokenize", "-m", out, "--texts", texts, "--parse-special"],
                                        check=True, capture_output=True, text=True).stdout)
        want = [[ab, gab, end], [vocab["b"], vocab["a"]]]
        assert got == want, (got, want)
        got = json.loads(subprocess.run([hqekv, "tokenize", "-m", out, "--texts", texts, "--bos"],
                                        check=True, capture_output=True, text=True).stdout)
        assert got[1] == [end, vocab["b"], vocab["a"]], got  # BOS as the file asks
        assert end not in got[0][1:], got  # without --parse-special "<|end|>" is text
    spm_case(hqekv)
    print("hf_tokenizer_to_gguf.py: keys and tokenization as expected")


def spm_case(hqekv):
    """A Llama-2-style tokenizer.json: <unk> <s> </s>, 256 byte tokens, pieces."""
    sp = "\u2581"
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for p in (sp, "a", "b", "ab", sp + "ab", "ba"):
        vocab[p] = len(vocab)
    merges = ["a b", f"{sp} ab", "b a"]  # rank 0, 1, 2
    tok = {"model": {"type": "BPE", "vocab": vocab, "merges": merges, "byte_fallback": True,
                     "unk_token": "<unk>", "fuse_unk": True},
           "added_tokens": [{"id": i, "content": t, "special": True} for t, i in
                            (("<unk>", 0), ("<s>", 1), ("</s>", 2))],
           "normalizer": {"type": "Sequence", "normalizers": [
               {"type": "Prepend", "prepend": sp},
               {"type": "Replace", "pattern": {"String": " "}, "content": sp}]},
           "pre_tokenizer": None}
    cfg = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "add_bos_token": True}
    with tempfile.TemporaryDirectory() as d:
        tj, cj, out = (os.path.join(d, n) for n in ("tokenizer.json", "tokenizer_config.json", "t.gguf"))
        json.dump(tok, open(tj, "w"))
        json.dump(cfg, open(cj, "w"))
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "hf_tokenizer_to_gguf.py"), tj, cj, out,
                        "--arch-stub"], check=True)
        n_tensors, kv = read_gguf_kv(out)
        assert n_tensors == 0
        assert kv["general.architecture"] == "llama" and kv["llama.block_count"] == 1, kv.keys()
        assert kv["tokenizer.ggml.model"] == "llama" and "tokenizer.ggml.merges" not in kv
        assert kv["tokenizer.ggml.add_space_prefix"] is True  # the Prepend normalizer
        ids = {p: vocab[p] for p in (sp, "a", "b", "ab", sp + "ab", "ba")}
        types = kv["tokenizer.ggml.token_type"]
        assert types[:3] == [2, 3, 3] and types[3] == 6 and types[258] == 6, types[:4]
        assert all(types[i] == 1 for i in ids.values()), types[259:]
        scores = kv["tokenizer.ggml.scores"]
        # Merge rank r -> score -r; pieces no merge makes are never preferred.
        assert (scores[ids["ab"]], scores[ids[sp + "ab"]], scores[ids["ba"]]) == (0.0, -1.0, -2.0), scores[259:]
        assert scores[ids["a"]] < -1e8 and scores[3] < -1e8
        assert kv["tokenizer.ggml.bos_token_id"] == 1 and kv["tokenizer.ggml.add_bos_token"] is True
        texts = os.path.join(d, "texts.json")
        # "ab ab" -> "▁ab▁ab": a+b first (rank 0), then ▁+ab; "bab": b+a (rank 2)
        # loses to a+b (rank 0) -> b, ab; "c" has no piece -> its byte.
        json.dump(["ab ab", "bab", "c", "a<unk>"], open(texts, "w"))
        got = json.loads(subprocess.run([hqekv, "tokenize", "-m", out, "--texts", texts, "--parse-special"],
                                        check=True, capture_output=True, text=True).stdout)
        want = [[ids[sp + "ab"], ids[sp + "ab"]], [ids[sp], ids["b"], ids["ab"]], [ids[sp], 3 + ord("c")],
                [ids[sp], ids["a"], 0]]
        assert got == want, (got, want)


if __name__ == "__main__":
    main()
