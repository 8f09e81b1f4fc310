#include "lm/bench.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/parallel.h"

namespace hqekv::lm {
namespace {

// Prefill batches while filling the context depth (not timed).
constexpr int kFillBatch = 512;

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void MeanSd(BenchRow* r) {
  const double n = static_cast<double>(r->tok_per_s.size());
  double s = 0;
  for (double v : r->tok_per_s) s += v;
  r->mean = n > 0 ? s / n : 0;
  double ss = 0;
  for (double v : r->tok_per_s) ss += (v - r->mean) * (v - r->mean);
  r->sd = n > 1 ? std::sqrt(ss / (n - 1)) : 0;
}

// One repetition: a fresh cache, `depth` tokens in it, then the timed part;
// returns tokens/s of the timed part.
Result<double> OneRun(LlamaModel& model, const CacheFactory& make_cache, const std::string& kv,
                      int depth, bool prompt, int n, std::mt19937_64& rng) {
  const int vocab = model.vocab_size();
  const int total = depth + n;
  if (total > model.config().max_ctx) {
    return MakeError("bench: depth " + std::to_string(depth) + " + " + std::to_string(n) +
                     " tokens exceed the model's context of " +
                     std::to_string(model.config().max_ctx));
  }
  HQEKV_ASSIGN_OR_RETURN(auto cache, make_cache(kv, model.CacheGeometry(total)));
  std::vector<int32_t> tok(total), pos(total);
  for (int i = 0; i < total; ++i) {
    tok[i] = 3 + static_cast<int32_t>(rng() % static_cast<uint64_t>(std::max(1, vocab - 3)));
    pos[i] = i;
  }
  std::vector<float> logits(vocab);
  for (int a = 0; a < depth; a += kFillBatch) {
    const int len = std::min(kFillBatch, depth - a);
    HQEKV_RETURN_IF_ERROR(
        model.Forward(&tok[a], &pos[a], len, *cache, Logits::kNone, nullptr, true));
  }
  const double t0 = Seconds();
  if (prompt) {
    HQEKV_RETURN_IF_ERROR(
        model.Forward(&tok[depth], &pos[depth], n, *cache, Logits::kLast, logits.data(), true));
  } else {
    for (int i = depth; i < total; ++i) {
      HQEKV_RETURN_IF_ERROR(
          model.Forward(&tok[i], &pos[i], 1, *cache, Logits::kLast, logits.data(), false));
    }
  }
  const double dt = Seconds() - t0;
  return dt > 0 ? n / dt : 0.0;
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
                                       const std::function<void(const BenchRow&)>& progress) {
  if (c.reps < 1)
    return MakeError("bench: repetitions must be >= 1, got " + std::to_string(c.reps));
  for (int d : c.depths) {
    if (d < 0) return MakeError("bench: depth must be >= 0, got " + std::to_string(d));
  }
  std::mt19937_64 rng(c.seed);
  std::vector<BenchRow> rows;
  for (const std::string& kv : c.kv) {
    for (int t : c.threads) {
      if (t < 1) return MakeError("bench: thread count must be >= 1, got " + std::to_string(t));
      SetNumThreads(t);
      for (int depth : c.depths) {
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
            HQEKV_RETURN_IF_ERROR(OneRun(model, make_cache, kv, depth, prompt == 1, n, rng));
            for (int rep = 0; rep < c.reps; ++rep) {
              HQEKV_ASSIGN_OR_RETURN(double tps,
                                     OneRun(model, make_cache, kv, depth, prompt == 1, n, rng));
              r.tok_per_s.push_back(tps);
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
  std::string o = "| model | size | kv | threads | test | t/s |\n|---|---:|---|---:|---|---:|\n";
  for (const BenchRow& r : rows) {
    const std::string test = r.test + (r.depth > 0 ? " @ d" + std::to_string(r.depth) : "");
    o += "| " + model_name + " | " + Fmt("%.1f MiB", weight_bytes / 1048576.0) + " | " + r.kv +
         " | " + std::to_string(r.threads) + " | " + test + " | " +
         Fmt("%.2f ± %.2f", r.mean, r.sd) + " |\n";
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
         ", \"depth\": " + std::to_string(r.depth) + ", \"samples_ts\": [";
    for (size_t j = 0; j < r.tok_per_s.size(); ++j) {
      o += (j ? ", " : "") + Fmt("%.4f", r.tok_per_s[j]);
    }
    o += "], \"avg_ts\": " + Fmt("%.4f", r.mean) + ", \"stddev_ts\": " + Fmt("%.4f", r.sd) + "}" +
         (i + 1 < rows.size() ? ",\n" : "\n");
  }
  return o + "]\n";
}

}  // namespace hqekv::lm
