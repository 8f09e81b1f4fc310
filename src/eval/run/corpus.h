// Bundled public-domain / open-licence texts as sentence lists: the haystack
// filler of retrieval tasks, the passages of the copy task and the held-out
// windows of language modelling.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace hqekv::eval {

struct Corpus {
  std::string name;                    // e.g. "tinystories" (goes into reports and hashes)
  std::vector<std::string> sentences;  // whitespace-collapsed, in text order, non-empty
};

// Splits text into sentences: a sentence ends after '.', '!' or '?' (plus any
// closing quotes) followed by whitespace, or at a blank line. Whitespace runs
// (including newlines) become one space. Sentences shorter than 2 characters
// are dropped.
Corpus SplitSentences(const std::string& name, const std::string& text);

// Reads a text file (refuses files over 64 MiB or with no sentence).
Result<Corpus> LoadCorpus(const std::string& name, const std::string& path);

// Well-known bundled texts, relative to the repository root:
// "tinystories" -> data/text/tinystories_val_subset.txt, "wiki" ->
// data/text/wiki.test.raw, "pg11" -> data/text/pg11_alice_in_wonderland.txt.
Result<std::string> BundledTextPath(const std::string& root, const std::string& name);

}  // namespace hqekv::eval
