// Runs a test body once per x86 SIMD target this CPU has (AVX-512, AVX2,
// SSE4), with Highway's dynamic dispatch forced to that target, so that a
// SIMD == oracle test covers every compiled kernel, not just the best one.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>

#include "hwy/targets.h"

namespace hqekv::test {

// Returns how many targets ran (a test should require at least one).
template <class Fn>
int OnEachTarget(Fn fn) {
  const int64_t supported = hwy::SupportedTargets();
  int ran = 0;
  for (int64_t target : {int64_t{HWY_AVX3}, int64_t{HWY_AVX2}, int64_t{HWY_SSE4}}) {
    if ((supported & target) == 0) continue;
    hwy::SetSupportedTargetsForTest(target);
    hwy::GetChosenTarget().Update(hwy::SupportedTargets());
    SCOPED_TRACE(hwy::TargetName(target));
    fn();
    ++ran;
  }
  hwy::SetSupportedTargetsForTest(0);
  hwy::GetChosenTarget().Update(hwy::SupportedTargets());
  return ran;
}

}  // namespace hqekv::test
