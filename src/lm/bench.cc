#include "lm/bench.h"

#include <time.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cache/kv_state.h"
#include "core/file.h"
#include "core/parallel.h"

namespace hqekv::lm {
namespace {

// Prefill batches while filling the context depth (not timed).
constexpr int kFillBatch = 512;

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// CPU seconds used by this process so far, all threads.
double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

void MeanSd(BenchRow* r) {
  const double n = static_cast<double>(r->tok_per_s.size());
  double s = 0;
  for (double v : r->tok_per_s) s += v;
  r->mean = n > 0 ? s / n : 0;
  double ss = 0;
  for (double v : r->tok_per_s) ss += (v - r->mean) * (v - r->mean);
  r->sd = n > 1 ? std::sqrt(ss / (n - 1)) : 0;
  double c = 0;
  for (double v : r->tok_per_cpu_s) c += v;
  r->cpu_mean = r->tok_per_cpu_s.empty() ? 0 : c / static_cast<double>(r->tok_per_cpu_s.size());
}

// Random token ids in [3, vocab) and positions first..first+n-1.
void RandomTokens(int vocab, int first, int n, std::mt19937_64& rng, std::vector<int32_t>* tok,
                  std::vector<int32_t>* pos) {
  tok->resize(n);
  pos->resize(n);
  for (int i = 0; i < n; ++i) {
    (*tok)[i] = 3 + static_cast<int32_t>(rng() % static_cast<uint64_t>(std::max(1, vocab - 3)));
    (*pos)[i] = first + i;
  }
}

// A cache holding `depth` random tokens, made once per (spec, depth) and
// restored before every run of every test and thread count at that depth:
// the fill (minutes at depth 16384 on a 1B model) is paid once instead of
// once per warm-up and repetition. Caches that cannot save their state are
// filled again for every run instead (same measurement, slower).
struct DepthFill {
  int depth = 0;
  int capacity = 0;   // depth + the longest test: the geometry every run uses
  std::string state;  // KvCache::SaveState after the fill; empty = refill per run
  bool saved = false;
  double fill_seconds = 0;  // or the state file's load
  std::string loaded_from, saved_to;
};

// Fills `cache` with `depth` random tokens; *all (may be null) gets them.
Status Fill(LlamaModel& model, KvCache& cache, int depth, std::mt19937_64& rng,
            std::vector<int32_t>* all = nullptr) {
  std::vector<int32_t> tok, pos;
  for (int a = 0; a < depth; a += kFillBatch) {
    const int len = std::min(kFillBatch, depth - a);
    RandomTokens(model.vocab_size(), a, len, rng, &tok, &pos);
    HQEKV_RETURN_IF_ERROR(
        model.Forward(tok.data(), pos.data(), len, cache, Logits::kNone, nullptr, true));
    if (all) all->insert(all->end(), tok.begin(), tok.end());
  }
  return Status::Ok();
}

// The filled depth from an existing state file: it must name this model, the
// spec and the depth, with the model's cache shape and room for `capacity`
// positions; the runs then use the file's context (its max_ctx).
Result<DepthFill> LoadDepthFill(LlamaModel& model, const CacheFactory& make_cache,
                                const BenchConfig& c, const std::string& kv, int depth,
                                int capacity) {
  const std::string& path = c.state_path;
  auto fail = [&](const std::string& what) {
    return MakeError("bench: state file " + path + ": " + what +
                     " (delete it or give another file to fill again)");
  };
  const double t0 = Seconds();
  auto bytes = ReadFileChecked(path, kMaxMappedFileBytes);
  if (!bytes.ok()) return fail(bytes.message());
  auto head = ReadKvStateHeader(*bytes);
  if (!head.ok()) return fail(head.message());
  if (head->model_identity != c.model_identity)
    return fail("made with another model (identity " + head->model_identity + ", this one is " +
                c.model_identity + ")");
  if (head->spec != kv)
    return fail("made with --kv '" + head->spec + "', this run is '" + kv + "'");
  if (static_cast<int64_t>(head->tokens.size()) != depth)
    return fail("filled to depth " + std::to_string(head->tokens.size()) + ", this run is " +
                std::to_string(depth));
  const KvGeometry want = model.CacheGeometry(head->geometry.max_ctx);
  const KvGeometry& g = head->geometry;
  if (g.n_layers != want.n_layers || g.n_q_heads != want.n_q_heads ||
      g.n_kv_heads != want.n_kv_heads || g.head_dim != want.head_dim)
    return fail("another cache shape (layers, heads or head size) than this model's");
  if (g.max_ctx < capacity)
    return fail("room for " + std::to_string(g.max_ctx) + " positions, this run needs " +
                std::to_string(capacity) + " (depth + the longest test)");
  HQEKV_ASSIGN_OR_RETURN(auto cache, make_cache(kv, want));
  KvStateMeta expect;
  expect.model_identity = c.model_identity;
  expect.spec = kv;
  expect.geometry = want;
  if (auto st = LoadKvState(*bytes, expect, *cache); !st.ok()) return fail(st.message());
  DepthFill f;
  f.depth = depth;
  f.capacity = g.max_ctx;
  HQEKV_RETURN_IF_ERROR(cache->SaveState(&f.state));
  f.saved = true;
  f.fill_seconds = Seconds() - t0;
  f.loaded_from = path;
  return f;
}

Result<DepthFill> MakeDepthFill(LlamaModel& model, const CacheFactory& make_cache,
                                const BenchConfig& c, const std::string& kv, int depth,
                                int capacity, std::mt19937_64& rng) {
  const bool use_file = !c.state_path.empty() && depth > 0;
  if (use_file && std::filesystem::exists(c.state_path))
    return LoadDepthFill(model, make_cache, c, kv, depth, capacity);
  // Checked before the fill (minutes at a deep depth), not after it.
  if (use_file) {
    if (Status st = CheckWritable(c.state_path); !st.ok())
      return MakeError("bench: state file: " + st.message());
  }
  DepthFill f;
  f.depth = depth;
  f.capacity = capacity;
  HQEKV_ASSIGN_OR_RETURN(auto cache, make_cache(kv, model.CacheGeometry(capacity)));
  std::vector<int32_t> tokens;
  const double t0 = Seconds();
  HQEKV_RETURN_IF_ERROR(Fill(model, *cache, depth, rng, use_file ? &tokens : nullptr));
  f.fill_seconds = Seconds() - t0;
  f.saved = cache->SaveState(&f.state).ok();
  if (!f.saved) f.state.clear();
  if (use_file) {
    KvStateMeta meta;
    meta.model_identity = c.model_identity;
    meta.spec = kv;
    meta.geometry = cache->geometry();
    meta.tokens = std::move(tokens);
    meta.logits.assign(model.vocab_size(), 0.0f);  // the fill asks for none
    auto bytes = EncodeKvState(*cache, meta);
    if (!bytes.ok())
      return MakeError("bench: state file " + c.state_path + ": --kv " + kv +
                       " cannot be saved: " + bytes.message());
    // A file that appeared during the fill is someone else's: kept.
    if (std::filesystem::exists(c.state_path))
      return MakeError("bench: state file " + c.state_path +
                       " appeared while filling; not overwritten");
    HQEKV_RETURN_IF_ERROR(WriteFileAtomic(c.state_path, *bytes));
    f.saved_to = c.state_path;
  }
  return f;
}

struct RunResult {
  double tok_per_s = 0;
  double tok_per_cpu_s = 0;  // per second of process CPU time
  KvStats kv;                // the cache after the run
};

// One run: the filled cache (restored, or filled again), then the timed
// part; returns tokens/s of the timed part and the cache's statistics.
Result<RunResult> OneRun(LlamaModel& model, const CacheFactory& make_cache, const std::string& kv,
                         const DepthFill& fill, bool prompt, int n, std::mt19937_64& rng) {
  HQEKV_ASSIGN_OR_RETURN(auto cache, make_cache(kv, model.CacheGeometry(fill.capacity)));
  if (fill.saved) {
    HQEKV_RETURN_IF_ERROR(cache->LoadState(fill.state));
  } else {
    HQEKV_RETURN_IF_ERROR(Fill(model, *cache, fill.depth, rng));
  }
  std::vector<int32_t> tok, pos;
  RandomTokens(model.vocab_size(), fill.depth, n, rng, &tok, &pos);
  std::vector<float> logits(model.vocab_size());
  const double c0 = ProcessCpuSeconds();
  const double t0 = Seconds();
  if (prompt) {
    HQEKV_RETURN_IF_ERROR(
        model.Forward(tok.data(), pos.data(), n, *cache, Logits::kLast, logits.data(), true));
  } else {
    for (int i = 0; i < n; ++i) {
      HQEKV_RETURN_IF_ERROR(
          model.Forward(&tok[i], &pos[i], 1, *cache, Logits::kLast, logits.data(), false));
    }
  }
  const double dt = Seconds() - t0;
  const double dc = ProcessCpuSeconds() - c0;
  return RunResult{dt > 0 ? n / dt : 0.0, dc > 0 ? n / dc : 0.0, cache->Stats()};
}

template <class... A>
std::string Fmt(const char* f, A... a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, a...);
  return buf;
}

std::string JsonString(const std::string& s) {
  std::string o = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') o += '\\';
    if (static_cast<unsigned char>(ch) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", ch);
      o += buf;
      continue;
    }
    o += ch;
  }
  return o + "\"";
}

}  // namespace

Result<std::vector<BenchRow>> RunBench(LlamaModel& model, const BenchConfig& c,
                                       const CacheFactory& make_cache,
                                       const std::function<void(const BenchRow&)>& progress,
                                       const FillProgress& filled) {
  if (c.reps < 1)
    return MakeError("bench: repetitions must be >= 1, got " + std::to_string(c.reps));
  int longest = 0;  // the longest test: every run at a depth uses depth + longest of context
  for (int n : c.pp) longest = std::max(longest, n);
  for (int n : c.tg) longest = std::max(longest, n);
  for (int d : c.depths) {
    if (d < 0) return MakeError("bench: depth must be >= 0, got " + std::to_string(d));
    if (d + longest > model.config().max_ctx) {
      return MakeError("bench: depth " + std::to_string(d) + " + " + std::to_string(longest) +
                       " tokens exceed the model's context of " +
                       std::to_string(model.config().max_ctx));
    }
  }
  if (!c.state_path.empty()) {
    int deep = 0;
    for (int d : c.depths) deep += d > 0;
    if (c.kv.size() != 1 || deep != 1)
      return MakeError(
          "bench: a state file keeps one filled depth of one KV spec: give one --kv "
          "and one depth > 0 (got " +
          std::to_string(c.kv.size()) + " specs, " + std::to_string(deep) + " depths > 0)");
    if (c.model_identity.empty()) return MakeError("bench: a state file needs the model identity");
  }
  std::vector<int> threads = c.threads;
  for (int& t : threads) {
    if (t < 0) return MakeError("bench: thread count must be >= 0, got " + std::to_string(t));
    if (t == 0) t = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  std::mt19937_64 rng(c.seed);
  std::vector<BenchRow> rows;
  for (const std::string& kv : c.kv) {
    // One fill per depth for this spec, made at the first thread count
    // (with that many threads) and reused by the others.
    std::map<int, DepthFill> fills;
    for (int t : threads) {
      SetNumThreads(t);
      for (int depth : c.depths) {
        auto it = fills.find(depth);
        if (it == fills.end()) {
          HQEKV_ASSIGN_OR_RETURN(
              DepthFill f, MakeDepthFill(model, make_cache, c, kv, depth, depth + longest, rng));
          if (filled && depth > 0)
            filled(FillEvent{kv, depth, f.fill_seconds, f.saved, f.loaded_from, f.saved_to});
          it = fills.emplace(depth, std::move(f)).first;
        }
        const DepthFill& fill = it->second;
        for (int prompt = 1; prompt >= 0; --prompt) {
          for (int n : prompt ? c.pp : c.tg) {
            if (n <= 0) continue;
            BenchRow r;
            r.kv = kv;
            r.test = (prompt ? "pp" : "tg") + std::to_string(n);
            r.threads = t;
            r.depth = depth;
            r.n_tokens = n;
            // One untimed warm-up run (page faults, pool start, caches).
            HQEKV_RETURN_IF_ERROR(OneRun(model, make_cache, kv, fill, prompt == 1, n, rng));
            for (int rep = 0; rep < c.reps; ++rep) {
              HQEKV_ASSIGN_OR_RETURN(RunResult run,
                                     OneRun(model, make_cache, kv, fill, prompt == 1, n, rng));
              r.tok_per_s.push_back(run.tok_per_s);
              r.tok_per_cpu_s.push_back(run.tok_per_cpu_s);
              r.kv_bytes = run.kv.bytes.total();
              r.kv_bits = run.kv.bits_per_original();
            }
            MeanSd(&r);
            if (progress) progress(r);
            rows.push_back(std::move(r));
          }
        }
      }
    }
  }
  return rows;
}

std::string BenchMarkdown(const std::string& model_name, int64_t weight_bytes,
                          const std::vector<BenchRow>& rows) {
  std::string o =
      "| model | size | kv | kv MiB | kv bits/elem | threads | test | t/s |\n"
      "|---|---:|---|---:|---:|---:|---|---:|\n";
  for (const BenchRow& r : rows) {
    const std::string test = r.test + (r.depth > 0 ? " @ d" + std::to_string(r.depth) : "");
    o += "| " + model_name + " | " + Fmt("%.1f MiB", weight_bytes / 1048576.0) + " | " + r.kv +
         " | " + Fmt("%.2f", r.kv_bytes / 1048576.0) + " | " + Fmt("%.2f", r.kv_bits) + " | " +
         std::to_string(r.threads) + " | " + test + " | " + Fmt("%.2f ± %.2f", r.mean, r.sd) +
         " |\n";
  }
  return o;
}

std::string BenchJson(const std::string& model_name, int64_t weight_bytes,
                      const std::vector<BenchRow>& rows) {
  std::string o = "[\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const BenchRow& r = rows[i];
    o += "  {\"model\": " + JsonString(model_name) +
         ", \"weight_bytes\": " + std::to_string(weight_bytes) + ", \"kv\": " + JsonString(r.kv) +
         ", \"threads\": " + std::to_string(r.threads) + ", \"test\": " + JsonString(r.test) +
         ", \"n_prompt\": " + std::to_string(r.test[0] == 'p' ? r.n_tokens : 0) +
         ", \"n_gen\": " + std::to_string(r.test[0] == 't' ? r.n_tokens : 0) +
         ", \"depth\": " + std::to_string(r.depth) +
         ", \"kv_bytes\": " + std::to_string(r.kv_bytes) +
         ", \"kv_bits_per_element\": " + Fmt("%.4f", r.kv_bits) + ", \"samples_ts\": [";
    for (size_t j = 0; j < r.tok_per_s.size(); ++j) {
      o += (j ? ", " : "") + Fmt("%.4f", r.tok_per_s[j]);
    }
    o += "], \"avg_ts\": " + Fmt("%.4f", r.mean) + ", \"stddev_ts\": " + Fmt("%.4f", r.sd) +
         ", \"samples_cpu_ts\": [";
    for (size_t j = 0; j < r.tok_per_cpu_s.size(); ++j) {
      o += (j ? ", " : "") + Fmt("%.4f", r.tok_per_cpu_s[j]);
    }
    o += "], \"avg_cpu_ts\": " + Fmt("%.4f", r.cpu_mean) + "}" +
         (i + 1 < rows.size() ? ",\n" : "\n");
  }
  return o + "]\n";
}

}  // namespace hqekv::lm
