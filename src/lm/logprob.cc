#include "lm/logprob.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace hqekv::lm {

std::vector<int32_t> TopTokens(const float* logits, int n, int k) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  ids.resize(static_cast<size_t>(k));
  return ids;
}

double LogSumExp(const float* logits, int n) {
  const float mx = *std::max_element(logits, logits + n);
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  return mx + std::log(sum);
}

template <class T>
void LogSoftmax(const float* logits, int n, T* out) {
  const double lse = LogSumExp(logits, n);
  for (int i = 0; i < n; ++i) out[i] = static_cast<T>(static_cast<double>(logits[i]) - lse);
}

template <class T>
int32_t Argmax(const T* v, int n) {
  return static_cast<int32_t>(std::max_element(v, v + n) - v);
}

template <class T>
double Nll(const float* logits, int n, int token) {
  const double lse = LogSumExp(logits, n);
  return -static_cast<double>(static_cast<T>(static_cast<double>(logits[token]) - lse));
}

template <class T>
double KlSum(const T* logp, const T* logq, int k, const int32_t* ids) {
  double kl = 0;
  for (int j = 0; j < k; ++j) {
    const double p = std::exp(static_cast<double>(logp[j]));
    if (p > 0) kl += p * (static_cast<double>(logp[j]) - logq[ids ? ids[j] : j]);
  }
  return kl;
}

template <class T>
double Kl(const T* logp, const T* logq, int n) {
  const double kl = KlSum(logp, logq, n);
  return kl < 0 ? 0.0 : kl;
}

double KlFromLogits(const float* ref_logits, const float* test_logits, int n) {
  std::vector<double> lr(n), lt(n);
  LogSoftmax(ref_logits, n, lr.data());
  LogSoftmax(test_logits, n, lt.data());
  return Kl(lr.data(), lt.data(), n);
}

template void LogSoftmax<float>(const float*, int, float*);
template void LogSoftmax<double>(const float*, int, double*);
template int32_t Argmax<float>(const float*, int);
template int32_t Argmax<double>(const double*, int);
template double Nll<float>(const float*, int, int);
template double Nll<double>(const float*, int, int);
template double KlSum<float>(const float*, const float*, int, const int32_t*);
template double KlSum<double>(const double*, const double*, int, const int32_t*);
template double Kl<float>(const float*, const float*, int);
template double Kl<double>(const double*, const double*, int);

}  // namespace hqekv::lm
