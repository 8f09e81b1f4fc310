// Next-token distribution math, the one implementation used by `hqekv ppl`
// (lm/lm_compare.h), calibration (calib/lm_scorer.h) and evaluation
// (eval/run/scoring.h). Inputs are a model's logits, fp32 [n]; every sum is
// accumulated in double in index order; results are nats.
//
// Numerics, fixed because stored results depend on them bit for bit:
//   max m = the largest logit (fp32), sum = sum_i exp(double(x_i) - m),
//   lse = m + log(sum), log p_i = double(x_i) - lse, then rounded to T
//   (T = float for the large reference tables of ppl and calibration,
//   T = double for evaluation).
#pragma once

#include <cstdint>
#include <vector>

namespace hqekv::lm {

// log(sum_i exp(logits[i])), shifted by the max so that logits of any size
// (1e4, -1e4) neither overflow nor underflow. n > 0.
double LogSumExp(const float* logits, int n);

// out[i] = log softmax(logits)[i] = logits[i] - LogSumExp(logits), rounded to
// T (float or double). For T = float, out may be logits (in place).
template <class T>
void LogSoftmax(const float* logits, int n, T* out);

// Index of the largest value, the first one on ties. n > 0. T: float or double.
template <class T>
int32_t Argmax(const T* v, int n);

// The k (<= n) most probable tokens of softmax(logits), by decreasing logit,
// the lower id first on ties (top log-probs of the server and the C API).
std::vector<int32_t> TopTokens(const float* logits, int n, int k);

// Negative log-likelihood of `token` under softmax(logits): -log p_token,
// with log p_token rounded to T first (T = float gives exactly minus the
// entry of a LogSoftmax<float> table). 0 <= token < n.
template <class T = double>
double Nll(const float* logits, int n, int token);

// sum_j p_j * (log p_j - log q_{id_j}) with p_j = exp(logp[j]), j < k, terms
// with p_j == 0 skipped; id_j = ids[j], or j when ids is null. NOT clamped:
// over a subset of the vocabulary the sum may be negative. T: float or double.
template <class T>
double KlSum(const T* logp, const T* logq, int k, const int32_t* ids = nullptr);

// KL(P || Q) in nats from the log-probabilities of two distributions over n
// outcomes: KlSum(logp, logq, n), clamped at 0 (rounding can give -1e-17
// for identical inputs).
template <class T>
double Kl(const T* logp, const T* logq, int n);

// KL(softmax(ref_logits) || softmax(test_logits)) with double log-probs.
double KlFromLogits(const float* ref_logits, const float* test_logits, int n);

}  // namespace hqekv::lm
