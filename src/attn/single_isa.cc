// attn::Avx3DlRuns (attn/single_isa.h): whether Highway's dispatcher chose its
// AVX3_DL target. The one Highway unit of the single-ISA kernels: it holds no
// kernel, only the question, so those files need no per-target stubs.
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif
#include "quant/simd_targets.h"
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "attn/single_isa.cc"
#include <hwy/foreach_target.h>  // NOLINT: re-includes this file once per target
#include <hwy/highway.h>

#include "attn/single_isa.h"

HWY_BEFORE_NAMESPACE();
namespace hqekv::attn {
namespace HWY_NAMESPACE {
bool ChosenTargetIsAvx3Dl() { return HWY_TARGET == HWY_AVX3_DL; }
}  // namespace HWY_NAMESPACE
}  // namespace hqekv::attn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hqekv::attn {
HWY_EXPORT(ChosenTargetIsAvx3Dl);

bool Avx3DlRuns() {
#if HQEKV_SINGLE_ISA
  return HWY_DYNAMIC_DISPATCH(ChosenTargetIsAvx3Dl)();
#else
  return false;  // the kernels are not compiled (not GCC on x86-64)
#endif
}
}  // namespace hqekv::attn
#endif  // HWY_ONCE
