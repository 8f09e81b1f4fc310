// Calibration profiles (policy/profile.h): the JSON format, the check
// against a model at cache creation, and in-memory per-layer ratios.
#include "policy/profile.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "policy/factory.h"
#include "policy/hqekv_cache.h"
#include "../temp_path.h"

namespace hqekv::policy {
namespace {

Profile SampleProfile() {
  Profile p;
  p.model_name = "stories260K";
  p.model_identity = "0123456789abcdef";
  p.n_layers = 2;
  p.budget_bits = 2.0;
  p.ratios = {0.1, 0.6, 0.2, 0.1};
  p.per_layer = {{0.1, 0.5, 0.3, 0.1}, {0.1, 0.7, 0.1, 0.1}};
  p.loss = 0.9;
  p.kl = 0.1;
  p.trials = 3;
  p.seed = 42;
  p.calib_hash = "fnv1a64:e71fa2190541574b";
  p.trial_log = {{{0.1, 0.6, 0.2, 0.1}, 0, 0, 0.9, 0.1, 2.01},
                 {{NAN, NAN, 0.9, 0.9}, 0, 0, INFINITY, NAN, NAN}};
  return p;
}

TEST(Profile, RoundTripsThroughJson) {
  const Profile p = SampleProfile();
  auto q = ProfileFromJson(ProfileToJson(p), "mem");
  ASSERT_TRUE(q.ok()) << q.message();
  EXPECT_EQ(q->model_identity, p.model_identity);
  EXPECT_DOUBLE_EQ(q->ratios.r2, 0.6);
  ASSERT_EQ(q->per_layer.size(), 2u);
  EXPECT_DOUBLE_EQ(q->per_layer[0].r1, 0.3);
  EXPECT_EQ(q->seed, 42u);
  ASSERT_EQ(q->trial_log.size(), 2u);
  EXPECT_TRUE(std::isinf(q->trial_log[1].loss));  // infeasible logged as null, read back as +inf
  EXPECT_EQ(ProfileToJson(*q), ProfileToJson(p));
}

TEST(Profile, RejectsMalformedProfiles) {
  EXPECT_FALSE(ProfileFromJson("not json", "x").ok());
  EXPECT_FALSE(ProfileFromJson("{}", "x").ok());
  auto bad_sum =
      ProfileFromJson(R"({"ratios": {"r4": 0.5, "r2": 0.5, "r1": 0.5, "r0": 0}})", "x.json");
  ASSERT_FALSE(bad_sum.ok());
  EXPECT_NE(bad_sum.message().find("x.json"), std::string::npos);
  EXPECT_FALSE(
      ProfileFromJson(R"({"ratios": {"r4": 1.5, "r2": -0.5, "r1": 0, "r0": 0}})", "x").ok());
  EXPECT_FALSE(
      ProfileFromJson(R"({"ratios": {"r4": 1, "r2": 0, "r1": 0, "r0": 0}, "per_layer": [[1, 0]]})",
                      "x")
          .ok());
  EXPECT_TRUE(ProfileFromJson(R"({"ratios": {"r4": 1, "r2": 0, "r1": 0, "r0": 0}})", "x").ok());
}

TEST(Profile, RefusesAnotherModelUnlessForced) {
  const Profile p = SampleProfile();
  Status s = CheckProfileForModel(p, "p.json", "ffffffffffffffff", 2, false);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("stories260K"), std::string::npos);
  EXPECT_NE(s.message().find("force=1"), std::string::npos);
  EXPECT_TRUE(CheckProfileForModel(p, "p.json", "ffffffffffffffff", 2, true).ok());
  EXPECT_TRUE(CheckProfileForModel(p, "p.json", "0123456789abcdef", 2, false).ok());
  EXPECT_FALSE(CheckProfileForModel(p, "p.json", "0123456789abcdef", 5, true).ok());  // layer count
}

TEST(Profile, SaveRefusesToOverwriteAndLoadReportsMissingFiles) {
  const std::string dir = hqekv::test::TempPath("calib_profile_test");
  std::filesystem::remove_all(dir);
  const std::string path = dir + "/p.json";
  ASSERT_TRUE(SaveProfile(SampleProfile(), path, false).ok());
  Status again = SaveProfile(SampleProfile(), path, false);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.message().find("--force"), std::string::npos);
  EXPECT_TRUE(SaveProfile(SampleProfile(), path, true).ok());
  auto back = LoadProfile(path);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->model_name, "stories260K");
  // A --kv spec naming the profile is checked against the model when the
  // cache is created (and by CheckSpecForModel, without a geometry).
  const KvGeometry geo{2, 2, 1, 8, 128};
  const CacheContext own = ForModel("stories260K", "0123456789abcdef", 2);
  const CacheContext other = ForModel("other", "ffffffffffffffff", 2);
  auto make = [&](const std::string& text, const CacheContext& ctx) {
    auto spec = ParseSpec(text);
    EXPECT_TRUE(spec.ok()) << text;
    return CreateCache(*spec, geo, ctx);
  };
  auto ok = make("hqekv:profile=" + path + ",m=20", own);
  ASSERT_TRUE(ok.ok()) << ok.message();
  EXPECT_EQ((*ok)->Describe(), "hqekv:profile=" + path + ",m=20");
  auto refused = make("hqekv:profile=" + path, other);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("not for this model"), std::string::npos);
  EXPECT_NE(refused.message().find(",force=1"), std::string::npos);
  EXPECT_FALSE(CheckSpecForModel(*ParseSpec("hqekv:profile=" + path), other).ok());
  EXPECT_TRUE(CheckSpecForModel(*ParseSpec("hqekv:profile=" + path), own).ok());
  // force=1 (or the context's force) accepts it; it is not part of the name.
  auto forced = make("hqekv:profile=" + path + ",force=1", other);
  ASSERT_TRUE(forced.ok()) << forced.message();
  EXPECT_EQ((*forced)->Describe(), "hqekv:profile=" + path);
  CacheContext forced_ctx = other;
  forced_ctx.force = true;
  EXPECT_TRUE(make("hqekv:profile=" + path, forced_ctx).ok());
  // No model in the context: only the shape is checked.
  EXPECT_TRUE(make("hqekv:profile=" + path, CacheContext{}).ok());
  EXPECT_FALSE(
      CreateCache(*ParseSpec("hqekv:profile=" + path), KvGeometry{3, 2, 1, 8, 128}, CacheContext{})
          .ok());  // 2 per_layer rows, 3 layers
  EXPECT_TRUE(CheckSpecForModel(*ParseSpec("kivi:nominal_bits=2"), other).ok());
  EXPECT_FALSE(CheckSpecForModel(*ParseSpec("hqekv:profile=" + dir + "/none.json"), own).ok());
  auto missing = LoadProfile(dir + "/none.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("none.json"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(Profile, LayerRatiosRescaleEachRow) {
  Profile p;
  p.ratios = {0.5, 0.3, 0.1, 0.1005};
  const std::vector<TierRatios> g = LayerRatios(p, 3);
  ASSERT_EQ(g.size(), 3u);
  EXPECT_DOUBLE_EQ(g[2].r4 + g[2].r2 + g[2].r1 + g[2].r0, 1.0);
  p.per_layer = {{1, 0, 0, 0}, {0.2, 0.2, 0.2, 0.4}};
  const std::vector<TierRatios> l = LayerRatios(p, 2);
  EXPECT_DOUBLE_EQ(l[1].r0, 0.4);
}

// Calibration trials pass per-layer ratios in memory: the same cache as the
// profile file that held them.
TEST(Profile, InMemoryLayerRatiosEqualAProfileFile) {
  const std::string path = hqekv::test::TempPath("hqekv_layer_ratios_test.json");
  Profile p;
  p.ratios = {0.4, 0.4, 0.1, 0.1};
  p.per_layer = {{0.5, 0.3, 0.1, 0.1}, {0.3, 0.5, 0.1, 0.1}};
  ASSERT_TRUE(SaveProfile(p, path, true).ok());
  const KvGeometry geo{2, 2, 1, 8, 128};
  auto from_file = MakeKvCache("hqekv:profile=" + path, geo);
  ASSERT_TRUE(from_file.ok()) << from_file.message();
  CacheContext ctx;
  ctx.layer_ratios = p.per_layer;
  auto in_memory = CreateCache(*ParseSpec("hqekv"), geo, ctx);
  ASSERT_TRUE(in_memory.ok()) << in_memory.message();
  for (int l = 0; l < 2; ++l) {
    const TierRatios a = dynamic_cast<const HqekvCache&>(**from_file).ratios(l);
    const TierRatios b = dynamic_cast<const HqekvCache&>(**in_memory).ratios(l);
    EXPECT_EQ(a.r4, b.r4);
    EXPECT_EQ(a.r2, b.r2);
    EXPECT_EQ(a.r1, b.r1);
    EXPECT_EQ(a.r0, b.r0);
  }
  ctx.layer_ratios.pop_back();  // one row per layer
  EXPECT_FALSE(CreateCache(*ParseSpec("hqekv"), geo, ctx).ok());
  ctx.layer_ratios = {{0.5, 0.5, 0.5, 0}, {0.5, 0.5, 0, 0}};  // sums to 1.5
  EXPECT_FALSE(CreateCache(*ParseSpec("hqekv"), geo, ctx).ok());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace hqekv::policy
