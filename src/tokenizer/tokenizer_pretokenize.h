// Pre-tokenizers of byte-level BPE vocabularies: how text is cut into words
// before BPE merges, one per llama.cpp `tokenizer.ggml.pre` regex set
// (src/llama-vocab.cpp, llm_tokenizer_bpe's constructor).
//
// kLlama3 / kQwen2 (one hand-written scanner):
//   (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}{1,3} |
//    ?[^\s\p{L}\p{N}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
//   Qwen2 uses \p{N} (one digit per piece) instead of \p{N}{1,3}.
// The others are lists of regexes applied one after the other, as llama.cpp's
// unicode_regex_split does: each regex re-splits every piece the previous
// one produced into its matches and the unmatched text between them:
//   GPT2 ("gpt-2"):   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
//   kSmollm:          \p{N}, then GPT2
//   kDefault:         [\p{P}\$\+<=>\^~\|]+, then GPT2, then \p{N}+, then [0-9][0-9][0-9]
//   kDeepseekLlm:     [\r\n], \s?[Latin/Greek/Cyrillic/... letters]+,
//                     \s?[!-/:-~！-／：-～‘-‟　-。]+, \s+$, [一-龥ࠀ-一가-퟿]+,
//                     \p{N}+
//   kDeepseekV3:      \p{N}{1,3}, then [一-龥぀-ゟ゠-ヿ]+, then
//                     [!-/:-@[-`{-~][A-Za-z]+ | [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+ |
//                      ?[\p{P}\p{S}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
//                     (the ASCII class is every printable ASCII character but
//                     letters and digits)
//   kTekken:          llama.cpp's rewrite of Mistral's pattern, where an "upper"
//                     letter is any letter but a-z and a "lower" one any letter but A-Z:
//                     [^\r\n\p{L}\p{N}]?U*W+ | [^\r\n\p{L}\p{N}]?U+W* | \p{N} |
//                      ?[^\s\p{L}\p{N}]+[\r\n/]* | \s*[\r\n]+ | \s+(?!\S) | \s+
// Limits: \p{L} / \p{N} / \p{P} / \p{S} / \p{M} come from Unicode 14 category tables;
// combining marks (\p{M}) are not letters, as in the regex; invalid UTF-8
// bytes count as "other" (neither letter, number, punctuation nor space).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace hqekv {

enum class PreTokenizer {
  kLlama3,
  kQwen2,
  kDefault,
  kGpt2,
  kSmollm,
  kDeepseekLlm,
  kDeepseekV3,
  kTekken
};

// llama.cpp's name mapping for the supported sets: "llama-bpe", "llama3",
// "smaug-bpe" -> kLlama3; "qwen2", "megrez" -> kQwen2; "default" (also a
// missing key) -> kDefault; "gpt-2" -> kGpt2; "smollm" -> kSmollm;
// "deepseek-llm" -> kDeepseekLlm; "deepseek-v3" -> kDeepseekV3; "tekken" ->
// kTekken. nullopt otherwise.
std::optional<PreTokenizer> PreTokenizerByName(std::string_view name);

// The names PreTokenizerByName accepts, comma separated (for error messages).
const char* SupportedPreTokenizerNames();

// Splits text into pieces that tile it exactly (concatenation == text).
std::vector<std::string_view> PreTokenize(std::string_view text, PreTokenizer kind);

namespace pretokenize_detail {
// Llama 3 / Qwen2 scanner (tokenizer_pretokenize.cc).
std::vector<std::string_view> ScanLlama3(std::string_view text, bool one_digit);
// Match of \s*[\r\n]+ | \s+(?!\S) | \s+ at cp[i] (a whitespace) inside a
// piece that ends at cp[e]: the end of the match.
size_t MatchSpaceTail(const std::vector<uint32_t>& cp, size_t i, size_t e);
}  // namespace pretokenize_detail

}  // namespace hqekv
