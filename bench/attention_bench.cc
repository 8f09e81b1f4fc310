// Decode attention time per token over each KV policy's cache, as a ratio to
// the fp16 cache measured in the same run.
//
// Geometry: one layer, 32 query heads, 8 KV heads, head_dim 128 (Llama-3.1-8B
// attention), single thread. Each cache is filled with N random tokens (the
// prompt; only the last 20 queries attend at prefill, enough for the
// importance-based policies to run their compression event), then one query
// at position N attends per iteration (no append, no event: attention only).
// Goal of issue 4: at 16K tokens and beyond, the 2-bit policies <= 0.5x fp16.
//
// Prefill attention (issue 15): the last Q queries of an N-token prompt
// (causal) over the plain fp16 / fp32 cache, tiled (Attend: blocks of query
// rows × pages, attn/flash_attention.h) against the per-query path
// (AttendPerQuery, the decode path that prefill used before), 1 thread by CPU
// time and 2 threads by wall time (with every thread's CPU time). The same
// over compressed stores (kivi-2, hqekv-3.2; the prompt sealed by the
// policy's compression event first): cache::StoreAttention tiled (each KV
// head decoded once into fp32 tiles, cache/store_prefill_attention.h)
// against its per-query path (StoreAttentionOptions::tiled_prefill = false).
// H2O (which records every prefill query): the tiled path with per-token
// column sums against the per-query path with its rows summed by a sink.
#include <benchmark/benchmark.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cache/plain_cache.h"
#include "cache/store_attention.h"
#include "core/parallel.h"
#include "policy/factory.h"
#include "policy/store_cache.h"
#include "bench_kv.h"
#include "compute_peak.h"
#include "ratio_table.h"

namespace {

using hqekv::bench::PrintRatioCells;
using hqekv::bench::SplitLabelLength;
using hqekv::bench::Times;

using hqekv::KvCache;
using hqekv::KvGeometry;

constexpr int kHq = 32, kHk = 8, kD = 128;
const char* const kSpecs[] = {"fp16",
                              "fp8",
                              "fp8:format=e5m2",
                              "int8",
                              "llama:ctk=q8_0,ctv=q8_0",
                              "llama:ctk=q4_0,ctv=q4_0",
                              "kivi:nominal_bits=2",
                              "kivi:nominal_bits=4",
                              "hqekv:nominal_bits=2",
                              "hqekv:nominal_bits=3.2"};
const int kLengths[] = {4096, 16384, 32768};
const char* const kThreadSpecs[] = {"fp16", "fp8", "kivi:nominal_bits=2", "hqekv:nominal_bits=2"};
const char* const kGrownSpecs[] = {"fp16", "int8", "fp8", "kivi:nominal_bits=2",
                                   "hqekv:nominal_bits=2"};

KvGeometry Geometry(int n) { return hqekv::bench::OneLayer(n, kHq, kHk, kD); }

// Builds a cache of n tokens (appended in blocks of 1024), then attends with
// the last 20 prompt queries and ends the prefill batch (compression event).
// max_n: the context the cache is made for (>= n; 0: n), e.g. for decode
// steps appended afterwards.
std::unique_ptr<KvCache> Build(const std::string& spec, int n, std::string* err, int max_n = 0) {
  auto made = hqekv::MakeKvCache(spec, Geometry(std::max(n, max_n)));
  if (!made.ok()) {
    *err = made.message();
    return nullptr;
  }
  std::unique_ptr<KvCache> c = std::move(made).value();
  std::mt19937 rng(1234);
  std::normal_distribution<float> nd(0.f, 1.f);
  if (auto s = hqekv::bench::AppendRandomTokens(*c, n, 1024, kHk * kD, rng, nd); !s.ok()) {
    *err = s.message();
    return nullptr;
  }
  const int nq = std::min(20, n);
  std::vector<float> q(static_cast<size_t>(nq) * kHq * kD), out(q.size());
  for (auto& x : q) x = nd(rng);
  std::vector<int32_t> qpos(nq);
  for (int i = 0; i < nq; ++i) qpos[i] = n - nq + i;
  if (auto s = c->Attend(0, q.data(), qpos.data(), nq, out.data()); !s.ok()) {
    *err = s.message();
    return nullptr;
  }
  if (auto s = c->EndBatch(n, true); !s.ok()) {
    *err = s.message();
    return nullptr;
  }
  return c;
}

std::map<std::pair<std::string, int>, double>& Bits() {
  static std::map<std::pair<std::string, int>, double> t;
  return t;
}
// True bytes of each cache (KvStats::bytes.total()), for the bandwidth table.
std::map<std::pair<std::string, int>, double>& Bytes() {
  static std::map<std::pair<std::string, int>, double> t;
  return t;
}

// ReadBandwidth: one core's read bandwidth in this run (bytes/s, CPU time),
// the limit a decode step that only streams the cache's true bytes would
// reach: a 256 MiB buffer summed in 64-bit words, 8 chains, software
// prefetch 3 KiB ahead (issue 15 target 3: >= 0.6 of it at 16K-32K).
double& ReadBytesPerSecond() {
  static double b = 0;
  return b;
}
void BM_ReadBandwidth(benchmark::State& state) {
  std::vector<uint64_t> buf((size_t{256} << 20) / sizeof(uint64_t));
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = i;
  uint64_t total = 0;
  for (auto _ : state) {
    uint64_t s[8] = {};
    for (size_t i = 0; i < buf.size(); i += 8) {
      __builtin_prefetch(buf.data() + i + 384);
      for (int j = 0; j < 8; ++j) s[j] += buf[i + j];
    }
    for (uint64_t x : s) total += x;
  }
  benchmark::DoNotOptimize(total);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * buf.size() * 8);
}

// The machine's own two-thread scaling in this run, the yardstick for issue
// 15 target 5 (attention on 2 threads >= 1.7x one): a fixed amount of work
// split over the ParallelFor pool, wall time. "fma": 12 FMA chains per
// thread (pure compute; two vCPUs that share a physical core, or a busy
// host, give well under 2x); "read": the 256 MiB sum of ReadBandwidth, one
// contiguous half per thread (the memory system's scaling).
void BM_MachineThreads(benchmark::State& state, bool read, int threads) {
  hqekv::SetNumThreads(threads);
  std::vector<uint64_t> buf;
  if (read) {
    buf.resize((size_t{256} << 20) / sizeof(uint64_t));
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = i;
  }
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (!read && !__builtin_cpu_supports("avx512f")) {
    state.SkipWithError("no AVX-512 on this CPU");
    hqekv::SetNumThreads(1);
    return;
  }
#else
  if (!read) {
    state.SkipWithError("x86-64 only");
    hqekv::SetNumThreads(1);
    return;
  }
#endif
  constexpr int64_t kFmaIters = int64_t{1} << 21;  // 403 M multiply-adds in all
  std::vector<uint64_t> sums(threads);
  for (auto _ : state) {
    hqekv::ParallelFor(threads, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        if (read) {
          const size_t n = buf.size() / threads, i0 = n * t;
          uint64_t s[8] = {};
          for (size_t i = i0; i < i0 + n; i += 8) {
            __builtin_prefetch(buf.data() + i + 384);
            for (int j = 0; j < 8; ++j) s[j] += buf[i + j];
          }
          sums[t] = s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
        } else {
#if defined(__x86_64__)
          sums[t] = static_cast<uint64_t>(hqekv::bench::FmaChains512(kFmaIters / threads));
#endif
        }
      }
    });
    benchmark::DoNotOptimize(sums.data());
  }
  hqekv::SetNumThreads(1);
}

// Compute peaks of this core in this run (issue 15 target 3's arithmetic
// bound): multiply-adds per second of 512-bit fp32 FMAs (16 per instruction)
// and of vpdpwssd (int16 pairs, 32 per instruction: the KIVI / HqeKV decode
// kernels, attn/multi_query_q16.cc), 12 independent chains each. One
// decode step at 32K (8 KV heads x 4 query heads x 32768 tokens x D = 128,
// K dot + V axpy) is 268 M multiply-adds.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target("avx512f,avx512vnni"), noipa)) int DpwssdChains(int64_t iters) {
  __m512i a[12];
  for (int j = 0; j < 12; ++j) a[j] = _mm512_set1_epi32(j);
  const __m512i x = _mm512_set1_epi16(3), y = _mm512_set1_epi16(-3);
  for (int64_t i = 0; i < iters; ++i)
    for (int j = 0; j < 12; ++j) a[j] = _mm512_dpwssd_epi32(a[j], x, y);
  __m512i t = a[0];
  for (int j = 1; j < 12; ++j) t = _mm512_add_epi32(t, a[j]);
  // Lanes summed through memory: GCC 12's _mm512_reduce_add_epi32 warns
  // (-Wuninitialized on its _mm256_undefined_si256).
  alignas(64) int32_t lanes[16];
  _mm512_store_si512(lanes, t);
  int sum = 0;
  for (int32_t v : lanes) sum += v;
  return sum;
}
void BM_ComputePeak(benchmark::State& state, bool int16) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f") || (int16 && !__builtin_cpu_supports("avx512vnni"))) {
    state.SkipWithError("no AVX-512 (VNNI) on this CPU");
    return;
  }
  constexpr int64_t kIters = 1 << 20;
  for (auto _ : state) {
    if (int16) {
      benchmark::DoNotOptimize(DpwssdChains(kIters));
    } else {
      benchmark::DoNotOptimize(hqekv::bench::FmaChains512(kIters));
    }
  }
  state.counters["MAC/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kIters * 12 * (int16 ? 32 : 16),
                         benchmark::Counter::kIsRate);
}
#endif

// Grows a cache built from an n / 2-token prompt to n tokens the way decode
// does: 32 tokens per EndBatch (a decode-time seal places the KV heads of a
// layer in turn; the policies reorder the blocks, docs/performance.md "Wave
// 10: stream-major block placement"). False, with the reason, on an error.
bool GrowByDecode(KvCache& c, int from, int n, std::string* err) {
  std::mt19937 rng(4321);
  std::normal_distribution<float> nd(0.f, 1.f);
  constexpr int kStep = 32;
  for (int b = from; b < n; b += kStep) {
    const int m = std::min(kStep, n - b);
    hqekv::Status s = hqekv::bench::AppendRandomTokens(c, m, kStep, kHk * kD, rng, nd, b);
    if (s.ok()) s = c.EndBatch(m, false);
    if (!s.ok()) {
      *err = s.message();
      return false;
    }
  }
  return true;
}

// grown: the second half of the n tokens comes 32 per decode batch
// (DecodeAttentionGrown/<spec>/<n>) instead of in the prompt.
void BM_DecodeAttention(benchmark::State& state, std::string spec, int n, int threads, bool grown) {
  hqekv::SetNumThreads(threads);
  std::string err;
  auto c = Build(spec, grown ? n / 2 : n, &err, n);
  if (c && grown && !GrowByDecode(*c, n / 2, n, &err)) c.reset();
  if (!c) {
    state.SkipWithError(err.c_str());
    return;
  }
  std::mt19937 rng(99);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> q(kHq * kD), out(q.size());
  for (auto& x : q) x = nd(rng);
  const int32_t qpos = n;  // the next decode position: sees every kept token
  for (auto _ : state) {
    auto s = c->Attend(0, q.data(), &qpos, 1, out.data());
    benchmark::DoNotOptimize(out.data());
    if (!s.ok()) state.SkipWithError(s.message().c_str());
  }
  const hqekv::KvStats st = c->Stats();
  state.counters["bits_per_original"] = st.bits_per_original();
  state.counters["MiB"] = static_cast<double>(st.bytes.total()) / (1 << 20);
  if (!grown) {
    Bits()[{spec, n}] = st.bits_per_original();
    Bytes()[{spec, n}] = static_cast<double>(st.bytes.total());
  }
  hqekv::SetNumThreads(1);
}

// Wall time per step of the thread-count cases (DecodeAttentionThreads/<spec>/<n>/<threads>).
std::map<std::pair<std::string, int>, double>& WallByThreads() {
  static std::map<std::pair<std::string, int>, double> t;
  return t;
}

// PrefillAttention/<spec>/<n>/<nq>/<path>/threads:<t>: the last nq queries of
// an n-token prompt attend at once (no append).
void BM_PrefillAttention(benchmark::State& state, std::string spec, int n, int nq, bool tiled,
                         int threads) {
  std::string err;
  auto made = hqekv::MakeKvCache(spec, Geometry(n));
  if (!made.ok()) {
    state.SkipWithError(made.message().c_str());
    return;
  }
  std::unique_ptr<KvCache> c = std::move(made).value();
  auto* plain = dynamic_cast<hqekv::PlainKvCache*>(c.get());
  if (!plain) {
    state.SkipWithError("not a plain cache");
    return;
  }
  std::mt19937 rng(1234);
  std::normal_distribution<float> nd(0.f, 1.f);
  if (auto s = hqekv::bench::AppendRandomTokens(*c, n, n, kHk * kD, rng, nd); !s.ok()) {
    state.SkipWithError(s.message().c_str());
    return;
  }
  std::vector<float> q(static_cast<size_t>(nq) * kHq * kD), out(q.size());
  for (auto& x : q) x = nd(rng);
  std::vector<int32_t> qpos(nq);
  for (int i = 0; i < nq; ++i) qpos[i] = n - nq + i;
  hqekv::SetNumThreads(threads);
  for (auto _ : state) {
    auto s = tiled ? c->Attend(0, q.data(), qpos.data(), nq, out.data())
                   : plain->AttendPerQuery(0, q.data(), qpos.data(), nq, out.data());
    benchmark::DoNotOptimize(out.data());
    if (!s.ok()) state.SkipWithError(s.message().c_str());
  }
  hqekv::SetNumThreads(1);
  // Causal multiply-adds of QK^T and PV, 2 FLOPs each.
  double visible = 0;
  for (int i = 0; i < nq; ++i) visible += qpos[i] + 1;
  state.counters["GFLOPs"] =
      benchmark::Counter(4.0 * kHq * kD * visible * state.iterations(), benchmark::Counter::kIsRate,
                         benchmark::Counter::kIs1000);
}

// A store-backed cache of `spec` filled with n tokens (Build), and the last
// nq queries of the prompt: q [nq][kHq][kD] random normal (seed 99), positions
// n - nq .. n - 1. Null (the benchmark skipped with the reason) when the spec
// fails or is not store-backed.
struct PrefillCase {
  std::unique_ptr<KvCache> cache;
  hqekv::policy::StoreBackedCache* sc = nullptr;
  std::vector<float> q, out;
  std::vector<int32_t> qpos;
};

std::unique_ptr<PrefillCase> MakePrefillCase(benchmark::State& state, const std::string& spec,
                                             int n, int nq) {
  auto pc = std::make_unique<PrefillCase>();
  std::string err;
  pc->cache = Build(spec, n, &err);
  if (!pc->cache) {
    state.SkipWithError(err.c_str());
    return nullptr;
  }
  pc->sc = dynamic_cast<hqekv::policy::StoreBackedCache*>(pc->cache.get());
  if (!pc->sc) {
    state.SkipWithError("not a store-backed cache");
    return nullptr;
  }
  std::mt19937 rng(99);
  std::normal_distribution<float> nd(0.f, 1.f);
  pc->q.resize(static_cast<size_t>(nq) * kHq * kD);
  pc->out.resize(pc->q.size());
  for (auto& x : pc->q) x = nd(rng);
  pc->qpos.resize(nq);
  for (int i = 0; i < nq; ++i) pc->qpos[i] = n - nq + i;
  return pc;
}

// PrefillAttention/<spec>/<n>/<nq>/<path>/threads:<t> over a store-backed
// cache: Build() fills and compresses it, then the last nq queries attend
// through cache::StoreAttention (no sink: the attention alone).
void BM_StorePrefillAttention(benchmark::State& state, std::string spec, int n, int nq, bool tiled,
                              int threads) {
  auto pc = MakePrefillCase(state, spec, n, nq);
  if (!pc) return;
  auto* sc = pc->sc;
  std::vector<float>& q = pc->q;
  std::vector<float>& out = pc->out;
  std::vector<int32_t>& qpos = pc->qpos;
  hqekv::cache::StoreAttentionOptions o;
  o.tiled_prefill = tiled;
  hqekv::SetNumThreads(threads);
  for (auto _ : state) {
    auto s = hqekv::cache::StoreAttention(sc->store(), 0, kHq, q.data(), qpos.data(), nq,
                                          out.data(), nullptr, o);
    benchmark::DoNotOptimize(out.data());
    if (!s.ok()) state.SkipWithError(s.message().c_str());
  }
  hqekv::SetNumThreads(1);
}

// PrefillAttention/h2o:keep=1/<n>/<nq>/<path>/threads:<t>: H2O records every
// prefill query. "columns" is the policy's Attend (tiled, the weights summed
// per kept token by the kernel: EvictCache::OnColumns); "rows" what it did
// before: StoreAttention per query with every weight row handed to a sink
// that sums them (cache::AttentionSum, as EvictCache::OnRow). The store holds
// the whole prompt (keep=1: nothing evicted), as during a prompt's prefill.
void BM_H2oPrefillAttention(benchmark::State& state, int n, int nq, bool columns, int threads) {
  auto pc = MakePrefillCase(state, "h2o:keep=1", n, nq);
  if (!pc) return;
  auto* sc = pc->sc;
  std::vector<float>& q = pc->q;
  std::vector<float>& out = pc->out;
  std::vector<int32_t>& qpos = pc->qpos;
  hqekv::cache::AttentionSum rows(kHk);
  hqekv::SetNumThreads(threads);
  for (auto _ : state) {
    rows.Clear();
    auto s = columns ? pc->cache->Attend(0, q.data(), qpos.data(), nq, out.data())
                     : hqekv::cache::StoreAttention(sc->store(), 0, kHq, q.data(), qpos.data(), nq,
                                                    out.data(), &rows.sink());
    benchmark::DoNotOptimize(out.data());
    if (!s.ok()) state.SkipWithError(s.message().c_str());
  }
  hqekv::SetNumThreads(1);
}

// Wall time per iteration of MachineThreads/<fma|read>/<threads>.
std::map<std::pair<std::string, int>, double>& MachineWall() {
  static std::map<std::pair<std::string, int>, double> t;
  return t;
}

// Records the mean CPU time per iteration of every run for the ratio table
// (single-threaded, so CPU time is the work; wall time on a shared machine is
// mostly waiting for a core).
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      // With --benchmark_repetitions the median aggregate comes after the
      // repetitions and replaces them in the tables.
      const bool median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
      if (r.error_occurred || (r.run_type != Run::RT_Iteration && !median)) continue;
      if (r.run_name.str() == "ReadBandwidth") {
        ReadBytesPerSecond() = r.counters.at("bytes_per_second");
        continue;
      }
      if (r.run_name.str().rfind("MachineThreads/", 0) == 0) {  // <fma|read>/<threads>
        std::string name = r.run_name.str();
        if (const auto rt = name.find("/real_time"); rt != std::string::npos) name.resize(rt);
        const auto t = name.rfind('/');
        MachineWall()[{name.substr(15, t - 15), std::atoi(name.c_str() + t + 1)}] =
            r.GetAdjustedRealTime();
      }
      // DecodeAttention/<spec>/<n> or DecodeAttentionThreads/<spec>/<n>/<threads>,
      // [/real_time] after either. (The thread cases were once tested after
      // the DecodeAttention/ filter, so their table never printed.)
      std::string name = r.run_name.str();
      if (const auto rt = name.find("/real_time"); rt != std::string::npos) name.resize(rt);
      if (name.rfind("DecodeAttentionThreads/", 0) == 0) {
        const auto t = name.rfind('/');
        WallByThreads()[{name.substr(23, t - 23), std::atoi(name.c_str() + t + 1)}] =
            r.GetAdjustedRealTime();
        continue;
      }
      if (name.rfind("DecodeAttention/", 0) != 0) continue;
      std::string spec;
      int n = 0;
      if (!SplitLabelLength(name, &spec, &n)) continue;
      Times()[{spec, n}] = r.GetAdjustedCPUTime();
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::RegisterBenchmark("ReadBandwidth", BM_ReadBandwidth)->Unit(benchmark::kMillisecond);
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  benchmark::RegisterBenchmark("ComputePeak/fp32_fma", BM_ComputePeak, false)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("ComputePeak/int16_vpdpwssd", BM_ComputePeak, true)
      ->Unit(benchmark::kMillisecond);
#endif
  for (int n : kLengths) {
    for (const char* spec : kSpecs) {
      benchmark::RegisterBenchmark(
          ("DecodeAttention/" + std::string(spec) + "/" + std::to_string(n)).c_str(),
          BM_DecodeAttention, std::string(spec), n, 1, false)
          ->Unit(benchmark::kMicrosecond);
    }
  }
  for (const char* spec : {"fp16", "fp32"}) {
    for (bool tiled : {false, true}) {
      for (int threads : {1, 2}) {
        const std::string name = "PrefillAttention/" + std::string(spec) + "/4096/512/" +
                                 (tiled ? "tiled" : "perquery") +
                                 "/threads:" + std::to_string(threads);
        auto* b = benchmark::RegisterBenchmark(name.c_str(), BM_PrefillAttention, std::string(spec),
                                               4096, 512, tiled, threads)
                      ->Unit(benchmark::kMillisecond);
        // One thread: CPU time is the work. Two: wall time, with every
        // thread's CPU time beside it.
        if (threads > 1) b->UseRealTime()->MeasureProcessCPUTime();
      }
    }
  }
  for (const char* spec : {"kivi:nominal_bits=2", "hqekv:nominal_bits=3.2"}) {
    for (bool tiled : {false, true}) {
      for (int threads : {1, 2}) {
        const std::string name = "PrefillAttention/" + std::string(spec) + "/4096/512/" +
                                 (tiled ? "tiled" : "perquery") +
                                 "/threads:" + std::to_string(threads);
        auto* b = benchmark::RegisterBenchmark(name.c_str(), BM_StorePrefillAttention,
                                               std::string(spec), 4096, 512, tiled, threads)
                      ->Unit(benchmark::kMillisecond);
        if (threads > 1) b->UseRealTime()->MeasureProcessCPUTime();
      }
    }
  }
  for (bool columns : {false, true}) {
    for (int threads : {1, 2}) {
      const std::string name = std::string("PrefillAttention/h2o:keep=1/4096/512/") +
                               (columns ? "columns" : "rows") +
                               "/threads:" + std::to_string(threads);
      auto* b = benchmark::RegisterBenchmark(name.c_str(), BM_H2oPrefillAttention, 4096, 512,
                                             columns, threads)
                    ->Unit(benchmark::kMillisecond);
      if (threads > 1) b->UseRealTime()->MeasureProcessCPUTime();
    }
  }
  // A cache grown by decode steps (half the tokens), 32K tokens, 1 thread.
  for (const char* spec : kGrownSpecs) {
    benchmark::RegisterBenchmark(
        ("DecodeAttentionGrown/" + std::string(spec) + "/" + std::to_string(kLengths[2])).c_str(),
        BM_DecodeAttention, std::string(spec), kLengths[2], 1, true)
        ->Unit(benchmark::kMicrosecond);
  }
  // Threads: wall time (the work is spread over threads), 32K tokens, with
  // the machine's own scaling measured just before.
  for (const char* what : {"fma", "read"}) {
    for (int threads : {1, 2}) {
      benchmark::RegisterBenchmark(
          ("MachineThreads/" + std::string(what) + "/" + std::to_string(threads)).c_str(),
          BM_MachineThreads, std::string(what) == "read", threads)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  for (const char* spec : kThreadSpecs) {
    for (int threads : {1, 2}) {
      benchmark::RegisterBenchmark(("DecodeAttentionThreads/" + std::string(spec) + "/" +
                                    std::to_string(kLengths[2]) + "/" + std::to_string(threads))
                                       .c_str(),
                                   BM_DecodeAttention, std::string(spec), kLengths[2], threads,
                                   false)
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::printf(
      "\nDecode attention CPU time per token, ratio to fp16 (same run; 32 q heads, 8 KV "
      "heads, D 128, 1 thread)\n%-16s",
      "policy");
  for (int n : kLengths) std::printf(" %10d", n);
  std::printf("   bits/original at %d\n", kLengths[2]);
  for (const char* spec : kSpecs) {
    std::printf("%-26s", spec);
    PrintRatioCells("fp16", spec, kLengths);
    auto b = Bits().find({spec, kLengths[2]});
    std::printf("   %.3f\n", b == Bits().end() ? 0.0 : b->second);
  }
  if (ReadBytesPerSecond() > 0) {
    std::printf(
        "\nTrue bytes of the cache read per second of decode CPU time (GB/s), and as a fraction "
        "of the read bandwidth of this run (%.2f GB/s)\n",
        ReadBytesPerSecond() / 1e9);
    for (const char* spec : kSpecs) {
      std::printf("%-26s", spec);
      for (int n : kLengths) {
        auto t = Times().find({spec, n});
        auto b = Bytes().find({spec, n});
        if (t == Times().end() || b == Bytes().end()) {
          std::printf(" %16s", "-");
        } else {
          const double gbs = b->second / (t->second * 1e-6) / 1e9;  // CPU time in us
          std::printf(" %6.2f (%5.3fx)", gbs, gbs * 1e9 / ReadBytesPerSecond());
        }
      }
      std::printf("\n");
    }
  }
  if (!WallByThreads().empty()) {
    std::printf(
        "\nWall time per token at %d, 1 thread / 2 threads (speedup; the machine's own "
        "speedups of this run below)\n",
        kLengths[2]);
    for (const char* spec : kThreadSpecs) {
      const std::string key = std::string(spec) + "/" + std::to_string(kLengths[2]);
      auto one = WallByThreads().find({key, 1}), two = WallByThreads().find({key, 2});
      if (one == WallByThreads().end() || two == WallByThreads().end()) continue;
      std::printf("%-26s %.3fx\n", spec, one->second / two->second);
    }
    // The same ratio for pure compute and for pure reading on this machine,
    // in this run: what two threads can give at best here.
    for (const char* what : {"fma", "read"}) {
      auto one = MachineWall().find({what, 1}), two = MachineWall().find({what, 2});
      if (one == MachineWall().end() || two == MachineWall().end()) continue;
      std::printf("%-26s %.3fx   (machine: %s)\n", (std::string("[") + what + "]").c_str(),
                  one->second / two->second,
                  std::string(what) == "fma" ? "12 fp32 FMA chains per thread"
                                             : "256 MiB read, one half per thread");
    }
  }
  benchmark::Shutdown();
  return 0;
}
