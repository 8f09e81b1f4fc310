#include "policy/hqekv_alloc.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <sstream>

#include "core/number.h"

namespace hqekv::policy {
namespace {

// Ranks `idx` best first: by current tier (better first) unless
// compare_across_tiers, then by score descending; ties: lower index first.
void Rank(std::vector<int>* idx, const std::vector<Tier>& cur, const std::vector<double>& score,
          bool compare_across_tiers) {
  std::stable_sort(idx->begin(), idx->end(), [&](int a, int b) {
    if (!compare_across_tiers && cur[a] != cur[b]) return cur[a] < cur[b];
    return score[a] > score[b];
  });
}

// Fills the kept tiers fp16, u4, u2, n1 from the best down over `live`:
// tier t's slots (counts[t] plus what the better tiers could not place) go to
// the best-ranked unplaced chunks whose current tier is t or better.
void FillKept(const std::vector<int>& live, const std::vector<Tier>& cur,
              const std::vector<double>& score, const std::array<int64_t, kNumTiers>& counts,
              bool compare_across_tiers, std::vector<Tier>* target) {
  std::vector<char> placed(cur.size(), 0);
  Tier worst_configured = Tier::kF16;
  for (int t = 0; t < 4; ++t) {
    if (counts[t] > 0) worst_configured = static_cast<Tier>(t);
  }
  int64_t carry = 0;
  for (int t = 0; t < 4; ++t) {
    const Tier tier = static_cast<Tier>(t);
    std::vector<int> cand;
    for (int c : live) {
      if (!placed[c] && cur[c] <= tier) cand.push_back(c);
    }
    Rank(&cand, cur, score, compare_across_tiers);
    const int64_t slots = counts[t] + carry;
    const int64_t take = std::min<int64_t>(slots, static_cast<int64_t>(cand.size()));
    for (int64_t i = 0; i < take; ++i) {
      (*target)[cand[i]] = tier;
      placed[cand[i]] = 1;
    }
    carry = slots - take;
  }
  // Only when the evicted history exceeds its share (the count can shrink by
  // one as nb grows): the leftovers stay in the worst configured kept tier.
  for (int c : live) {
    if (!placed[c]) (*target)[c] = std::max(cur[c], worst_configured);
  }
}

}  // namespace

const char* TierName(Tier t) {
  switch (t) {
    case Tier::kF16:
      return "fp16";
    case Tier::kHigh:
      return "u4";
    case Tier::kMid:
      return "u2";
    case Tier::kLow:
      return "n1";
    case Tier::kEvicted:
      return "evicted";
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
    Result<double> d = ParseReal(item, "");
    if (!d.ok())
      return MakeError(where + ": '" + item + "' is not a number (expected r4/r2/r1/r0)");
    v.push_back(*d);
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
  // Llama-3.1-8B-Instruct rows of config/ratios.json (docs/policies.md "HqeKV", Ratios), B_avg ->
  // r4, r2, r1, r0.
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
  c[0] = std::min<int64_t>(std::max(pinned_chunks, 0), nb);
  const int64_t rest = nb - c[0];
  const double ratio[4] = {r.r4, r.r2, r.r1, r.r0};
  const double sum = r.r4 + r.r2 + r.r1 + r.r0;
  double frac[4];
  int64_t given = 0;
  for (int i = 0; i < 4; ++i) {
    const double exact = rest * ratio[i] / sum;
    c[i + 1] = static_cast<int64_t>(std::floor(exact));
    frac[i] = exact - std::floor(exact);
    given += c[i + 1];
  }
  // Largest remainder: each missing unit to the largest fractional part
  // (stable: ties go to the more precise tier). Fewer units are missing than
  // there are positive fractions, so a zero ratio never gets one.
  int order[4] = {0, 1, 2, 3};
  std::stable_sort(order, order + 4, [&](int a, int b) { return frac[a] > frac[b]; });
  for (int i = 0; given < rest; ++i, ++given) ++c[order[i % 4] + 1];
  return c;
}

bool ShiftOneChunkDown(std::array<int64_t, kNumTiers>* counts, TierMask usable) {
  constexpr int kEv = static_cast<int>(Tier::kEvicted);
  for (int t = static_cast<int>(Tier::kHigh); t < kEv; ++t) {
    if ((*counts)[t] > 0) {
      int w = t + 1;
      while (w < kEv && !TierUsable(usable, w)) ++w;
      --(*counts)[t];
      ++(*counts)[w];
      return true;
    }
  }
  return false;
}

TierPlan PlanTiers(const std::vector<Tier>& cur_k, const std::vector<Tier>& cur_v,
                   const std::vector<double>& score_k, const std::vector<double>& score_v,
                   const std::array<int64_t, kNumTiers>& counts, PlanOptions options) {
  const int n = static_cast<int>(cur_k.size());
  TierPlan plan{cur_k, cur_v};
  const bool across = options.compare_across_tiers;

  // Eviction of K (and, coupled, of V): the lowest-ranked live chunks by K.
  std::vector<int> live_k;
  int64_t evicted_k = 0;
  for (int c = 0; c < n; ++c) {
    if (cur_k[c] == Tier::kEvicted) {
      ++evicted_k;
    } else {
      live_k.push_back(c);
    }
  }
  Rank(&live_k, cur_k, score_k, across);
  int64_t more = std::max<int64_t>(0, counts[4] - evicted_k);
  more = std::min<int64_t>(more, static_cast<int64_t>(live_k.size()));
  for (int64_t i = 0; i < more; ++i) {
    const int c = live_k[live_k.size() - 1 - i];
    plan.k[c] = Tier::kEvicted;
    plan.v[c] = Tier::kEvicted;  // no V without its K (the token leaves the softmax)
  }
  live_k.resize(live_k.size() - more);
  std::vector<int> live_v;
  for (int c = 0; c < n; ++c) {
    if (plan.v[c] != Tier::kEvicted) live_v.push_back(c);
  }
  FillKept(live_k, cur_k, score_k, counts, across, &plan.k);
  FillKept(live_v, cur_v, score_v, counts, across, &plan.v);
  return plan;
}

}  // namespace hqekv::policy
