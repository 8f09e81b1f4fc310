"""Tests of the Python bindings (run by CTest `python_bindings`):
generation and KV stats equal the CLI's, quantize / dequantize round trips
for every format, the standalone KV store, and errors as Python exceptions
carrying the library's message."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import hqekv

SRC = os.environ.get("HQEKV_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
MODEL = os.path.join(SRC, "models", "stories260K.gguf")
CLI = os.environ.get("HQEKV_CLI", "hqekv")

hqekv.set_threads(1)  # the numbers of `hqekv run -t 1`


def run_cli(prompt, n, kv):
    r = subprocess.run([CLI, "run", "-m", MODEL, "-p", prompt, "--temp", "0", "-n", str(n), "-t", "1",
                        "--kv", kv], capture_output=True, text=True, check=True)
    m = re.search(r"(\d+) bytes held, ([0-9.]+) true bits", r.stderr)
    return r.stdout, int(m.group(1)), float(m.group(2))


@pytest.fixture(scope="module")
def model():
    return hqekv.Model(MODEL)


def test_metadata(model):
    assert hqekv.api_version >= 1
    assert model.n_vocab == 512 and model.arch == "llama" and len(model.identity) == 16
    ids = model.tokenize("Once upon a time")
    assert ids[0] == model.bos
    assert model.detokenize(ids[1:], prev=ids[0]) == b"Once upon a time"


@pytest.mark.parametrize("kv", ["fp16", "kivi:nominal_bits=2", "hqekv:nominal_bits=3.2"])
def test_generation_and_stats_equal_the_cli(model, kv):
    prompt = "Once upon a time"
    ctx = model.context(kv=kv, n_ctx=512)
    text = ctx.generate(prompt, max_new=30)
    out, cli_bytes, cli_bits = run_cli(prompt, 30, kv)
    assert prompt + text + "\n" == out
    st = ctx.kv_stats()
    assert st["bytes_total"] == cli_bytes
    assert round(st["true_bits"], 3) == cli_bits
    report = ctx.kv_report()
    assert len(report["layers"]) == model.n_layers and report["bytes"]["total"] == cli_bytes


def test_decode_logits_and_sampling(model):
    ctx = model.context(n_ctx=64)
    ctx.decode([model.bos])
    logits = ctx.logits()
    assert logits.shape == (512,) and logits.dtype == np.float32 and not logits.flags.writeable
    first = int(np.argmax(logits))
    toks = ctx.generate_tokens(5)
    assert toks[0] == first and ctx.n_past == 5
    ctx.reset()
    assert ctx.n_past == 0


@pytest.mark.parametrize("fmt", ["f16", "f32", "fp8e4m3", "fp8e5m2", "int8", "u1", "u2", "u4", "u8",
                                 "u4:chan", "u2:g=16:had", "n1", "n2", "n4"])
def test_quantize_round_trip(fmt):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 64)).astype(np.float32)
    codes, meta = hqekv.quantize(x, fmt)
    cb, mb = hqekv.quant_sizes(fmt, 32, 64)
    assert codes.dtype == np.uint8 and codes.size == cb and meta.size == mb
    y = hqekv.dequantize(codes, meta, fmt, 32, 64)
    assert y.shape == x.shape and y.dtype == np.float32 and np.all(np.isfinite(y))
    if fmt == "f32":
        assert np.array_equal(x, y)
    # Deterministic: the same input gives the same planes.
    codes2, meta2 = hqekv.quantize(x, fmt)
    assert np.array_equal(codes, codes2) and np.array_equal(meta, meta2)
    err = float(np.sqrt(np.mean((x - y) ** 2)))
    bound = {"u1": 1.5, "n1": 1.5, "u2": 0.9, "n2": 0.9, "u2:g=16:had": 0.9}.get(fmt, 0.35)
    assert err < bound, (fmt, err)


def test_kv_store():
    kv = hqekv.KvStore("fp32", n_layers=1, n_q_heads=2, n_kv_heads=1, head_dim=8, max_ctx=16)
    k = np.arange(8, dtype=np.float32).reshape(1, 1, 8)
    v = -np.arange(8, dtype=np.float32).reshape(1, 1, 8)
    kv.append(0, k, v, [0])
    out = kv.attend(0, np.ones((1, 2, 8), np.float32), [0])
    kv.end_batch(1, True)
    assert np.array_equal(out[0, 0], v[0, 0]) and np.array_equal(out[0, 1], v[0, 0])
    assert kv.stats()["kept_elements"] == 16 and kv.describe == "fp32"


def test_errors_carry_the_library_message(model):
    with pytest.raises(hqekv.Error, match="nonexistent"):
        hqekv.Model("/nonexistent/model.gguf")
    with pytest.raises(hqekv.Error, match="nonsense"):
        model.context(kv="nonsense")
    with pytest.raises(hqekv.Error, match="u5"):
        hqekv.quantize(np.zeros((4, 32), np.float32), "u5")
    with pytest.raises(ValueError, match="float32"):
        hqekv.quantize(np.zeros((4, 32), np.float64), "u4")
    with pytest.raises(ValueError, match="2-D"):
        hqekv.quantize(np.zeros(32, np.float32), "u4")
    ctx = model.context(n_ctx=8)
    with pytest.raises(hqekv.Error, match="outside"):
        ctx.decode([100000])
    with pytest.raises(hqekv.Error, match="decode"):
        ctx.logits()
    kv = hqekv.KvStore("fp16", 1, 1, 1, 8, 8)
    with pytest.raises(ValueError, match="shape"):
        kv.append(0, np.zeros((2, 1, 8), np.float32), np.zeros((2, 1, 8), np.float32), [0])
    with pytest.raises(hqekv.Error, match="layer"):
        kv.append(3, np.zeros((1, 1, 8), np.float32), np.zeros((1, 1, 8), np.float32), [0])


def test_compare_policies_example():
    script = os.path.join(SRC, "examples", "python", "compare_policies.py")
    specs = ["fp16", "llama:ctk=q4_0,ctv=q4_0", "kivi:nominal_bits=2"]
    r = subprocess.run([sys.executable, script, "--ctx", "256", "--chunks", "1", "-n", "8", "-t", "1",
                        "--kv", *specs], capture_output=True, text=True, check=True)
    rows = {line.split()[0]: line.split() for line in r.stdout.splitlines()[2:-1]}
    assert sorted(rows) == sorted(specs), r.stdout
    # On refmodel-4l (head_dim 64) every compressed cache is smaller than fp16's.
    assert float(rows["fp16"][3]) == 1.0
    assert float(rows["kivi:nominal_bits=2"][3]) > 1.5 and float(rows["llama:ctk=q4_0,ctv=q4_0"][3]) > 3


def test_chat_template():
    conv = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert hqekv.apply_chat_template(conv, "chatml") == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\n")
    assert hqekv.apply_chat_template(conv[1:], "gemma", add_generation_prompt=False) == (
        "<start_of_turn>user\nHi<end_of_turn>\n")
    m = hqekv.Model(MODEL)
    assert m.apply_chat_template(conv, template="phi3").endswith("<|assistant|>\n")
    with pytest.raises(hqekv.Error, match="chat_template"):
        m.apply_chat_template(conv)  # stories260K has no template
    with pytest.raises(hqekv.Error, match="role 'tool'"):
        hqekv.apply_chat_template([{"role": "tool", "content": "x"}], "chatml")
    with pytest.raises(ValueError):
        hqekv.apply_chat_template([{"role": "user"}], "chatml")


@pytest.mark.parametrize("kv", ["hqekv:nominal_bits=2", "h2o:keep=0.5"])
def test_save_and_load_state(model, kv, tmp_path):
    prompt = model.tokenize("Once upon a time, there was a little dog who liked to run")
    a = model.context(kv=kv, n_ctx=256)
    a.decode(prompt)
    path = str(tmp_path / "s.kv")
    a.save_state(path)
    b = model.context(kv=kv, n_ctx=256)
    b.load_state(path)
    c = model.context(kv=kv, n_ctx=256)
    c.set_state_bytes(a.state_bytes())
    assert b.n_past == c.n_past == len(prompt)
    assert b.kv_stats() == a.kv_stats() == c.kv_stats()
    for _ in range(40):
        tok = int(np.argmax(a.logits()))
        for ctx in (a, b, c):
            ctx.decode([tok])
        assert np.array_equal(a.logits(), b.logits()) and np.array_equal(a.logits(), c.logits())
    assert b.kv_stats() == a.kv_stats()
    # A damaged file or another spec: an error with the library's message, b unchanged.
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 1
    open(path, "wb").write(bytes(data))
    with pytest.raises(hqekv.Error, match="checksum"):
        b.load_state(path)
    with pytest.raises(hqekv.Error, match="KV policy"):
        model.context(kv="fp16", n_ctx=256).set_state_bytes(a.state_bytes())
    assert b.n_past == len(prompt) + 40


# KvStore arrays are checked against the store's geometry, not their own shape:
# a q with fewer heads than the store would be over-read, one with more would
# get an output buffer the library overruns.
def test_kv_store_shapes_are_checked_against_the_store():
    kv = hqekv.KvStore("fp32", n_layers=1, n_q_heads=4, n_kv_heads=2, head_dim=8, max_ctx=16)
    kv.append(0, np.zeros((1, 2, 8), np.float32), np.zeros((1, 2, 8), np.float32), [0])
    for bad_q in [(1, 1, 8), (1, 8, 8), (1, 4, 4), (1, 4, 64), (2, 4, 8)]:
        with pytest.raises(ValueError, match="expected shape"):
            kv.attend(0, np.ones(bad_q, np.float32), [0])
    for bad_kv in [(1, 1, 8), (1, 4, 8), (1, 2, 4), (1, 2, 16)]:
        with pytest.raises(ValueError, match="expected shape"):
            kv.append(0, np.zeros(bad_kv, np.float32), np.zeros(bad_kv, np.float32), [1])
    with pytest.raises(ValueError, match="expected shape"):
        kv.append(0, np.zeros((1, 2, 8), np.float32), np.zeros((1, 1, 8), np.float32), [1])
    out = kv.attend(0, np.ones((1, 4, 8), np.float32), [0])
    assert out.shape == (1, 4, 8)


# Sizes past the C API's int and strings with an embedded NUL are refused,
# never narrowed or cut (a cut path would write another file).
def test_sizes_and_nul_strings_are_refused(model, tmp_path):
    huge = np.zeros((2**31, 0), np.float32)  # no bytes, 2^31 rows
    with pytest.raises(ValueError, match="more than"):
        hqekv.quantize(huge, "u4")
    target = str(tmp_path / "state.kv")
    ctx = model.context(n_ctx=16)
    ctx.decode([model.bos])
    with pytest.raises(ValueError, match="NUL"):
        ctx.save_state(target + "\0.ignored")
    assert not os.path.exists(target)
    with pytest.raises(ValueError, match="NUL"):
        model.context(kv="fp16\0garbage")
    with pytest.raises(ValueError, match="NUL"):
        hqekv.quantize(np.zeros((4, 32), np.float32), "u4\0x")
    with pytest.raises(ValueError, match="NUL"):
        hqekv.Model(MODEL + "\0x")
    with pytest.raises(ValueError, match="NUL"):
        hqekv.apply_chat_template([{"role": "user", "content": "a\0b"}], "chatml")


# A property loop over the argument layer (Hypothesis is not packaged in
# Debian): random shapes, dtypes, layers and positions either work or raise
# ValueError / hqekv.Error; the process never crashes. 300 cases, seeded.
def test_argument_layer_property_loop():
    rng = np.random.default_rng(42)
    kv = hqekv.KvStore("fp16", n_layers=2, n_q_heads=4, n_kv_heads=2, head_dim=8, max_ctx=32)
    dtypes = [np.float32, np.float64, np.float16, np.int32]
    for _ in range(300):
        n = int(rng.integers(0, 4))
        shape = tuple(int(x) for x in rng.integers(0, 10, size=int(rng.integers(1, 5))))
        arr = np.zeros(shape, dtypes[int(rng.integers(0, len(dtypes)))])
        if rng.random() < 0.3:
            arr = arr.T  # not C-contiguous for ndim >= 2
        layer = int(rng.integers(-2, 4))
        pos = [int(p) for p in rng.integers(-3, 40, size=n)]
        op = int(rng.integers(0, 3))
        try:
            if op == 0:
                kv.append(layer, arr, arr, pos)
            elif op == 1:
                out = kv.attend(layer, arr, pos)
                assert out.shape == (n, 4, 8)
            else:
                hqekv.quantize(arr, ["u4", "f16", "int8", "u2:g=16:had"][int(rng.integers(0, 4))])
        except (ValueError, hqekv.Error):
            pass
