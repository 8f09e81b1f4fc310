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

// The memory headline: an uncompressed cache is never "larger than fp16"
// (its paging puts it a little over 16 bits), a compressed one says how many
// times smaller it is, bits per original element in both.
TEST(KvReport, MemorySummaryNamesUncompressedCachesAsSuch) {
  KvStats fp16;
  fp16.layers.resize(1);
  fp16.layers[0].k_tiers = {{"fp16", 10}};
  fp16.layers[0].v_tiers = {{"fp16", 10}};
  fp16.bytes = {2200, 0, 0, 0};  // 17.6 bits over 1000 elements
  fp16.kept_elements = fp16.original_elements = 1000;
  EXPECT_EQ(MemorySummary(fp16), "KV 2.1 KiB, uncompressed, 17.60 bits/element");
  KvStats q = fp16;
  q.layers[0].v_tiers = {{"fp16", 2}, {"u2", 8}};
  q.bytes = {500, 0, 0, 0};
  EXPECT_EQ(MemorySummary(q), "KV 0.5 KiB, 4.0x smaller than fp16, 4.00 bits/element");
  q.bytes = {2400, 0, 0, 0};  // a tiny head_dim can make metadata outweigh the savings
  EXPECT_EQ(MemorySummary(q), "KV 2.3 KiB, 1.2x the bytes of fp16, 19.20 bits/element");
}

}  // namespace
}  // namespace hqekv
