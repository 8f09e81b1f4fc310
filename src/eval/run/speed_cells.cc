#include "eval/run/speed_cells.h"

#include <algorithm>
#include <chrono>
#include <sstream>
#include <vector>

#include "core/parallel.h"
#include "eval/run/scoring.h"
#include "lm/logprob.h"

namespace hqekv::eval {
namespace {

constexpr int kSpeedRepeats = 3;  // speed cells: best of 3 runs

// Prefills tokens[0, L) and decodes D tokens greedily with `p`, best of
// kSpeedRepeats runs, into `cell`.
void TimePolicy(EvalModel& model, const std::vector<int32_t>& tokens, int L, int D,
                const PolicyPoint& p, const CacheFactory& make_cache, CellResult* cell) {
  auto cache = make_cache(p.spec, model.Geometry(L + D));
  if (!cache.ok()) {
    cell->error = cache.message();
    return;
  }
  cell->describe = (*cache)->Describe();
  // Best of kSpeedRepeats runs (the machine is shared: the fastest run is the
  // least disturbed one); the cache is reset between runs.
  std::vector<float> logits;
  Status st;
  double prefill_s = 0, decode_s = 0;
  for (int rep = 0; rep < kSpeedRepeats && st.ok(); ++rep) {
    (*cache)->Reset();
    auto tp = std::chrono::steady_clock::now();
    st = model.Forward(**cache, tokens.data(), L, 0, true, &logits);
    const double p_s = Since(tp);
    if (!st.ok()) break;
    auto td = std::chrono::steady_clock::now();
    for (int i = 0; i < D && st.ok(); ++i) {
      const int32_t tok = lm::Argmax(logits.data(), model.VocabSize());
      st = model.Forward(**cache, &tok, 1, L + i, false, &logits);
    }
    const double d_s = Since(td);
    prefill_s = rep == 0 ? p_s : std::min(prefill_s, p_s);
    decode_s = rep == 0 ? d_s : std::min(decode_s, d_s);
  }
  if (!st.ok()) {
    cell->error = st.message();
    return;
  }
  MemAcc mem;
  mem.Add((*cache)->Stats());
  mem.Into(cell);
  cell->n = 1;
  cell->prefill_tok_s = prefill_s > 0 ? L / prefill_s : 0;
  cell->decode_tok_s = decode_s > 0 ? D / decode_s : 0;
}

}  // namespace

Status RunSpeedCells(EvalModel& model, const Suite& suite, const CacheFactory& make_cache,
                     CellRunner& cells) {
  if (suite.speed.contexts.empty()) return Status::Ok();
  const int max_ctx = cells.run().max_ctx;
  HQEKV_ASSIGN_OR_RETURN(auto c, cells.GetCorpus(suite.speed.corpus));
  // Held-out text: sentences until there are 16 characters per token of the
  // context cap.
  std::string text;
  for (const auto& s : c->sentences) {
    text += (text.empty() ? "" : " ") + s;
    if (text.size() > 16u * static_cast<size_t>(max_ctx)) break;
  }
  const std::vector<int32_t> all = model.Encode(text, true);
  for (int L : suite.speed.contexts) {
    const int D = suite.speed.decode_tokens;
    if (L + D > max_ctx) L = max_ctx - D;
    if (L < 8 || static_cast<int>(all.size()) < L) continue;
    std::ostringstream config;
    config << "ctx=" << L << "|decode=" << D << "|rep=" << kSpeedRepeats << "|"
           << suite.speed.corpus << "|threads=" << NumThreads();
    for (const PolicyPoint& p : suite.policies) {
      HQEKV_RETURN_IF_ERROR(cells.Run("speed", config.str(), p,
                                      p.spec + " speed ctx=" + std::to_string(L),
                                      [&](CellResult* cell) {
                                        cell->task = "speed";
                                        cell->corpus = suite.speed.corpus;
                                        cell->context = L;
                                        TimePolicy(model, all, L, D, p, make_cache, cell);
                                        return true;
                                      }));
    }
  }
  return Status::Ok();
}

}  // namespace hqekv::eval
