// llama.cpp's KV cache types as a policy (`--kv llama:ctk=q8_0,ctv=q4_0`):
// K and V each in one of llama.cpp's `-ctk` / `-ctv` types — f16, q8_0,
// q5_1, q5_0, q4_1, q4_0 (quant/format.h: blocks of 32 values along
// head_dim of one token, fp16 scale, fp16 minimum for the _1 types) — so
// users can compare hqekv with what they run today.
//
// The default cache computes what llama.cpp's CPU build computes (checked
// side by side, docs/results/llamacpp-side/):
//   - every token's K and V are quantized when appended, before the batch
//     that brought them attends (no fp16 residual);
//   - `rot=on` (llama.cpp's default since its attention-rotation change):
//     when K's type is quantized and head_dim % 64 == 0, Q and K are
//     multiplied by the orthonormal Walsh-Hadamard matrix in blocks of the
//     largest power of two >= 64 dividing head_dim; when V's type is
//     quantized and head_dim % 64 == 0, V is rotated in blocks of 64 and the
//     attention output rotated back. `rot=off` is llama.cpp with
//     LLAMA_ATTN_ROT_DISABLE=1;
//   - its CPU flash attention's arithmetic: Q rounded to K's dot type (q8_0
//     values for quantized K, fp16 for f16 K, except the tiled batch path of
//     f16/f16 with >= 64 queries, which keeps Q in fp32); online softmax in
//     fp32; the V accumulator in fp16 when V is f16 outside that tiled path.
// `residual=32` is the earlier variant: a QuantCache (policy/quant_cache.h)
// with the newest < 32 tokens in an fp16 residual; it has no rotation.
//
// `bits=B` (TRUE bits per original element) picks, of the pairs whose cache
// holds <= B bits at every token count from min(64, ctx) to the cache's full
// context, the one with the lowest KL in a sensitivity table measured
// against the real llama.cpp's protocol (llama_cache.cc).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "policy/cache_context.h"
#include "policy/spec.h"
#include "quant/format.h"

namespace hqekv::policy {

// The type names `ctk=` / `ctv=` accept, widest first.
const std::vector<std::string>& LlamaCacheTypes();

// Bytes one layer of the per-token cache holds after n tokens: n records of
// (int32 position, n_kv_heads K rows, n_kv_heads V rows; a row is the
// format's codes and metadata for one token of one head), the page table
// (capacity bit_ceil(pages of 32 tokens) vector headers) and the layer
// object. Equal to Stats() and LayerAllocatedBytes() for every n (tested).
int64_t LlamaLayerBytes(const KvGeometry& g, const quant::Format& kf, const quant::Format& vf,
                        int64_t n);

// llama.cpp's rotation block for K (key = true) or V of a quantized type:
// 0 when head_dim % 64 != 0 (no rotation); K: the largest power of two
// >= 64 dividing head_dim; V: 64.
int LlamaRotationBlock(int head_dim, bool key);

// x[0..D) times the normalized Walsh-Hadamard matrix of size `block`, block
// by block (block divides D); applying it twice is the identity.
void LlamaRotate(float* x, int D, int block);

// The (K, V) formats a true-bits budget selects: the lowest-KL pair of the
// sensitivity table whose bits fit spec's bits= (see above); an error giving
// the achievable range when even q4_0/q4_0 does not fit.
Result<std::pair<quant::Format, quant::Format>> LlamaTypesForBudget(const PolicySpec& spec,
                                                                    const KvGeometry& g);

// The policy table's create function for `llama`.
Result<std::unique_ptr<KvCache>> CreateLlamaCache(const PolicySpec& spec, const KvGeometry& g,
                                                  const CacheContext& ctx);

}  // namespace hqekv::policy
