// The architecture table (io/arch.h) drives loading: every row's traits
// reach the loaded config, and an unknown name is refused with the list.
#include "io/arch.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "io/model_source.h"
#include "io/synthetic.h"
#include "../temp_path.h"

namespace hqekv {
namespace {

TEST(ArchTable, RowsAndLookup) {
  const ArchTraits* llama = FindArch("llama");
  ASSERT_NE(llama, nullptr);
  EXPECT_EQ(llama->rope, RopeStyle::kNormal);
  EXPECT_FALSE(llama->qk_norm);
  const ArchTraits* qwen3 = FindArch("qwen3");
  ASSERT_NE(qwen3, nullptr);
  EXPECT_EQ(qwen3->rope, RopeStyle::kNeoX);
  EXPECT_TRUE(qwen3->qk_norm);
  EXPECT_TRUE(FindArch("qwen2")->qkv_bias);
  EXPECT_EQ(FindArch("gpt2"), nullptr);
  EXPECT_EQ(FindArch("Llama"), nullptr);  // names are exact, as in GGUF
  EXPECT_EQ(SupportedArchNames(), "llama, qwen2, qwen3, gemma3, gemma2, phi3");
}

// A synthetic file of each architecture loads with that row's traits.
TEST(ArchTable, EveryRowLoadsFromASyntheticFile) {
  for (const char* name : {"llama", "qwen2", "qwen3", "gemma3", "gemma2", "phi3"}) {
    SyntheticSpec s;
    s.arch = name;
    s.n_layers = 1;
    s.d_model = 64;
    s.n_heads = 2;
    s.n_kv_heads = 1;
    s.d_ff = 64;
    const std::string path = hqekv::test::TempPath("arch_") + name + ".gguf";
    ASSERT_TRUE(WriteSyntheticGguf(s, path, /*overwrite=*/true).ok());
    auto m = LoadModel(path);
    ASSERT_TRUE(m.ok()) << m.message();
    const ArchTraits* a = FindArch(name);
    EXPECT_EQ((*m)->config.rope, a->rope) << name;
    EXPECT_EQ((*m)->config.qk_norm, a->qk_norm) << name;
    EXPECT_EQ((*m)->config.attn_bias, a->qkv_bias) << name;
    EXPECT_EQ((*m)->config.gemma_block, a->gemma_block) << name;
    EXPECT_EQ((*m)->config.fused_qkv, a->fused) << name;
    // The tensors the row asks for: post norms (gemma), fused matrices (phi3).
    EXPECT_EQ((*m)->Find("blk.0.post_ffw_norm.weight") != nullptr, a->gemma_block) << name;
    EXPECT_EQ((*m)->Find("blk.0.attn_qkv.weight") != nullptr, a->fused) << name;
    EXPECT_EQ((*m)->Find("blk.0.ffn_gate.weight") == nullptr, a->fused) << name;
    std::remove(path.c_str());
  }
  SyntheticSpec bad;
  bad.arch = "mamba";
  auto st = WriteSyntheticGguf(bad, hqekv::test::TempPath("arch_bad.gguf"), true);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'mamba' (supported: llama, qwen2, qwen3, gemma3, gemma2, phi3)"),
            std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace hqekv
