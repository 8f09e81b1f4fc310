// Engine throughput: decode and prefill tokens/s of the forward pass on the
// bundled stories260K model and on a synthetic Llama-shaped GGUF with random
// Q8_0 weights (~1.1 B parameters: 16 layers x 2048, 32/8 heads, d_ff 8192,
// vocab 32000, untied), written to /tmp on first use (never committed;
// override the path with HQEKV_BENCH_MODEL).
//
// Baseline in the same run: memcpy bandwidth (bytes copied per second, the
// copy split over the same thread count). Decode reads every weight once
// per token, so "weight bytes streamed per second" = WeightBytesPerToken x
// tokens/s, reported as frac_memcpy = that / memcpy bandwidth (goal >= 0.6
// with 2 threads). Prefill reports GFLOP/s of the weight matmuls (2 x
// parameters x tokens; attention excluded).
//
//   build/bench/bench_engine --benchmark_filter=Synth   # the 1B model only
//   build/bench/bench_engine --benchmark_filter='Memcpy/1|MatVecType'  # GEMV per weight type
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <vector>

#include "core/parallel.h"
#include "kernels/kernels.h"
#include "model/llama.h"
#include "io/model_source.h"
#include "io/synthetic.h"
#include "policy/factory.h"

namespace hqekv {
namespace {

using Clock = std::chrono::steady_clock;

std::map<int, double>& MemcpyBandwidth() {  // threads -> bytes/s
  static std::map<int, double> bw;
  return bw;
}

void BM_Memcpy(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  SetNumThreads(threads);
  const size_t n = size_t(512) << 20;  // 512 MiB: far beyond any cache
  std::vector<char> src(n, 1), dst(n, 0);
  double secs = 0, bytes = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    ParallelFor(threads, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        std::memcpy(dst.data() + n / threads * i, src.data() + n / threads * i, n / threads);
    });
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    state.SetIterationTime(s);
    secs += s;
    bytes += n;
    benchmark::DoNotOptimize(dst.data());
  }
  MemcpyBandwidth()[threads] = bytes / secs;
  state.counters["GB_per_s"] = bytes / secs / 1e9;
}

struct Loaded {
  std::unique_ptr<ModelSource> src;
  std::unique_ptr<LlamaModel> model;
};

Loaded* Load(const std::string& which) {
  static std::map<std::string, std::unique_ptr<Loaded>> cache;
  auto& slot = cache[which];
  if (slot) return slot.get();
  std::string path;
  if (which == "stories") {
    path = std::string(HQEKV_SOURCE_DIR) + "/models/stories260K.gguf";
  } else {
    const char* env = std::getenv("HQEKV_BENCH_MODEL");
    path = env && *env ? env : "/tmp/hqekv-synth-1b-q8_0.gguf";
    if (!std::filesystem::exists(path)) {
      SyntheticSpec s;
      s.n_layers = 16;
      s.d_model = 2048;
      s.n_heads = 32;
      s.n_kv_heads = 8;
      s.d_ff = 8192;
      s.vocab = 32000;
      s.max_ctx = 4096;
      s.tied_output = false;
      s.type = TensorType::kQ8_0;
      std::fprintf(stderr, "writing %s (%.2f GB)...\n", path.c_str(),
                   SyntheticWeightBytes(s) / 1e9);
      const Status st = WriteSyntheticGguf(s, path);
      if (!st.ok()) {
        std::fprintf(stderr, "%s\n", st.message().c_str());
        return nullptr;
      }
    }
  }
  auto src = LoadModel(path);
  if (!src.ok()) {
    std::fprintf(stderr, "%s\n", src.message().c_str());
    return nullptr;
  }
  slot = std::make_unique<Loaded>();
  slot->src = std::move(src).value();
  auto m = LlamaModel::Create(*slot->src);
  if (!m.ok()) {
    std::fprintf(stderr, "%s\n", m.message().c_str());
    slot.reset();
    return nullptr;
  }
  slot->model = std::move(m).value();
  return slot.get();
}

// Decode: a 16-token prompt, then one token per iteration (greedy on the
// logits is irrelevant to speed: the next input is a fixed token).
void Decode(benchmark::State& state, const std::string& which) {
  const int threads = static_cast<int>(state.range(0));
  SetNumThreads(threads);
  Loaded* L = Load(which);
  if (!L) return state.SkipWithError("model not available");
  LlamaModel& m = *L->model;
  auto cache = MakeKvCache("fp16", m.CacheGeometry(4096)).value();
  std::vector<int32_t> prompt(16, 1), pos(16);
  std::iota(pos.begin(), pos.end(), 0);
  std::vector<float> logits(m.vocab_size());
  if (!m.Forward(prompt.data(), pos.data(), 16, *cache, Logits::kLast, logits.data(), true).ok()) {
    return state.SkipWithError("prefill failed");
  }
  int32_t p = 16;
  double secs = 0;
  int64_t toks = 0;
  for (auto _ : state) {
    if (p >= 4096) {  // keep the context bounded
      state.PauseTiming();
      cache->Reset();
      p = 0;
      state.ResumeTiming();
    }
    const int32_t t = 5 + p % 7;
    const auto t0 = Clock::now();
    if (!m.Forward(&t, &p, 1, *cache, Logits::kLast, logits.data(), false).ok())
      return state.SkipWithError("decode");
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    state.SetIterationTime(s);
    secs += s;
    ++toks;
    ++p;
  }
  const double tps = toks / secs;
  const double wbps = tps * static_cast<double>(m.WeightBytesPerToken());
  state.counters["tok_per_s"] = tps;
  state.counters["weight_GB_per_s"] = wbps / 1e9;
  auto bw = MemcpyBandwidth().find(threads);
  if (bw != MemcpyBandwidth().end()) state.counters["frac_memcpy"] = wbps / bw->second;
}

// Prefill: one batch of `tokens` tokens from an empty cache per iteration.
void Prefill(benchmark::State& state, const std::string& which) {
  const int threads = static_cast<int>(state.range(0));
  const int tokens = static_cast<int>(state.range(1));
  SetNumThreads(threads);
  Loaded* L = Load(which);
  if (!L) return state.SkipWithError("model not available");
  LlamaModel& m = *L->model;
  auto cache = MakeKvCache("fp16", m.CacheGeometry(tokens)).value();
  std::vector<int32_t> ids(tokens), pos(tokens);
  for (int i = 0; i < tokens; ++i) ids[i] = 3 + (i * 37) % 250;
  std::iota(pos.begin(), pos.end(), 0);
  std::vector<float> logits(m.vocab_size());
  double secs = 0;
  int64_t toks = 0;
  for (auto _ : state) {
    cache->Reset();
    const auto t0 = Clock::now();
    if (!m.Forward(ids.data(), pos.data(), tokens, *cache, Logits::kLast, logits.data(), true)
             .ok()) {
      return state.SkipWithError("prefill");
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    state.SetIterationTime(s);
    secs += s;
    toks += tokens;
  }
  state.counters["tok_per_s"] = toks / secs;
  state.counters["GFLOP_per_s"] = toks / secs * static_cast<double>(m.MatmulFlopsPerToken()) / 1e9;
}

void BM_DecodeStories(benchmark::State& s) { Decode(s, "stories"); }
void BM_PrefillStories(benchmark::State& s) { Prefill(s, "stories"); }
void BM_DecodeSynth1B(benchmark::State& s) { Decode(s, "synth"); }
void BM_PrefillSynth1B(benchmark::State& s) { Prefill(s, "synth"); }

// One weight type's GEMV kernel (kernels/kernels.h MatVec) on a 4096 x 4096
// matrix (8-56 MiB: past the caches), one thread: weight GB/s, and the ratio
// to memcpy and to Q8_0 (the first row) in the same run. The bytes are 0x11
// everywhere (every fp16 scale a small normal number): speed only.
std::map<int, double>& TypeBandwidth() {  // TensorType -> weight bytes/s
  static std::map<int, double> bw;
  return bw;
}

void BM_MatVecType(benchmark::State& state) {
  const auto t = static_cast<TensorType>(state.range(0));
  SetNumThreads(1);
  const int64_t n = 4096, k = 4096;
  std::vector<uint8_t> w(static_cast<size_t>(n * kernels::RowBytes(t, k)), 0x11);
  std::vector<float> x(k, 0.5f), y(n);
  const kernels::WeightMatrix m{t, w.data(), n, k};
  double secs = 0, bytes = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    kernels::MatVec(m, x.data(), y.data());
    const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
    state.SetIterationTime(sec);
    secs += sec;
    bytes += static_cast<double>(w.size());
    benchmark::DoNotOptimize(y.data());
  }
  const double bps = bytes / secs;
  TypeBandwidth()[state.range(0)] = bps;
  state.SetLabel(TensorTypeName(t));
  state.counters["weight_GB_per_s"] = bps / 1e9;
  state.counters["Gparam_per_s"] = secs > 0 ? state.iterations() * double(n * k) / secs / 1e9 : 0;
  auto mc = MemcpyBandwidth().find(1);
  if (mc != MemcpyBandwidth().end()) state.counters["frac_memcpy"] = bps / mc->second;
  auto q8 = TypeBandwidth().find(static_cast<int>(TensorType::kQ8_0));
  if (q8 != TypeBandwidth().end())
    state.counters["params_vs_Q8_0"] =
        (bps / kernels::RowBytes(t, k)) / (q8->second / kernels::RowBytes(TensorType::kQ8_0, k));
}

void RegisterTypeRows(benchmark::internal::Benchmark* b) {
  b->Arg(static_cast<int>(TensorType::kQ8_0));  // first: the reference row
  for (const auto& i : kTensorTypes)
    if (i.type != TensorType::kQ8_0) b->Arg(static_cast<int>(i.type));
}

// Registered in this order: memcpy first, so decode can report its ratio.
BENCHMARK(BM_Memcpy)->Arg(1)->Arg(2)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_MatVecType)->Apply(RegisterTypeRows)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DecodeStories)->Arg(1)->Arg(2)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PrefillStories)
    ->Args({1, 256})
    ->Args({2, 256})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DecodeSynth1B)
    ->Arg(1)
    ->Arg(2)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(5.0);
BENCHMARK(BM_PrefillSynth1B)
    ->Args({2, 64})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2);

}  // namespace
}  // namespace hqekv

BENCHMARK_MAIN();
