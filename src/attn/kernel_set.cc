#include "attn/kernel_set.h"

#include <algorithm>
#include <deque>
#include <mutex>

#include "attn/prefetch.h"
#include "core/half.h"
#include "attn/multi_query.h"

namespace hqekv::attn {
namespace {

// fp16 rows (no metadata) for the fp32 kernels: called per kF16PieceTokens
// tokens (attn/prefetch.h), each call after as many lines of *ahead (a later
// chunk's block) as the piece reads, so that the requests overlap the
// arithmetic instead of stalling in one burst (the plain cache's walk,
// cache/plain_cache.cc). kernel(codes, t0, len): tokens [t0, t0 + len) of the
// chunk. False (nothing done) for other kinds or without lines to request.
template <class Kernel>
bool FromAheadInPieces(const ChunkRef& c, attn::PrefetchLines* ahead, const Kernel& kernel) {
  if (c.format.kind != quant::Kind::kF16 || !ahead || ahead->next >= ahead->end) return false;
  const size_t row_bytes = sizeof(f16_t) * static_cast<size_t>(c.D);
  const int piece_lines = static_cast<int>((row_bytes * kF16PieceTokens + 63) / 64);
  for (int t0 = 0; t0 < c.T; t0 += kF16PieceTokens) {
    ahead->next = attn::RequestLines(ahead->next, ahead->end, piece_lines);
    kernel(c.codes + row_bytes * static_cast<size_t>(t0), t0, std::min(kF16PieceTokens, c.T - t0));
  }
  return true;
}

// ---- K scores: one function per candidate, each followed by the fallback.

void DotFp32(const ChunkRef& c, const float* q, int group, float* scores, size_t ss) {
  DotChunkMulti(c.format, c.codes, c.meta, c.T, c.D, q, c.D, group, scores, ss);
}

bool TryInt16Query(const ChunkRef& c, const float* q, int group, float* scores, size_t ss) {
  return DotChunkMultiInt16Query(c.format, c.codes, c.meta, c.T, c.D, q, c.D, group, scores, ss);
}
bool TryInt8Rows(const ChunkRef& c, const float* q, int group, float* scores, size_t ss,
                 PreparedQuery& pq, attn::PrefetchLines* ahead) {
  const int D = c.D;
  return Int16QueryRowsApply(c.format, c.T, D) &&
         pq.i8.Score(
             q, [&](Int16Query* r) { return PrepareInt16Query(q, D, group, D, r); },
             [&](const Int16Query& r) {
               return DotRowsInt16Prepared(c.format, c.codes, c.meta, c.T, r, scores, ss, ahead);
             });
}
bool TryQ8_0Rows(const ChunkRef& c, const float* q, int group, float* scores, size_t ss,
                 PreparedQuery& pq, attn::PrefetchLines* ahead) {
  const int D = c.D;
  return Q8_0QueryRowsApply(c.format, c.T, D) &&
         pq.q8.Score(
             q, [&](Q8_0Query* r) { return PrepareQ8_0Query(q, D, group, D, r); },
             [&](const Q8_0Query& r) {
               return DotRowsQ8_0Prepared(c.format, c.codes, c.meta, c.T, r, scores, ss, ahead);
             });
}
// The caller has checked Bf16RowsPreferred().
bool TryBf16Rows(const ChunkRef& c, const float* q, int group, float* scores, size_t ss,
                 PreparedQuery& pq) {
  const int D = c.D;
  return Bf16QueryRowsApply(c.format, c.T, D) &&
         pq.bf16.Score(
             q, [&](Bf16Query* r) { return PrepareBf16Query(q, D, group, D, r); },
             [&](const Bf16Query& r) {
               return DotRowsBf16Prepared(c.format, c.codes, c.meta, c.T, r, scores, ss);
             });
}
bool TryF16PiecesDot(const ChunkRef& c, const float* q, int group, float* scores, size_t ss,
                     attn::PrefetchLines* ahead) {
  return FromAheadInPieces(c, ahead, [&](const uint8_t* rows, int t0, int len) {
    DotChunkMulti(c.format, rows, nullptr, len, c.D, q, c.D, group, scores + t0, ss);
  });
}

void DotKFp32(const ChunkRef& c, const float* q, int group, float* scores, size_t ss,
              PreparedQuery&, attn::PrefetchLines*) {
  DotFp32(c, q, group, scores, ss);
}
void DotKInt16Query(const ChunkRef& c, const float* q, int group, float* scores, size_t ss,
                    PreparedQuery&, attn::PrefetchLines*) {
  if (!TryInt16Query(c, q, group, scores, ss)) DotFp32(c, q, group, scores, ss);
}
void DotKInt8Rows(const ChunkRef& c, const float* q, int group, float* scores, size_t ss,
                  PreparedQuery& pq, attn::PrefetchLines* ahead) {
  if (!TryInt8Rows(c, q, group, scores, ss, pq, ahead)) DotFp32(c, q, group, scores, ss);
}
void DotKQ8_0Rows(const ChunkRef& c, const float* q, int group, float* scores, size_t ss,
                  PreparedQuery& pq, attn::PrefetchLines* ahead) {
  if (!TryQ8_0Rows(c, q, group, scores, ss, pq, ahead)) DotFp32(c, q, group, scores, ss);
}
void DotKBf16Rows(const ChunkRef& c, const float* q, int group, float* scores, size_t ss,
                  PreparedQuery& pq, attn::PrefetchLines*) {
  if (!TryBf16Rows(c, q, group, scores, ss, pq)) DotFp32(c, q, group, scores, ss);
}
void DotKF16Pieces(const ChunkRef& c, const float* q, int group, float* scores, size_t ss,
                   PreparedQuery&, attn::PrefetchLines* ahead) {
  if (!TryF16PiecesDot(c, q, group, scores, ss, ahead)) DotFp32(c, q, group, scores, ss);
}
void DotKLadderRounded(const ChunkRef& c, const float* q, int group, float* scores, size_t ss,
                       PreparedQuery& pq, attn::PrefetchLines* ahead) {
  LadderDotK(c, q, group, scores, ss, true, pq, ahead);
}

// ---- V sums.

void AxpyFp32(const ChunkRef& c, const float* w, size_t ws, int group, float* acc) {
  AxpyChunkMulti(c.format, c.codes, c.meta, c.T, c.D, w, ws, group, acc, c.D);
}
bool TryF16PiecesAxpy(const ChunkRef& c, const float* w, size_t ws, int group, float* acc,
                      attn::PrefetchLines* ahead) {
  return FromAheadInPieces(c, ahead, [&](const uint8_t* rows, int t0, int len) {
    AxpyChunkMulti(c.format, rows, nullptr, len, c.D, w + t0, ws, group, acc, c.D);
  });
}

void AxpyVFp32(const ChunkRef& c, const float* w, size_t ws, int group, float* acc,
               attn::PrefetchLines*) {
  AxpyFp32(c, w, ws, group, acc);
}
void AxpyVInt16Weights(const ChunkRef& c, const float* w, size_t ws, int group, float* acc,
                       attn::PrefetchLines*) {
  if (!AxpyChunkMultiInt16Weights(c.format, c.codes, c.meta, c.T, c.D, w, ws, group, acc, c.D)) {
    AxpyFp32(c, w, ws, group, acc);
  }
}
void AxpyVInt8Rows(const ChunkRef& c, const float* w, size_t ws, int group, float* acc,
                   attn::PrefetchLines* ahead) {
  if (!AxpyRowsInt16Weights(c.format, c.codes, c.meta, c.T, c.D, w, ws, group, acc, c.D, ahead)) {
    AxpyFp32(c, w, ws, group, acc);
  }
}
void AxpyVQ8_0Rows(const ChunkRef& c, const float* w, size_t ws, int group, float* acc,
                   attn::PrefetchLines* ahead) {
  if (!AxpyRowsQ8_0Int16Weights(c.format, c.codes, c.meta, c.T, c.D, w, ws, group, acc, c.D,
                                ahead)) {
    AxpyFp32(c, w, ws, group, acc);
  }
}
void AxpyVBf16Rows(const ChunkRef& c, const float* w, size_t ws, int group, float* acc,
                   attn::PrefetchLines*) {
  if (!AxpyRowsBf16Weights(c.format, c.codes, c.meta, c.T, c.D, w, ws, group, acc, c.D)) {
    AxpyFp32(c, w, ws, group, acc);
  }
}
void AxpyVF16Pieces(const ChunkRef& c, const float* w, size_t ws, int group, float* acc,
                    attn::PrefetchLines* ahead) {
  if (!TryF16PiecesAxpy(c, w, ws, group, acc, ahead)) AxpyFp32(c, w, ws, group, acc);
}
void AxpyVLadderRounded(const ChunkRef& c, const float* w, size_t ws, int group, float* acc,
                        attn::PrefetchLines* ahead) {
  LadderAxpyV(c, w, ws, group, acc, true, ahead);
}
void AxpyVLadderPlain(const ChunkRef& c, const float* w, size_t ws, int group, float* acc,
                      attn::PrefetchLines* ahead) {
  LadderAxpyV(c, w, ws, group, acc, false, ahead);
}

// Whether a shape test passes for some chunk length: a store's chunks hold
// 1..64 tokens (cache/kv_store.h), so a candidate that fails for all of them
// at this D never runs.
template <class Applies>
bool ForSomeT(const Applies& applies) {
  for (int T = 1; T <= 64; ++T) {
    if (applies(T)) return true;
  }
  return false;
}

}  // namespace

bool KernelTakesLines(const quant::Format& f) {
  return f.kind == quant::Kind::kInt8 || f.kind == quant::Kind::kQ8_0 ||
         f.kind == quant::Kind::kF16;
}

void LadderDotK(const ChunkRef& c, const float* q, int group, float* scores, size_t ss,
                bool rounded_query, PreparedQuery& pq, attn::PrefetchLines* ahead) {
  if (!rounded_query) return DotFp32(c, q, group, scores, ss);
  if (TryInt16Query(c, q, group, scores, ss)) return;
  if (TryInt8Rows(c, q, group, scores, ss, pq, ahead)) return;
  if (TryQ8_0Rows(c, q, group, scores, ss, pq, ahead)) return;
  if (Bf16RowsPreferred() && TryBf16Rows(c, q, group, scores, ss, pq)) return;
  if (TryF16PiecesDot(c, q, group, scores, ss, ahead)) return;
  DotFp32(c, q, group, scores, ss);
}

void LadderAxpyV(const ChunkRef& c, const float* w, size_t ws, int group, float* acc,
                 bool rounded_weights, attn::PrefetchLines* ahead) {
  const quant::Format& f = c.format;
  if (rounded_weights &&
      (AxpyChunkMultiInt16Weights(f, c.codes, c.meta, c.T, c.D, w, ws, group, acc, c.D) ||
       AxpyRowsInt16Weights(f, c.codes, c.meta, c.T, c.D, w, ws, group, acc, c.D, ahead) ||
       AxpyRowsQ8_0Int16Weights(f, c.codes, c.meta, c.T, c.D, w, ws, group, acc, c.D, ahead) ||
       (Bf16RowsPreferred() &&
        AxpyRowsBf16Weights(f, c.codes, c.meta, c.T, c.D, w, ws, group, acc, c.D)))) {
    return;
  }
  if (TryF16PiecesAxpy(c, w, ws, group, acc, ahead)) return;
  AxpyFp32(c, w, ws, group, acc);
}

ChunkKernels SelectKernels(const quant::Format& f, int D, const KernelOptions& o) {
  ChunkKernels k;
  k.takes_lines = KernelTakesLines(f);
  const bool f16 = f.kind == quant::Kind::kF16;  // candidate 5: fp16 pieces
  const bool bf16 = Bf16RowsPreferred();

  // K: the candidates that can apply at this D, in ladder order.
  if (!o.rounded_query) {
    k.dot_k = DotKFp32;
    k.dot_path = DotPath::kFp32;
  } else {
    const bool c1 = ForSomeT([&](int T) { return Int16QueryApplies(f, T, D); });
    const bool c2 = ForSomeT([&](int T) { return Int16QueryRowsApply(f, T, D); });
    const bool c3 = ForSomeT([&](int T) { return Q8_0QueryRowsApply(f, T, D); });
    const bool c4 = bf16 && ForSomeT([&](int T) { return Bf16QueryRowsApply(f, T, D); });
    const int n = c1 + c2 + c3 + c4 + f16;
    if (n > 1) {
      k.dot_k = DotKLadderRounded;
      k.dot_path = DotPath::kLadder;
    } else if (c1) {
      k.dot_k = DotKInt16Query;
      k.dot_path = DotPath::kInt16Query;
    } else if (c2) {
      k.dot_k = DotKInt8Rows;
      k.dot_path = DotPath::kInt8Rows;
    } else if (c3) {
      k.dot_k = DotKQ8_0Rows;
      k.dot_path = DotPath::kQ8_0Rows;
    } else if (c4) {
      k.dot_k = DotKBf16Rows;
      k.dot_path = DotPath::kBf16Rows;
    } else if (f16) {
      k.dot_k = DotKF16Pieces;
      k.dot_path = DotPath::kF16Pieces;
    } else {
      k.dot_k = DotKFp32;
      k.dot_path = DotPath::kFp32;
    }
  }

  // V: the rounded candidates only when asked for; fp16 pieces either way.
  bool v1 = false, v2 = false, v3 = false, v4 = false;
  if (o.rounded_weights) {
    v1 = ForSomeT([&](int T) { return Int16WeightsApply(f, T, D); });
    v2 = ForSomeT([&](int T) { return Int16WeightsRowsApply(f, T, D); });
    v3 = ForSomeT([&](int T) { return Q8_0WeightsRowsApply(f, T, D); });
    v4 = bf16 && ForSomeT([&](int T) { return Bf16WeightsRowsApply(f, T, D); });
  }
  const int n = v1 + v2 + v3 + v4 + f16;
  if (n > 1) {
    k.axpy_v = o.rounded_weights ? AxpyVLadderRounded : AxpyVLadderPlain;
    k.axpy_path = AxpyPath::kLadder;
  } else if (v1) {
    k.axpy_v = AxpyVInt16Weights;
    k.axpy_path = AxpyPath::kInt16Weights;
  } else if (v2) {
    k.axpy_v = AxpyVInt8Rows;
    k.axpy_path = AxpyPath::kInt8Rows;
  } else if (v3) {
    k.axpy_v = AxpyVQ8_0Rows;
    k.axpy_path = AxpyPath::kQ8_0Rows;
  } else if (v4) {
    k.axpy_v = AxpyVBf16Rows;
    k.axpy_path = AxpyPath::kBf16Rows;
  } else if (f16) {
    k.axpy_v = AxpyVF16Pieces;
    k.axpy_path = AxpyPath::kF16Pieces;
  } else {
    k.axpy_v = AxpyVFp32;
    k.axpy_path = AxpyPath::kFp32;
  }
  return k;
}

const ChunkKernels& CachedKernels(const quant::Format& f, int D, const KernelOptions& o) {
  struct Entry {
    quant::Format f;
    int D;
    KernelOptions o;
    ChunkKernels k;
  };
  static std::mutex mu;
  static std::deque<Entry> entries;  // stable addresses; a few per model
  const std::lock_guard<std::mutex> lock(mu);
  for (const Entry& e : entries) {
    if (e.D == D && e.o.rounded_query == o.rounded_query &&
        e.o.rounded_weights == o.rounded_weights && e.f.kind == f.kind && e.f.bits == f.bits &&
        e.f.grouping == f.grouping && e.f.group == f.group && e.f.hadamard == f.hadamard) {
      return e.k;
    }
  }
  entries.push_back(Entry{f, D, o, SelectKernels(f, D, o)});
  return entries.back().k;
}

}  // namespace hqekv::attn
