// A small fixed-size thread pool shared by the whole process. The engine and
// the caches split work with ParallelFor; with one thread everything runs
// inline on the caller (deterministic and sanitizer-friendly).
#pragma once

#include <cstdint>
#include <functional>

namespace hqekv {

// Number of worker threads used by ParallelFor (>= 1). Default: hardware
// concurrency. Safe to call between parallel regions only.
void SetNumThreads(int n);
int NumThreads();

// Calls fn(begin, end) on disjoint sub-ranges covering [0, n); blocks until
// all are done. Ranges are contiguous and their split depends only on n and
// NumThreads(), so results are reproducible for a fixed thread count.
// Nested calls from inside fn run inline.
void ParallelFor(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn);

}  // namespace hqekv
