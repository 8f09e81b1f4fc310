// Decode attention over a KvStore (cache::StoreAttention) per tier layout, as
// a ratio to an all-fp16 store measured in the same run, plus the plain fp16
// cache (PlainKvCache, the `fp16` policy) for reference.
//
// Geometry: one layer, 32 query heads, 8 KV heads (GQA group 4), head_dim
// 128, chunks of 32 tokens, the newest 64 tokens in the fp16 residual, single
// thread. One decode query at position N sees all N tokens. Layouts: see
// bench_store.h.
// Issue 4's goal: at >= 16K tokens, the 2-bit layouts <= 0.5x fp16.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cache/kv_store.h"
#include "cache/plain_cache.h"
#include "cache/store_attention.h"
#include "core/parallel.h"
#include "bench_store.h"
#include "ratio_table.h"

namespace {

using hqekv::bench::PrintRatioCells;
using hqekv::bench::Times;

using hqekv::cache::KvStore;

constexpr int kHq = 32, kHk = 8, kD = 128, kResidual = 64;
const char* const kLayouts[] = {"f16",  "u4",   "u2",   "hqekv2",   "hqekv3.2",
                                "q8_0", "q4_0", "q5_1", "q8_0-q4_0"};
const int kLengths[] = {4096, 16384, 32768};

void BM_StoreDecode(benchmark::State& state, std::string layout, int n) {
  hqekv::SetNumThreads(1);
  auto s = hqekv::bench::BuildStore(layout, n, kHk, kD, kResidual);
  if (!s) {
    state.SkipWithError("building the store failed");
    return;
  }
  std::mt19937 rng(99);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> q(kHq * kD), out(q.size());
  for (auto& x : q) x = nd(rng);
  const int32_t qpos = n;
  for (auto _ : state) {
    auto st = hqekv::cache::StoreAttention(*s, 0, kHq, q.data(), &qpos, 1, out.data());
    benchmark::DoNotOptimize(out.data());
    if (!st.ok()) state.SkipWithError(st.message().c_str());
  }
}

void BM_PlainFp16Decode(benchmark::State& state, int n) {
  hqekv::SetNumThreads(1);
  const hqekv::KvGeometry g = hqekv::bench::OneLayer(n, kHq, kHk, kD);
  auto made = hqekv::PlainKvCache::Create(g, hqekv::PlainPrecision::kF16);
  if (!made.ok()) {
    state.SkipWithError(made.message().c_str());
    return;
  }
  auto c = std::move(made).value();
  std::mt19937 rng(1234);
  std::normal_distribution<float> nd(0.f, 1.f);
  if (!hqekv::bench::AppendRandomTokens(*c, n, n, kHk * kD, rng, nd).ok()) {
    state.SkipWithError("append failed");
    return;
  }
  std::vector<float> q(kHq * kD), out(q.size());
  for (auto& x : q) x = nd(rng);
  const int32_t qpos = n;
  for (auto _ : state) {
    auto st = c->Attend(0, q.data(), &qpos, 1, out.data());
    benchmark::DoNotOptimize(out.data());
    if (!st.ok()) state.SkipWithError(st.message().c_str());
  }
}

// Single-threaded, so CPU time is the work (wall time on a shared machine is
// mostly waiting for a core).
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.error_occurred || r.run_type != Run::RT_Iteration) continue;
      std::string name = r.benchmark_name();  // StoreDecode/<layout>/<n> or PlainFp16Decode/<n>
      const auto a = name.find('/'), b = name.rfind('/');
      if (a == std::string::npos) continue;
      const std::string layout = a == b ? "plain-fp16" : name.substr(a + 1, b - a - 1);
      Times()[{layout, std::atoi(name.c_str() + b + 1)}] = r.GetAdjustedCPUTime();
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

}  // namespace

int main(int argc, char** argv) {
  for (int n : kLengths) {
    benchmark::RegisterBenchmark(("PlainFp16Decode/" + std::to_string(n)).c_str(),
                                 BM_PlainFp16Decode, n)
        ->Unit(benchmark::kMicrosecond);
    for (const char* layout : kLayouts) {
      benchmark::RegisterBenchmark(
          ("StoreDecode/" + std::string(layout) + "/" + std::to_string(n)).c_str(), BM_StoreDecode,
          std::string(layout), n)
          ->Unit(benchmark::kMicrosecond);
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::printf(
      "\nDecode attention CPU time per token over a KvStore, ratio to the f16 store (same run;"
      " 32 q heads, 8 KV heads, D 128, 1 thread)\n%-12s",
      "layout");
  for (int n : kLengths) std::printf(" %10d", n);
  std::printf("\n");
  std::vector<std::string> rows = {"plain-fp16"};
  for (const char* l : kLayouts) rows.push_back(l);
  for (const std::string& l : rows) {
    std::printf("%-12s", l.c_str());
    PrintRatioCells("f16", l, kLengths);
    std::printf("\n");
  }
  std::printf("%-12s", "f16 ms");
  for (int n : kLengths) {
    auto base = Times().find({"f16", n});
    if (base == Times().end()) {
      std::printf(" %10s", "-");
    } else {
      std::printf(" %10.3f", base->second * 1e-3);  // benchmark unit: microseconds
    }
  }
  std::printf("\n");
  benchmark::Shutdown();
  return 0;
}
