// Scoring of task outputs: exact match of generated answers, and the
// next-token distribution metrics of teacher forcing (NLL, KL against the
// reference cache, top-1), with lm/logprob.h's functions on double
// log-probabilities. All reductions are in double precision.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hqekv::eval {

// Lowercase ASCII, every character that is not a letter or digit becomes a
// space, whitespace runs collapse to one space, no leading/trailing space.
// Non-ASCII bytes are kept as they are.
std::string NormalizeAnswer(const std::string& s);

// True when the normalized generation starts with one of the normalized
// answers as whole words ("71432." matches "71432"; "714325" does not).
// Empty answers never match.
bool ExactMatch(const std::string& generated, const std::vector<std::string>& answers);

// Running sums over teacher-forced steps.
struct TeacherForcedStats {
  int64_t steps = 0;
  double nll = 0;         // sum of NLL of the true next token (nats)
  int64_t top1_true = 0;  // argmax == true next token
  double kl = 0;          // sum of KL(ref || test) (when a reference is given)
  double kl2 = 0;         // sum of its squares (standard error of the mean KL)
  int64_t agree = 0;      // argmax(test) == argmax(ref)
  int64_t ref_steps = 0;  // steps that had a reference

  // Adds one step: lm::Nll, lm::Argmax and lm::KlFromLogits of the logits
  // [n]. ref_logits may be null (no reference).
  void Add(const float* test_logits, const float* ref_logits, int n, int true_token);
  TeacherForcedStats& operator+=(const TeacherForcedStats& o);
  double ppl() const;        // exp(nll / steps)
  double accuracy() const;   // top1_true / steps
  double mean_kl() const;    // kl / ref_steps
  double agreement() const;  // agree / ref_steps
  double kl_se() const;      // standard error of mean_kl() over steps
};

}  // namespace hqekv::eval
