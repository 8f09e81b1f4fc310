// Bounds of thread counts, one home for every caller that takes a count from
// a person or a program (-t, hqekv_set_threads, the server's pools).
#pragma once

namespace hqekv {

// The cores of this machine (hardware concurrency, at least 1).
int CpuCount();

// Most threads any caller may ask for: 4 x the cores, at least 16. More only
// adds contention, and a typo like 10000 would start 10,000 threads.
// SetNumThreads (core/parallel.h) clamps to it; callers check first and
// report the limit.
int MaxThreads();

}  // namespace hqekv
