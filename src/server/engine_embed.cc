// Engine::Embed: hidden-state embeddings between scheduler steps.
#include <string>
#include <vector>

#include "model/embedding_pool.h"
#include "policy/factory.h"
#include "server/engine.h"

namespace hqekv::server {

bool Engine::Embed(const std::vector<std::vector<int32_t>>& inputs, const std::string& kv,
                   std::vector<std::vector<float>>* out, ApiError* err) {
  std::string spec = o_.kv;
  if (!kv.empty() && !ResolveSpec(kv, &spec, err)) return false;
  auto parsed = policy::ParseSpec(spec);
  if (!parsed.ok()) {
    *err = BadRequest("'kv': " + parsed.message(), "kv");
    return false;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].empty() || static_cast<int>(inputs[i].size()) > o_.ctx) {
      *err = BadRequest("'input' item " + std::to_string(i) + " has " +
                            std::to_string(inputs[i].size()) + " tokens; it must have 1 to " +
                            std::to_string(o_.ctx) + " (the server's context)",
                        "input");
      return false;
    }
  }
  const ModelConfig& c = src_.config;
  const size_t d = static_cast<size_t>(c.d_model);
  out->assign(inputs.size(), std::vector<float>(d, 0.0f));
  // Between scheduler steps, as a slot save: the model's scratch is shared.
  std::lock_guard<std::mutex> step(step_mu_);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int n = static_cast<int>(inputs[i].size());
    auto cache = policy::CreateCache(*parsed, model_->CacheGeometry(n),
                                     policy::ForModel(c.name, src_.identity, c.n_layers));
    if (!cache.ok()) {
      *err = BadRequest("'kv': " + cache.message(), "kv");
      return false;
    }
    std::vector<int32_t> pos(n);
    for (int t = 0; t < n; ++t) pos[t] = t;
    std::vector<float> rows(static_cast<size_t>(n) * d);
    const Status st = model_->Forward(inputs[i].data(), pos.data(), n, **cache, Logits::kNone,
                                      nullptr, /*is_prefill=*/true, rows.data());
    if (!st.ok()) {
      *err = ApiError{500, "server_error",
                      "embedding input " + std::to_string(i) + ": " + st.message(), "", ""};
      return false;
    }
    // Mean over the tokens, then L2 normalisation (OpenAI's vectors have norm 1).
    std::vector<size_t> all(static_cast<size_t>(n));
    for (int t = 0; t < n; ++t) all[t] = static_cast<size_t>(t);
    PoolEmbedding(rows.data(), d, all.data(), all.size(), /*normalize=*/true, (*out)[i].data());
  }
  std::lock_guard<std::mutex> l(mu_);
  ++m_.requests;
  for (const auto& in : inputs) m_.prompt_tokens += static_cast<int64_t>(in.size());
  return true;
}

}  // namespace hqekv::server
