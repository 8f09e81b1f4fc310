// Runs a test body once per x86 SIMD target this CPU supports, with Highway's
// dispatch forced to it, then restores the default dispatch. (simd_test.cc
// and multi_query_test.cc still carry their own copies of this loop; they can
// switch to this one.)
#pragma once

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cstdint>

namespace hqekv::quant::testing {

// Calls fn(target) per target; returns how many targets ran (0: none of
// AVX-512 / AVX2 / SSE4 here, fn did not run).
template <class Fn>
int ForEachSimdTarget(Fn fn) {
  int ran = 0;
  // Read once: after SetSupportedTargetsForTest, SupportedTargets() returns
  // only the forced target, so testing it inside the loop would stop after
  // the first target.
  const int64_t supported = hwy::SupportedTargets();
  for (int64_t target : {int64_t{HWY_AVX3}, int64_t{HWY_AVX2}, int64_t{HWY_SSE4}}) {
    if ((supported & target) == 0) continue;
    hwy::SetSupportedTargetsForTest(target);
    hwy::GetChosenTarget().Update(hwy::SupportedTargets());
    SCOPED_TRACE(hwy::TargetName(target));
    fn(target);
    ++ran;
  }
  hwy::SetSupportedTargetsForTest(0);
  hwy::GetChosenTarget().Update(hwy::SupportedTargets());
  return ran;
}

}  // namespace hqekv::quant::testing
