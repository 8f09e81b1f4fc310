// KV statistics in the C API's two forms: the flat struct and the JSON report.
#include <nlohmann/json.hpp>

#include "capi/handles.h"

namespace hqekv::capi {
namespace {

nlohmann::json BytesJson(const KvBytes& b) {
  return {{"total", b.total()},
          {"payload", b.payload},
          {"metadata", b.metadata},
          {"bookkeeping", b.bookkeeping},
          {"residual", b.residual}};
}

}  // namespace

void FillStats(const KvStats& st, hqekv_kv_stats* out) {
  out->bytes_total = st.bytes.total();
  out->bytes_payload = st.bytes.payload;
  out->bytes_metadata = st.bytes.metadata;
  out->bytes_bookkeeping = st.bytes.bookkeeping;
  out->bytes_residual = st.bytes.residual;
  out->kept_elements = st.kept_elements;
  out->original_elements = st.original_elements;
  out->true_bits = st.true_bits();
  out->bits_per_original = st.bits_per_original();
  out->n_layers = static_cast<int32_t>(st.layers.size());
}

std::string StatsJson(const KvStats& st, const std::string& describe) {
  nlohmann::json layers = nlohmann::json::array();
  for (const KvLayerStats& l : st.layers) {
    layers.push_back({{"bytes", BytesJson(l.bytes)},
                      {"kept_tokens", l.kept_tokens},
                      {"k_tiers", l.k_tiers},
                      {"v_tiers", l.v_tiers}});
  }
  nlohmann::json j = {{"describe", describe},
                      {"bytes", BytesJson(st.bytes)},
                      {"kept_elements", st.kept_elements},
                      {"original_elements", st.original_elements},
                      {"true_bits", st.true_bits()},
                      {"bits_per_original", st.bits_per_original()},
                      {"layers", std::move(layers)}};
  return j.dump();
}

}  // namespace hqekv::capi
