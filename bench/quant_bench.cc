// Throughput of the quantization formats on one 32-token x 128-channel chunk
// (one KV head), single thread: quantize+pack, unpack+dequantize, fused dot
// (attention scores) and axpy (attention output). Baselines in the same run:
// memcpy of the chunk's fp16 bytes (32*128*2 = 8 KiB) for quantize/dequantize,
// and DotChunk/AxpyChunk of the fp16 format for dot/axpy. A summary table at
// the end prints every ratio (baseline time / format time: higher is faster;
// goal for the 4- and 2-bit formats: quantize >= 0.25x and dequantize >= 0.5x
// memcpy). The scalar reference is measured too, to show the SIMD speed-up.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "quant/format.h"
#include "quant/internal.h"

namespace {
using namespace hqekv::quant;

constexpr int kT = 32, kD = 128;
const char* const kFormats[] = {"f16",        "fp8e4m3",    "fp8e5m2", "int8",    "u8:tok",
                                "u4:tok",     "u4:chan",    "u2:tok",  "u2:chan", "u1:tok",
                                "u1:chan",    "n2:tok",     "n2:chan", "n1:tok",  "n1:chan",
                                "u4:tok:had", "u2:chan:had"};

struct Chunk {
  Format f;
  std::vector<float> x, q, w, y, out;
  std::vector<uint8_t> codes, meta;
  explicit Chunk(const char* name) : f(*ParseFormat(name)) {
    std::mt19937 rng(1);
    std::normal_distribution<float> n;
    for (int i = 0; i < kT * kD; ++i) x.push_back(n(rng));
    for (int i = 0; i < kD; ++i) q.push_back(n(rng));
    for (int i = 0; i < kT; ++i) w.push_back(n(rng));
    y.resize(x.size());
    out.resize(kD);
    codes.resize(CodeBytes(f, kT, kD));
    meta.resize(MetaBytes(f, kT, kD) + 1);
    QuantizeChunk(f, x.data(), kT, kD, codes.data(), meta.data());
  }
};

void BM_Memcpy(benchmark::State& state) {
  std::vector<uint8_t> src(kT * kD * 2, 1), dst(kT * kD * 2);
  for (auto _ : state) {
    benchmark::DoNotOptimize(src.data());
    std::memcpy(dst.data(), src.data(), src.size());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(src.size()));
}

void Quantize(benchmark::State& state, const char* name, bool reference) {
  Chunk c(name);
  for (auto _ : state) {
    if (reference) {
      ref::QuantizeChunk(c.f, c.x.data(), kT, kD, c.codes.data(), c.meta.data());
    } else {
      QuantizeChunk(c.f, c.x.data(), kT, kD, c.codes.data(), c.meta.data());
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kT * kD);
}

void Dequantize(benchmark::State& state, const char* name, bool reference) {
  Chunk c(name);
  for (auto _ : state) {
    if (reference) {
      ref::DequantizeChunk(c.f, c.codes.data(), c.meta.data(), kT, kD, c.y.data());
    } else {
      DequantizeChunk(c.f, c.codes.data(), c.meta.data(), kT, kD, c.y.data());
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kT * kD);
}

void Dot(benchmark::State& state, const char* name) {
  Chunk c(name);
  for (auto _ : state) {
    DotChunk(c.f, c.codes.data(), c.meta.data(), kT, kD, c.q.data(), c.y.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kT * kD);
}

void Axpy(benchmark::State& state, const char* name) {
  Chunk c(name);
  for (auto _ : state) {
    AxpyChunk(c.f, c.codes.data(), c.meta.data(), kT, kD, c.w.data(), c.out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kT * kD);
}

// Console output as usual, plus every run's CPU time kept for the summary (CPU
// time, not wall time: the benchmark is single-threaded and the build machines
// are shared, so wall time mostly measures other people's jobs).
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.run_type == Run::RT_Iteration && !r.error_occurred) {
        times[r.benchmark_name()] = r.GetAdjustedCPUTime();
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
  std::map<std::string, double> times;
};

double Ratio(const std::map<std::string, double>& t, const std::string& base,
             const std::string& x) {
  const auto b = t.find(base), v = t.find(x);
  return b == t.end() || v == t.end() || v->second <= 0 ? 0.0 : b->second / v->second;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::RegisterBenchmark("memcpy_fp16_chunk", BM_Memcpy);
  for (const char* f : kFormats) {
    benchmark::RegisterBenchmark((std::string("quantize/") + f).c_str(), Quantize, f, false);
    benchmark::RegisterBenchmark((std::string("dequantize/") + f).c_str(), Dequantize, f, false);
    benchmark::RegisterBenchmark((std::string("quantize_ref/") + f).c_str(), Quantize, f, true);
    benchmark::RegisterBenchmark((std::string("dequantize_ref/") + f).c_str(), Dequantize, f, true);
    benchmark::RegisterBenchmark((std::string("dot/") + f).c_str(), Dot, f);
    benchmark::RegisterBenchmark((std::string("axpy/") + f).c_str(), Axpy, f);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  SummaryReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  const auto& t = reporter.times;
  std::printf(
      "\nSummary: ratio = baseline CPU time / format CPU time (higher is faster), chunk %dx%d\n",
      kT, kD);
  std::printf("%-12s %12s %12s %12s %12s %10s %10s\n", "format", "quant/memcpy", "deq/memcpy",
              "quant SIMD/ref", "deq SIMD/ref", "dot/f16dot", "axpy/f16");
  for (const char* f : kFormats) {
    const std::string n(f);
    std::printf("%-12s %12.3f %12.3f %14.2f %12.2f %10.3f %10.3f\n", f,
                Ratio(t, "memcpy_fp16_chunk", "quantize/" + n),
                Ratio(t, "memcpy_fp16_chunk", "dequantize/" + n),
                Ratio(t, "quantize_ref/" + n, "quantize/" + n),
                Ratio(t, "dequantize_ref/" + n, "dequantize/" + n), Ratio(t, "dot/f16", "dot/" + n),
                Ratio(t, "axpy/f16", "axpy/" + n));
  }
  benchmark::Shutdown();
  return 0;
}
