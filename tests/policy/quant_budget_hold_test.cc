// bits=B of KIVI and HqeKV holds at every decode step: after the prefill and
// after each of a long run of single-token steps the cache holds <= B true
// bits per original element, at a 2048-token context (prefill 1536) and a
// 512-token one (prefill 256), at head_dim 64.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "policy_harness.h"

namespace hqekv::policy {
namespace {

using testing::Driver;
using testing::MustMake;

struct Trace {
  double after_prefill = 0, worst = 0, end = 0;
  std::string note;
};

Trace TraceBits(const std::string& spec, int ctx, int prefill, int decode) {
  Trace t;
  KvGeometry g = testing::SmallGeometry(2, 4, 2, 64);
  g.max_ctx = ctx;
  auto c = MustMake(spec, g);
  EXPECT_NE(c, nullptr) << spec;
  if (!c) return t;
  Driver d(c.get(), 17);
  d.Step(prefill, true, false);
  t.after_prefill = t.worst = c->Stats().bits_per_original();
  for (int i = 0; i < decode; ++i) {
    d.Step(1, false, false);
    t.worst = std::max(t.worst, c->Stats().bits_per_original());
  }
  t.end = c->Stats().bits_per_original();
  t.note = c->BudgetNote();
  return t;
}

TEST(QuantBudgetHold, KiviHoldsBAtEveryStep) {
  for (const double b : {4.0, 4.5, 5.0}) {
    const std::string spec = "kivi:bits=" + std::to_string(b);
    SCOPED_TRACE(spec);
    const Trace t = TraceBits(spec, 2048, 1536, 500);
    std::printf("%s ctx 2048: after prefill %.3f worst %.3f end %.3f\n", spec.c_str(),
                t.after_prefill, t.worst, t.end);
    EXPECT_LE(t.worst, b);
  }
}

TEST(QuantBudgetHold, HqekvHoldsBAtEveryStepLongAndShort) {
  struct Case {
    double bits;
    int ctx, prefill, decode;
  } kCases[] = {
      {3.4, 2048, 1536, 500}, {6.0, 2048, 1536, 500}, {3.4, 512, 256, 250}, {4.2, 512, 256, 250}};
  for (const Case& k : kCases) {
    const std::string spec = "hqekv:bits=" + std::to_string(k.bits);
    SCOPED_TRACE(spec + " ctx " + std::to_string(k.ctx));
    const Trace t = TraceBits(spec, k.ctx, k.prefill, k.decode);
    std::printf("%s ctx %d: after prefill %.3f worst %.3f end %.3f %s\n", spec.c_str(), k.ctx,
                t.after_prefill, t.worst, t.end, t.note.c_str());
    EXPECT_LE(t.worst, k.bits);
    EXPECT_EQ(t.note, "");
  }
}

}  // namespace
}  // namespace hqekv::policy
