// The one selection point of decode/prefill attention over stored chunks:
// which kernel scores a K chunk (q·k) and which adds a V chunk times its
// weights (sum_t w_t v_t), chosen once per (format, head dim D, CPU, rounding
// options) and then called for every chunk of that format.
//
// Candidates, in the order the cache tried them per chunk before this table
// existed (the order is kept, so every chunk runs the same kernel as then and
// the results are the same bits):
//   K scores, rounded query (decode steps):
//     1. int16 query over per-channel integer levels (KIVI / HqeKV K tiers):
//        DotChunkMultiInt16Query;
//     2. int8 rows, int16 query prepared once per query and KV head:
//        DotRowsInt16Prepared;
//     3. q8_0 rows, the same for llama.cpp's blocks: DotRowsQ8_0Prepared;
//     4. fp8 rows, bf16 query, where this CPU prefers them
//        (Bf16RowsPreferred): DotRowsBf16Prepared;
//     5. fp16 rows a piece at a time, each piece after its share of a later
//        chunk's line prefetches (KernelTakesLines);
//     6. DotChunkMulti (fp32 query; every format).
//   K scores, fp32 query: 6 only.
//   V sums, rounded weights: int16 weights over per-token integer levels
//   (AxpyChunkMultiInt16Weights), int8 rows (AxpyRowsInt16Weights),
//   q8_0 rows (AxpyRowsQ8_0Int16Weights), fp8 rows where preferred
//   (AxpyRowsBf16Weights); then, rounded or not, fp16 pieces and
//   AxpyChunkMulti.
// Each candidate 1-5 applies to one kind only (and shapes of it: T, D), so a
// format has at most one of them besides the fallback: the selection keeps
// the one whose shape test passes for some T in [1, 64] at this D (a kernel
// that never applies returns false without touching anything, so leaving it
// out changes nothing). The chosen path still checks T (a ragged chunk) and
// the data (a non-finite query) and falls back to 6 exactly as before.
// tests/attn/kernel_set_test.cc checks, for every format and the head dims
// the tests use, that the chosen path gives the bits of the full ladder
// (LadderDotK / LadderAxpyV, kept here as the oracle of the selection).
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/format.h"
#include "attn/multi_query_rows_bf16.h"
#include "attn/multi_query_rows_q16.h"
#include "attn/prefetch.h"

namespace hqekv::attn {

// One plane (K or V) of a stored chunk: T tokens × D channels in `format`,
// its codes and metadata (quant::CodeBytes / MetaBytes bytes).
struct ChunkRef {
  quant::Format format;
  const uint8_t* codes = nullptr;
  const uint8_t* meta = nullptr;
  int T = 0;
  int D = 0;
};

// Query rows prepared once per query and KV head for a row kernel (the rows
// of `src`; nullptr: none yet), on the first chunk of that kind that needs
// them.
template <class Rows>
struct PreparedRows {
  Rows rows;
  const float* src = nullptr;
  bool ok = false;

  // prepare(&rows) when q is not the source yet, then dot(rows) if that
  // worked; false sends the caller to the fallback.
  template <class Prepare, class Dot>
  bool Score(const float* q, const Prepare& prepare, const Dot& dot) {
    if (src != q) {
      src = q;
      ok = prepare(&rows);
    }
    return ok && dot(rows);
  }
};

// The prepared rows of each row kernel: fp8 (bf16), q8_0 (int16) and int8
// (int16). Forget() when the query rows change.
struct PreparedQuery {
  PreparedRows<Bf16Query> bf16;
  PreparedRows<Q8_0Query> q8;
  PreparedRows<Int16Query> i8;
  void Forget() { bf16.src = q8.src = i8.src = nullptr; }
};

// scores[h·ss + t] for the `group` query rows q[h·D ..] (already scaled).
// `ahead`: a later chunk's code block whose lines the kernel may request.
using DotKFn = void (*)(const ChunkRef& c, const float* q, int group, float* scores, size_t ss,
                        PreparedQuery& pq, attn::PrefetchLines* ahead);
// acc[h·D + d] += sum_t w[h·ws + t] x̂[t][d] for the `group` weight rows.
using AxpyVFn = void (*)(const ChunkRef& c, const float* w, size_t ws, int group, float* acc,
                         attn::PrefetchLines* ahead);

// Which candidate a set runs first (then the fallback).
enum class DotPath : uint8_t {
  kFp32,        // DotChunkMulti only
  kInt16Query,  // 1
  kInt8Rows,    // 2
  kQ8_0Rows,    // 3
  kBf16Rows,    // 4
  kF16Pieces,   // 5
  kLadder,      // several could apply: every candidate in order (none today)
};
enum class AxpyPath : uint8_t {
  kFp32,
  kInt16Weights,
  kInt8Rows,
  kQ8_0Rows,
  kBf16Rows,
  kF16Pieces,
  kLadder,
};

struct ChunkKernels {
  DotKFn dot_k = nullptr;
  AxpyVFn axpy_v = nullptr;
  DotPath dot_path = DotPath::kFp32;
  AxpyPath axpy_path = AxpyPath::kFp32;
  // The kernels of this format request a later chunk's lines themselves
  // (int8, q8_0, fp16): the walk hands them the block (attn::PrefetchLines)
  // instead of prefetching it in one burst.
  bool takes_lines = false;
};

struct KernelOptions {
  bool rounded_query = true;    // candidates 1-5 for K (else 6 only)
  bool rounded_weights = true;  // the rounded V candidates
};

// The set for chunks of format f at head dim D on this CPU. Pure: the same
// arguments give the same set.
ChunkKernels SelectKernels(const quant::Format& f, int D, const KernelOptions& o);

// SelectKernels, remembered: one table per process, looked up by the exact
// format (every field), D and options; the entry lives as long as the
// process (thread-safe). A store resolves its format table through this once
// per call and indexes it by each chunk's format index.
const ChunkKernels& CachedKernels(const quant::Format& f, int D, const KernelOptions& o);

// Whether the kernels of format f take a later chunk's lines (ChunkKernels::
// takes_lines).
bool KernelTakesLines(const quant::Format& f);

// The full candidate lists, tried in order for every chunk (the selection's
// oracle; tests only).
void LadderDotK(const ChunkRef& c, const float* q, int group, float* scores, size_t ss,
                bool rounded_query, PreparedQuery& pq, attn::PrefetchLines* ahead);
void LadderAxpyV(const ChunkRef& c, const float* w, size_t ws, int group, float* acc,
                 bool rounded_weights, attn::PrefetchLines* ahead);

}  // namespace hqekv::attn
