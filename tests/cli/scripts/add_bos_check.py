"""`ppl` puts BOS first only when the model file asks for it (issue 14).

Makes a copy of a GGUF whose tokenizer.ggml.add_bos_token is true with that
bool flipped to false (one byte), then runs `hqekv ppl --json` on both:
  plain mode: the no-BOS copy scores a text of exactly one token fewer;
  compare mode (--kv): each chunk no longer starts with BOS, so the KL differs.
Usage: add_bos_check.py HQEKV MODEL WORKDIR
"""
import json
import os
import subprocess
import sys

KEY = b"tokenizer.ggml.add_bos_token"
GGUF_BOOL = 7  # GGUF metadata value type of a bool


def no_bos_copy(model, out):
    data = bytearray(open(model, "rb").read())
    i = data.find(KEY)
    assert i > 0, f"{model} has no {KEY.decode()}"
    t = i + len(KEY)  # uint32 value type, then the 1-byte value
    assert int.from_bytes(data[t:t + 4], "little") == GGUF_BOOL, "add_bos_token is not a bool"
    assert data[t + 4] == 1, f"{model}: add_bos_token is already false"
    data[t + 4] = 0
    with open(out, "wb") as f:
        f.write(data)


def ppl(hqekv, model, text, *extra):
    r = subprocess.run([hqekv, "ppl", "-m", model, "-f", text, "--json", "-t", "1", *extra],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"ppl failed ({r.returncode}): {r.stderr}"
    return json.loads(r.stdout)


def main():
    hqekv, model, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    nobos = os.path.join(work, "no-bos.gguf")
    no_bos_copy(model, nobos)
    text = os.path.join(work, "text.txt")
    with open(text, "w") as f:
        f.write("Once upon a time there was a little cat who liked to sit in the sun. " * 12)

    a = ppl(hqekv, model, text, "--ctx", "64")
    b = ppl(hqekv, nobos, text, "--ctx", "64")
    assert b["tokens"] == a["tokens"] - 1, f"tokens with BOS {a['tokens']}, without {b['tokens']}"

    kv = ("--kv", "kivi:nominal_bits=2,residual=32", "--ctx", "64", "--chunks", "2")
    a = ppl(hqekv, model, text, *kv)["statistics"]["ppl_base"]
    b = ppl(hqekv, nobos, text, *kv)["statistics"]["ppl_base"]
    assert a != b, f"compare mode: the same base perplexity {a} with and without BOS"
    print("add_bos_token=false: one token fewer, chunks start without BOS")


if __name__ == "__main__":
    main()
