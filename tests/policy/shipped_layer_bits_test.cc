// Per-layer budgets shipped for a model (profiles/<model>/layer-bits.txt):
// hqekv:bits=B uses them unless layer_bits= or shipped=0 is given; another
// model identity is an error, a malformed file too.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "policy/factory.h"
#include "policy/hqekv_options.h"
#include "policy_harness.h"

namespace hqekv::policy {
namespace {

struct ShippedDir {
  explicit ShippedDir(const std::string& body) {
    root =
        std::filesystem::temp_directory_path() /
        ("hqekv_layer_bits_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
         "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(root / "m4");
    std::ofstream(root / "m4" / "layer-bits.txt") << body;
  }
  ~ShippedDir() {
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
  }
  std::filesystem::path root;
};

ModelIdentity M4() { return {"m4", "00000000000000aa", 2}; }

// hqekv options for model m4 (2 layers, D 64, ctx 2048) with `d` as its
// profiles folder.
struct M4Caches {
  explicit M4Caches(const ShippedDir& d)
      : g(testing::SmallGeometry(2, 4, 2, 64)), ctx(ForModel("m4", "00000000000000aa", 2)) {
    g.max_ctx = 2048;
    ctx.profiles_dir = d.root.string();
  }
  Result<HqekvOptions> Options(const std::string& spec) const {
    auto s = ParseSpec(spec);
    EXPECT_TRUE(s.ok()) << spec;
    return ResolveHqekvOptions(*s, g, ctx, false);
  }
  KvGeometry g;
  CacheContext ctx;
};

TEST(ShippedLayerBits, ReadsTheFileAndChecksTheIdentity) {
  ShippedDir d("# comment\nidentity 00000000000000aa\nlayer_bits=0.30/-0.30\n");
  auto v = ShippedLayerBits(d.root.string(), M4(), false);
  ASSERT_TRUE(v.ok()) << v.message();
  EXPECT_EQ(*v, "0.30/-0.30");
  ModelIdentity other = M4();
  other.identity = "00000000000000bb";
  auto bad = ShippedLayerBits(d.root.string(), other, false);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("shipped=0"), std::string::npos) << bad.message();
  EXPECT_TRUE(ShippedLayerBits(d.root.string(), other, true).ok());  // force=1
  ModelIdentity none = M4();
  none.name = "absent";
  auto empty = ShippedLayerBits(d.root.string(), none, false);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, "");
  ShippedDir junk("identity 00000000000000aa\nlayers 0.3/-0.3\n");
  auto j = ShippedLayerBits(junk.root.string(), M4(), false);
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.message().find("unexpected line"), std::string::npos) << j.message();
}

TEST(ShippedLayerBits, BitsUsesThemUnlessTheSpecSaysOtherwise) {
  ShippedDir d("identity 00000000000000aa\nlayer_bits=0.30/-0.30\n");
  M4Caches m4(d);
  auto opts = [&](const std::string& spec) { return m4.Options(spec); };
  auto shipped = opts("hqekv:bits=3.4");
  ASSERT_TRUE(shipped.ok()) << shipped.message();
  EXPECT_EQ(shipped->layer_bits, (std::vector<double>{0.3, -0.3}));
  auto own = opts("hqekv:bits=3.4,layer_bits=-0.1/0.1");
  ASSERT_TRUE(own.ok()) << own.message();
  EXPECT_EQ(own->layer_bits, (std::vector<double>{-0.1, 0.1}));
  auto off = opts("hqekv:bits=3.4,shipped=0");
  ASSERT_TRUE(off.ok()) << off.message();
  EXPECT_TRUE(off->layer_bits.empty());
  auto ratios = opts("hqekv:ratios=0.5/0.5/0/0");  // not bits=: no per-layer budgets
  ASSERT_TRUE(ratios.ok()) << ratios.message();
  EXPECT_TRUE(ratios->layer_bits.empty());
  m4.ctx.model->identity = "00000000000000bb";
  EXPECT_FALSE(opts("hqekv:bits=3.4").ok());
  EXPECT_TRUE(opts("hqekv:bits=3.4,shipped=0").ok());
}

// A budget below the shipped offsets (B + d <= 0 on a layer) is judged
// without them: the user gave no layer_bits=, so no error may name it; the
// same offsets given by the user are refused with the layer's budget.
TEST(ShippedLayerBits, TinyBudgetsDropTheShippedOffsetsButNotTheUsers) {
  ShippedDir d("identity 00000000000000aa\nlayer_bits=0.30/-0.30\n");
  M4Caches m4(d);
  auto opts = [&](const std::string& spec) { return m4.Options(spec); };
  auto tiny = opts("hqekv:bits=0.2");
  ASSERT_TRUE(tiny.ok()) << tiny.message();
  EXPECT_TRUE(tiny->layer_bits.empty());
  auto at_edge = opts("hqekv:bits=0.31");
  ASSERT_TRUE(at_edge.ok()) << at_edge.message();
  EXPECT_EQ(at_edge->layer_bits, (std::vector<double>{0.3, -0.3}));
  auto own = opts("hqekv:bits=0.2,layer_bits=0.3/-0.3");
  ASSERT_FALSE(own.ok());
  EXPECT_NE(own.message().find("leaves a layer at"), std::string::npos) << own.message();
}

// ForModel looks for profiles/ where the bundled data is found (core/file.h
// FindBundled: $HQEKV_DATA_DIR first), not in the working directory.
TEST(ShippedLayerBits, ForModelLooksWhereTheBundledDataIs) {
  ShippedDir d("identity 00000000000000aa\nlayer_bits=0.30/-0.30\n");
  const std::filesystem::path data = d.root / "data";
  std::filesystem::create_directories(data / "profiles");
  std::filesystem::rename(d.root / "m4", data / "profiles" / "m4");
  const char* old = std::getenv("HQEKV_DATA_DIR");
  const std::string saved = old ? old : "";
  ::setenv("HQEKV_DATA_DIR", data.c_str(), 1);
  const CacheContext ctx = ForModel("m4", "00000000000000aa", 2);
  if (old) {
    ::setenv("HQEKV_DATA_DIR", saved.c_str(), 1);
  } else {
    ::unsetenv("HQEKV_DATA_DIR");
  }
  EXPECT_TRUE(std::filesystem::equivalent(ctx.profiles_dir, data / "profiles")) << ctx.profiles_dir;
  auto v = ShippedLayerBits(ctx.profiles_dir, M4(), false);
  ASSERT_TRUE(v.ok()) << v.message();
  EXPECT_EQ(*v, "0.30/-0.30");
}

}  // namespace
}  // namespace hqekv::policy
