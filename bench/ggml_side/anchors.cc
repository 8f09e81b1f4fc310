// anchors.cc -- side-by-side CPU microbenchmarks, ggml vs hqekv, interleaved in one process.
//
//   anchors attn  N [rounds]        decode attention, 32 q heads / 8 KV heads / D 128, N cached
//   tokens anchors pattn N Q [rounds]      prefill attention: the last Q queries of an N-token
//   prompt (causal) anchors gemv  [rounds]          weight GEMV (1 token) + memcpy / read bandwidth
//   anchors gemm  M [rounds]        weight GEMM (M tokens)
//   anchors peak                    fp32 FMA peak and memory bandwidth
//   anchors repack M [rounds]       Q4_0 / Q4_K weights in llama.cpp's CPU_REPACK buffer vs plain
//   ggml vs hqekv
//
// Every comparison is timed interleaved: round r: threads t in {1,2}: config A, B, C, ... ;
// per (round, config) the median of repeated calls; reported: median over rounds.
// Output: lines "RES,<section>,<name>,<threads>,<shape>,<median_us>,<bytes>,<flops>" plus raw
// rounds.
#include <ggml.h>
#include <ggml-alloc.h>
#include <ggml-backend.h>
#include <ggml-cpu.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <strings.h>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cache/kv_store.h"
#include "cache/plain_cache.h"
#include "cache/store_attention.h"
#include "core/parallel.h"
#include "io/gguf_types.h"
#include "kernels/kernels.h"
#include "policy/factory.h"
#include "quant/format.h"
#include "bench_store.h"  // bench/: BuildStore, AppendRandomTokens, OneLayer
#include "cpu_time.h"     // bench/: ThreadCpuSeconds

namespace {

using Clock = std::chrono::steady_clock;
double Now() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }
// CPU seconds of the calling thread (1-thread runs execute on it).
using hqekv::bench::ThreadCpuSeconds;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

// Median wall, best wall and median calling-thread CPU seconds per call: warm-up calls, then at
// least min_reps calls and min_time seconds.
struct Timing {
  double median, best, cpu;
};
Timing TimeIt(const std::function<void()>& fn, double min_time, int min_reps, int warm = 1) {
  for (int i = 0; i < warm; ++i) fn();
  std::vector<double> t, c;
  const double start = Now();
  while (static_cast<int>(t.size()) < min_reps || Now() - start < min_time) {
    const double c0 = ThreadCpuSeconds(), t0 = Now();
    fn();
    t.push_back(Now() - t0);
    c.push_back(ThreadCpuSeconds() - c0);
    if (t.size() >= 2000) break;
  }
  return {Median(t), *std::min_element(t.begin(), t.end()), Median(c)};
}

struct Config {
  std::string section, name, shape;
  double bytes = 0, flops = 0;
  std::function<void(int threads)> prepare;  // outside the timed region
  std::function<void()> run;
  double min_time = 0.25;
  int min_reps = 5;
  int warm = 1;
};

void RunInterleaved(std::vector<Config>& cs, int rounds, const std::vector<int>& threads) {
  std::map<std::pair<int, int>, std::vector<double>> res;  // (config, threads) -> per-round medians
  std::map<std::pair<int, int>, double> best;              // (config, threads) -> fastest call
  std::map<std::pair<int, int>, std::vector<double>> cpu;  // per-round median thread CPU
  const char* filter = std::getenv("ANCHORS_FILTER");
  if (filter && *filter) {
    std::vector<Config> keep;
    for (auto& c : cs)
      if (c.name.find(filter) != std::string::npos) keep.push_back(c);
    cs = keep;
  }
  for (int r = 0; r < rounds; ++r) {
    for (int t : threads) {
      hqekv::SetNumThreads(t);
      for (size_t i = 0; i < cs.size(); ++i) {
        Config& c = cs[i];
        if (c.prepare) c.prepare(t);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));  // let OpenMP spinners go idle
        const Timing tm =
            TimeIt(c.run, c.min_time, c.min_reps, (r == 0 && c.warm > 0) ? c.warm + 1 : c.warm);
        const double s = tm.median, b = tm.best;
        res[{static_cast<int>(i), t}].push_back(s);
        cpu[{static_cast<int>(i), t}].push_back(tm.cpu);
        auto& bb = best[{static_cast<int>(i), t}];
        bb = r == 0 ? b : std::min(bb, b);
        std::printf("RAW,%s,%s,%d,%s,round%d,%.2f,cpu=%.2f,best=%.2f\n", c.section.c_str(),
                    c.name.c_str(), t, c.shape.c_str(), r, s * 1e6, tm.cpu * 1e6, b * 1e6);
        std::fflush(stdout);
      }
    }
  }
  for (int t : threads) {
    for (size_t i = 0; i < cs.size(); ++i) {
      const Config& c = cs[i];
      const auto& v = res[{static_cast<int>(i), t}];
      const double min = *std::min_element(v.begin(), v.end()),
                   max = *std::max_element(v.begin(), v.end());
      std::printf("RES,%s,%s,%d,%s,%.2f,%.0f,%.0f,spread=%.1f%%,best=%.2f,cpu=%.2f\n",
                  c.section.c_str(), c.name.c_str(), t, c.shape.c_str(), Median(v) * 1e6, c.bytes,
                  c.flops, 100.0 * (max - min) / Median(v), best[{static_cast<int>(i), t}] * 1e6,
                  Median(cpu[{static_cast<int>(i), t}]) * 1e6);
    }
  }
  std::fflush(stdout);
}

// ---------------- ggml helpers ----------------
struct GgmlGraph {
  ggml_cgraph* gf = nullptr;
  ggml_tensor* out = nullptr;
  std::vector<uint8_t> work;
  ggml_cplan plan{};
  int planned_threads = -1;
  void Prepare(int t) {
    if (planned_threads == t) return;
    plan = ggml_graph_plan(gf, t, nullptr);
    work.resize(plan.work_size + 64);
    plan.work_data = work.data();
    planned_threads = t;
  }
  void Run() {
    if (ggml_graph_compute(gf, &plan) != GGML_STATUS_SUCCESS) {
      std::fprintf(stderr, "ggml_graph_compute failed\n");
      std::exit(1);
    }
  }
};

// Fast approximately-normal data (sum of 4 uniforms, unit variance).
void FillNormal(float* x, size_t n, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    float a = 0;
    for (int j = 0; j < 4; ++j) {
      s ^= s << 13;
      s ^= s >> 7;
      s ^= s << 17;
      a += static_cast<float>(s >> 40) * (1.0f / 16777216.0f);
    }
    x[i] = (a - 2.0f) * 1.7320508f;
  }
}

void FillTensor(ggml_tensor* t, const float* src) {
  const int64_t n_per_row = t->ne[0];
  const int64_t nrows = ggml_nelements(t) / n_per_row;
  ggml_quantize_chunk(t->type, src, t->data, 0, nrows, n_per_row, nullptr);
}

ggml_context* NewCtx(size_t data_bytes) {
  ggml_init_params p{};
  p.mem_size = data_bytes + 256 * ggml_tensor_overhead() + 16 * ggml_graph_overhead() + (16 << 20);
  p.mem_buffer = nullptr;
  p.no_alloc = false;
  ggml_context* ctx = ggml_init(p);
  if (!ctx) {
    std::fprintf(stderr, "ggml_init failed\n");
    std::exit(1);
  }
  return ctx;
}

constexpr int kHq = 32, kHk = 8, kD = 128;

double KvBytesGgml(ggml_type t, int n) {
  return 2.0 * n * kHk * kD * ggml_type_size(t) / ggml_blck_size(t);
}

// ---------------- hqekv cache builders (bench/bench_kv.h, bench/bench_store.h) ----
hqekv::KvGeometry Geometry(int n) { return hqekv::bench::OneLayer(n, kHq, kHk, kD); }

std::unique_ptr<hqekv::KvCache> BuildPolicy(const std::string& spec, int n) {
  auto made = hqekv::MakeKvCache(spec, Geometry(n));
  if (!made.ok()) {
    std::fprintf(stderr, "%s: %s\n", spec.c_str(), made.message().c_str());
    return nullptr;
  }
  std::unique_ptr<hqekv::KvCache> c = std::move(made).value();
  std::mt19937 rng(1234);
  std::normal_distribution<float> nd(0.f, 1.f);
  if (!hqekv::bench::AppendRandomTokens(*c, n, 1024, kHk * kD, rng, nd).ok()) return nullptr;
  const int nq = std::min(20, n);
  std::vector<float> q(static_cast<size_t>(nq) * kHq * kD), out(q.size());
  for (auto& x : q) x = nd(rng);
  std::vector<int32_t> qpos(nq);
  for (int i = 0; i < nq; ++i) qpos[i] = n - nq + i;
  if (!c->Attend(0, q.data(), qpos.data(), nq, out.data()).ok()) return nullptr;
  if (!c->EndBatch(n, true).ok()) return nullptr;
  return c;
}

using hqekv::cache::KvStore;

// ---------------- decode attention ----------------
int Attn(int n, int rounds) {
  const std::string shape = "N=" + std::to_string(n);
  const ggml_type types[] = {GGML_TYPE_F16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0};
  const size_t elems = static_cast<size_t>(n) * kHk * kD;
  size_t bytes = 0;
  for (ggml_type t : types) bytes += 2 * (elems * ggml_type_size(t) / ggml_blck_size(t) + 4096);
  bytes += elems * 2 + 4096;                                  // V^T f16 (non-flash)
  bytes += static_cast<size_t>(n) * 2 + 4096;                 // mask
  bytes += static_cast<size_t>(n) * kHq * 4 * 2 + (1 << 20);  // kq, softmax
  ggml_context* ctx = NewCtx(bytes);
  std::vector<float> kf(elems), vf(elems);
  FillNormal(kf.data(), elems, 1);
  FillNormal(vf.data(), elems, 2);
  ggml_tensor* q = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, kD, 1, kHq, 1);
  FillNormal(static_cast<float*>(q->data), kD * kHq, 3);
  ggml_tensor* mask = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, n, 1, 1, 1);
  std::memset(mask->data, 0, ggml_nbytes(mask));  // every cached token visible
  const float scale = 1.0f / std::sqrt(static_cast<float>(kD));
  std::vector<std::unique_ptr<GgmlGraph>> graphs;
  std::vector<Config> cs;
  for (ggml_type t : types) {
    ggml_tensor* k = ggml_new_tensor_4d(ctx, t, kD, n, kHk, 1);
    ggml_tensor* v = ggml_new_tensor_4d(ctx, t, kD, n, kHk, 1);
    FillTensor(k, kf.data());
    FillTensor(v, vf.data());
    auto g = std::make_unique<GgmlGraph>();
    g->out = ggml_flash_attn_ext(ctx, q, k, v, mask, scale, 0.0f, 0.0f);
    ggml_flash_attn_ext_set_prec(g->out, GGML_PREC_F32);  // as llama.cpp
    g->gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(g->gf, g->out);
    GgmlGraph* gp = g.get();
    Config c;
    c.section = "attn";
    c.name = std::string("ggml-fa-") + ggml_type_name(t);
    c.shape = shape;
    c.bytes = KvBytesGgml(t, n);
    c.prepare = [gp](int th) { gp->Prepare(th); };
    c.run = [gp] { gp->Run(); };
    cs.push_back(c);
    graphs.push_back(std::move(g));
    if (t == GGML_TYPE_F16) {  // non-flash path: mul_mat + soft_max + mul_mat, V stored transposed
      ggml_tensor* vt = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, n, kD, kHk, 1);
      ggml_fp32_to_fp16_row(vf.data(), static_cast<ggml_fp16_t*>(vt->data),
                            static_cast<int64_t>(elems));
      auto g2 = std::make_unique<GgmlGraph>();
      ggml_tensor* kq = ggml_mul_mat(ctx, k, q);  // [n, 1, 32]
      kq = ggml_soft_max_ext(ctx, kq, mask, scale, 0.0f);
      g2->out = ggml_mul_mat(ctx, vt, kq);  // [128, 1, 32]
      g2->gf = ggml_new_graph(ctx);
      ggml_build_forward_expand(g2->gf, g2->out);
      GgmlGraph* gp2 = g2.get();
      Config c2 = c;
      c2.name = "ggml-nofa-f16";
      c2.prepare = [gp2](int th) { gp2->Prepare(th); };
      c2.run = [gp2] { gp2->Run(); };
      cs.push_back(c2);
      graphs.push_back(std::move(g2));
    }
  }
  kf.clear();
  kf.shrink_to_fit();
  vf.clear();
  vf.shrink_to_fit();
  // hqekv policy level
  static std::vector<float> qv(kHq * kD), out(kHq * kD);
  FillNormal(qv.data(), qv.size(), 3);
  static int32_t qpos;
  qpos = n;
  std::vector<std::unique_ptr<hqekv::KvCache>> caches;
  for (const char* spec :
       {"fp16", "fp8", "int8", "llama:ctk=q8_0,ctv=q8_0", "kivi:nominal_bits=2",
        "kivi:nominal_bits=4", "hqekv:nominal_bits=2", "hqekv:nominal_bits=3.2"}) {
    const double t0 = Now();
    auto c = BuildPolicy(spec, n);
    if (!c) return 1;
    std::fprintf(stderr, "built %s N=%d in %.1fs\n", spec, n, Now() - t0);
    hqekv::KvCache* cp = c.get();
    Config cf;
    cf.section = "attn";
    cf.name = std::string("hqekv-policy-") + spec;  // the RES lines are comma-separated
    std::replace(cf.name.begin(), cf.name.end(), ',', '+');
    cf.shape = shape;
    cf.bytes = static_cast<double>(c->Stats().bytes.total());
    cf.run = [cp] {
      if (!cp->Attend(0, qv.data(), &qpos, 1, out.data()).ok()) std::exit(2);
    };
    cs.push_back(cf);
    caches.push_back(std::move(c));
  }
  std::vector<std::unique_ptr<KvStore>> stores;
  for (const char* layout : {"f16", "u4", "u2", "hqekv2", "hqekv3.2"}) {
    auto s = hqekv::bench::BuildStore(layout, n, kHk, kD, 64);
    if (!s) return 1;
    KvStore* sp = s.get();
    Config cf;
    cf.section = "attn";
    cf.name = std::string("hqekv-store-") + layout;
    cf.shape = shape;
    cf.bytes = static_cast<double>(s->Stats().bytes.total());
    cf.run = [sp] {
      if (!hqekv::cache::StoreAttention(*sp, 0, kHq, qv.data(), &qpos, 1, out.data()).ok())
        std::exit(2);
    };
    cs.push_back(cf);
    stores.push_back(std::move(s));
  }
  const double mt = n >= 32768 ? 0.4 : 0.25;
  for (auto& c : cs) c.min_time = mt;
  RunInterleaved(cs, rounds, {1, 2});
  ggml_free(ctx);
  return 0;
}

// ---------------- prefill attention: last Q queries of an N-token prompt ----------------
int PrefillAttn(int n, int nq, int rounds) {
  const std::string shape = "N=" + std::to_string(n) + ",Q=" + std::to_string(nq);
  const size_t elems = static_cast<size_t>(n) * kHk * kD;
  size_t bytes = 3 * elems * 2 + static_cast<size_t>(n) * nq * 2 +
                 static_cast<size_t>(nq) * kHq * kD * 4 * 2 +
                 2 * static_cast<size_t>(n) * nq * kHq * 4 + (8 << 20);
  ggml_context* ctx = NewCtx(bytes);
  std::vector<float> kf(elems), vf(elems);
  FillNormal(kf.data(), elems, 1);
  FillNormal(vf.data(), elems, 2);
  ggml_tensor* q = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, kD, nq, kHq, 1);
  FillNormal(static_cast<float*>(q->data), static_cast<size_t>(kD) * kHq * nq, 3);
  ggml_tensor* mask = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, n, nq, 1, 1);
  {
    auto* m = static_cast<ggml_fp16_t*>(mask->data);
    const ggml_fp16_t zero = ggml_fp32_to_fp16(0.0f), ninf = ggml_fp32_to_fp16(-INFINITY);
    for (int i = 0; i < nq; ++i) {
      const int qp = n - nq + i;
      for (int j = 0; j < n; ++j) m[static_cast<size_t>(i) * n + j] = j <= qp ? zero : ninf;
    }
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(kD));
  ggml_tensor* k = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, kD, n, kHk, 1);
  ggml_tensor* v = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, kD, n, kHk, 1);
  ggml_tensor* vt = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, n, kD, kHk, 1);
  FillTensor(k, kf.data());
  FillTensor(v, vf.data());
  ggml_fp32_to_fp16_row(vf.data(), static_cast<ggml_fp16_t*>(vt->data),
                        static_cast<int64_t>(elems));
  // causal FLOPs of the QK^T and PV products over visible tokens
  double vis = 0;
  for (int i = 0; i < nq; ++i) vis += n - nq + i + 1;
  const double flops = 4.0 * kHq * kD * vis;
  GgmlGraph fa, nofa;
  fa.out = ggml_flash_attn_ext(ctx, q, k, v, mask, scale, 0.0f, 0.0f);
  ggml_flash_attn_ext_set_prec(fa.out, GGML_PREC_F32);
  fa.gf = ggml_new_graph(ctx);
  ggml_build_forward_expand(fa.gf, fa.out);
  ggml_tensor* kq = ggml_mul_mat(ctx, k, q);
  kq = ggml_soft_max_ext(ctx, kq, mask, scale, 0.0f);
  nofa.out = ggml_mul_mat(ctx, vt, kq);
  nofa.gf = ggml_new_graph(ctx);
  ggml_build_forward_expand(nofa.gf, nofa.out);
  // hqekv fp16 cache with the same shape
  auto made = hqekv::MakeKvCache("fp16", Geometry(n));
  if (!made.ok()) return 1;
  auto cache = std::move(made).value();
  {
    std::vector<int32_t> pos(n);
    for (int i = 0; i < n; ++i) pos[i] = i;
    // hqekv wants [n][Hk][D]; ggml holds [Hk][n][D]: transpose
    std::vector<float> kk(elems), vv(elems);
    for (int h = 0; h < kHk; ++h)
      for (int t = 0; t < n; ++t)
        for (int d = 0; d < kD; ++d) {
          kk[(static_cast<size_t>(t) * kHk + h) * kD + d] =
              kf[(static_cast<size_t>(h) * n + t) * kD + d];
          vv[(static_cast<size_t>(t) * kHk + h) * kD + d] =
              vf[(static_cast<size_t>(h) * n + t) * kD + d];
        }
    if (!cache->Append(0, kk.data(), vv.data(), pos.data(), n).ok()) return 1;
  }
  static std::vector<float> hq, hout;
  hq.resize(static_cast<size_t>(nq) * kHq * kD);
  hout.resize(hq.size());
  FillNormal(hq.data(), hq.size(), 3);
  static std::vector<int32_t> qpos;
  qpos.resize(nq);
  for (int i = 0; i < nq; ++i) qpos[i] = n - nq + i;
  hqekv::KvCache* cp = cache.get();
  std::vector<Config> cs(3);
  cs[0].name = "ggml-fa-f16";
  cs[0].prepare = [&](int t) { fa.Prepare(t); };
  cs[0].run = [&] { fa.Run(); };
  cs[1].name = "ggml-nofa-f16";
  cs[1].prepare = [&](int t) { nofa.Prepare(t); };
  cs[1].run = [&] { nofa.Run(); };
  cs[2].name = "hqekv-policy-fp16";
  cs[2].run = [cp] {
    if (!cp->Attend(0, hq.data(), qpos.data(), static_cast<int>(qpos.size()), hout.data()).ok())
      std::exit(2);
  };
  for (auto& c : cs) {
    c.section = "pattn";
    c.shape = shape;
    c.flops = flops;
    c.bytes = KvBytesGgml(GGML_TYPE_F16, n);
    c.min_time = 0.5;
    c.min_reps = 2;
    c.warm = 0;
  }
  RunInterleaved(cs, rounds, {1, 2});
  ggml_free(ctx);
  return 0;
}

// ---------------- memory bandwidth ----------------
struct Bandwidth {
  size_t n = size_t(512) << 20;
  std::vector<char> src, dst;
  Bandwidth() : src(n, 1), dst(n, 0) {}
  void Copy(int threads) {
    if (threads == 1) {
      std::memcpy(dst.data(), src.data(), n);
      return;
    }
    std::vector<std::thread> ts;
    for (int i = 0; i < threads; ++i)
      ts.emplace_back([&, i] {
        std::memcpy(dst.data() + n / threads * i, src.data() + n / threads * i, n / threads);
      });
    for (auto& t : ts) t.join();
  }
  static float ReadPart(const float* p, size_t m) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 64 <= m; i += 64) {
      a0 = _mm512_add_ps(a0, _mm512_loadu_ps(p + i));
      a1 = _mm512_add_ps(a1, _mm512_loadu_ps(p + i + 16));
      a2 = _mm512_add_ps(a2, _mm512_loadu_ps(p + i + 32));
      a3 = _mm512_add_ps(a3, _mm512_loadu_ps(p + i + 48));
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  }
  volatile float sink = 0;
  void Read(int threads) {
    const float* p = reinterpret_cast<const float*>(src.data());
    const size_t m = n / 4;
    if (threads == 1) {
      sink = ReadPart(p, m);
      return;
    }
    std::vector<float> r(threads);
    std::vector<std::thread> ts;
    for (int i = 0; i < threads; ++i)
      ts.emplace_back([&, i] { r[i] = ReadPart(p + m / threads * i, m / threads); });
    for (auto& t : ts) t.join();
    sink = r[0];
  }
};

void AddBandwidth(std::vector<Config>& cs, Bandwidth& bw) {
  Config c;
  c.section = "mem";
  c.shape = "512MiB";
  c.bytes = static_cast<double>(bw.n);
  c.min_time = 0.3;
  int* th = new int(1);
  c.prepare = [th](int t) { *th = t; };
  c.name = "memcpy";
  c.run = [&bw, th] { bw.Copy(*th); };
  cs.push_back(c);
  c.name = "read";
  c.run = [&bw, th] { bw.Read(*th); };
  cs.push_back(c);
}

// ---------------- weight GEMV / GEMM ----------------
// The hqekv type of the same bytes (io/gguf_types.h's table); exits on a type hqekv lacks.
hqekv::TensorType ToHq(ggml_type t) {
  const auto h = hqekv::TensorTypeFromGgml(static_cast<uint32_t>(t));
  if (!h) {
    std::fprintf(stderr, "hqekv has no kernel for ggml type %s\n", ggml_type_name(t));
    std::exit(3);
  }
  return *h;
}

// Weight types of the gemv / gemm modes: $ANCHOR_TYPES (ggml names, comma-separated, e.g.
// "f16,bf16,q8_0,q4_K"), default F16, Q8_0, Q4_0, Q4_K.
std::vector<ggml_type> WeightTypes() {
  const char* env = std::getenv("ANCHOR_TYPES");
  if (env == nullptr || *env == 0)
    return {GGML_TYPE_F16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_K};
  std::vector<ggml_type> out;
  std::string list(env);
  size_t at = 0;
  while (at <= list.size()) {
    const size_t end = std::min(list.find(',', at), list.size());
    const std::string name = list.substr(at, end - at);
    at = end + 1;
    if (name.empty()) continue;
    bool found = false;
    for (int i = 0; i < GGML_TYPE_COUNT; ++i) {
      const char* n = ggml_type_name(static_cast<ggml_type>(i));
      if (n != nullptr && strcasecmp(n, name.c_str()) == 0) {
        out.push_back(static_cast<ggml_type>(i));
        found = true;
        break;
      }
    }
    if (!found) {
      std::fprintf(stderr, "ANCHOR_TYPES: unknown ggml type '%s'\n", name.c_str());
      std::exit(3);
    }
  }
  return out;
}

int Matmul(int m, int rounds, bool with_bw, const std::vector<std::pair<int, int>>& shapes) {
  // shapes: (k = inputs, n = outputs); ggml W is [k, n] (ne0 = k)
  const std::vector<ggml_type> types = WeightTypes();
  size_t bytes = 0;
  for (auto [k, n] : shapes) {
    for (ggml_type t : types) {  // weights + the [n, m] f32 output of each product
      bytes += static_cast<size_t>(k) * n * ggml_type_size(t) / ggml_blck_size(t) +
               static_cast<size_t>(n) * m * 4 + 8192;
    }
    bytes += static_cast<size_t>(k) * m * 4 + 8192;
  }
  ggml_context* ctx = NewCtx(bytes);
  std::vector<Config> cs;
  std::vector<std::unique_ptr<GgmlGraph>> graphs;
  static std::vector<std::vector<float>> ys;
  ys.reserve(64);
  for (auto [k, n] : shapes) {
    const std::string shape =
        "k=" + std::to_string(k) + ",n=" + std::to_string(n) + ",m=" + std::to_string(m);
    std::vector<float> wf(static_cast<size_t>(k) * n);
    FillNormal(wf.data(), wf.size(), 7 + k + n);
    ggml_tensor* x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, m);
    FillNormal(static_cast<float*>(x->data), static_cast<size_t>(k) * m, 9);
    for (ggml_type t : types) {
      ggml_tensor* w = ggml_new_tensor_2d(ctx, t, k, n);
      const double q0 = Now();
      FillTensor(w, wf.data());
      std::fprintf(stderr, "quantized %s %s in %.1fs\n", ggml_type_name(t), shape.c_str(),
                   Now() - q0);
      auto g = std::make_unique<GgmlGraph>();
      g->out = ggml_mul_mat(ctx, w, x);  // [n, m]
      g->gf = ggml_new_graph(ctx);
      ggml_build_forward_expand(g->gf, g->out);
      GgmlGraph* gp = g.get();
      Config c;
      c.section = m == 1 ? "gemv" : "gemm";
      c.shape = shape;
      c.bytes = static_cast<double>(ggml_nbytes(w));
      c.flops = 2.0 * k * n * m;
      c.name = std::string("ggml-") + ggml_type_name(t);
      c.prepare = [gp](int th) { gp->Prepare(th); };
      c.run = [gp] { gp->Run(); };
      if (m > 1) {
        c.min_time = 0.0;
        c.min_reps = 1;
        c.warm = 0;
      }
      cs.push_back(c);
      graphs.push_back(std::move(g));
      hqekv::kernels::WeightMatrix wm;
      wm.type = ToHq(t);
      wm.data = w->data;
      wm.n = n;
      wm.k = k;
      ys.emplace_back(static_cast<size_t>(n) * m);
      float* y = ys.back().data();
      const float* xp = static_cast<const float*>(x->data);
      Config h = c;
      h.name = std::string("hqekv-") + ggml_type_name(t);
      h.prepare = nullptr;
      h.run = [wm, xp, m, y] { hqekv::kernels::MatMul(wm, xp, m, y); };
      cs.push_back(h);
      // sanity: outputs agree
      hqekv::SetNumThreads(2);
      gp->Prepare(2);
      gp->Run();
      h.run();
      const float* go = static_cast<const float*>(gp->out->data);
      double num = 0, den = 0;
      for (size_t i = 0; i < static_cast<size_t>(n) * m; ++i) {
        num += (go[i] - y[i]) * double(go[i] - y[i]);
        den += double(go[i]) * go[i];
      }
      std::printf("CHECK,%s,%s,rel_l2_diff=%.2e\n", ggml_type_name(t), shape.c_str(),
                  std::sqrt(num / den));
    }
  }
  static Bandwidth* bw = nullptr;
  if (with_bw) {
    bw = new Bandwidth();
    AddBandwidth(cs, *bw);
  }
  RunInterleaved(cs, rounds, {1, 2});
  ggml_free(ctx);
  return 0;
}

// ---------------- llama.cpp's default CPU weight path: runtime repack (CPU_REPACK buffer)
// ---------------- Q4_0 -> q4_0_8x8, Q4_K -> q4_K_8x8 (AVX2+ kernels), computed through the CPU
// backend, side by side with the plain ggml path and hqekv on the same quantized bytes.
int Repack(int m, int rounds) {
  ggml_backend_t be = ggml_backend_cpu_init();
  ggml_backend_dev_t dev = ggml_backend_get_device(be);
  ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
  auto get_extra = reinterpret_cast<ggml_backend_dev_get_extra_bufts_t>(
      ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts"));
  ggml_backend_buffer_type_t rbuft = nullptr;
  for (ggml_backend_buffer_type_t* e = get_extra ? get_extra(dev) : nullptr; e && *e; ++e) {
    if (std::strcmp(ggml_backend_buft_name(*e), "CPU_REPACK") == 0) rbuft = *e;
  }
  if (!rbuft) {
    std::fprintf(stderr, "no CPU_REPACK buffer type\n");
    return 1;
  }
  const std::vector<std::pair<int, int>> shapes = {{4096, 14336}};
  const ggml_type types[] = {GGML_TYPE_Q4_0, GGML_TYPE_Q4_K};
  std::vector<Config> cs;
  static std::vector<std::vector<uint8_t>> qbytes;
  static std::vector<std::vector<float>> xs, ys;
  qbytes.reserve(16);
  xs.reserve(16);
  ys.reserve(16);
  std::vector<std::unique_ptr<GgmlGraph>> graphs;
  for (auto [k, n] : shapes) {
    const std::string shape =
        "k=" + std::to_string(k) + ",n=" + std::to_string(n) + ",m=" + std::to_string(m);
    std::vector<float> wf(static_cast<size_t>(k) * n);
    FillNormal(wf.data(), wf.size(), 7 + k + n);
    xs.emplace_back(static_cast<size_t>(k) * m);
    FillNormal(xs.back().data(), xs.back().size(), 9);
    const float* xp = xs.back().data();
    for (ggml_type t : types) {
      qbytes.emplace_back(static_cast<size_t>(k) * n * ggml_type_size(t) / ggml_blck_size(t));
      std::vector<uint8_t>& q = qbytes.back();
      ggml_quantize_chunk(t, wf.data(), q.data(), 0, n, k, nullptr);
      // (a) repacked, through the CPU backend
      ggml_init_params pw{};
      pw.mem_size = 8 * ggml_tensor_overhead();
      pw.no_alloc = true;
      ggml_context* cw = ggml_init(pw);
      ggml_tensor* w = ggml_new_tensor_2d(cw, t, k, n);
      if (!ggml_backend_alloc_ctx_tensors_from_buft(cw, rbuft)) return 1;
      ggml_backend_tensor_set(w, q.data(), 0, q.size());
      ggml_init_params pg{};
      pg.mem_size = 16 * ggml_tensor_overhead() + ggml_graph_overhead();
      pg.no_alloc = true;
      ggml_context* cg = ggml_init(pg);
      ggml_tensor* x = ggml_new_tensor_2d(cg, GGML_TYPE_F32, k, m);
      ggml_tensor* out = ggml_mul_mat(cg, w, x);
      ggml_cgraph* gf = ggml_new_graph(cg);
      ggml_build_forward_expand(gf, out);
      ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
      if (!ggml_gallocr_alloc_graph(ga, gf)) return 1;
      ggml_backend_tensor_set(x, xp, 0, ggml_nbytes(x));
      Config c;
      c.section = m == 1 ? "gemv" : "gemm";
      c.shape = shape;
      c.bytes = static_cast<double>(q.size());
      c.flops = 2.0 * k * n * m;
      c.name = std::string("ggml-repack-") + ggml_type_name(t);
      c.prepare = [be](int th) { ggml_backend_cpu_set_n_threads(be, th); };
      c.run = [be, gf] {
        if (ggml_backend_graph_compute(be, gf) != GGML_STATUS_SUCCESS) std::exit(4);
      };
      if (m > 1) {
        c.min_time = 0.0;
        c.min_reps = 1;
        c.warm = 0;
      }
      cs.push_back(c);
      // (b) plain ggml (no repack), same bytes
      ggml_context* cp = NewCtx(q.size() + static_cast<size_t>(k) * m * 4 +
                                static_cast<size_t>(n) * m * 4 + (1 << 20));
      ggml_tensor* w2 = ggml_new_tensor_2d(cp, t, k, n);
      std::memcpy(w2->data, q.data(), q.size());
      ggml_tensor* x2 = ggml_new_tensor_2d(cp, GGML_TYPE_F32, k, m);
      std::memcpy(x2->data, xp, ggml_nbytes(x2));
      auto g = std::make_unique<GgmlGraph>();
      g->out = ggml_mul_mat(cp, w2, x2);
      g->gf = ggml_new_graph(cp);
      ggml_build_forward_expand(g->gf, g->out);
      GgmlGraph* gp = g.get();
      graphs.push_back(std::move(g));
      Config c2 = c;
      c2.name = std::string("ggml-") + ggml_type_name(t);
      c2.prepare = [gp](int th) { gp->Prepare(th); };
      c2.run = [gp] { gp->Run(); };
      cs.push_back(c2);
      // (c) hqekv on the same bytes
      hqekv::kernels::WeightMatrix wm;
      wm.type = ToHq(t);
      wm.data = q.data();
      wm.n = n;
      wm.k = k;
      ys.emplace_back(static_cast<size_t>(n) * m);
      float* y = ys.back().data();
      Config h = c;
      h.name = std::string("hqekv-") + ggml_type_name(t);
      h.prepare = nullptr;
      h.run = [wm, xp, m, y] { hqekv::kernels::MatMul(wm, xp, m, y); };
      cs.push_back(h);
      // sanity: repacked result vs hqekv
      ggml_backend_cpu_set_n_threads(be, 2);
      c.run();
      hqekv::SetNumThreads(2);
      h.run();
      std::vector<float> go(static_cast<size_t>(n) * m);
      ggml_backend_tensor_get(out, go.data(), 0, go.size() * 4);
      double num = 0, den = 0;
      for (size_t i = 0; i < go.size(); ++i) {
        num += (go[i] - y[i]) * double(go[i] - y[i]);
        den += double(go[i]) * go[i];
      }
      std::printf("CHECK,repack-%s,%s,rel_l2_diff=%.2e\n", ggml_type_name(t), shape.c_str(),
                  std::sqrt(num / den));
    }
  }
  RunInterleaved(cs, rounds, {1, 2});
  return 0;
}

// ---------------- fp32 FMA peak ----------------
double FmaPeak(int threads, bool zmm) {
  const int64_t iters = 50'000'000;
  std::vector<std::thread> ts;
  std::vector<float> sink(threads);
  const double t0 = Now();
  auto body = [&](int i) {
    if (zmm) {
      __m512 a[12];
      for (int j = 0; j < 12; ++j) a[j] = _mm512_set1_ps(0.001f * j);
      const __m512 b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
      for (int64_t it = 0; it < iters; ++it) {
        for (int j = 0; j < 12; ++j) a[j] = _mm512_fmadd_ps(a[j], b, c);
      }
      __m512 s = a[0];
      for (int j = 1; j < 12; ++j) s = _mm512_add_ps(s, a[j]);
      sink[i] = _mm512_reduce_add_ps(s);
    } else {
      __m256 a[12];
      for (int j = 0; j < 12; ++j) a[j] = _mm256_set1_ps(0.001f * j);
      const __m256 b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
      for (int64_t it = 0; it < iters; ++it) {
        for (int j = 0; j < 12; ++j) a[j] = _mm256_fmadd_ps(a[j], b, c);
      }
      __m256 s = a[0];
      for (int j = 1; j < 12; ++j) s = _mm256_add_ps(s, a[j]);
      float tmp[8];
      _mm256_storeu_ps(tmp, s);
      sink[i] = tmp[0];
    }
  };
  if (threads == 1) {
    body(0);  // on the calling thread, so that its CPU time is the work
  } else {
    for (int i = 0; i < threads; ++i) ts.emplace_back(body, i);
    for (auto& t : ts) t.join();
  }
  const double s = Now() - t0;
  const double flops = 2.0 * iters * 12 * (zmm ? 16 : 8) * threads;
  if (sink[0] == 12345.f) std::printf("#");
  return flops / s / 1e9;
}

int Peak(int rounds) {
  std::vector<Config> cs;
  for (bool zmm : {true, false}) {
    Config c;
    c.section = "fma";
    c.name = zmm ? "fma-zmm" : "fma-ymm";
    c.shape = "12acc";
    c.flops = 2.0 * 50'000'000 * 12 * (zmm ? 16 : 8);  // per thread
    int* th = new int(1);
    c.prepare = [th](int t) { *th = t; };
    c.run = [th, zmm] {
      std::printf("FMA,%s,%d,%.1f GFLOP/s\n", zmm ? "zmm" : "ymm", *th, FmaPeak(*th, zmm));
    };
    c.min_time = 0;
    c.min_reps = 1;
    c.warm = 0;
    cs.push_back(c);
  }
  Bandwidth bw;
  AddBandwidth(cs, bw);
  RunInterleaved(cs, rounds, {1, 2});
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: anchors attn N [rounds] | pattn N Q [rounds] | gemv [rounds] | gemm M "
                 "[rounds] | peak [rounds]\n");
    return 1;
  }
  ggml_cpu_init();
  const std::string mode = argv[1];
  if (mode == "attn") return Attn(std::atoi(argv[2]), argc > 3 ? std::atoi(argv[3]) : 3);
  if (mode == "pattn")
    return PrefillAttn(std::atoi(argv[2]), std::atoi(argv[3]), argc > 4 ? std::atoi(argv[4]) : 3);
  if (mode == "gemv")
    return Matmul(1, argc > 2 ? std::atoi(argv[2]) : 3, true,
                  {{4096, 4096}, {4096, 14336}, {14336, 4096}});
  if (mode == "gemm")
    return Matmul(std::atoi(argv[2]), argc > 3 ? std::atoi(argv[3]) : 3, false,
                  {{4096, 4096}, {4096, 14336}});
  if (mode == "peak") return Peak(argc > 2 ? std::atoi(argv[2]) : 3);
  if (mode == "repack") return Repack(std::atoi(argv[2]), argc > 3 ? std::atoi(argv[3]) : 3);
  std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 1;
}
