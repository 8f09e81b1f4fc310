#include "eval/run/scoring.h"

#include <cctype>
#include <cmath>

#include "eval/run/intervals.h"
#include "lm/logprob.h"

namespace hqekv::eval {

std::string NormalizeAnswer(const std::string& s) {
  std::string out;
  bool pending_space = false;
  for (unsigned char c : s) {
    const bool keep = c >= 0x80 || std::isalnum(c);
    if (!keep) {
      pending_space = true;
      continue;
    }
    if (pending_space && !out.empty()) out.push_back(' ');
    pending_space = false;
    out.push_back(c < 0x80 ? static_cast<char>(std::tolower(c)) : static_cast<char>(c));
  }
  return out;
}

bool ExactMatch(const std::string& generated, const std::vector<std::string>& answers) {
  const std::string g = NormalizeAnswer(generated);
  for (const std::string& a : answers) {
    const std::string n = NormalizeAnswer(a);
    if (n.empty() || g.size() < n.size()) continue;
    if (g.compare(0, n.size(), n) == 0 && (g.size() == n.size() || g[n.size()] == ' ')) return true;
  }
  return false;
}

void TeacherForcedStats::Add(const float* test_logits, const float* ref_logits, int n,
                             int true_token) {
  ++steps;
  nll += lm::Nll(test_logits, n, true_token);
  const int top = lm::Argmax(test_logits, n);
  if (top == true_token) ++top1_true;
  if (ref_logits) {
    ++ref_steps;
    const double k = lm::KlFromLogits(ref_logits, test_logits, n);
    kl += k;
    kl2 += k * k;
    if (top == lm::Argmax(ref_logits, n)) ++agree;
  }
}

TeacherForcedStats& TeacherForcedStats::operator+=(const TeacherForcedStats& o) {
  steps += o.steps;
  nll += o.nll;
  top1_true += o.top1_true;
  kl += o.kl;
  kl2 += o.kl2;
  agree += o.agree;
  ref_steps += o.ref_steps;
  return *this;
}

double TeacherForcedStats::kl_se() const {
  return StandardError(static_cast<double>(ref_steps), kl, kl2);
}

double TeacherForcedStats::ppl() const { return steps ? std::exp(nll / steps) : 0; }
double TeacherForcedStats::accuracy() const { return steps ? double(top1_true) / steps : 0; }
double TeacherForcedStats::mean_kl() const { return ref_steps ? kl / ref_steps : 0; }
double TeacherForcedStats::agreement() const { return ref_steps ? double(agree) / ref_steps : 0; }

}  // namespace hqekv::eval
