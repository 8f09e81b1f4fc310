// Builds a Tokenizer from the tokenizer.ggml.* keys of a GGUF file.
#pragma once

#include <memory>

#include "core/status.h"
#include "io/gguf.h"
#include "tokenizer/tokenizer.h"

namespace hqekv {

// Reads tokenizer.ggml.model ("llama" -> SPM, "gpt2" -> BPE), .pre, .tokens,
// .scores, .token_type, .merges, .bos/.eos/.unknown/.padding/.eot/.eom_token_id,
// .add_bos_token, .add_space_prefix, and tokenizer.chat_template. Errors name the file and key.
Result<TokenizerVocab> TokenizerVocabFromGguf(const GgufFile& file);
Result<std::unique_ptr<Tokenizer>> TokenizerFromGguf(const GgufFile& file);

}  // namespace hqekv
