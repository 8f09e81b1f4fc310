// What the evaluation harness needs from a language model: tokenize, and run
// tokens through a forward pass whose attention goes through a KvCache the
// harness owns. The engine adapter (engine_model.h) implements it over the
// model module; tests implement it with a tiny toy model.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cache/kv_cache.h"
#include "core/status.h"

namespace hqekv::eval {

class EvalModel {
 public:
  virtual ~EvalModel() = default;

  // Display name and a stable identity (e.g. a hash of the weights' config)
  // that goes into cell hashes, so changing the model invalidates cached cells.
  virtual std::string Name() const = 0;
  virtual std::string Identity() const = 0;
  virtual int VocabSize() const = 0;
  // Positions the model was trained on: contexts are capped to this.
  virtual int TrainedContext() const = 0;
  // Cache geometry for sequences of up to max_ctx tokens.
  virtual KvGeometry Geometry(int max_ctx) const = 0;

  // add_bos: start with BOS if the model file asks for one (add_bos_token).
  virtual std::vector<int32_t> Encode(const std::string& text, bool add_bos) const = 0;
  virtual std::string Decode(const std::vector<int32_t>& ids) const = 0;
  virtual bool IsEndOfGeneration(int32_t token) const = 0;

  // Runs tokens[0..n) at positions pos0..pos0+n-1, appending their K/V to
  // `cache` and calling cache.EndBatch(n, is_prefill) once at the end.
  // logits: resized to VocabSize() and set to the logits of the last token.
  virtual Status Forward(KvCache& cache, const int32_t* tokens, int n, int pos0, bool is_prefill,
                         std::vector<float>* logits) = 0;
};

}  // namespace hqekv::eval
