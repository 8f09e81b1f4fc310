// llama2.c checkpoints (Karpathy's run.c "legacy" export, version 0) and
// tokenizer.bin files.
//
// Checkpoint: 7 × int32 header {dim, hidden_dim, n_layers, n_heads,
// n_kv_heads, vocab_size, seq_len} (vocab_size < 0: untied classifier), then
// float32 weights in this order (shapes row-major, outer dimension first):
//   token_embedding [vocab][dim], rms_att [L][dim], wq [L][dim][dim],
//   wk [L][kv_dim][dim], wv [L][kv_dim][dim], wo [L][dim][dim],
//   rms_ffn [L][dim], w1 [L][hidden][dim], w2 [L][dim][hidden],
//   w3 [L][hidden][dim], rms_final [dim], freq_cis_real [seq][head_dim/2],
//   freq_cis_imag [seq][head_dim/2] (skipped), wcls [vocab][dim] if untied.
// Row-major [out][in] is exactly ggml's ne = {in, out}, so the weights are
// exposed zero copy under the GGUF names (w1 = ffn_gate, w2 = ffn_down,
// w3 = ffn_up).
//
// tokenizer.bin: uint32 max_token_length, then per token: float32 score,
// int32 length, bytes. Ids 0, 1, 2 are <unk>, <s>, </s> (BOS 1, EOS 2).
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "io/model_file.h"
#include "tokenizer/tokenizer.h"

namespace hqekv {

// Parses a tokenizer.bin image; `vocab_size` tokens are read (the checkpoint
// says how many). Errors name `name`.
Result<TokenizerVocab> ParseLlama2cTokenizer(const uint8_t* data, size_t size, int vocab_size,
                                             const std::string& name);
Result<std::unique_ptr<Tokenizer>> LoadLlama2cTokenizer(const std::string& path, int vocab_size);

// Loads a checkpoint + tokenizer from `map`, the checkpoint file `path`
// already opened (LoadModel opened it to look for the GGUF magic; the
// weights point into it). tokenizer_path "" -> tok<vocab>.bin, then
// tokenizer.bin, in the checkpoint's directory. Checks the header and the
// file size only: LoadModel (model_source.h) validates the result like a
// GGUF model, so this reader needs nothing above model_file.h.
Result<std::unique_ptr<ModelSource>> LoadLlama2c(std::shared_ptr<MappedFile> map,
                                                 const std::string& path,
                                                 const std::string& tokenizer_path = "");

}  // namespace hqekv
