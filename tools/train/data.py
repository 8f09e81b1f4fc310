"""Training batches: natural text from the training corpus mixed with synthetic long-range documents.

Every sequence starts with BOS (id 1), as prompts do in the engine. Synthetic documents teach the
model to use distant context:
  - passkey: "The pass key is 48213. Remember it. 48213 is the pass key." at a random depth inside
    filler, then "What is the pass key? The pass key is 48213." at the end;
  - kv: several "The value of key WORD is NNNNN." facts scattered in filler, one or two queried at end;
  - copy: a corpus passage (or random tokens) that appears again later in the context;
  - repeat: a short random-token segment repeated to the end (a dense induction signal).
Filler is either training-corpus text or the classic repeated "The grass is green..." haystack.
The tokens that answer a query (and the repeated copy) get a larger loss weight.

Batches are a pure function of (seed, step): a resumed run sees exactly the data an uninterrupted run
would have seen.
"""
import os

import numpy as np
import sentencepiece as spm

from corpus import TRAIN_FILES, read_text

BOS = 1
INTROS = [  # the classic passkey prompt and the one of hqekv's own eval harness (src/eval/tasks.cc)
    "There is an important info hidden inside a lot of irrelevant text. Find it and memorize it. "
    "I will quiz you about the important information there.",
    "There is an important piece of information hidden inside a lot of irrelevant text. Find it and "
    "remember it.",
]
KV_FORMS = [  # (intro, fact, question); {w} key word, {v} value
    ("Some special magic numbers are hidden inside the following text. Remember them.",
     "The special magic number for {w} is {v}.", "What is the special magic number for {w}? The special magic number for {w} is"),
    ("", "The value of key {w} is {v}.", "What is the value of key {w}? The value of key {w} is"),
]
GRASS = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. "
PASSKEY_FORMS = [  # (needle, question-and-answer prefix)
    ("The pass key is {k}. Remember it. {k} is the pass key.", "What is the pass key? The pass key is"),
    ("The pass key is {k}. Remember it. {k} is the pass key.", "What is the pass key? The pass key is"),
    ("The secret word is {k}. Remember it. {k} is the secret word.", "What is the secret word? The secret word is"),
    ("The secret number is {k}. Remember it.", "What is the secret number? The secret number is"),
    ("The magic number is {k}.", "What is the magic number? The magic number is"),
]


class TokenCorpus:
    """Training files tokenised once (cached as .npy) plus samplers for natural and synthetic text."""

    def __init__(self, sp_model, data_dir, cache_dir, mix, answer_weight):
        self.sp = spm.SentencePieceProcessor(model_file=sp_model)
        self.mix = mix
        self.copy_random = 0.2  # share of copy documents made of random tokens (set per phase)
        self.small_alphabet = 0.0  # share of repeat documents over a small alphabet (set per phase)
        self.digit_ids = [self.sp.piece_to_id(str(d)) for d in range(10)]
        self.answer_weight = answer_weight
        self.streams, sizes = [], []
        for rel in TRAIN_FILES:
            path = os.path.join(cache_dir, os.path.basename(rel) + ".npy")
            if not os.path.exists(path):
                ids = self.sp.encode(read_text(data_dir, rel))
                np.save(path, np.asarray(ids, dtype=np.uint16))
            arr = np.load(path)
            self.streams.append(arr)
            # The Bible and the dictionaries are large and formulaic: half weight per token.
            w = 0.5 if ("kjv" in rel or "dictd" in rel) else 1.0
            sizes.append(w * len(arr))
        self.weights = np.asarray(sizes) / sum(sizes)
        self.grass = np.asarray(self.enc(GRASS * 8), dtype=np.int64)
        self.intros = [self.enc(t) for t in INTROS]
        # Query keys: whole-word alphabetic pieces of the vocabulary ("▁house" -> "house").
        self.words = [p[1:] for p in (self.sp.id_to_piece(i) for i in range(self.sp.vocab_size()))
                      if p.startswith("\u2581") and p[1:].isalpha() and p[1:].islower() and len(p) >= 5]

    def enc(self, text):
        return self.sp.encode(text)

    def total_tokens(self):
        return int(sum(len(s) for s in self.streams))

    # ---- text sources -------------------------------------------------------------------------
    def natural(self, rng, n):
        s = self.streams[rng.choice(len(self.streams), p=self.weights)]
        start = int(rng.integers(0, len(s) - n - 1))
        return s[start:start + n].astype(np.int64).tolist()

    def filler(self, rng, n, kind):
        if n <= 0:
            return []
        if kind == "grass":
            reps = n // len(self.grass) + 2
            tiled = np.tile(self.grass, reps)
            off = int(rng.integers(0, len(self.grass)))
            return tiled[off:off + n].tolist()
        return self.natural(rng, n)

    # ---- documents (each returns tokens and per-token loss weights, length exactly n) -------------
    def _fit(self, rng, toks, wts, n):
        toks, wts = toks[:n], wts[:n]
        if len(toks) < n:  # pad with natural text so every sequence is full
            extra = self.natural(rng, n - len(toks))
            toks, wts = toks + extra, wts + [1.0] * len(extra)
        return toks, wts

    def _digits(self, rng):
        nd = 5 if rng.random() < 0.7 else int(rng.integers(3, 8))
        return str(int(rng.integers(10 ** (nd - 1), 10 ** nd)))

    def passkey_doc(self, rng, n):
        needle_t, question_t = PASSKEY_FORMS[int(rng.integers(0, len(PASSKEY_FORMS)))]
        key = self.words[int(rng.integers(0, len(self.words)))] if "word" in needle_t else self._digits(rng)
        r = rng.random()
        intro = self.intros[0] if r < 0.3 else self.intros[1] if r < 0.8 else []
        needle = self.enc(needle_t.format(k=key))
        question = self.enc(question_t)
        # Answer tokens as they appear after the question (the tokenizer splits digits one by one).
        answer = self.enc(question_t + " " + key + ".")[len(question):]
        kind = "grass" if rng.random() < 0.5 else "text"
        # Random filler length when n is long: context lengths of many sizes, not only the maximum.
        room = n - len(intro) - len(needle) - len(question) - len(answer)
        if rng.random() < 0.3:
            room = int(rng.integers(max(room // 4, 0), room + 1))
        depth = rng.random()
        a = int(room * depth)
        body = intro + self.filler(rng, a, kind) + needle + self.filler(rng, room - a, kind) + question
        toks = body + answer
        wts = [1.0] * len(body) + [self.answer_weight] * len(answer)
        return self._fit(rng, toks, wts, n)

    def kv_doc(self, rng, n):
        npairs = int(rng.integers(2, max(3, min(48, n // 40))))
        keys = list(rng.choice(len(self.words), size=npairs, replace=False))
        facts = [(self.words[k], self._digits(rng)) for k in keys]
        intro_t, fact_t, question_t = KV_FORMS[0] if rng.random() < 0.7 else KV_FORMS[1]
        intro = self.enc(intro_t) if intro_t else []
        fact_toks = [self.enc(fact_t.format(w=w, v=v)) for w, v in facts]
        nq = 1 if rng.random() < 0.6 else 2
        queries = [facts[int(i)] for i in rng.choice(npairs, size=nq, replace=False)]
        q_parts = []
        for w, v in queries:
            q = self.enc(question_t.format(w=w))
            full = self.enc(question_t.format(w=w) + f" {v}.")
            q_parts.append((q, full[len(q):]))
        used = len(intro) + sum(len(t) for t in fact_toks) + sum(len(q) + len(a) for q, a in q_parts)
        room = max(0, n - used)
        kind = "grass" if rng.random() < 0.3 else "text"
        cuts = np.sort(rng.integers(0, room + 1, size=npairs))
        toks, wts, prev = list(intro), [], 0
        for c, ft in zip(cuts, fact_toks):
            fill = self.filler(rng, int(c) - prev, kind)
            prev = int(c)
            toks += fill + ft
        toks += self.filler(rng, room - prev, kind)
        wts = [1.0] * len(toks)
        for q, a in q_parts:
            toks += q + a
            wts += [1.0] * len(q) + [self.answer_weight] * len(a)
        return self._fit(rng, toks, wts, n)

    def vartrack_doc(self, rng, n):
        """Chains "VAR A = 12345." ... "VAR B = VAR A." in filler; the last name of chain 0 is asked."""
        n_chains, n_hops = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        inserts, names = [], set()
        for c in range(n_chains):
            value = self._digits(rng)
            start = rng.random() * (0.9 if c == 0 else 0.5)
            prev = None
            for h in range(n_hops):
                name = "".join(chr(65 + int(x)) for x in rng.integers(0, 26, size=5))
                while name in names:
                    name = "".join(chr(65 + int(x)) for x in rng.integers(0, 26, size=5))
                names.add(name)
                rhs = value if h == 0 else "VAR " + prev
                inserts.append((start + (1 - start) * h / n_hops, self.enc(f"VAR {name} = {rhs}.")))
                prev = name
            if c == 0:
                asked, answer_v = prev, value
        head = self.enc("Memorize and track the chain of variable assignments hidden in the following text.")
        q_t = f"What is the value of VAR {asked}? The value of VAR {asked} is"
        q = self.enc(q_t)
        a = self.enc(q_t + f" {answer_v}.")[len(q):]
        inserts.sort(key=lambda t: t[0])
        room = max(0, n - len(head) - sum(len(t) for _, t in inserts) - len(q) - len(a))
        kind = "grass" if rng.random() < 0.3 else "text"
        toks, prev = list(head), 0
        for pos, t in inserts:
            c = int(room * pos)
            toks += self.filler(rng, c - prev, kind) + t
            prev = c
        toks += self.filler(rng, room - prev, kind) + q
        wts = [1.0] * len(toks) + [self.answer_weight] * len(a)
        return self._fit(rng, toks + a, wts, n)

    def repeat_doc(self, rng, n):
        """A random-token segment of 4..64 tokens repeated to the end: after its first period every
        token is predictable only by looking up what followed the same token one period back (the
        induction pattern), with a period that varies between documents."""
        if self.small_alphabet > 0 and rng.random() < self.small_alphabet:
            # Few distinct tokens (the ten digits, or 4..16 random pieces): every token recurs inside
            # the period with different successors, so copying needs the preceding two or three
            # tokens, not one (what a 5-digit pass key with a repeated digit asks for). Drawn only
            # when the phase asks, so earlier phases replay with the same random stream.
            if rng.random() < 0.5:
                alphabet = self.digit_ids
            else:
                alphabet = rng.choice(np.arange(259, self.sp.vocab_size()), size=int(rng.integers(4, 17)),
                                      replace=False).tolist()
            seg = [alphabet[int(i)] for i in rng.integers(0, len(alphabet), size=int(rng.integers(12, 65)))]
        else:
            seg = rng.integers(259, self.sp.vocab_size(), size=int(rng.integers(4, 65))).tolist()
        toks = (seg * (n // len(seg) + 1))[:n]
        return toks, [1.0] * n

    def copy_doc(self, rng, n):
        plen = int(rng.integers(16, max(17, min(400, n // 2 - 8))))
        if rng.random() < self.copy_random:  # random tokens: nothing but copying predicts them
            passage = rng.integers(259, self.sp.vocab_size(), size=plen).tolist()
        else:
            passage = self.natural(rng, plen)
        room = n - 2 * plen
        gap = int(rng.integers(0, room + 1)) if room > 0 else 0
        pre = int(rng.integers(0, room - gap + 1)) if room - gap > 0 else 0
        toks = self.natural(rng, pre) + passage + self.natural(rng, gap)
        wts = [1.0] * len(toks)
        toks += passage
        wts += [min(2.0, self.answer_weight)] * len(passage)
        return self._fit(rng, toks, wts, n)

    def sequence(self, rng, n):
        """BOS + n tokens of one document kind drawn from the mix; returns (tokens, weights)."""
        kinds = list(self.mix.keys())
        p = np.asarray([self.mix[k] for k in kinds], dtype=np.float64)
        kind = kinds[rng.choice(len(kinds), p=p / p.sum())]
        if kind == "natural":
            toks = self.natural(rng, n)
            wts = [1.0] * n
        else:
            toks, wts = getattr(self, kind + "_doc")(rng, n)
        return [BOS] + toks, [1.0] + wts

    def batch(self, seed, step, batch_size, seq_len, mix=None, copy_random=0.2, small_alphabet=0.0):
        """(tokens [B, T+1] int64, weights [B, T+1] float32) for one optimizer step; mix and
        copy_random override the defaults (a curriculum phase may change them)."""
        rng = np.random.default_rng([seed, step])
        self.mix = mix or self.mix
        self.copy_random = copy_random
        self.small_alphabet = small_alphabet
        toks = np.zeros((batch_size, seq_len + 1), dtype=np.int64)
        wts = np.zeros((batch_size, seq_len + 1), dtype=np.float32)
        for b in range(batch_size):
            t, w = self.sequence(rng, seq_len)
            toks[b], wts[b] = t, w
        return toks, wts
