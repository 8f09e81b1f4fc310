"""Tests of the high-level Python API (python/hqekv/__init__.py): generate /
stream / stop strings equal to the CLI's greedy text, perplexity() equal to
`hqekv ppl --json`, pareto() rows and frontier, default_model(), and type
stubs that declare every public name of the extension."""
import ast
import json
import os
import subprocess

import pytest

import hqekv
from hqekv import _hqekv

SRC = os.environ.get("HQEKV_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
CLI = os.environ.get("HQEKV_CLI", "hqekv")
REFMODEL = os.path.join(SRC, "models", "refmodel-4l.gguf")
TEXT = os.path.join(SRC, "data", "text", "wiki.test.raw")

hqekv.set_threads(1)


@pytest.fixture(scope="module")
def ref():
    return hqekv.Model(REFMODEL)


def cli_run(prompt, n, kv):
    r = subprocess.run([CLI, "run", "-m", REFMODEL, "-p", prompt, "--temp", "0", "-n", str(n), "-t",
                        "1", "--kv", kv], capture_output=True, text=True, check=True)
    assert r.stdout.startswith(prompt)
    return r.stdout[len(prompt):].rstrip("\n")


@pytest.mark.parametrize("kv", ["fp16", "hqekv:bits=3.4"])
def test_generate_equals_the_cli(ref, kv):
    text = ref.generate("Once upon a time", kv=kv, max_tokens=24)
    assert text == cli_run("Once upon a time", 24, kv)
    assert text  # refmodel-4l continues this prompt


def test_stream_gives_the_same_text_in_pieces(ref):
    whole = ref.generate("The history of", max_tokens=20)
    pieces = list(ref.generate("The history of", max_tokens=20, stream=True))
    assert len(pieces) > 1 and "".join(pieces) == whole


def test_stop_strings_end_the_text_before_them(ref):
    whole = ref.generate("The history of", max_tokens=30)
    # A stop string taken from the middle of the greedy text: the text ends right before it.
    stop = whole[len(whole) // 2:len(whole) // 2 + 3]
    cut = ref.generate("The history of", max_tokens=30, stop=[stop])
    assert cut == whole[:whole.index(stop)]
    streamed = "".join(ref.generate("The history of", max_tokens=30, stop=stop, stream=True))
    assert streamed == cut


def test_max_tokens_zero_and_negative(ref):
    assert ref.generate("Once", max_tokens=0) == ""
    with pytest.raises(ValueError):
        ref.generate("Once", max_tokens=-1)


def test_chat_renders_the_template_and_answers(ref):
    out = ref.chat([{"role": "user", "content": "Hello"}], max_tokens=8, template="chatml")
    assert isinstance(out, str)


def test_perplexity_equals_hqekv_ppl(ref):
    with open(TEXT, encoding="utf-8") as f:
        text = f.read()[:20000]
    r = ref.perplexity(text, kv="llama:ctk=q4_0,ctv=q4_0", n_ctx=128, n_chunks=2)
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"hqekv-ppl-{os.getpid()}.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    try:
        cli = subprocess.run([CLI, "ppl", "-m", REFMODEL, "-f", path, "--kv", "llama:ctk=q4_0,ctv=q4_0", "--ref",
                              "fp16", "--ctx", "128", "--chunks", "2", "-t", "1", "--json"],
                             capture_output=True, text=True, check=True)
    finally:
        os.remove(path)
    j = json.loads(cli.stdout)
    st = j["statistics"]
    assert r.scored == 128  # 2 chunks x (128 - 64 prefill)
    assert r.kl == pytest.approx(st["kld"]["value"], rel=1e-9, abs=1e-12)
    assert r.top1 == pytest.approx(st["same_top"]["value"], rel=1e-12)
    assert r.ppl == pytest.approx(st["ppl_test"]["value"], rel=1e-9)
    assert r.bytes == j["kv_end"]["bytes"]
    assert r.kl_max == pytest.approx(st["kld_quantiles"]["max"], rel=1e-9)
    assert r.kl > 0 and 0 < r.top1 <= 1 and r.x_smaller > 3  # 4.5-bit blocks against fp16
    fp16 = ref.perplexity(text, kv="fp16", n_ctx=128, n_chunks=2)
    assert fp16.kl == 0 and fp16.top1 == 1 and fp16.x_smaller == pytest.approx(1.0)


def test_shipped_layer_budgets_apply_from_any_directory(ref, tmp_path, monkeypatch):
    # profiles/refmodel-4l/layer-bits.txt holds refmodel-4l's per-layer budgets;
    # hqekv:bits=B uses them by default (shipped=1), whatever the working folder.
    line = [l for l in open(os.path.join(SRC, "profiles", "refmodel-4l", "layer-bits.txt"))
            if l.startswith("layer_bits=")][0].strip()
    with open(TEXT, encoding="utf-8") as f:
        text = f.read()[:8000]
    monkeypatch.chdir(tmp_path)
    default = ref.perplexity(text, kv="hqekv:bits=4.6", n_ctx=256, n_chunks=1)
    explicit = ref.perplexity(text, kv="hqekv:bits=4.6," + line, n_ctx=256, n_chunks=1)
    without = ref.perplexity(text, kv="hqekv:bits=4.6,shipped=0", n_ctx=256, n_chunks=1)
    assert default.kl == explicit.kl and default.bytes == explicit.bytes
    assert default.kl != without.kl


def test_pareto_rows_sorted_with_the_frontier(ref):
    with open(TEXT, encoding="utf-8") as f:
        text = f.read()[:8000]
    rows = hqekv.pareto(ref, text, ["fp16", "llama:ctk=q4_0,ctv=q4_0", "llama:ctk=q8_0,ctv=q8_0"], n_ctx=128, n_chunks=1)
    if not isinstance(rows, list):  # pandas installed
        rows = rows.to_dict("records")
    assert [r["spec"] for r in rows] == ["llama:ctk=q4_0,ctv=q4_0", "llama:ctk=q8_0,ctv=q8_0", "fp16"]
    assert all(r["on_frontier"] for r in rows)  # fewer bits, more KL, in this order
    assert rows[0]["kl"] > rows[1]["kl"] > rows[2]["kl"] == 0


def test_default_model_and_bundled_text():
    path = hqekv.default_model()
    assert os.path.basename(path) == "refmodel-4l.gguf" and os.path.isfile(path)
    assert os.path.basename(hqekv.default_model("stories260K")) == "stories260K.gguf"
    with pytest.raises(FileNotFoundError):
        hqekv.default_model("no-such-model")
    assert "Robert Boulter" in hqekv.bundled_text("wiki.test.raw")[:2000]


def test_bad_spec_is_a_library_error(ref):
    with pytest.raises(hqekv.Error, match="kv"):
        ref.perplexity("some text to score here and there", kv="nonsense:x=1", n_ctx=4)
    with pytest.raises(hqekv.Error):
        ref.generate("Once", kv="kivi:bits=banana", max_tokens=2)


def _stub_names(tree):
    names = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
        elif isinstance(node, ast.FunctionDef):
            names[node.name] = None
        elif isinstance(node, ast.AnnAssign):
            names[node.target.id] = None
    return names


def test_stubs_declare_every_public_name_of_the_extension():
    stub = os.path.join(os.path.dirname(hqekv.__file__), "_hqekv.pyi")
    with open(stub, encoding="utf-8") as f:
        declared = _stub_names(ast.parse(f.read()))
    for name in dir(_hqekv):
        if name.startswith("_") and name != "__version__":
            continue
        assert name in declared, f"_hqekv.{name} is missing from _hqekv.pyi"
        obj = getattr(_hqekv, name)
        if isinstance(obj, type) and declared[name] is not None:
            for attr in vars(obj):
                if attr.startswith("_"):
                    continue
                assert attr in declared[name], f"_hqekv.{name}.{attr} is missing from _hqekv.pyi"


def test_embed_pools_the_hidden_states(ref):
    import numpy as np
    text = "Alice was beginning to get very tired of sitting by her sister on the bank."
    e = ref.embed(text)
    assert e.shape == (ref.n_embd,) and abs(float(np.linalg.norm(e)) - 1.0) < 1e-5
    # The mean of the per-token rows, normalised, is the pooled vector.
    ctx = ref.context(kv="fp16", n_ctx=256)
    ctx.set_embeddings(True)
    ids = ref.tokenize(text, add_bos=ref.add_bos)
    ctx.decode(ids)
    rows = ctx.embeddings()
    assert rows.shape == (len(ids), ref.n_embd)
    mean = rows.mean(axis=0)
    assert np.allclose(e, mean / np.linalg.norm(mean), atol=1e-5)
    assert np.allclose(ctx.embedding("last", False), rows[-1])
    # A related sentence is closer than an unrelated one.
    near = ref.embed("Alice was getting tired of sitting next to her sister on the bank.")
    far = ref.embed("The stock market fell sharply on Tuesday after the quarterly report.")
    assert float(e @ near) > float(e @ far)
    with pytest.raises(ValueError, match="pooling"):
        ctx.embedding("max")
    ctx.reset()
    with pytest.raises(hqekv.Error, match="no embeddings"):
        ctx.embeddings()
