#include "cache/kv_report.h"

#include <gtest/gtest.h>

namespace hqekv {
namespace {

TEST(KvReport, ListsEveryLayerTierAndByteBucket) {
  KvStats st;
  st.layers.resize(2);
  st.layers[0].k_tiers = {{"fp16", 64}, {"u2", 320}};
  st.layers[0].v_tiers = {{"evicted", 32}, {"n1", 96}};
  st.layers[0].bytes = {100, 20, 8, 4};
  st.layers[1].bytes = {1, 2, 3, 4};
  st.bytes = {101, 22, 11, 8};
  st.kept_elements = 71;  // 142 bytes * 8 / 71 = 16 bits
  st.original_elements = 142;
  const std::string r = FormatKvReport(st);
  EXPECT_NE(r.find("layer 0: kept 0 | K fp16=64 u2=320 | V evicted=32 n1=96 | 132 B (payload 100, "
                   "metadata 20, "
                   "bookkeeping 8, residual 4)"),
            std::string::npos)
      << r;
  EXPECT_NE(r.find("layer 1: kept 0 | K - | V - | 10 B"), std::string::npos) << r;
  EXPECT_NE(r.find("total: 142 B"), std::string::npos) << r;
  EXPECT_NE(r.find("16.000 true bits/element, 8.000 bits/original element"), std::string::npos)
      << r;
}

}  // namespace
}  // namespace hqekv
