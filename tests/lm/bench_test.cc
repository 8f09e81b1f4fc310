// lm/bench.h: the cells RunBench measures (kv x threads x depth x test), the
// statistics, errors, and the markdown / JSON shapes.
#include "lm/bench.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "io/model_source.h"
#include "io/synthetic.h"
#include "policy/factory.h"
#include "../temp_path.h"

namespace hqekv::lm {
namespace {

class BenchTest : public testing::Test {
 protected:
  void SetUp() override {
    path_ = hqekv::test::TempPath("hqekv_bench_test.gguf");
    std::filesystem::remove(path_);
    SyntheticSpec s;
    s.max_ctx = 64;
    ASSERT_TRUE(WriteSyntheticGguf(s, path_).ok());
    auto src = LoadModel(path_);
    ASSERT_TRUE(src.ok()) << src.message();
    src_ = std::move(*src);
    auto m = LlamaModel::Create(*src_);
    ASSERT_TRUE(m.ok());
    model_ = std::move(*m);
  }
  void TearDown() override { std::filesystem::remove(path_); }

  std::string path_;
  std::unique_ptr<ModelSource> src_;
  std::unique_ptr<LlamaModel> model_;
};

const CacheFactory kFactory = [](const std::string& spec, const KvGeometry& g) {
  return MakeKvCache(spec, g);
};

TEST_F(BenchTest, EveryCellMeasuredWithMeanAndSd) {
  BenchConfig c;
  c.pp = {8};
  c.tg = {4, 0};  // 0: skipped
  c.depths = {0, 16};
  c.kv = {"fp16", "fp32"};
  c.threads = {1, 2};
  c.reps = 3;
  int seen = 0;
  auto rows = RunBench(*model_, c, kFactory, [&](const BenchRow&) { ++seen; });
  ASSERT_TRUE(rows.ok()) << rows.message();
  ASSERT_EQ(rows->size(), 2u * 2 * 2 * 2);
  EXPECT_EQ(seen, 16);
  const BenchRow& r = (*rows)[5];  // fp16, 2 threads, depth 0, tg4
  EXPECT_EQ(r.kv, "fp16");
  EXPECT_EQ(r.threads, 2);
  EXPECT_EQ(r.depth, 0);
  EXPECT_EQ(r.test, "tg4");
  for (const BenchRow& row : *rows) {
    ASSERT_EQ(row.tok_per_s.size(), 3u);
    double mn = 1e300, mx = 0;
    for (double v : row.tok_per_s) {
      EXPECT_GT(v, 0.0);
      mn = std::min(mn, v);
      mx = std::max(mx, v);
    }
    EXPECT_GE(row.mean, mn);
    EXPECT_LE(row.mean, mx);
    EXPECT_GE(row.sd, 0.0);
    EXPECT_LE(row.sd, mx - mn + 1e-9);
    // The same runs per second of process CPU time.
    ASSERT_EQ(row.tok_per_cpu_s.size(), 3u);
    for (double v : row.tok_per_cpu_s) EXPECT_GT(v, 0.0);
    EXPECT_GT(row.cpu_mean, 0.0);
  }
  // One thread cannot use more CPU time than wall time (less when it waits
  // for a core): its CPU rate is at least its wall rate, up to clock
  // granularity. Rows 0-3 are fp16 at 1 thread, before any 2-thread run.
  for (int i = 0; i < 4; ++i) {
    const BenchRow& row = (*rows)[i];
    ASSERT_EQ(row.threads, 1);
    EXPECT_GE(row.cpu_mean, 0.9 * row.mean) << row.test << " d" << row.depth;
  }
  const std::string md = BenchMarkdown("synth", 1 << 20, *rows);
  EXPECT_NE(md.find("| kv MiB | kv bits/elem |"), std::string::npos) << md;
  EXPECT_NE(md.find(" | 2 | pp8 @ d16 | "), std::string::npos) << md;
  // The KV bytes after the run: depth + the test's tokens, every byte
  // counted; fp32 holds twice fp16's payload, and at least 16 / 32 bits per
  // original element.
  for (const BenchRow& row : *rows) {
    EXPECT_GT(row.kv_bytes, 0) << row.kv << " " << row.test;
    EXPECT_GE(row.kv_bits, row.kv == "fp32" ? 32.0 : 16.0) << row.kv;
  }
  const BenchRow& f16 = (*rows)[2];   // fp16, 1 thread, depth 16, pp8
  const BenchRow& f32 = (*rows)[10];  // fp32, 1 thread, depth 16, pp8
  ASSERT_EQ(f16.test + f16.kv, "pp8fp16");
  ASSERT_EQ(f32.test + f32.kv, "pp8fp32");
  EXPECT_GT(f32.kv_bytes, f16.kv_bytes);
  EXPECT_NE(md.find(" ± "), std::string::npos);
  const std::string js = BenchJson("synth", 1 << 20, *rows);
  EXPECT_EQ(js.front(), '[');
  EXPECT_NE(js.find("\"test\": \"tg4\", \"n_prompt\": 0, \"n_gen\": 4, \"depth\": 16"),
            std::string::npos)
      << js;
  EXPECT_NE(js.find("\"kv_bytes\": " + std::to_string(f16.kv_bytes)), std::string::npos) << js;
  EXPECT_NE(js.find("\"kv_bits_per_element\": "), std::string::npos) << js;
  EXPECT_NE(js.find("\"avg_cpu_ts\": "), std::string::npos) << js;
}

TEST_F(BenchTest, FillsEachDepthOncePerSpecAndRestoresIt) {
  BenchConfig c;
  c.pp = {4};
  c.tg = {2};
  c.depths = {0, 8, 24};
  c.kv = {"fp16", "kivi:nominal_bits=2"};
  c.threads = {1, 2};
  c.reps = 2;
  std::vector<std::string> fills;
  auto rows = RunBench(*model_, c, kFactory, {}, [&](const FillEvent& e) {
    EXPECT_GE(e.seconds, 0.0);
    EXPECT_TRUE(e.reused) << e.kv;              // both kinds save their state
    EXPECT_EQ(e.loaded_from + e.saved_to, "");  // no state file asked for
    fills.push_back(e.kv + "@" + std::to_string(e.depth));
  });
  ASSERT_TRUE(rows.ok()) << rows.message();
  // Depth 0 needs no fill; every other depth is filled once per spec,
  // whatever the number of thread counts, tests and repetitions.
  EXPECT_EQ(fills, (std::vector<std::string>{"fp16@8", "fp16@24", "kivi:nominal_bits=2@8",
                                             "kivi:nominal_bits=2@24"}));
  ASSERT_EQ(rows->size(), 2u * 2 * 3 * 2);
  for (const BenchRow& r : *rows) EXPECT_EQ(r.tok_per_s.size(), 2u);
}

// --state: the first run fills and writes the file, the second loads it
// (no fill) and measures the same cells; a file made for another spec, depth
// or model, or too small for the tests, is refused and left as it was.
TEST_F(BenchTest, StateFileFilledOnceThenLoadedAndTiedToModelSpecDepth) {
  const std::string state = hqekv::test::TempPath("hqekv_bench_test.state");
  std::filesystem::remove(state);
  BenchConfig c;
  c.pp = {4};
  c.tg = {3};
  c.depths = {0, 20};
  c.kv = {"kivi:nominal_bits=2"};
  c.threads = {1};
  c.reps = 1;
  c.state_path = state;
  c.model_identity = src_->identity + "-weights1";
  std::vector<FillEvent> events;
  auto note = [&](const FillEvent& e) { events.push_back(e); };
  auto first = RunBench(*model_, c, kFactory, {}, note);
  ASSERT_TRUE(first.ok()) << first.message();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].saved_to, state);
  EXPECT_EQ(events[0].loaded_from, "");
  ASSERT_TRUE(std::filesystem::exists(state));
  const auto size = std::filesystem::file_size(state);
  const auto mtime = std::filesystem::last_write_time(state);

  events.clear();
  auto second = RunBench(*model_, c, kFactory, {}, note);
  ASSERT_TRUE(second.ok()) << second.message();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].loaded_from, state);
  EXPECT_EQ(events[0].saved_to, "");
  EXPECT_TRUE(events[0].reused);
  ASSERT_EQ(second->size(), first->size());
  for (size_t i = 0; i < first->size(); ++i) {
    const BenchRow& a = (*first)[i];
    const BenchRow& b = (*second)[i];
    EXPECT_EQ(a.test + "@" + std::to_string(a.depth), b.test + "@" + std::to_string(b.depth));
    // The loaded cache holds the same bytes as the filled one did.
    EXPECT_EQ(a.kv_bytes, b.kv_bytes) << a.test << " d" << a.depth;
    EXPECT_GT(b.mean, 0.0);
  }

  auto refused = [&](BenchConfig bad, const std::string& what) {
    auto r = RunBench(*model_, bad, kFactory, {});
    ASSERT_FALSE(r.ok()) << what;
    EXPECT_NE(r.message().find(state), std::string::npos) << r.message();
    EXPECT_NE(r.message().find(what), std::string::npos) << r.message();
    EXPECT_EQ(std::filesystem::file_size(state), size);
    EXPECT_EQ(std::filesystem::last_write_time(state), mtime);
  };
  BenchConfig spec = c;
  spec.kv = {"fp16"};
  refused(spec, "made with --kv 'kivi:nominal_bits=2', this run is 'fp16'");
  BenchConfig depth = c;
  depth.depths = {16};
  refused(depth, "filled to depth 20, this run is 16");
  BenchConfig model = c;
  model.model_identity = src_->identity + "-weights2";
  refused(model, "made with another model");
  BenchConfig room = c;
  room.tg = {30};  // the file was made with room for depth + 4
  refused(room, "room for 24 positions, this run needs 50");

  // One file keeps one spec at one depth.
  BenchConfig two = c;
  two.kv = {"fp16", "kivi:nominal_bits=2"};
  auto r = RunBench(*model_, two, kFactory, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("one --kv and one depth > 0"), std::string::npos) << r.message();
  std::filesystem::remove(state);
}

TEST_F(BenchTest, ErrorsNameTheProblem) {
  BenchConfig c;
  c.pp = {32};
  c.tg = {0};
  c.depths = {40};  // 40 + 32 > 64
  c.reps = 1;
  auto rows = RunBench(*model_, c, kFactory, {});
  ASSERT_FALSE(rows.ok());
  EXPECT_NE(rows.message().find("exceed the model's context of 64"), std::string::npos)
      << rows.message();
  c.depths = {0};
  c.kv = {"nosuchpolicy"};
  EXPECT_FALSE(RunBench(*model_, c, kFactory, {}).ok());
  c.kv = {"fp16"};
  c.reps = 0;
  EXPECT_FALSE(RunBench(*model_, c, kFactory, {}).ok());
}

}  // namespace
}  // namespace hqekv::lm
