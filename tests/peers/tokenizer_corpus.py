#!/usr/bin/env python3
"""A deterministic corpus of varied texts for tokenizer parity tests: prose,
code, CJK, emoji (ZWJ sequences, flags, skin tones), digits, whitespace runs
(tabs, CRLF, long space runs), other scripts, URLs, contractions in any
case, and special-token strings of the family. Writes a JSON array of
strings, each with its category as the first word of its key in a second
file (same order), to OUT.json and OUT.kinds.json.

Usage: tokenizer_corpus.py OUT.json [--bytes N] [--special TOKEN ...]
"""
import argparse
import json
import random

WORDS = ("the of and to in is was for on that with as by at from it this be are an or have not "
         "which but had they his her their one all were we there been has when who will more no "
         "if out so said what up its about into than them can only other new some could time "
         "these two may then do first any my now such like our over man me even most made after "
         "also did many before must through back years where much your way well down should "
         "because each just those people how too little state good very make world still own "
         "see men work long get here between both life being under never day same another know "
         "while last might us great old year off come since against go came right used take "
         "three").split()
CONTRACTIONS = ["it's", "they're", "we've", "I'm", "you'll", "he'd", "IT'S", "THEY'RE", "We'Ve",
                "don't", "can't", "o'clock", "rock'n'roll"]
CODE = [
    "def f(x):\n    return x ** 2 + 3 * x - 1\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}\n",
    "#include <vector>\nstd::vector<int> v{1, 2, 3};\n",
    "{\"name\": \"hqekv\", \"bits\": 3.4, \"tags\": [\"kv\", \"cache\"]}\n",
    "SELECT id, name FROM users WHERE age >= 21 ORDER BY name;\n",
    "if x != None and y == 'z':\n        print(f\"{x!r}: {y}\")\n",
    "const add = (a, b) => a + b; // arrow\n",
    "    \n\n\t\t  return;\r\n}\r\n",
    "<div class=\"row\"><span>&nbsp;&amp;</span></div>\n",
    "$ ls -la /usr/lib | grep -E '^d' > out.txt 2>&1\n",
]
CJK = ["我们今天去公园散步。", "日本語のテキストを分割します。", "한국어 문장도 포함됩니다.",
       "机器学习模型的键值缓存压缩", "カタカナとひらがなと漢字", "中文，标点！还有“引号”。",
       "東京タワーは333メートルです。"]
OTHER = ["Привет, как дела?", "مرحبا بالعالم", "नमस्ते दुनिया", "Γειά σου Κόσμε", "שלום עולם",
         "Ça va très bien, merci.", "Straße, Größe, Übermaß", "ñandú pingüino", "Tiếng Việt có dấu",
         "e\u0301 combining acute", "ﬁ ligature and ① circled", "ｆｕｌｌｗｉｄｔｈ ＡＢＣ"]
EMOJI = ["🙂", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷🇯🇵", "❤️", "🧑🏿‍💻", "✅", "🎉🎉🎉", "🐍", "🤖💬"]
SPACES = ["  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \n ", "        ", "\u00a0", "\u3000",
          " \t \n"]


def number(r):
    k = r.randrange(6)
    if k == 0:
        return str(r.randrange(10))
    if k == 1:
        return str(r.randrange(10 ** r.randrange(2, 12)))
    if k == 2:
        return f"{r.uniform(-1000, 1000):.{r.randrange(1, 6)}f}"
    if k == 3:
        return f"+1-{r.randrange(200, 999)}-{r.randrange(100, 999)}-{r.randrange(1000, 9999)}"
    if k == 4:
        return f"{r.randrange(1, 31)}/{r.randrange(1, 12)}/{r.randrange(1900, 2100)}"
    return "1" * r.randrange(1, 20)


def prose(r):
    n = r.randrange(5, 25)
    words = [r.choice(WORDS) for _ in range(n)]
    if r.random() < 0.3:
        words[r.randrange(n)] = r.choice(CONTRACTIONS)
    if r.random() < 0.2:
        words[0] = words[0].capitalize()
    if r.random() < 0.1:
        words = [w.upper() for w in words]
    return " ".join(words) + r.choice([".", "!", "?", ",", ";", " -", "..."])


def piece(r, kind, special):
    if kind == "prose":
        return prose(r)
    if kind == "code":
        return r.choice(CODE)
    if kind == "cjk":
        return r.choice(CJK)
    if kind == "other":
        return r.choice(OTHER)
    if kind == "emoji":
        return r.choice(EMOJI)
    if kind == "digits":
        return number(r)
    if kind == "space":
        return r.choice(SPACES)
    if kind == "url":
        return f"https://example.com/{r.choice(WORDS)}/{r.randrange(1000)}?q={r.choice(WORDS)}&x=1"
    if kind == "special":
        return r.choice(special) if special else prose(r)
    raise ValueError(kind)


KINDS = ["prose", "code", "cjk", "other", "emoji", "digits", "space", "url", "special"]


def make(total_bytes, special, seed=20261205):
    r = random.Random(seed)
    texts, kinds = [], []
    size = 0
    while size < total_bytes:
        main = KINDS[len(texts) % len(KINDS)]
        parts = []
        for _ in range(r.randrange(3, 30)):
            kind = main if r.random() < 0.6 else r.choice(KINDS)
            parts.append(piece(r, kind, special))
            if r.random() < 0.5:
                parts.append(r.choice([" ", "", "\n", " "]))
        t = "".join(parts)
        texts.append(t)
        kinds.append(main)
        size += len(t.encode("utf-8"))
    return texts, kinds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--bytes", type=int, default=1 << 20)
    ap.add_argument("--special", nargs="*", default=[])
    a = ap.parse_args()
    texts, kinds = make(a.bytes, a.special)
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(texts, f, ensure_ascii=False)
    with open(a.out.removesuffix(".json") + ".kinds.json", "w") as f:
        json.dump(kinds, f)
    print(f"{a.out}: {len(texts)} texts, {sum(len(t.encode()) for t in texts)} bytes")


if __name__ == "__main__":
    main()
