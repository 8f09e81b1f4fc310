// The SIMD targets every quant Highway translation unit (quant/simd.cc,
// attn/multi_query.cc) is compiled for. Include before hwy/foreach_target.h.
#pragma once

// SSSE3 adds compile time for machines that no longer matter; they run EMU128.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS HWY_SSSE3
#endif
