// Tokenizers of Llama-family models, built from GGUF metadata or a llama2.c
// tokenizer.bin:
//   - SentencePiece-style ("llama"): pieces with scores, "▁" (U+2581) for
//     spaces, a space prepended to the text (add_dummy_prefix), greedy
//     merging of the adjacent pair whose merged piece has the best score
//     (llama2.c / llama.cpp SPM), byte fallback to <0xXX> tokens.
//   - Byte-level BPE ("gpt2"): GPT-2 byte-to-unicode mapping, merges by rank,
//     pre-tokenizer splits by tokenizer.ggml.pre (tokenizer_pretokenize.h).
// Special tokens written literally in the text are matched as whole tokens
// before BPE / SPM, as llama.cpp does: user-defined tokens (type 4, e.g.
// Qwen3's "<think>") always, control tokens (type 3, "<|im_end|>") and the unknown
// token (type 2, Llama 2's "<unk>") only when Encode is asked to (parse_special).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace hqekv {

enum class TokenizerKind { kSpm, kBpe };

// Token types as GGUF stores them (tokenizer.ggml.token_type).
enum TokenType : int32_t {
  kTokUndefined = 0,
  kTokNormal = 1,
  kTokUnknown = 2,
  kTokControl = 3,
  kTokUserDefined = 4,
  kTokUnused = 5,
  kTokByte = 6,
};

// Everything a tokenizer is built from.
struct TokenizerVocab {
  TokenizerKind kind = TokenizerKind::kSpm;
  std::string pre =
      "default";  // BPE pre-tokenizer name (tokenizer_pretokenize.h: PreTokenizerByName)
  std::vector<std::string> tokens;  // piece text (SPM: "▁" for space; BPE: byte-to-unicode mapped)
  std::vector<float> scores;        // SPM merge scores (empty -> all 0)
  std::vector<int32_t> types;  // TokenType per token (empty -> all normal, except <0xXX> = byte)
  std::vector<std::string> merges;  // BPE: "left right", rank = index
  int32_t bos = -1, eos = -1, unk = -1, pad = -1;
  int32_t eot = -1, eom = -1;  // extra end-of-generation ids (Llama 3 <|eot_id|>, <|eom_id|>)
  bool add_bos = true;         // tokenizer.ggml.add_bos_token (SPM default true, BPE default false)
  bool add_space_prefix = true;  // SPM only: tokenizer.ggml.add_space_prefix
  std::string chat_template;     // tokenizer.chat_template (Jinja source; "" when absent)
};

// Piece texts that end generation whatever the file's eos/eot/eom ids say
// (llama.cpp's list: Llama 3, ChatML / Qwen, GPT-2 style, Phi-3, Gemma).
inline constexpr const char* kEndOfGenerationTexts[] = {
    "<|eot_id|>",      "<|eom_id|>", "<|im_end|>",    "<|endoftext|>",
    "<|end_of_text|>", "<|end|>",    "<end_of_turn>",
};
bool IsEndOfGenerationText(std::string_view piece);

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Token ids of `text`. add_bos: put bos() first (if the vocab has one).
  // User-defined tokens written literally in the text become their ids;
  // parse_special: so do control tokens (e.g. "<|eot_id|>"), which are
  // otherwise plain text.
  virtual std::vector<int32_t> Encode(std::string_view text, bool add_bos,
                                      bool parse_special = false) const = 0;

  // Text of `token` when it follows `prev` (llama2.c convention for SPM: the
  // leading space of a piece right after BOS is dropped; <0xXX> byte tokens
  // give the raw byte). Control tokens (BOS, EOS, ...) give "". Out-of-range
  // ids give "". The concatenation of pieces may split a UTF-8 character
  // across calls (byte tokens): stream the bytes, don't validate per piece.
  virtual std::string DecodePiece(int32_t prev, int32_t token) const = 0;

  // Decode a sequence generated after `prev` (default: BOS, so the leading
  // space of the first SPM piece is dropped, as llama2.c prints a story).
  std::string Decode(const std::vector<int32_t>& ids) const { return Decode(ids, bos()); }
  std::string Decode(const std::vector<int32_t>& ids, int32_t prev) const;

  virtual TokenizerKind kind() const = 0;
  virtual int32_t bos() const = 0;   // -1 when none
  virtual int32_t eos() const = 0;   // -1 when none
  virtual bool add_bos() const = 0;  // what the model file asks for
  virtual int vocab_size() const = 0;
  // True for EOS, EOT, EOM and every token whose text is one of
  // kEndOfGenerationTexts (so Qwen's <|endoftext|> and Llama 3's
  // <|end_of_text|> / <|eom_id|> stop generation even when the file names
  // another eos).
  virtual bool IsEndOfGeneration(int32_t token) const = 0;
  virtual const std::vector<int32_t>& EndOfGenerationIds() const = 0;  // sorted
  // The file's chat template (Jinja source), "" when it has none.
  virtual const std::string& chat_template() const = 0;
  virtual bool IsControl(int32_t token) const = 0;
  // Raw piece text as stored in the vocab ("" when out of range).
  virtual const std::string& Piece(int32_t token) const = 0;
  // Id of an exact piece, -1 when absent.
  virtual int32_t FindPiece(std::string_view piece) const = 0;
  // One line, e.g. "spm (llama), 512 tokens, bos=1 eos=2, byte fallback".
  virtual std::string Describe() const = 0;
};

// Validates the vocab (sizes agree, ids in range, merges refer to tokens) and
// builds the tokenizer. `source` names the file in errors.
Result<std::unique_ptr<Tokenizer>> MakeTokenizer(TokenizerVocab vocab, const std::string& source);

}  // namespace hqekv
