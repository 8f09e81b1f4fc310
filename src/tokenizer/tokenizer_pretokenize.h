// Hand-written scanner equivalent to the pre-tokenizer regexes of byte-level
// BPE vocabularies (llama.cpp's "llama-bpe" = Llama 3, and "qwen2"):
//   (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}{1,3} |
//    ?[^\s\p{L}\p{N}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
// Qwen2 uses \p{N} (one digit per piece) instead of \p{N}{1,3}.
// Limits: \p{L} / \p{N} come from Unicode 14 category tables; combining marks
// (\p{M}) are not letters, as in the regex; invalid UTF-8 bytes count as
// "other" (neither letter, number nor space).
#pragma once

#include <string_view>
#include <vector>

namespace hqekv {

enum class PreTokenizer { kLlama3, kQwen2 };

// Splits text into pieces that tile it exactly (concatenation == text).
std::vector<std::string_view> PreTokenize(std::string_view text, PreTokenizer kind);

}  // namespace hqekv
