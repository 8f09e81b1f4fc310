"""Training corpus definition: which shared texts are trained on, which are held out, and why.

Paths are relative to the shared data folder (default /work/shared/data, see its SOURCES.md for
origin and licence of every file). Held-out texts never enter tokenizer or model training.
"""
import hashlib
import os

DEFAULT_DATA_DIR = os.environ.get("HQEKV_DATA_DIR", "/work/shared/data")

TRAIN_FILES = [
    "text/gutenberg/pg1342_pride_and_prejudice.txt",
    "text/gutenberg/pg1661_adventures_of_sherlock_holmes.txt",
    "text/gutenberg/pg174_picture_of_dorian_gray.txt",
    "text/gutenberg/pg236_the_jungle_book.txt",
    "text/gutenberg/pg2600_war_and_peace.txt",
    "text/gutenberg/pg2701_moby_dick.txt",
    "text/gutenberg/pg345_dracula.txt",
    "text/gutenberg/pg4300_ulysses.txt",
    "text/gutenberg/pg76_huckleberry_finn.txt",
    "text/gutenberg/pg98_tale_of_two_cities.txt",
    "text/kjv/kjv_old_testament.txt",
    "text/kjv/kjv_new_testament.txt",
    "text/tinyshakespeare/input.txt",
    "text/dictd/devils_dictionary.dict.txt",
    "text/dictd/jargon_file_4.4.7.dict.txt",
]

# Held out: WikiText-2 valid = calibration text, test = evaluation text; pg11 = the held-out book;
# the TinyStories subset is the bundled stories model's evaluation text (kept out so both models
# are evaluated on text neither saw).
HELD_OUT_FILES = {
    "alice": "text/gutenberg/pg11_alice_in_wonderland.txt",
    "wiki_test": "text/wikitext-2-raw/wiki.test.raw",
    "wiki_valid": "text/wikitext-2-raw/wiki.valid.raw",
    "tinystories": "text/tinystories/tinystories_val_subset.txt",
}


def read_text(data_dir, rel):
    """File as str with CRLF normalised to LF (some Gutenberg copies keep CRLF)."""
    with open(os.path.join(data_dir, rel), "rb") as f:
        return f.read().decode("utf-8").replace("\r\n", "\n")


def sha256(data_dir, rel):
    with open(os.path.join(data_dir, rel), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()
