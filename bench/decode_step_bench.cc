// Whole decode step of each KV policy's cache (issue 15, "per-step policy
// overhead"), as a ratio to the fp16 cache measured in the same run: Append
// one token, Attend one query (through the policy's Attend, so its attention
// rows reach the policy), EndBatch (the compression events). Attention
// kernels alone are bench_attention's subject; this one adds what a policy
// does per step around them (importance sums, Range(V), re-ranking,
// re-quantizing, repacking, eviction).
//
// Geometry: one layer of Llama-3.2-1B (32 query heads, 8 KV heads, head_dim
// 64), 1 thread, CPU time. Each cache is filled with N random tokens (a
// prompt whose last 32 queries attend, then EndBatch(prefill)); one iteration
// is kSteps decode steps (two hqekv events per iteration), so the per-step
// time includes the events at their real rate.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "policy/factory.h"
#include "bench_kv.h"
#include "ratio_table.h"

namespace {

using hqekv::bench::PrintRatioCells;
using hqekv::bench::SplitLabelLength;
using hqekv::bench::Times;

using hqekv::KvCache;
using hqekv::KvGeometry;

constexpr int kHq = 32, kHk = 8, kD = 64;
constexpr int kSteps = 64;       // decode steps per iteration
constexpr int kIterations = 16;  // fixed: the cache grows by kSteps per iteration
const char* const kSpecs[] = {"fp16",           "kivi:nominal_bits=2",
                              "hqekv:bits=3.4", "hqekv:nominal_bits=3.2",
                              "h2o:keep=0.25",  "snapkv:keep=0.25"};
const int kLengths[] = {4096, 16384};

void BM_DecodeStep(benchmark::State& state, std::string spec, int n) {
  KvGeometry g;
  g.n_layers = 1;
  g.n_q_heads = kHq;
  g.n_kv_heads = kHk;
  g.head_dim = kD;
  g.max_ctx = n + kSteps * (kIterations + 1) + 1;
  auto made = hqekv::MakeKvCache(spec, g);
  if (!made.ok()) {
    state.SkipWithError(made.message().c_str());
    return;
  }
  std::unique_ptr<KvCache> c = std::move(made).value();
  std::mt19937 rng(1234);
  std::normal_distribution<float> nd(0.f, 1.f);
  if (auto s = hqekv::bench::AppendRandomTokens(*c, n, 1024, kHk * kD, rng, nd); !s.ok()) {
    state.SkipWithError(s.message().c_str());
    return;
  }
  constexpr int kPromptQueries = 32;
  std::vector<float> q(static_cast<size_t>(kPromptQueries) * kHq * kD), out(q.size());
  for (auto& x : q) x = nd(rng);
  std::vector<int32_t> qpos(kPromptQueries);
  for (int i = 0; i < kPromptQueries; ++i) qpos[i] = n - kPromptQueries + i;
  if (auto s = c->Attend(0, q.data(), qpos.data(), kPromptQueries, out.data()); !s.ok()) {
    state.SkipWithError(s.message().c_str());
    return;
  }
  if (auto s = c->EndBatch(n, true); !s.ok()) {
    state.SkipWithError(s.message().c_str());
    return;
  }
  // Pre-drawn step inputs (the generator is not timed).
  const size_t width = static_cast<size_t>(kHk) * kD;
  std::vector<float> k(width * kSteps), v(k.size()), qs(static_cast<size_t>(kHq) * kD * kSteps);
  for (auto& x : k) x = nd(rng);
  for (auto& x : v) x = nd(rng);
  for (auto& x : qs) x = nd(rng);
  int32_t pos = n;
  for (auto _ : state) {
    for (int s = 0; s < kSteps; ++s, ++pos) {
      hqekv::Status st = c->Append(0, k.data() + width * s, v.data() + width * s, &pos, 1);
      if (st.ok()) {
        st = c->Attend(0, qs.data() + static_cast<size_t>(kHq) * kD * s, &pos, 1, out.data());
      }
      if (st.ok()) st = c->EndBatch(1, false);
      if (!st.ok()) {
        state.SkipWithError(st.message().c_str());
        return;
      }
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["bits_per_original"] = c->Stats().bits_per_original();
}

class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.error_occurred || r.run_type != Run::RT_Iteration) continue;
      // DecodeStep/<spec>/<n>/iterations:<k>
      std::string name = r.benchmark_name();
      if (const auto it = name.find("/iterations:"); it != std::string::npos) name.resize(it);
      std::string spec;
      int n = 0;
      if (!SplitLabelLength(name, &spec, &n)) continue;
      Times()[{spec, n}] = r.GetAdjustedCPUTime() / kSteps;
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

}  // namespace

int main(int argc, char** argv) {
  hqekv::SetNumThreads(1);
  for (int n : kLengths) {
    for (const char* spec : kSpecs) {
      benchmark::RegisterBenchmark(
          ("DecodeStep/" + std::string(spec) + "/" + std::to_string(n)).c_str(), BM_DecodeStep,
          std::string(spec), n)
          ->Unit(benchmark::kMillisecond)
          ->Iterations(kIterations);
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::printf(
      "\nDecode step CPU time (Append + Attend + EndBatch, %d steps per iteration), ratio to "
      "fp16 (same run; 32 q heads, 8 KV heads, D 64, 1 layer, 1 thread)\n%-26s",
      kSteps, "policy");
  for (int n : kLengths) std::printf(" %10d", n);
  std::printf("\n");
  for (const char* spec : kSpecs) {
    std::printf("%-26s", spec);
    PrintRatioCells("fp16", spec, kLengths);
    std::printf("\n");
  }
  benchmark::Shutdown();
  return 0;
}
