#include "model/sampler.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace hqekv {

Status ValidateSamplerConfig(const SamplerConfig& c) {
  if (!std::isfinite(c.temperature) || c.temperature < 0) {
    return MakeError("--temp must be a finite number >= 0, got " + std::to_string(c.temperature));
  }
  if (c.top_k < 0) return MakeError("--top-k must be >= 0, got " + std::to_string(c.top_k));
  if (!(c.top_p > 0 && c.top_p <= 1))
    return MakeError("--top-p must be in (0, 1], got " + std::to_string(c.top_p));
  if (!(c.min_p >= 0 && c.min_p < 1))
    return MakeError("--min-p must be in [0, 1), got " + std::to_string(c.min_p));
  if (!(c.repeat_penalty > 0) || !std::isfinite(c.repeat_penalty)) {
    return MakeError("--repeat-penalty must be a finite number > 0, got " +
                     std::to_string(c.repeat_penalty));
  }
  if (c.repeat_last_n < 0) return MakeError("repeat_last_n must be >= 0");
  if (!std::isfinite(c.presence_penalty) || !std::isfinite(c.frequency_penalty))
    return MakeError("presence_penalty and frequency_penalty must be finite numbers");
  for (const auto& [id, bias] : c.logit_bias) {
    if (id < 0) return MakeError("logit_bias: token id " + std::to_string(id) + " is negative");
    if (!std::isfinite(bias))
      return MakeError("logit_bias: the bias of token " + std::to_string(id) +
                       " must be a finite number (kLogitBan bans it)");
  }
  return Status::Ok();
}

Result<Sampler> Sampler::Create(const SamplerConfig& c) {
  HQEKV_RETURN_IF_ERROR(ValidateSamplerConfig(c));
  return Sampler(c);
}

int32_t Sampler::Sample(const float* logits, int vocab, const std::vector<int32_t>& history) {
  work_.assign(logits, logits + vocab);
  for (const auto& [id, bias] : c_.logit_bias)
    if (id < vocab) work_[id] += bias;
  const bool counts = c_.presence_penalty != 0.0f || c_.frequency_penalty != 0.0f;
  if ((c_.repeat_penalty != 1.0f || counts) && c_.repeat_last_n > 0) {
    const size_t from = history.size() > static_cast<size_t>(c_.repeat_last_n)
                            ? history.size() - c_.repeat_last_n
                            : 0;
    std::vector<int32_t> seen(history.begin() + from, history.end());
    std::sort(seen.begin(), seen.end());
    for (size_t i = 0; i < seen.size();) {
      const int32_t t = seen[i];
      size_t j = i;
      while (j < seen.size() && seen[j] == t) ++j;
      const float count = static_cast<float>(j - i);
      i = j;
      if (t < 0 || t >= vocab) continue;
      float& w = work_[t];
      if (c_.repeat_penalty != 1.0f) w = w > 0 ? w / c_.repeat_penalty : w * c_.repeat_penalty;
      w -= count * c_.frequency_penalty + c_.presence_penalty;
    }
  }
  if (c_.temperature == 0.0f) {
    return static_cast<int32_t>(std::max_element(work_.begin(), work_.end()) - work_.begin());
  }
  cand_.resize(vocab);
  for (int i = 0; i < vocab; ++i) cand_[i] = {work_[i] / c_.temperature, i};
  // Descending logit, ascending id on ties: a total order, so the draw is reproducible.
  auto by_logit = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t keep = cand_.size();
  if (c_.top_k > 0 && static_cast<size_t>(c_.top_k) < keep) {
    keep = c_.top_k;
    std::partial_sort(cand_.begin(), cand_.begin() + keep, cand_.end(), by_logit);
  } else {
    std::sort(cand_.begin(), cand_.end(), by_logit);
  }
  cand_.resize(keep);
  const float mx = cand_[0].first;
  double sum = 0;
  for (auto& [v, id] : cand_) sum += (v = std::exp(v - mx));
  for (auto& [v, id] : cand_) v = static_cast<float>(v / sum);
  if (c_.top_p < 1.0f) {
    double cum = 0;
    size_t n = 0;
    while (n < cand_.size()) {
      cum += cand_[n++].first;
      if (cum >= c_.top_p) break;
    }
    cand_.resize(n);
  }
  if (c_.min_p > 0.0f) {
    const float floor = c_.min_p * cand_[0].first;
    size_t n = 1;
    while (n < cand_.size() && cand_[n].first >= floor) ++n;
    cand_.resize(n);
  }
  double total = 0;
  for (const auto& cv : cand_) total += cv.first;
  double r = rng_.Uniform() * total;
  for (const auto& [p, id] : cand_) {
    r -= p;
    if (r < 0) return id;
  }
  return cand_.back().second;  // rounding left r >= 0: the last candidate
}

}  // namespace hqekv
