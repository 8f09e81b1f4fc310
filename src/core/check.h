// Internal-invariant checks. User input never reaches these: bad input is an
// Error value (core/status.h). A failed HQEKV_DCHECK is a bug in hqekv itself;
// it aborts with the file, line and condition in debug builds (NDEBUG unset)
// and sanitizer builds (HQEKV_DCHECK_ON, set by -DHQEKV_SANITIZE=ON), and
// compiles to nothing in release builds, so it may sit on hot paths.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace hqekv::internal {
[[noreturn]] inline void CheckFailed(const char* file, int line, const char* cond) {
  std::fprintf(stderr, "hqekv internal check failed at %s:%d: %s\n", file, line, cond);
  std::abort();
}
}  // namespace hqekv::internal

#if defined(NDEBUG) && !defined(HQEKV_DCHECK_ON)
#define HQEKV_DCHECK(cond) ((void)sizeof(!(cond)))
#else
#define HQEKV_DCHECK(cond) \
  ((cond) ? (void)0 : ::hqekv::internal::CheckFailed(__FILE__, __LINE__, #cond))
#endif
