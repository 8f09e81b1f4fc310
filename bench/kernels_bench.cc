// Weight kernels against the machine's limits, measured in the same run:
// decode GEMV (GB/s of weight bytes vs read bandwidth) and prefill GEMM
// (GFLOP/s vs the fp32 FMA peak), the int8-activation path ("new") against the
// fp32-activation path ("old", SetInt8Activations(false)) on the same bytes.
//
// Interleaved rounds (read, memcpy, FMA, old, new, read, ...); per round and
// config the median of `reps` calls; reported: min and median over rounds of
// the calling thread's CPU time (robust to a time-shared machine), 1 thread.
//
//   bench_kernels [--rounds N] [--reps N] [--gemm-m M] [--quick] [--types F16,BF16,...]
//                 [--ops gemv,gemm] [--no-old] [--cold] [--no-amx]
// (--types: the weight types to run; default Q8_0,Q4_K,F16. For types without
// the int8 path old and new are the same kernel. --ops: which products to
// run (default both); --no-old: skip the fp32-activation path; --cold: before
// every timed GEMV call, read a 512 MiB buffer (untimed) so that the weights
// come from DRAM, not from a last-level cache that holds them (this machine's
// L3 is 260 MiB: a warm 14336 x 4096 matrix of any type fits); with --cold
// the limits add "cold read": the prefetching read of a 128 MiB buffer after
// the same eviction, i.e. the DRAM read rate the cold GEMVs compete with, and
// per GEMV "same-size cold read": that read over the matrix's byte count
// (the smaller K-quant matrices against a read of their own size); --no-amx:
// BF16 GEMMs on the vdpbf16ps kernel where the CPU has AMX (gemm_panel.h).)
#include <immintrin.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/parallel.h"
#include "kernels/gemm_panel.h"
#include "kernels/kernels.h"
#include "compute_peak.h"
#include "cpu_time.h"

namespace {

using hqekv::TensorType;
namespace kn = hqekv::kernels;

double MedianOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median CPU seconds of `reps` calls; `before` (untimed) runs before each.
double TimeIt(const std::function<void()>& fn, int reps,
              const std::function<void()>& before = nullptr) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    if (before) before();
    const double t0 = hqekv::bench::ThreadCpuSeconds();
    fn();
    t.push_back(hqekv::bench::ThreadCpuSeconds() - t0);
  }
  return MedianOf(t);
}

// ---- limits ----
volatile float g_sink;

void ReadAll(const float* a, size_t size) {
  float s[16] = {};
  const size_t n = size / 16 * 16;
  for (size_t i = 0; i < n; i += 16)
    for (int j = 0; j < 16; ++j) s[j] += a[i + j];
  float t = 0;
  for (float x : s) t += x;
  g_sink = t;
}
void ReadAll(const std::vector<float>& a) { ReadAll(a.data(), a.size()); }

// The same read with 512-bit loads and a software prefetch 3 KiB ahead (what
// the GEMV kernels do): one core's read bandwidth without the plain loop's
// limit of the hardware prefetcher alone (the stricter limit).
__attribute__((target("avx512f"))) void ReadAllPrefetch(const float* a, size_t size) {
  __m512 s[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                 _mm512_setzero_ps()};
  const size_t n = size / 64 * 64;
  for (size_t i = 0; i < n; i += 64) {
    for (int c = 0; c < 4; ++c) {
      __builtin_prefetch(a + i + 768 + 16 * c);
      s[c] = _mm512_add_ps(s[c], _mm512_loadu_ps(a + i + 16 * c));
    }
  }
  // (A store, not _mm512_reduce_add_ps: GCC 12 warns about that intrinsic's
  // internal undefined vector once inlined here.)
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, _mm512_add_ps(_mm512_add_ps(s[0], s[1]), _mm512_add_ps(s[2], s[3])));
  float t = 0;
  for (float x : lanes) t += x;
  g_sink = t;
}

void FmaPeak512(int64_t iters) { g_sink = hqekv::bench::FmaChains512(iters); }

__attribute__((target("avx2,fma"))) void FmaPeak256(int64_t iters) {
  __m256 a[12];
  for (int j = 0; j < 12; ++j) a[j] = _mm256_set1_ps(1.0f + j * 1e-3f);
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i)
    for (int j = 0; j < 12; ++j) a[j] = _mm256_fmadd_ps(a[j], m, c);
  float out[8];
  _mm256_storeu_ps(out, a[0]);
  g_sink = out[0];
}

// ---- weights ----
void PutHalf(uint8_t* p, float v) {
  const hqekv::f16_t h = hqekv::F32ToF16(v);
  std::memcpy(p, &h, 2);
}

std::vector<uint8_t> RandomWeights(TensorType t, int64_t n, int64_t k) {
  std::vector<uint8_t> buf(n * kn::RowBytes(t, k));
  std::mt19937_64 rng(1);
  for (size_t i = 0; i + 8 <= buf.size(); i += 8) {
    const uint64_t r = rng();
    std::memcpy(buf.data() + i, &r, 8);
  }
  if (t == TensorType::kF16) {
    for (size_t i = 0; i < buf.size(); i += 2) PutHalf(buf.data() + i, 0.01f * ((i / 2) % 17 - 8));
  } else if (t == TensorType::kBF16) {
    for (size_t i = 0; i < buf.size(); i += 2) buf[i + 1] = 0x3c;  // |x| in [2^-7, 2^-6)
  } else if (t == TensorType::kF32) {
    for (size_t i = 0; i < buf.size(); i += 4) {
      const float v = 0.01f * ((i / 4) % 17 - 8.f);
      std::memcpy(buf.data() + i, &v, 4);
    }
  } else {
    // Offsets of the block's fp16 scale and min (-1: none).
    const int scale_at = t == TensorType::kQ6_K   ? 208
                         : t == TensorType::kQ3_K ? 108
                         : t == TensorType::kQ2_K ? 80
                                                  : 0;
    const int min_at = t == TensorType::kQ2_K                               ? 82
                       : (t == TensorType::kQ4_K || t == TensorType::kQ5_K) ? 2
                                                                            : -1;
    for (size_t o = 0; o < buf.size(); o += hqekv::BlockBytes(t)) {
      PutHalf(buf.data() + o + scale_at, 0.01f);
      if (min_at >= 0) PutHalf(buf.data() + o + min_at, 0.002f);
    }
  }
  return buf;
}

struct Stats {
  double min = 0, med = 0;
};
Stats Summarize(const std::vector<double>& v) {
  return {*std::min_element(v.begin(), v.end()), MedianOf(v)};
}

constexpr const char* kUsage =
    "usage: bench_kernels [--rounds N] [--reps N] [--gemm-m M] [--quick]\n"
    "                     [--types F16,BF16,Q8_0,...] [--ops gemv,gemm] [--no-old] [--cold]\n"
    "                     [--no-amx]\n";

int UsageError(const std::string& why) {
  std::fprintf(stderr, "bench_kernels: %s\n%s", why.c_str(), kUsage);
  return 2;
}

// The value of a decimal flag, or -1 when it is not a whole positive number.
int64_t PositiveInt(const char* s) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s, &end, 10);
  if (end == s || *end != '\0' || errno == ERANGE || v <= 0 || v > (int64_t{1} << 30)) return -1;
  return v;
}

std::vector<std::string> SplitCommas(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    out.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

// The first name in a comma list that is no tensor type's name ("" if none).
std::string UnknownType(const std::string& list) {
  for (const std::string& name : SplitCommas(list)) {
    bool known = false;
    for (const auto& info : hqekv::kTensorTypes)
      known = known || name == hqekv::TensorTypeName(info.type);
    if (!known) return name.empty() ? "(empty)" : name;
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 5, reps = 5;
  int64_t gemm_m = 512;
  bool quick = false;
  std::string types = "Q8_0,Q4_K,F16", ops = "gemv,gemm";
  bool run_old = true, cold = false;
  // Strict flags: a typo or a bad value is an error, never a silent default
  // run (which would also take the machine for minutes).
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      return 0;
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--no-old") {
      run_old = false;
    } else if (a == "--cold") {
      cold = true;
    } else if (a == "--no-amx") {
      kn::SetBf16Amx(false);
    } else if ((a == "--rounds" || a == "--reps" || a == "--gemm-m") && has_value) {
      const char* v = argv[++i];
      const int64_t n = PositiveInt(v);
      if (n <= 0) return UsageError(a + " takes a positive integer, got '" + v + "'");
      if (a == "--rounds") rounds = static_cast<int>(n);
      if (a == "--reps") reps = static_cast<int>(n);
      if (a == "--gemm-m") gemm_m = n;
    } else if (a == "--types" && has_value) {
      types = argv[++i];
      if (const std::string bad = UnknownType(types); !bad.empty())
        return UsageError("--types: unknown weight type '" + bad + "'");
    } else if (a == "--ops" && has_value) {
      ops = argv[++i];
      for (const std::string& op : SplitCommas(ops))
        if (op != "gemv" && op != "gemm")
          return UsageError("--ops: unknown op '" + op + "' (gemv, gemm)");
    } else {
      const bool value_flag =
          a == "--rounds" || a == "--reps" || a == "--gemm-m" || a == "--types" || a == "--ops";
      return UsageError(value_flag ? a + " needs a value" : "unknown argument '" + a + "'");
    }
  }
  hqekv::SetNumThreads(1);
  const bool has512 = __builtin_cpu_supports("avx512f");

  // Limits: read 256 MiB, memcpy 128 MiB, FMA 12 independent chains.
  std::vector<float> big((quick ? 32 : 64) << 20, 1.0f), dst(big.size() / 2);
  std::vector<float> evict(cold ? 128 << 20 : 0, 1.0f);  // 512 MiB
  const std::function<void()> flush = [&] { ReadAll(evict); };
  const int64_t fma_iters = 20'000'000;
  const int lanes = has512 ? 16 : 8;
  std::vector<double> t_read, t_read_pf, t_copy, t_fma, t_read_cold;
  std::vector<float> cold_buf(cold ? 32 << 20 : 0, 1.0f);  // 128 MiB
  const std::function<void(const float*, size_t)> read_pf = [&](const float* v, size_t n) {
    has512 ? ReadAllPrefetch(v, n) : ReadAll(v, n);
  };

  struct Case {
    std::string name;
    TensorType t;
    int64_t n, k, m;
    std::vector<uint8_t> w;
    std::vector<float> x, y;
    std::vector<double> t_old, t_new, t_cold_read;
  };
  std::vector<Case> cases;
  const int64_t N = quick ? 4096 : 14336, K = 4096;
  for (const auto& info : hqekv::kTensorTypes) {
    const TensorType t = info.type;
    if (("," + types + ",").find("," + std::string(hqekv::TensorTypeName(t)) + ",") ==
        std::string::npos)
      continue;
    if (ops.find("gemv") != std::string::npos) {
      cases.push_back({"gemv", t, N, K, 1, {}, {}, {}, {}, {}, {}});
      cases.push_back({"gemv", t, K, N, 1, {}, {}, {}, {}, {}, {}});
    }
    if (ops.find("gemm") != std::string::npos) {
      cases.push_back({"gemm", t, N, K, gemm_m, {}, {}, {}, {}, {}, {}});
    }
  }
  for (Case& c : cases) {
    c.w = RandomWeights(c.t, c.n, c.k);
    c.x.resize(c.m * c.k);
    std::mt19937 rng(2);
    std::normal_distribution<float> nd;
    for (float& v : c.x) v = nd(rng);
    c.y.resize(c.m * c.n);
  }

  for (int r = 0; r < rounds; ++r) {
    t_read.push_back(TimeIt([&] { ReadAll(big); }, reps));
    if (has512) t_read_pf.push_back(TimeIt([&] { ReadAllPrefetch(big.data(), big.size()); }, reps));
    t_copy.push_back(TimeIt([&] { std::memcpy(dst.data(), big.data(), dst.size() * 4); }, reps));
    t_fma.push_back(TimeIt([&] { has512 ? FmaPeak512(fma_iters) : FmaPeak256(fma_iters); }, reps));
    if (cold)
      t_read_cold.push_back(
          TimeIt([&] { read_pf(cold_buf.data(), cold_buf.size()); }, reps, flush));
    for (Case& c : cases) {
      const kn::WeightMatrix w{c.t, c.w.data(), c.n, c.k};
      const int cr = c.name == "gemm" ? 1 : reps;
      if (cold && c.name == "gemv") {
        // The read limit of the same byte count (the matrix's size), cold.
        const size_t nf = std::min(cold_buf.size(), c.w.size() / 4);
        c.t_cold_read.push_back(TimeIt([&] { read_pf(cold_buf.data(), nf); }, reps, flush));
      }
      for (int on = run_old ? 0 : 1; on < 2; ++on) {
        kn::SetInt8Activations(on == 1);
        (on ? c.t_new : c.t_old)
            .push_back(TimeIt([&] { kn::MatMul(w, c.x.data(), c.m, c.y.data()); }, cr,
                              cold && c.name == "gemv" ? flush : nullptr));
      }
    }
    std::fprintf(stderr, "round %d/%d done\n", r + 1, rounds);
  }
  kn::SetInt8Activations(true);

  const Stats sr = Summarize(t_read), sc = Summarize(t_copy), sf = Summarize(t_fma);
  const double read_gbs = big.size() * 4 / sr.min / 1e9;
  const double read_pf_gbs =
      t_read_pf.empty() ? read_gbs : big.size() * 4 / Summarize(t_read_pf).min / 1e9;
  const double copy_gbs = dst.size() * 4 / sc.min / 1e9;
  const double fma_gflops = 2.0 * lanes * 12 * fma_iters / sf.min / 1e9;
  std::printf("# bench_kernels: 1 thread, CPU time, %d interleaved rounds x median of %d calls%s\n",
              rounds, reps, cold ? ", GEMV weights evicted before each call (--cold)" : "");
  const double read_cold_gbs =
      t_read_cold.empty() ? 0.0 : cold_buf.size() * 4 / Summarize(t_read_cold).min / 1e9;
  std::printf(
      "limits (best round): read %.1f GB/s (with sw prefetch %.1f), memcpy %.1f GB/s, fp32 FMA "
      "%.0f GFLOP/s (%d-bit)",
      read_gbs, read_pf_gbs, copy_gbs, fma_gflops, lanes * 32);
  if (cold) std::printf(", cold read (after eviction, sw prefetch) %.1f GB/s", read_cold_gbs);
  std::printf("\n\n");
  std::printf("| op | type | n x k (m) | old | new (min / median) | new/old | new vs limit |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (Case& c : cases) {
    const Stats sn = Summarize(c.t_new);
    const Stats so = c.t_old.empty() ? sn : Summarize(c.t_old);
    const double bytes = static_cast<double>(c.w.size());
    if (c.name == "gemv") {
      std::printf(
          "| gemv | %s | %lldx%lld | %.1f GB/s | %.1f / %.1f GB/s | %.2fx | %.2f of read (%.2f of "
          "read-pf",
          hqekv::TensorTypeName(c.t), (long long)c.n, (long long)c.k, bytes / so.min / 1e9,
          bytes / sn.min / 1e9, bytes / sn.med / 1e9, so.min / sn.min,
          bytes / sn.min / 1e9 / read_gbs, bytes / sn.min / 1e9 / read_pf_gbs);
      if (cold) {
        const double same = static_cast<double>(std::min(cold_buf.size(), c.w.size() / 4)) * 4 /
                            Summarize(c.t_cold_read).min / 1e9;
        std::printf(", %.2f of cold read, %.2f of same-size cold read %.1f GB/s",
                    bytes / sn.min / 1e9 / read_cold_gbs, bytes / sn.min / 1e9 / same, same);
      }
      std::printf(") |\n");
    } else {
      const double flop = 2.0 * c.n * c.k * c.m;
      std::printf(
          "| gemm | %s | %lldx%lld (%lld) | %.1f GFLOP/s | %.1f / %.1f GFLOP/s | %.2fx | %.2f of "
          "FMA peak |\n",
          hqekv::TensorTypeName(c.t), (long long)c.n, (long long)c.k, (long long)c.m,
          flop / so.min / 1e9, flop / sn.min / 1e9, flop / sn.med / 1e9, so.min / sn.min,
          flop / sn.min / 1e9 / fma_gflops);
    }
  }
  return 0;
}
