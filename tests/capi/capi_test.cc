// The C API against the C++ it wraps (the header compiled as C++ here; as
// C99 in c_api_test.c): quantize / dequantize byte-identical to
// quant::QuantizeChunk / DequantizeChunk for every format, and the standalone
// KV store equal to a cache made by MakeKvCache.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "hqekv/hqekv.h"
#include "policy/factory.h"
#include "quant/format.h"
#include "quant/format_traits.h"

namespace hqekv {
namespace {

// Every format name the parser accepts in its plain form, plus grouped and
// rotated variants.
std::vector<std::string> AllFormatNames() {
  size_t n = 0;
  const quant::FormatTraits* t = quant::AllTraits(&n);
  std::vector<std::string> names;
  for (size_t i = 0; i < n; ++i) {
    std::vector<std::string> base;
    if (!t[i].bits_in_name) {
      base.push_back(t[i].name);
    } else {
      for (int b = 1; b <= 16; ++b) {
        if (t[i].legal_bits & (uint64_t{1} << b))
          base.push_back(std::string(t[i].name) + std::to_string(b));
      }
    }
    for (const std::string& s : base) {
      names.push_back(s);
      if (t[i].grouped) {
        names.push_back(s + ":chan");
        names.push_back(s + ":g=16:had");
      }
    }
  }
  return names;
}

TEST(CapiQuant, EqualsTheCxxEntryPointsForEveryFormat) {
  constexpr int T = 32, D = 64;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.5f);
  std::vector<float> src(T * D);
  for (float& x : src) x = nd(rng);
  const std::vector<std::string> names = AllFormatNames();
  ASSERT_GE(names.size(), 12u);
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    auto f = quant::ParseFormat(name);
    ASSERT_TRUE(f.ok()) << f.message();
    size_t cb = 0, mb = 0;
    ASSERT_EQ(hqekv_quant_sizes(name.c_str(), T, D, &cb, &mb), HQEKV_OK) << hqekv_last_error();
    ASSERT_EQ(cb, quant::CodeBytes(*f, T, D));
    ASSERT_EQ(mb, quant::MetaBytes(*f, T, D));
    std::vector<uint8_t> codes(cb), meta(mb + 1), ref_codes(cb), ref_meta(mb + 1);
    ASSERT_EQ(hqekv_quantize(name.c_str(), src.data(), T, D, codes.data(), cb, meta.data(), mb),
              HQEKV_OK)
        << hqekv_last_error();
    quant::QuantizeChunk(*f, src.data(), T, D, ref_codes.data(), ref_meta.data());
    EXPECT_EQ(codes, ref_codes);
    EXPECT_EQ(meta, ref_meta);
    std::vector<float> out(T * D), ref_out(T * D);
    ASSERT_EQ(hqekv_dequantize(name.c_str(), codes.data(), cb, meta.data(), mb, T, D, out.data()),
              HQEKV_OK);
    quant::DequantizeChunk(*f, ref_codes.data(), ref_meta.data(), T, D, ref_out.data());
    EXPECT_EQ(0, std::memcmp(out.data(), ref_out.data(), out.size() * sizeof(float)));
  }
}

TEST(CapiKv, EqualsACacheMadeByMakeKvCache) {
  const hqekv_kv_geometry cg = {2, 4, 2, 32, 64};
  KvGeometry g;
  g.n_layers = 2;
  g.n_q_heads = 4;
  g.n_kv_heads = 2;
  g.head_dim = 32;
  g.max_ctx = 64;
  for (const char* spec : {"fp16", "kivi:nominal_bits=2", "hqekv:nominal_bits=3.2", "h2o:keep=0.5",
                           "llama:ctk=q8_0,ctv=q4_1"}) {
    SCOPED_TRACE(spec);
    hqekv_kv* kv = nullptr;
    ASSERT_EQ(hqekv_kv_create(spec, &cg, &kv), HQEKV_OK) << hqekv_last_error();
    auto ref = MakeKvCache(spec, g);
    ASSERT_TRUE(ref.ok()) << ref.message();
    std::mt19937 rng(3);
    std::normal_distribution<float> nd;
    // A 24-token prompt, then 20 decoded tokens; both see the same calls.
    int pos = 0;
    for (int step = 0; step < 21; ++step) {
      const int n = step == 0 ? 24 : 1;
      std::vector<int32_t> p(n);
      for (int i = 0; i < n; ++i) p[i] = pos + i;
      for (int l = 0; l < 2; ++l) {
        std::vector<float> k(n * 2 * 32), v(n * 2 * 32), q(n * 4 * 32), out(q.size()),
            ref_out(q.size());
        for (float& x : k) x = nd(rng);
        for (float& x : v) x = nd(rng);
        for (float& x : q) x = nd(rng);
        ASSERT_EQ(hqekv_kv_append(kv, l, k.data(), v.data(), p.data(), n), HQEKV_OK)
            << hqekv_last_error();
        ASSERT_TRUE((*ref)->Append(l, k.data(), v.data(), p.data(), n).ok());
        ASSERT_EQ(hqekv_kv_attend(kv, l, q.data(), p.data(), n, out.data()), HQEKV_OK)
            << hqekv_last_error();
        ASSERT_TRUE((*ref)->Attend(l, q.data(), p.data(), n, ref_out.data()).ok());
        ASSERT_EQ(0, std::memcmp(out.data(), ref_out.data(), out.size() * sizeof(float)));
      }
      ASSERT_EQ(hqekv_kv_end_batch(kv, n, step == 0), HQEKV_OK) << hqekv_last_error();
      ASSERT_TRUE((*ref)->EndBatch(n, step == 0).ok());
      pos += n;
    }
    hqekv_kv_stats st{};
    ASSERT_EQ(hqekv_kv_stats_get(kv, &st), HQEKV_OK);
    const KvStats rs = (*ref)->Stats();
    EXPECT_EQ(st.bytes_total, rs.bytes.total());
    EXPECT_EQ(st.kept_elements, rs.kept_elements);
    EXPECT_EQ(st.original_elements, rs.original_elements);
    EXPECT_EQ(st.true_bits, rs.true_bits());
    EXPECT_STREQ(hqekv_kv_describe(kv), (*ref)->Describe().c_str());
    hqekv_kv_free(kv);
  }
}

TEST(CapiErrors, LastErrorIsPerThreadAndNamesTheInput) {
  hqekv_kv* kv = nullptr;
  const hqekv_kv_geometry g = {1, 1, 1, 8, 8};
  EXPECT_EQ(hqekv_kv_create("kivi:nominal_bits=7", &g, &kv), HQEKV_ERR_SPEC);
  EXPECT_NE(std::string(hqekv_last_error()).find("bits"), std::string::npos) << hqekv_last_error();
  std::string other;
  std::thread([&] { other = hqekv_last_error(); }).join();
  EXPECT_EQ(other, "");
}

}  // namespace
}  // namespace hqekv
