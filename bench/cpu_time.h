// CPU seconds of the calling thread: the primary time of one-thread
// benchmark runs here, since a shared machine's other jobs do not inflate it
// the way they inflate wall time.
#pragma once

#include <ctime>

namespace hqekv::bench {

inline double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace hqekv::bench
