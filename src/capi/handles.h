// The C API's handle structs and its error plumbing (include/hqekv/hqekv.h).
//
// Every exported function runs its body through Guard(), which turns any C++
// exception into a status (none crosses the C boundary), and reports failures
// through Fail(), which stores the message for hqekv_last_error() in a
// thread-local string.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cache/kv_cache.h"
#include "hqekv/hqekv.h"
#include "io/model_file.h"
#include "model/generate_step.h"
#include "model/llama.h"
#include "model/sampler.h"

// Handles are in the global namespace: the header declares them there.
struct hqekv_model {
  // Shared with every context made from it, so that freeing the model while
  // contexts exist is safe.
  std::shared_ptr<const hqekv::ModelSource> src;
};

struct hqekv_context {
  std::shared_ptr<const hqekv::ModelSource> src;  // outlives `model` (declared first)
  std::unique_ptr<hqekv::LlamaModel> model;       // one per context: it owns scratch buffers
  std::unique_ptr<hqekv::KvCache> cache;
  std::string describe;
  int n_ctx = 0;
  bool context_shift = false;  // hqekv_context_set_shift
  int n_keep = 0;
  hqekv::Sequence seq;               // tokens decoded, the cache's window, the last logits
  int (*abort_fn)(void*) = nullptr;  // hqekv_context_set_abort_callback
  void* abort_user = nullptr;

  // Sequences added by hqekv_seq_add (ids 1..; sequence 0 is cache/seq above).
  struct ExtraSeq {
    std::unique_ptr<hqekv::KvCache> cache;
    std::string describe;
    hqekv::Sequence seq;
  };
  std::map<int32_t, ExtraSeq> extra;
  int32_t next_seq_id = 1;
  // The logits rows the last hqekv_decode_batch was asked for: batch_row[i]
  // is the row of token i ([n_vocab] floats at batch_logits + row * n_vocab)
  // or -1.
  std::vector<float> batch_logits;
  std::vector<int32_t> batch_row;
  // Embeddings (hqekv_context_set_embeddings): when on, the last decode's
  // hidden states [n][n_embd] and the sequence id of each of its tokens.
  bool embeddings_on = false;
  std::vector<float> embd;
  std::vector<int32_t> embd_seq;
  // Sequences whose budget note was logged and still holds (logged again
  // only after the budget was met in between).
  std::map<int32_t, bool> budget_warned;
};

struct hqekv_sampler {
  hqekv::Sampler sampler;
};

struct hqekv_kv {
  std::unique_ptr<hqekv::KvCache> cache;
  std::string describe;
  std::vector<int32_t> last_pos;  // [n_layers]: largest position appended (-1: none)
  std::vector<int> pending;       // [n_layers]: tokens appended since the last EndBatch
};

namespace hqekv::capi {

// Records `message` for hqekv_last_error() on this thread; returns `status`.
hqekv_status Fail(hqekv_status status, std::string message);

// Runs body() (returning hqekv_status); any exception becomes
// HQEKV_ERR_OUT_OF_MEMORY or HQEKV_ERR_INTERNAL with its message.
template <class Body>
hqekv_status Guard(const char* fn, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Fail(HQEKV_ERR_OUT_OF_MEMORY, std::string(fn) + ": out of memory");
  } catch (const std::exception& e) {
    return Fail(HQEKV_ERR_INTERNAL, std::string(fn) + ": internal error: " + e.what());
  } catch (...) {
    return Fail(HQEKV_ERR_INTERNAL, std::string(fn) + ": internal error (unknown exception)");
  }
}

// Copies s into buf[cap] as the header's (buf, cap, len) convention says.
hqekv_status CopyOut(const char* fn, const std::string& s, char* buf, size_t cap, size_t* len);

// One sequence of a context: its cache, spec description and tokens.
struct SeqRef {
  hqekv::KvCache* cache = nullptr;
  const std::string* describe = nullptr;
  hqekv::Sequence* seq = nullptr;
};
// Sequence `id` of ctx (0: the context's own), or {} when there is none.
SeqRef FindSeq(const hqekv_context* ctx, int32_t id);

// The state bytes of one sequence (cache/kv_state.h format) / loads them,
// checked against the sequence's model, spec and geometry first.
hqekv_status EncodeSeqState(const char* fn, const hqekv_context* ctx, const SeqRef& s,
                            std::string* out);
hqekv_status DecodeSeqState(const char* fn, const hqekv_context* ctx, const SeqRef& s,
                            std::string_view file);

// HQEKV_ERR_ABORTED (message naming fn) when ctx's abort callback asks to
// stop, else HQEKV_OK.
hqekv_status CheckAbort(const char* fn, const hqekv_context* ctx);

// Logs `cache`'s budget note (KvCache::BudgetNote) as a WARN when sequence
// `seq` goes from meeting its budget to not meeting it (once, not per step).
void LogBudgetNote(hqekv_context* ctx, const hqekv::KvCache& cache, int32_t seq);

// Fills the C struct from a cache's stats.
void FillStats(const KvStats& st, hqekv_kv_stats* out);

// The per-layer report as a JSON object (hqekv_context_kv_report_json).
std::string StatsJson(const KvStats& st, const std::string& describe);

}  // namespace hqekv::capi
