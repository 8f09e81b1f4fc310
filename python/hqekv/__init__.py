"""hqekv: long-context LLM inference with a compressed KV cache.

The high-level API, for the few lines a kvpress or llama-cpp-python user
writes::

    import hqekv
    m = hqekv.Model(hqekv.default_model())            # bundled refmodel-4l
    print(m.generate("Once upon a time", kv="hqekv:bits=3.4", max_tokens=32))
    for piece in m.generate("Once", max_tokens=16, stream=True):
        print(piece, end="", flush=True)
    r = m.perplexity(hqekv.bundled_text("wiki.test.raw"), kv="kivi:bits=2")
    print(r.kl, r.top1, r.bits_per_element, r.x_smaller)
    table = hqekv.pareto(m, text, ["fp16", "llama:bits=8.5", "hqekv:bits=3.4"])

The binding's objects (Model.context, Context, Sampler, KvStore, quantize,
dequantize, ...) are here too; ``help(hqekv.Context)`` documents them.
Library errors raise :class:`hqekv.Error` (a RuntimeError) with the
library's message; wrong arguments raise ValueError.
"""
from __future__ import annotations

import codecs
import dataclasses
import os
import sys
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Union

from . import _hqekv
from ._hqekv import (  # noqa: F401  (re-exported)
    Context,
    Error,
    KvStore,
    Sampler,
    __version__,
    api_version,
    apply_chat_template,
    dequantize,
    quant_sizes,
    quantize,
    set_threads,
)

__all__ = [
    "Model", "Context", "Sampler", "KvStore", "Error", "PerplexityResult", "pareto",
    "default_model", "bundled_text", "data_dir", "quantize", "dequantize", "quant_sizes",
    "apply_chat_template", "set_threads", "__version__", "api_version",
]

_BUNDLED_MODELS = ("refmodel-4l.gguf", "stories260K.gguf")


def _data_candidates() -> List[str]:
    """Folders that may hold the bundled models/ and data/text/, in order."""
    here = os.path.dirname(os.path.abspath(__file__))
    out = []
    env = os.environ.get("HQEKV_DATA_DIR")
    if env:
        out.append(env)
    out.append(os.path.join(here, "data"))  # inside a wheel
    out.append(os.path.join(sys.prefix, "share", "hqekv"))  # a venv / pip --prefix
    # `cmake --install`: PREFIX/lib/python3/dist-packages/hqekv -> PREFIX/share/hqekv;
    # the build tree: build/python/hqekv -> the repository; the source tree: python/hqekv.
    up = here
    for _ in range(5):
        up = os.path.dirname(up)
        out.append(os.path.join(up, "share", "hqekv"))
        out.append(up)
    src = os.environ.get("HQEKV_SOURCE_DIR")
    if src:
        out.append(src)
    return out


def data_dir() -> str:
    """The folder holding the bundled models/ (and data/text/ when present)."""
    tried = []
    for d in _data_candidates():
        tried.append(d)
        if any(os.path.isfile(os.path.join(d, "models", f)) for f in _BUNDLED_MODELS):
            return d
    raise FileNotFoundError("hqekv: no bundled models found; looked in " + ", ".join(tried) +
                            " (set HQEKV_DATA_DIR to a folder holding models/)")


def _point_the_library_at_bundled_data() -> None:
    """The library finds the calibration profiles shipped for a model
    (profiles/<model>/layer-bits.txt: the per-layer budgets of hqekv:bits=B)
    under $HQEKV_DATA_DIR or next to the running executable. In Python that
    executable is the interpreter, so without this a wheel's or the build
    tree's profiles would be found only from the repository's folder, and a
    result would depend on the working directory. Sets $HQEKV_DATA_DIR (this
    process only) to the first data folder that holds profiles/, unless the
    user set it."""
    if os.environ.get("HQEKV_DATA_DIR"):
        return
    for d in _data_candidates():
        if os.path.isdir(os.path.join(d, "profiles")):
            os.environ["HQEKV_DATA_DIR"] = d
            return


_point_the_library_at_bundled_data()


def default_model(name: str = "refmodel-4l") -> str:
    """Path of a bundled model: 'refmodel-4l' (4 layers, head_dim 64, trained
    here for KV-cache studies) or 'stories260K' (head_dim 8: too small for
    compression to pay off). $HQEKV_MODEL wins when set."""
    env = os.environ.get("HQEKV_MODEL")
    if env:
        return env
    file = name if name.endswith(".gguf") else name + ".gguf"
    path = os.path.join(data_dir(), "models", file)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"hqekv: bundled model {file!r} not found at {path}")
    return path


def bundled_text(name: str = "wiki.test.raw") -> str:
    """The contents of a bundled text (data/text/NAME: wiki.test.raw,
    wiki.valid.raw, pg11_alice_in_wonderland.txt, tinystories_val_subset.txt)."""
    path = os.path.join(data_dir(), "data", "text", name)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"hqekv: bundled text {name!r} not found at {path}")
    with open(path, encoding="utf-8") as f:
        return f.read()


@dataclasses.dataclass(frozen=True)
class PerplexityResult:
    """One KV policy against a reference cache on one text (the protocol of
    ``hqekv ppl --kv SPEC --ref REF``). KL is KL(ref || test) in nats per
    token; bytes are those the test cache holds after the last chunk."""

    kv: str
    ref: str
    ppl: float
    ref_ppl: float
    kl: float
    kl_stderr: float
    kl_p99: float
    kl_max: float
    top1: float
    top1_stderr: float
    kl_is_top_k_bound: bool
    scored: int
    chunks: int
    n_ctx: int
    n_prefill: int
    bytes: int
    ref_bytes: int
    bits_per_element: float  # true bits per original K/V element, every byte counted
    bytes_after_prefill: int
    bits_after_prefill: float

    @property
    def x_smaller(self) -> float:
        """How many times fewer bytes than the reference cache holds."""
        return self.ref_bytes / self.bytes if self.bytes else float("inf")

    def as_dict(self) -> Dict[str, object]:
        d = dataclasses.asdict(self)
        d["x_smaller"] = self.x_smaller
        return d


def _emittable(held: str, stops: Sequence[str]) -> int:
    """How much of `held` can be emitted: all but its longest suffix that
    could still grow into one of the stop strings."""
    longest = max((len(s) for s in stops if s), default=0)
    for j in range(max(0, len(held) - longest + 1), len(held)):
        if any(s.startswith(held[j:]) for s in stops if s):
            return j
    return len(held)


class Model(_hqekv.Model):
    """A model file (GGUF or llama2.c), memory-mapped, with the high-level
    calls generate / chat / perplexity next to the binding's tokenize,
    detokenize, apply_chat_template and context()."""

    def __init__(self, path: Optional[str] = None, tokenizer: str = "", *, kv: str = "fp16",
                 n_ctx: int = 0) -> None:
        super().__init__(default_model() if path is None else os.fspath(path), tokenizer)
        self._kv = kv
        self._n_ctx = n_ctx
        self._contexts: Dict[tuple, Context] = {}

    def __repr__(self) -> str:
        return (f"hqekv.Model({self.name!r}: {self.arch}, {self.n_layers} layers, "
                f"head_dim {self.head_dim}, vocab {self.n_vocab})")

    def _context(self, kv: Optional[str], n_ctx: Optional[int]) -> Context:
        key = (kv or self._kv, self._n_ctx if n_ctx is None else n_ctx)
        ctx = self._contexts.get(key)
        if ctx is None:
            ctx = self.context(kv=key[0], n_ctx=key[1])
            self._contexts[key] = ctx
        return ctx

    def _stream(self, ids: List[int], kv: Optional[str], n_ctx: Optional[int], max_tokens: int,
                sampler: Sampler, stop: Sequence[str]) -> Iterator[str]:
        if max_tokens < 0:
            raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
        ctx = self._context(kv, n_ctx)
        ctx.reset()
        ctx.decode(ids)
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        prev = ids[-1]
        held = ""  # text kept back while it could still be the start of a stop string
        for i in range(max_tokens):
            tok = sampler.sample(ctx)
            if self.is_eog(tok):
                break
            held += decoder.decode(self.detokenize([tok], prev))
            prev = tok
            hit = min((held.find(s) for s in stop if s and s in held), default=-1)
            if hit >= 0:
                if held[:hit]:
                    yield held[:hit]
                return
            cut = _emittable(held, stop)
            if cut > 0:
                yield held[:cut]
                held = held[cut:]
            if i + 1 == max_tokens or ctx.n_past >= ctx.n_ctx:
                break
            ctx.decode([tok])
        tail = held + decoder.decode(b"", final=True)
        if tail:
            yield tail

    def _run(self, ids: List[int], kv, n_ctx, max_tokens, stream, stop, sampling) -> Union[
            str, Iterator[str]]:
        if not ids:
            raise ValueError("empty prompt and the model's tokenizer has no BOS token")
        stops = [stop] if isinstance(stop, str) else list(stop or [])
        sampler = Sampler(**sampling)
        it = self._stream(ids, kv, n_ctx, max_tokens, sampler, stops)
        return it if stream else "".join(it)

    def generate(self, prompt: str, kv: Optional[str] = None, max_tokens: int = 128,
                 stream: bool = False, *, n_ctx: Optional[int] = None,
                 stop: Union[str, Sequence[str], None] = None, temperature: float = 0.0,
                 top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0,
                 repeat_penalty: float = 1.0, repeat_last_n: int = 64,
                 seed: int = 0) -> Union[str, Iterator[str]]:
        """The continuation of prompt under KV policy `kv` (a --kv spec such as
        "hqekv:bits=3.4"; default: the Model's kv, "fp16"). Greedy unless
        temperature > 0. stream=True returns an iterator of text pieces.
        Stops at an end-of-generation token, a stop string (not included),
        max_tokens or a full context."""
        ids = self.tokenize(prompt, add_bos=self.add_bos or not prompt)
        return self._run(ids, kv, n_ctx, max_tokens, stream, stop,
                         dict(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
                              repeat_penalty=repeat_penalty, repeat_last_n=repeat_last_n,
                              seed=seed))

    def chat(self, messages: Sequence[Dict[str, str]], kv: Optional[str] = None,
             max_tokens: int = 256, stream: bool = False, *, template: Optional[str] = None,
             n_ctx: Optional[int] = None, stop: Union[str, Sequence[str], None] = None,
             temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0,
             repeat_penalty: float = 1.0, repeat_last_n: int = 64,
             seed: int = 0) -> Union[str, Iterator[str]]:
        """The assistant's reply to messages ([{"role": ..., "content": ...}])
        with the model's chat template (or `template`: a family name or Jinja
        source); special tokens in the rendered prompt are parsed, as
        `hqekv chat` does."""
        prompt = self.apply_chat_template(list(messages), template, True)
        ids = self.tokenize(prompt, add_bos=None, parse_special=True)
        return self._run(ids, kv, n_ctx, max_tokens, stream, stop,
                         dict(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
                              repeat_penalty=repeat_penalty, repeat_last_n=repeat_last_n,
                              seed=seed))

    def embed(self, text: str, kv: Optional[str] = None, *, pooling: str = "mean",
              normalize: bool = True, n_ctx: Optional[int] = None):
        """One vector [n_embd] for text: its tokens decoded in one batch under
        KV policy `kv`, the final hidden states (after the model's last norm)
        pooled ("mean", "last" or "first") and L2-normalised unless
        normalize=False. A numpy array."""
        ids = self.tokenize(text, add_bos=self.add_bos or not text)
        if not ids:
            raise ValueError("empty text and the model's tokenizer has no BOS token")
        ctx = self._context(kv, n_ctx)
        ctx.reset()
        ctx.set_embeddings(True)
        try:
            ctx.decode(ids)
            return ctx.embedding(pooling, normalize)
        finally:
            ctx.set_embeddings(False)

    def perplexity(self, text: str, kv: str = "fp16", ref: str = "fp16", *, n_ctx: int = 512,
                   n_prefill: int = 0, n_chunks: int = 0, ref_top_k: int = -1) -> PerplexityResult:
        """KV policy `kv` against the reference cache `ref` on text: chunks of
        n_ctx tokens, the first n_prefill (default half) as one batch (the
        compression event), the rest teacher-forced and compared token by
        token -- the figures of ``hqekv ppl --kv KV --ref REF --ctx N``."""
        ids = self.tokenize(text, add_bos=None)  # as `hqekv ppl`: BOS when the file asks
        r = self.compare_tokens(ids, kv, ref, n_ctx, n_prefill, n_chunks, ref_top_k)
        end, pre = r["kv_end"], r["kv_after_prefill"]
        return PerplexityResult(
            kv=kv, ref=ref, ppl=r["ppl"], ref_ppl=r["ppl_ref"], kl=r["kl"],
            kl_stderr=r["kl_stderr"], kl_p99=r["kl_p99"], kl_max=r["kl_max"], top1=r["top1"],
            top1_stderr=r["top1_stderr"], kl_is_top_k_bound=r["kl_is_top_k_bound"],
            scored=r["scored"], chunks=r["chunks"], n_ctx=r["n_ctx"], n_prefill=r["n_prefill"],
            bytes=end["bytes_total"], ref_bytes=r["ref_kv_end"]["bytes_total"],
            bits_per_element=end["bits_per_original"], bytes_after_prefill=pre["bytes_total"],
            bits_after_prefill=pre["bits_per_original"])


def _frontier(rows: List[Dict[str, object]]) -> None:
    """Marks rows on the bits/KL frontier: no other row has fewer or equal
    bits and a lower KL."""
    for r in rows:
        r["on_frontier"] = not any(
            o is not r and o["bits"] <= r["bits"] and o["kl"] < r["kl"] for o in rows)


def pareto(model: Model, text: str, specs: Iterable[str], ref: str = "fp16", *,
           n_ctx: int = 512, n_prefill: int = 0, n_chunks: int = 0, progress: bool = False):
    """Compares KV policies on one text: a row per spec with bits per element
    (every byte counted), bytes, x smaller than the reference, KL(ref||test)
    and its standard error, top-1 agreement and perplexity, sorted by bits,
    with `on_frontier` marking the bits/KL frontier. A pandas DataFrame when
    pandas is installed, else a list of dicts."""
    rows = []
    specs = list(specs)
    for i, spec in enumerate(specs):
        if progress:
            print(f"[{i + 1}/{len(specs)}] {spec}", file=sys.stderr, flush=True)
        r = model.perplexity(text, kv=spec, ref=ref, n_ctx=n_ctx, n_prefill=n_prefill,
                             n_chunks=n_chunks)
        rows.append({"spec": spec, "bits": r.bits_per_element, "bytes": r.bytes,
                     "x_smaller": r.x_smaller, "kl": r.kl, "kl_stderr": r.kl_stderr,
                     "top1": r.top1, "ppl": r.ppl, "ref_ppl": r.ref_ppl})
    rows.sort(key=lambda r: (r["bits"], r["kl"]))
    _frontier(rows)
    try:
        import pandas  # noqa: WPS433  (optional)
    except ImportError:
        return rows
    return pandas.DataFrame(rows)
