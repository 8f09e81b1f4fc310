// Throughput benchmark of the engine (`hqekv bench`, like llama-bench):
// prompt processing ppN (one batch of N tokens) and generation tgN (N
// single-token steps), each after `depth` tokens already in the cache, per KV
// spec and thread count, repeated; tokens/s as mean and sample sd.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cache/kv_cache.h"
#include "core/status.h"
#include "model/llama.h"

namespace hqekv::lm {

struct BenchConfig {
  std::vector<int> pp = {512};  // prompt sizes (0 entries are skipped)
  std::vector<int> tg = {128};  // generation lengths
  std::vector<int> depths = {0};
  std::vector<std::string> kv = {"fp16"};
  std::vector<int> threads = {0};  // 0 = all cores (as llama-bench); the CLI resolves it
  int reps = 3;
  uint64_t seed = 1;  // token ids are random in [3, vocab)
  // A KV state file (cache/kv_state.h) for the one depth > 0: loaded instead
  // of filling when it exists, written (atomically) after the fill when it
  // does not. It is tied to the model (model_identity, which must be set),
  // the spec (one --kv only) and the depth (one depth > 0 only); a file made
  // for anything else is refused, never overwritten.
  std::string state_path;
  std::string model_identity;
};

struct BenchRow {
  std::string kv, test;  // test: "pp512", "tg128"
  int threads = 0, depth = 0, n_tokens = 0;
  std::vector<double> tok_per_s;  // one per repetition
  double mean = 0, sd = 0;
  // Tokens per second of process CPU time (all threads, user + system) over
  // the same timed part, one per repetition, and their mean: on a
  // time-shared machine the wall figure is mostly the scheduler's share of a
  // core, this one is not (it still feels memory and cache contention).
  std::vector<double> tok_per_cpu_s;
  double cpu_mean = 0;
  // The KV cache after the last repetition (depth + the test's tokens):
  // bytes held, every byte counted, and bits per original element.
  int64_t kv_bytes = 0;
  double kv_bits = 0;
};

// Makes an empty cache for a spec (the CLI passes policy::MakeKvCache).
using CacheFactory =
    std::function<Result<std::unique_ptr<KvCache>>(const std::string& spec, const KvGeometry& g)>;

// Told when the cache of a spec has been filled to a depth > 0 (not timed).
struct FillEvent {
  std::string kv;
  int depth = 0;
  double seconds = 0;  // the fill's, or the state file's load
  // Whether the filled state is kept in memory and restored for every run
  // (false: the cache kind cannot save its state, so every run fills again).
  bool reused = false;
  std::string loaded_from;  // the state file it was loaded from ("" = filled here)
  std::string saved_to;     // the state file the fill was written to ("" = none)
};
using FillProgress = std::function<void(const FillEvent&)>;

// Runs every (kv, threads, depth, test) cell; `progress` (may be empty) gets
// each finished row. Sets the thread pool size as it goes (left at the last).
// Every run at a depth starts from the same filled cache (random tokens,
// filled once per spec and depth, saved with KvCache::SaveState and loaded
// into a fresh cache), whose geometry has room for depth + the longest test;
// the timed tokens are drawn anew for every run.
Result<std::vector<BenchRow>> RunBench(LlamaModel& model, const BenchConfig& c,
                                       const CacheFactory& make_cache,
                                       const std::function<void(const BenchRow&)>& progress,
                                       const FillProgress& filled = {});

// llama-bench-like markdown table, and a JSON array (one object per row).
std::string BenchMarkdown(const std::string& model_name, int64_t weight_bytes,
                          const std::vector<BenchRow>& rows);
std::string BenchJson(const std::string& model_name, int64_t weight_bytes,
                      const std::vector<BenchRow>& rows);

}  // namespace hqekv::lm
