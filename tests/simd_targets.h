// Runs a test body once per x86 SIMD target this CPU has (AVX-512, AVX2,
// SSE4; AVX-512 VNNI too for the files that compile it), with Highway's
// dynamic dispatch forced to that target, so that a SIMD == oracle test
// covers every compiled kernel, not just the best one.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <type_traits>

#include "hwy/targets.h"

namespace hqekv::test {

// The targets every kernel file compiles (quant/simd_targets.h).
inline constexpr int64_t kSimdTestTargets[] = {HWY_AVX3, HWY_AVX2, HWY_SSE4};
// Plus AVX-512 VNNI, which the model's int8 and panel kernels compile (the
// quant kernels report "no fast path" when forced to it).
inline constexpr int64_t kSimdTestTargetsWithVnni[] = {HWY_AVX3_DL, HWY_AVX3, HWY_AVX2, HWY_SSE4};

// fn() or fn(int64_t target); returns how many targets ran (a test should
// require at least one, or skip). The supported set is read once, before any
// target is forced (re-reading it after forcing one would run only that one).
template <class Fn>
int OnEachTarget(Fn fn, std::span<const int64_t> targets = kSimdTestTargets) {
  const int64_t supported = hwy::SupportedTargets();
  int ran = 0;
  for (int64_t target : targets) {
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
