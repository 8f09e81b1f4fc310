#include "policy/llama_cache.h"

#include <cstdio>

#include "policy/quant_cache.h"
#include "policy/true_bits.h"

namespace hqekv::policy {
namespace {

// Tokens wait in fp16 until a whole chunk can be sealed, as int8 / fp8.
constexpr int kResidual = 32;

quant::Format TypeFormat(const std::string& name) {
  if (name == "f16") return quant::F16();
  // The table's choices are exactly these names (LlamaCacheTypes).
  auto f = quant::ParseFormat(name);
  return f.ok() ? *f : quant::F16();
}

double PairBits(const KvGeometry& g, const quant::Format& kf, const quant::Format& vf) {
  const int64_t n = g.max_ctx;
  return LayerBits(LayerLayout{g.n_kv_heads, g.head_dim}, QuantLayerBytes(g, kf, vf, kResidual, n),
                   n);
}

}  // namespace

const std::vector<std::string>& LlamaCacheTypes() {
  static const std::vector<std::string> types = {"f16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0"};
  return types;
}

Result<std::pair<quant::Format, quant::Format>> LlamaTypesForBudget(const PolicySpec& spec,
                                                                    const KvGeometry& g) {
  const double budget = spec.Num("bits");
  double best = -1, lo = 1e30, hi = 0;
  std::pair<quant::Format, quant::Format> pick;
  for (const std::string& k : LlamaCacheTypes()) {  // widest K first: it wins ties
    for (const std::string& v : LlamaCacheTypes()) {
      const quant::Format kf = TypeFormat(k), vf = TypeFormat(v);
      const double b = PairBits(g, kf, vf);
      lo = std::min(lo, b);
      hi = std::max(hi, b);
      if (b <= budget && b > best) {
        best = b;
        pick = {kf, vf};
      }
    }
  }
  if (best >= 0) return pick;
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "budget %s true bits per element is below the cheapest llama.cpp cache types: "
                "the K/V pairs hold %s (q4_0/q4_0 .. f16/f16, fp16 residual of up to %d tokens "
                "and page slack included); give bits >= %.3f or name the types with ctk= / ctv=",
                spec.Text("bits").c_str(), AchievableRange(lo, hi, g.max_ctx).c_str(), kResidual,
                lo);
  return MakeError("KV policy '" + spec.Canonical() + "': " + buf);
}

Result<std::unique_ptr<KvCache>> CreateLlamaCache(const PolicySpec& spec, const KvGeometry& g,
                                                  const CacheContext&) {
  HQEKV_RETURN_IF_ERROR(CheckGeometry(g));
  quant::Format kf = TypeFormat(spec.Text("ctk")), vf = TypeFormat(spec.Text("ctv"));
  std::string describe = spec.Canonical();
  if (spec.Given("bits")) {
    HQEKV_ASSIGN_OR_RETURN(auto pair, LlamaTypesForBudget(spec, g));
    kf = pair.first;
    vf = pair.second;
    describe += " (ctk=" + quant::FormatName(kf) + ",ctv=" + quant::FormatName(vf) + ")";
  }
  for (const quant::Format& f : {kf, vf}) {
    if (Status s = quant::Validate(f, kResidual, g.head_dim); !s.ok()) {
      return MakeError("KV policy '" + spec.Canonical() + "': " + s.message() +
                       " (llama.cpp's quantized cache types need head_dim % 32 == 0; f16 works "
                       "for any head_dim)");
    }
  }
  return QuantCache::Make(g, std::move(describe), kf, vf, kResidual);
}

}  // namespace hqekv::policy
