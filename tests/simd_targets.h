// Runs a test body once per x86 SIMD target this CPU has (AVX-512 VNNI,
// AVX-512, AVX2, SSE4), with Highway's dynamic dispatch forced to that
// target, so that a SIMD == oracle test covers every compiled kernel, not
// just the best one. A kernel file that does not compile a forced target
// runs its next lower one there.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <type_traits>

#include "hwy/targets.h"

namespace hqekv::test {

inline constexpr int64_t kSimdTestTargets[] = {HWY_AVX3_DL, HWY_AVX3, HWY_AVX2, HWY_SSE4};

// fn() or fn(int64_t target); returns how many targets ran (a test should
// require at least one, or skip). The supported set is read once, before any
// target is forced (re-reading it after forcing one would run only that one).
template <class Fn>
int OnEachTarget(Fn fn) {
  const int64_t supported = hwy::SupportedTargets();
  int ran = 0;
  for (int64_t target : kSimdTestTargets) {
    if ((supported & target) == 0) continue;
    hwy::SetSupportedTargetsForTest(target);
    hwy::GetChosenTarget().Update(hwy::SupportedTargets());
    SCOPED_TRACE(hwy::TargetName(target));
    if constexpr (std::is_invocable_v<Fn, int64_t>) {
      fn(target);
    } else {
      fn();
    }
    ++ran;
  }
  hwy::SetSupportedTargetsForTest(0);
  hwy::GetChosenTarget().Update(hwy::SupportedTargets());
  return ran;
}

}  // namespace hqekv::test
