"""Trains the SentencePiece tokenizer on the training corpus only.

Settings follow Llama-2's tokenizer so the engine's "llama" (SentencePiece-BPE with scores) tokenizer
reproduces it: BPE, byte fallback (<0x00>..<0xFF> at ids 3..258), identity normalisation, dummy
prefix "▁", whitespace runs kept, digits split into single tokens (passkeys become digit sequences),
<unk>=0, <s>=1, </s>=2, no pad.
"""
import os

import sentencepiece as spm

from corpus import TRAIN_FILES, read_text


def train_tokenizer(data_dir, out_prefix, vocab_size, seed):
    txt = out_prefix + ".train.txt"
    with open(txt, "w", encoding="utf-8") as f:
        for rel in TRAIN_FILES:
            for line in read_text(data_dir, rel).split("\n"):
                if line.strip():
                    f.write(line + "\n")
    if hasattr(spm, "SetRandomGeneratorSeed"):
        spm.SetRandomGeneratorSeed(seed)  # only input shuffling is random; BPE merges are deterministic
    spm.SentencePieceTrainer.train(
        input=txt, model_prefix=out_prefix, model_type="bpe", vocab_size=vocab_size,
        byte_fallback=True, split_digits=True, normalization_rule_name="identity",
        add_dummy_prefix=True, remove_extra_whitespaces=False, allow_whitespace_only_pieces=True,
        character_coverage=0.9995, max_sentencepiece_length=16, input_sentence_size=2000000,
        shuffle_input_sentence=True, unk_id=0, bos_id=1, eos_id=2, pad_id=-1, num_threads=2,
        minloglevel=2,
        # Every printable ASCII character gets its own piece (digits are rare in the books, and a
        # passkey digit must never fall back to a byte token).
        required_chars="".join(chr(c) for c in range(33, 127)))
    os.remove(txt)
    return out_prefix + ".model"
