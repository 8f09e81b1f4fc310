#include "eval/run/harness.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "eval/run/cell_store.h"
#include "eval/report/report.h"
#include "eval/run/suite.h"
#include "policy/factory.h"
#include "toy_model.h"

namespace hqekv::eval {
namespace {
namespace fs = std::filesystem;

Suite TinySuite() {
  Suite s;
  s.name = "test";
  auto q = [](TaskKind k, int ctx, double depth, int span) {
    QualityTask t;
    t.spec.kind = k;
    t.spec.context_tokens = ctx;
    t.spec.depth = depth;
    t.spec.span_tokens = span;
    t.corpus = "tinystories";
    t.seeds = 2;
    return t;
  };
  s.tasks = {q(TaskKind::kLm, 160, 0, 32), q(TaskKind::kCopy, 320, 0.2, 24),
             q(TaskKind::kPasskey, 400, 0.5, 48)};
  s.speed.contexts = {64};
  s.speed.decode_tokens = 4;
  s.policies = ExpandPolicies({"fp16", "fp32"}, {2});
  return s;
}

std::string TempDir(const std::string& name) {
  const fs::path d =
      fs::temp_directory_path() / ("hqekv_eval_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d.string();
}

EvalOptions Options(const std::string& dir) {
  EvalOptions o;
  o.out_dir = dir;
  o.text_root = HQEKV_SOURCE_DIR;
  o.progress = false;
  return o;
}

TEST(Harness, Fp16IsTheReferenceAndCellsAreCached) {
  testing::ToyModel model;
  const std::string dir = TempDir("cache");
  auto run = RunEval(model, TinySuite(), Options(dir), MakeKvCache);
  ASSERT_TRUE(run.ok()) << run.message();
  EXPECT_EQ(run->computed, 8);  // 3 tasks x 2 policies + 1 speed context x 2 policies
  EXPECT_EQ(run->reused, 0);
  bool saw_fp32_lm = false;
  for (const auto& c : run->cells) {
    EXPECT_TRUE(c.error.empty()) << c.policy << " " << c.task_key << ": " << c.error;
    EXPECT_EQ(c.hash.size(), 16u);
    if (c.kind != "quality") {
      EXPECT_GT(c.decode_tok_s, 0);
      EXPECT_GT(c.kv_bytes, 0);
      continue;
    }
    EXPECT_EQ(c.n, 2);
    if (c.policy == "fp16") {
      EXPECT_EQ(c.kl, 0.0) << c.task;
      EXPECT_EQ(c.agreement, 1.0) << c.task;
      // fp16 payload plus bookkeeping (the plain cache keeps an int32 position per token and layer:
      // 32 bits / (2 x 8 elements) = 2 bits with this geometry), as allocated: 32-token pages
      // (at most 31 tokens of slack over these 160..400-token cells) and page tables.
      EXPECT_GE(c.true_bits, 18.0);
      EXPECT_LE(c.true_bits, 18.0 * (1 + 31.0 / 160) * 1.05);
    }
    if (c.policy == "fp32" && c.task == "lm") {
      saw_fp32_lm = true;
      EXPECT_GE(c.kl, 0.0);
      EXPECT_LT(c.kl, 1e-3);  // fp16 rounding of K/V only
      EXPECT_GT(c.true_bits, 30.0);
      EXPECT_GT(c.steps, 0);
      EXPECT_GT(c.ppl, 1.0);
    }
  }
  EXPECT_TRUE(saw_fp32_lm);

  // Same arguments again: every cell comes from DIR/cells, identical.
  auto again = RunEval(model, TinySuite(), Options(dir), MakeKvCache);
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_EQ(again->reused, 8);
  EXPECT_EQ(again->computed, 0);
  ASSERT_EQ(again->cells.size(), run->cells.size());
  for (size_t i = 0; i < run->cells.size(); ++i) {
    EXPECT_EQ(again->cells[i].hash, run->cells[i].hash);
    EXPECT_EQ(again->cells[i].kl, run->cells[i].kl);
    EXPECT_EQ(again->cells[i].accuracy, run->cells[i].accuracy);
  }
  // A different policy list only computes the new cells.
  Suite more = TinySuite();
  more.policies = ExpandPolicies({"fp16", "fp32"}, {2});
  more.speed.contexts = {64, 96};
  auto third = RunEval(model, more, Options(dir), MakeKvCache);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->computed, 2);

  // Reports.
  ASSERT_TRUE(WriteReports(*run, dir).ok());
  for (const char* f : {"results.json", "report.md", "report.html"})
    EXPECT_TRUE(fs::exists(dir + "/" + f)) << f;
  std::ifstream h(dir + "/report.html");
  std::stringstream ss;
  ss << h.rdbuf();
  const std::string html = ss.str();
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http://") == std::string::npos ||
                html.find("http://www.w3.org/2000/svg") != std::string::npos,
            true);
  fs::remove_all(dir);
}

TEST(Harness, UnknownPolicyFailsFast) {
  testing::ToyModel model;
  Suite s = TinySuite();
  s.policies = ExpandPolicies({"fp16", "nosuch:bits=2"}, {});
  auto run = RunEval(model, s, Options(""), MakeKvCache);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.message().find("nosuch"), std::string::npos);
}

TEST(Harness, AnImpossibleTaskFailsItsCellsNotTheRun) {
  testing::ToyModel model;
  Suite s = TinySuite();
  s.tasks[2].spec.context_tokens = 100;  // the passkey prompt alone needs ~200 byte tokens
  auto run = RunEval(model, s, Options(""), MakeKvCache);
  ASSERT_TRUE(run.ok()) << run.message();
  int failed = 0;
  for (const auto& c : run->cells)
    if (!c.error.empty()) {
      ++failed;
      EXPECT_EQ(c.task, "passkey");
      EXPECT_NE(c.error.find("too short"), std::string::npos) << c.error;
    }
  EXPECT_EQ(failed, 2);
}

TEST(Harness, FailedTaskCellsAreNotCached) {
  testing::ToyModel model;
  Suite s = TinySuite();
  s.tasks[2].spec.context_tokens = 100;  // too short for the passkey prompt
  const std::string dir = TempDir("failed_task");
  auto first = RunEval(model, s, Options(dir), MakeKvCache);
  ASSERT_TRUE(first.ok()) << first.message();
  auto again = RunEval(model, s, Options(dir), MakeKvCache);
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_EQ(again->computed, 2);  // the passkey cells, retried
  EXPECT_EQ(again->reused, 6);
  fs::remove_all(dir);
}

TEST(CellStore, SavesAndLoadsByHash) {
  const std::string dir = TempDir("store");
  CellStore store(dir);
  CellResult c;
  c.hash = CellHash("some|config");
  c.kind = "quality";
  c.policy = "fp16";
  c.kl = 0.125;
  EXPECT_FALSE(store.Load(c.hash).has_value());
  ASSERT_TRUE(store.Save(c).ok());
  EXPECT_TRUE(fs::exists(dir + "/cells/" + c.hash + ".json"));
  auto back = store.Load(c.hash);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->policy, "fp16");
  EXPECT_EQ(back->kl, 0.125);
  // A file whose content names another hash is not that cell.
  fs::copy_file(dir + "/cells/" + c.hash + ".json", dir + "/cells/0000000000000000.json");
  EXPECT_FALSE(store.Load("0000000000000000").has_value());
  // No directory: nothing is stored or found.
  CellStore none("");
  EXPECT_TRUE(none.Save(c).ok());
  EXPECT_FALSE(none.Load(c.hash).has_value());
  fs::remove_all(dir);
}

TEST(Harness, DeterministicWithoutCache) {
  testing::ToyModel model;
  auto a = RunEval(model, TinySuite(), Options(""), MakeKvCache);
  auto b = RunEval(model, TinySuite(), Options(""), MakeKvCache);
  ASSERT_TRUE(a.ok() && b.ok());
  for (size_t i = 0; i < a->cells.size(); ++i) {
    if (a->cells[i].kind != "quality") continue;
    EXPECT_EQ(a->cells[i].kl, b->cells[i].kl);
    EXPECT_EQ(a->cells[i].accuracy, b->cells[i].accuracy);
    EXPECT_EQ(a->cells[i].ppl, b->cells[i].ppl);
  }
}

TEST(Suites, ExpandBudgetsAndBuiltins) {
  auto p = ExpandPolicies(
      {"fp16", "snapkv", "kivi:nominal_bits=2", "hqekv:nominal_bits=3.25", "snapkv"}, {2, 3.2});
  ASSERT_EQ(p.size(), 5u);
  EXPECT_EQ(p[1].spec, "snapkv:bits=2");
  EXPECT_EQ(p[2].spec, "snapkv:bits=3.2");
  EXPECT_DOUBLE_EQ(p[2].budget, 3.2);
  EXPECT_EQ(p[3].spec, "kivi:nominal_bits=2");
  EXPECT_EQ(p[3].budget, -1);
  EXPECT_DOUBLE_EQ(p[4].budget, 3.25);
  // A spec with options but no budget key is expanded too; one with a budget key is not.
  auto w = ExpandPolicies({"snapkv:window=8", "streaming:window=64", "h2o:keep=0.5"}, {2});
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[0].spec, "snapkv:window=8,bits=2");
  EXPECT_EQ(w[1].spec, "streaming:window=64");
  EXPECT_EQ(w[2].spec, "h2o:keep=0.5");
  auto q = MakeSuite("quick", 512, {}, {}, 0);
  ASSERT_TRUE(q.ok());
  for (const auto& t : q->tasks) EXPECT_LE(t.spec.context_tokens, 512);
  auto paper = MakeSuite("paper", 512, {}, {}, 0);
  ASSERT_TRUE(paper.ok());
  std::vector<std::string> specs;
  for (const auto& x : paper->policies) specs.push_back(x.spec);
  for (const char* want :
       {"fp16", "kivi:nominal_bits=2", "hqekv:nominal_bits=2", "hqekv:nominal_bits=2.8",
        "hqekv:nominal_bits=3.2", "hqekv:nominal_bits=3.25", "fp8", "kivi:nominal_bits=4",
        "h2o:bits=3.2", "streaming:bits=3.2", "snapkv:window=8,bits=3.2",
        "pyramid:window=8,bits=3.2"})
    EXPECT_NE(std::find(specs.begin(), specs.end(), want), specs.end()) << want;
  auto big = MakeSuite("paper", 2048, {}, {}, 0);
  ASSERT_TRUE(big.ok());
  bool has_snap = false;
  for (const auto& x : big->policies) has_snap |= x.spec == "snapkv:bits=3.2";
  EXPECT_TRUE(has_snap);
  EXPECT_FALSE(MakeSuite("nope", 512, {}, {}, 0).ok());
  EXPECT_FALSE(ParseBudgets("2,x").ok());
  EXPECT_FALSE(ParseBudgets("0").ok());
  EXPECT_EQ(ParseBudgets("2,3.2")->size(), 2u);
}

}  // namespace
}  // namespace hqekv::eval

namespace hqekv::eval {
namespace {

// Cells carry the version of the code that computed them; another version
// recomputes them instead of reusing stale numbers.
TEST(Harness, CellsAreRecomputedWhenTheCodeVersionChanges) {
  testing::ToyModel model;
  const std::string dir = TempDir("version");
  EvalOptions o = Options(dir);
  o.code_version = "cell-v2+aaaa";
  auto first = RunEval(model, TinySuite(), o, MakeKvCache);
  ASSERT_TRUE(first.ok()) << first.message();
  EXPECT_EQ(first->computed, 8);
  for (const auto& c : first->cells) EXPECT_EQ(c.code_version, "cell-v2+aaaa");
  auto same = RunEval(model, TinySuite(), o, MakeKvCache);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->reused, 8);
  EXPECT_EQ(same->computed, 0);
  o.code_version = "cell-v2+bbbb";
  auto next = RunEval(model, TinySuite(), o, MakeKvCache);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->reused, 0);
  EXPECT_EQ(next->computed, 8);
  for (const auto& c : next->cells) EXPECT_EQ(c.code_version, "cell-v2+bbbb");
  EXPECT_EQ(CodeVersion().rfind("cell-v2+", 0), 0u);  // the build's own: format + git describe
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hqekv::eval
