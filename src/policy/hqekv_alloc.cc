#include "policy/hqekv_alloc.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <sstream>

namespace hqekv::policy {
namespace {

// Indices of `idx` sorted by score descending; ties: lower index first.
void SortDescending(std::vector<int>* idx, const std::vector<double>& score) {
  std::stable_sort(idx->begin(), idx->end(), [&](int a, int b) { return score[a] > score[b]; });
}

// Assigns kept tiers (fp16, u4, u2, n1) along `ranked` by the cumulative
// counts; positions beyond the counted total get n1.
void AssignKept(const std::vector<int>& ranked, const std::array<int64_t, kNumTiers>& counts,
                std::vector<Tier>* target) {
  int64_t i = 0;
  for (int c : ranked) {
    int64_t acc = 0;
    Tier t = Tier::kN1;
    for (int tier = 0; tier < 4; ++tier) {
      acc += counts[tier];
      if (i < acc) {
        t = static_cast<Tier>(tier);
        break;
      }
    }
    (*target)[c] = t;
    ++i;
  }
}

}  // namespace

const char* TierName(Tier t) {
  switch (t) {
    case Tier::kF16: return "fp16";
    case Tier::kU4: return "u4";
    case Tier::kU2: return "u2";
    case Tier::kN1: return "n1";
    case Tier::kEvicted: return "evicted";
  }
  return "?";
}

double RoundHalfEven(double x) { return std::nearbyint(x); }  // default FE_TONEAREST

Status CheckRatios(const TierRatios& r, const std::string& where) {
  for (double v : {r.r4, r.r2, r.r1, r.r0}) {
    if (!std::isfinite(v) || v < 0 || v > 1) {
      return MakeError(where + ": each ratio must be in [0, 1]");
    }
  }
  const double s = r.r4 + r.r2 + r.r1 + r.r0;
  if (std::fabs(s - 1.0) > 1e-3) {
    std::ostringstream o;
    o << where << ": ratios r4/r2/r1/r0 sum to " << s << ", not 1";
    return MakeError(o.str());
  }
  return Status::Ok();
}

Result<TierRatios> ParseRatios(const std::string& text) {
  const std::string where = "hqekv ratios '" + text + "'";
  std::vector<double> v;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, '/')) {
    char* end = nullptr;
    const double d = std::strtod(item.c_str(), &end);
    if (item.empty() || end != item.c_str() + item.size()) {
      return MakeError(where + ": '" + item + "' is not a number (expected r4/r2/r1/r0)");
    }
    v.push_back(d);
  }
  if (v.size() != 4 || (!text.empty() && text.back() == '/')) {
    return MakeError(where + ": expected four numbers r4/r2/r1/r0");
  }
  TierRatios r{v[0], v[1], v[2], v[3]};
  HQEKV_RETURN_IF_ERROR(CheckRatios(r, where));
  return Rescaled(r);
}

std::string RatiosText(const TierRatios& r) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "%.6f/%.6f/%.6f/%.6f", r.r4, r.r2, r.r1, r.r0);
  return buf;
}

TierRatios Rescaled(const TierRatios& r) {
  const double s = r.r4 + r.r2 + r.r1 + r.r0;
  return {r.r4 / s, r.r2 / s, r.r1 / s, r.r0 / s};
}

Result<TierRatios> DefaultRatios(double bits) {
  // Llama-3.1-8B-Instruct rows of config/ratios.json (digest §3), B_avg -> r4, r2, r1, r0.
  struct Row {
    double bits;
    TierRatios r;
  };
  static const Row kRows[] = {
      {2.0, {0.0315, 0.9221, 0.0299, 0.0165}},
      {2.8, {0.4159, 0.5676, 0.0012, 0.0153}},
      {3.2, {0.6373, 0.3068, 0.0374, 0.0186}},
      {3.25, {0.6494, 0.3186, 0.0152, 0.0168}},
  };
  for (const Row& row : kRows) {
    if (std::fabs(row.bits - bits) < 1e-9) return Rescaled(row.r);
  }
  std::ostringstream o;
  o << "hqekv: no built-in tier ratios for bits=" << bits
    << " (built in: 2, 2.8, 3.2, 3.25 from the authors' Llama-3.1-8B search); give "
       "ratios=r4/r2/r1/r0 or profile=FILE";
  return MakeError(o.str());
}

std::array<int64_t, kNumTiers> AllocateChunks(int64_t nb, const TierRatios& r, int pinned_chunks) {
  std::array<int64_t, kNumTiers> c{};
  if (nb <= 0) return c;
  const double rho16 = std::min(1.0, static_cast<double>(pinned_chunks) / nb);
  const double rest = 1.0 - rho16;
  const double rho[kNumTiers] = {rho16, rest * r.r4, rest * r.r2, rest * r.r1, rest * r.r0};
  int64_t sum = 0;
  for (int i = 0; i < kNumTiers; ++i) {
    c[i] = static_cast<int64_t>(RoundHalfEven(nb * rho[i]));
    sum += c[i];
  }
  int64_t e = sum - nb;
  if (e < 0) {
    c[3] -= e;  // deficit: the 1-bit entry grows
  } else {
    for (int i : {3, 2, 1, 0}) {  // 1-bit, 2-bit, 4-bit, fp16; evict never adjusted
      const int64_t take = std::min(e, c[i]);
      c[i] -= take;
      e -= take;
    }
  }
  return c;
}

TierPlan PlanTiers(const std::vector<Tier>& cur_k, const std::vector<Tier>& cur_v,
                   const std::vector<double>& score_k, const std::vector<double>& score_v,
                   const std::array<int64_t, kNumTiers>& counts) {
  const int n = static_cast<int>(cur_k.size());
  TierPlan plan{cur_k, cur_v};
  const int64_t evict_target = counts[4];

  // Eviction of K (and, coupled, of V): lowest score_k among live chunks.
  std::vector<int> live_k;
  int64_t evicted_k = 0;
  for (int c = 0; c < n; ++c) {
    if (cur_k[c] == Tier::kEvicted) {
      ++evicted_k;
    } else {
      live_k.push_back(c);
    }
  }
  SortDescending(&live_k, score_k);
  int64_t more = std::max<int64_t>(0, evict_target - evicted_k);
  more = std::min<int64_t>(more, static_cast<int64_t>(live_k.size()));
  for (int64_t i = 0; i < more; ++i) {
    const int c = live_k[live_k.size() - 1 - i];
    plan.k[c] = Tier::kEvicted;
    plan.v[c] = Tier::kEvicted;  // no V without its K (the token leaves the softmax)
  }
  live_k.resize(live_k.size() - more);

  std::vector<Tier> tk(n, Tier::kEvicted), tv(n, Tier::kEvicted);
  AssignKept(live_k, counts, &tk);
  std::vector<int> live_v;
  for (int c = 0; c < n; ++c) {
    if (plan.v[c] != Tier::kEvicted) live_v.push_back(c);
  }
  SortDescending(&live_v, score_v);
  AssignKept(live_v, counts, &tv);
  for (int c = 0; c < n; ++c) {
    if (plan.k[c] != Tier::kEvicted) plan.k[c] = std::max(plan.k[c], tk[c]);
    if (plan.v[c] != Tier::kEvicted) plan.v[c] = std::max(plan.v[c], tv[c]);
  }
  return plan;
}

}  // namespace hqekv::policy
