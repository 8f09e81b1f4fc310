// The base file of `hqekv ppl --kl-divergence-base FILE` /
// `--kl-divergence FILE`: the tokens of every chunk and the base run's
// next-token distributions, so that later runs (another KV cache, threads,
// build) are scored against exactly the same reference.
//
// Layout (version 1, little-endian, no padding):
//   "HQEKVKLD"                                  8-byte magic
//   u32 version (= kKldFileVersion)
//   u32 vocab, ctx, prefill, chunks, top_k      the chunk plan (lm_compare.h) and k
//   5 x (u32 length, bytes)                     model name, model identity (layout
//                                               hash, io/model_source), tokenizer
//                                               fingerprint, base cache, text name
//   chunks x {
//     i32 tokens[ctx]                           the chunk as fed (BOS first when used)
//     (ctx - prefill) x {                       per scored position, predicting tokens[prefill + s]
//       f32 log p(true next token)              exact, whatever k
//       i32 argmax                              the base's top-1 token
//       i32 ids[top_k]                          the k most probable tokens, decreasing
//       f32 log_probs[top_k]                    their log-probabilities
//     }
//   }
//   u64 checksum                                FNV-1a 64 of every byte before it
// Top-k compression: the rest of the distribution is not stored; its mass is
// 1 - sum(exp(log_probs)) and counts as one "everything else" outcome in the
// KL (lm_compare.h), which makes the KL a lower bound of the exact one, exact
// when top_k == vocab. Written atomically (core/file.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/file.h"
#include "core/status.h"
#include "lm/lm_compare.h"

namespace hqekv::lm {

inline constexpr uint32_t kKldFileVersion = 1;

struct KldBaseInfo {
  int vocab = 0, ctx = 0, prefill = 0, chunks = 0, top_k = 0;
  std::string model_name, model_identity, tokenizer_fingerprint, base_cache, text;
};

// Whether a base file fits the model about to be scored against it: same
// vocabulary size, same tokenizer fingerprint, and (unless any_model: the
// weights may differ, e.g. another quantization) the same model identity, and
// chunks that fit max_ctx. Errors name `path` and both values.
Status CheckBaseFits(const KldBaseInfo& base, const std::string& path, const KldBaseInfo& model,
                     int max_ctx, bool any_model);

class KldBaseWriter {
 public:
  // Starts `path` (a temporary file until Commit). Checks the info's ranges.
  static Result<KldBaseWriter> Create(const std::string& path, const KldBaseInfo& info);
  // Appends one chunk: ref.tokens.size() == ctx, ref.prefill == prefill,
  // ref.top_k == top_k, ref.vocab == vocab.
  Status Add(const ReferenceScores& ref);
  // After exactly `chunks` Add calls: writes the checksum and renames into place.
  Status Commit();

 private:
  KldBaseWriter(AtomicFileWriter w, KldBaseInfo info) : w_(std::move(w)), info_(std::move(info)) {}
  Status Put(const void* data, size_t n);
  AtomicFileWriter w_;
  KldBaseInfo info_;
  uint64_t hash_ = 0;
  int added_ = 0;
};

class KldBaseReader {
 public:
  // Opens `path`, checks the magic, version, header ranges, that the size is
  // the one the header describes (a truncated or extended file is an error)
  // and the checksum (reads the file once). Errors name the path.
  static Result<KldBaseReader> Open(const std::string& path);
  const KldBaseInfo& info() const { return info_; }
  // The next chunk as ReferenceScores (tokens, prefill, top-k tables); ids
  // are checked against the vocabulary.
  Result<ReferenceScores> Next();

 private:
  KldBaseReader(RegularFile f, KldBaseInfo info, uint64_t offset)
      : file_(std::move(f)), info_(std::move(info)), offset_(offset) {}
  Status ReadAt(void* out, size_t n);
  RegularFile file_;
  KldBaseInfo info_;
  uint64_t offset_ = 0;
  int next_ = 0;
};

}  // namespace hqekv::lm
