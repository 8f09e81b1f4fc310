#include "eval/study/pareto_study.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "eval/study/pareto_analysis.h"
#include "eval/report/report_svg.h"
#include "eval/study/pareto_plot.h"
#include "eval/study/pareto_report.h"
#include "policy/spec.h"
#include "../source_root.h"

namespace hqekv::eval {
namespace {

TEST(ParetoFrontier, HandMadePoints) {
  // (bits, KL): duplicates stay on the frontier together; a point with the
  // same bits and a higher KL, or more bits and the same KL, is dominated.
  const std::vector<BitsKl> pts = {{3, 0.5}, {4, 0.2}, {4, 0.3}, {5, 0.2},
                                   {2, 1.0}, {2, 1.0}, {16, 0},  {1.5, 2.0}};
  const std::vector<bool> want = {true, true, false, false, true, true, true, true};
  EXPECT_EQ(ParetoFrontier(pts), want);
  EXPECT_TRUE(ParetoFrontier({}).empty());
  EXPECT_EQ(ParetoFrontier({{8, 0.1}}), std::vector<bool>{true});
}

TEST(ParetoTarget, RatiosWindowsAndVerdicts) {
  const std::vector<BitsKl> pts = {
      {3.45, 0.08}, {3.38, 0.10},                 // 3.4: 0.8x -> PASS (<= 0.8)
      {4.50, 0.01}, {4.20, 0.05},                 // 4.2: hqekv only outside +-3%
      {5.40, 0.05}, {5.50, 0.003}, {5.3, 0.2},    // 5.4: best other 0.003 -> FAIL
      {8.10, 0.01}, {7.90, 0.01},  {12.0, 0.0}};  // 8: 1.0x at need 1.0 -> PASS
  const std::vector<std::string> fam = {"hqekv", "kivi", "hqekv", "h2o",  "hqekv",
                                        "kivi",  "h2o",  "hqekv", "int8", "fp16"};
  const auto rows = TargetCheck(pts, fam, "hqekv");
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].verdict, "PASS");
  EXPECT_NEAR(rows[0].ratio, 0.8, 1e-12);
  EXPECT_EQ(rows[0].target.index, 0);
  EXPECT_EQ(rows[0].other.index, 1);
  EXPECT_FALSE(rows[1].target.found);
  EXPECT_TRUE(rows[1].other.found);
  EXPECT_NE(rows[1].verdict.find("no hqekv point"), std::string::npos) << rows[1].verdict;
  EXPECT_EQ(rows[1].nearest.index, 2);        // 4.5 bits: nearer to 4.2 than 3.45 or 5.4
  EXPECT_FALSE(rows[1].nearest_other.found);  // nothing else within 4.365..4.635 bits
  EXPECT_FALSE(rows[0].nearest.found);        // only looked for when the window is empty
  EXPECT_EQ(rows[2].verdict, "FAIL");
  EXPECT_EQ(rows[2].other.index, 5);  // the lowest KL of the other families
  EXPECT_NEAR(rows[2].ratio, 0.05 / 0.003, 1e-9);
  EXPECT_EQ(rows[3].verdict, "PASS");
  EXPECT_DOUBLE_EQ(rows[3].threshold, 1.0);

  // Nobody else in the window; an exact other (KL 0) against a lossy hqekv.
  const auto alone =
      TargetCheck({{3.4, 0.1}, {8, 0.01}, {8.1, 0}}, {"hqekv", "hqekv", "fp8"}, "hqekv");
  EXPECT_NE(alone[0].verdict.find("no other point"), std::string::npos) << alone[0].verdict;
  // 4.2 bits: no hqekv point; the nearest (3.4) has no other point at its bits.
  EXPECT_EQ(alone[1].nearest.index, 0);
  EXPECT_FALSE(alone[1].nearest_other.found);
  const auto near =
      TargetCheck({{4.0, 0.3}, {4.05, 0.2}, {4.2, 0.25}}, {"hqekv", "kivi", "h2o"}, "hqekv");
  ASSERT_TRUE(near[1].nearest.found);  // 4.2: hqekv at 4.0 is 4.8% off
  EXPECT_EQ(near[1].nearest.index, 0);
  EXPECT_EQ(near[1].nearest_other.index, 1);  // kivi at 4.05 is within 3% of 4.0, h2o is not
  EXPECT_EQ(alone[3].verdict, "FAIL");
  EXPECT_TRUE(std::isinf(alone[3].ratio));
}

TEST(ParetoGrid, DefaultCoversEveryPolicyOfTheTable) {
  const auto grid = DefaultParetoGrid();
  std::set<std::string> families;
  for (const auto& s : grid) {
    auto p = policy::ParseSpec(s);
    ASSERT_TRUE(p.ok()) << s << ": " << p.message();
    EXPECT_EQ(p->Canonical(), s);
    families.insert(p->name);
  }
  for (const auto& row : policy::PolicyTable()) {
    const bool skipped = row.name == std::string(kParetoSkipPolicies[0]);
    EXPECT_EQ(families.count(row.name), skipped ? 0u : 1u) << row.name;
  }
  auto has = [&](const std::string& s) {
    return std::find(grid.begin(), grid.end(), s) != grid.end();
  };
  for (const char* s :
       {"fp16", "fp8", "fp8:format=e5m2", "kivi:nominal_bits=2", "kivi:nominal_bits=4",
        "hqekv:bits=3.4", "hqekv:bits=8", "hqekv:nominal_bits=2.8", "h2o:bits=5.4",
        "kivi:nominal_bits=2,residual=32"})
    EXPECT_TRUE(has(s)) << s;
  EXPECT_EQ(std::set<std::string>(grid.begin(), grid.end()).size(), grid.size());  // no repeats
}

TEST(ParetoGrid, NormalizeRejectsBadAndEmptyGrids) {
  EXPECT_NE(NormalizeGrid({}).message().find("empty"), std::string::npos);
  EXPECT_NE(NormalizeGrid({" "}).message().find("empty"), std::string::npos);
  auto bad = NormalizeGrid({"fp16", "nonsense:x=1"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("nonsense"), std::string::npos) << bad.message();
  auto ok = NormalizeGrid({"fp16", "kivi:nominal_bits=2", "fp16", "kivi:nominal_bits=2"});
  ASSERT_TRUE(ok.ok()) << ok.message();
  EXPECT_EQ(*ok, (std::vector<std::string>{"fp16", "kivi:nominal_bits=2"}));
}

ParetoResults Sample() {
  ParetoResults r;
  r.command = "hqekv study pareto -o x";
  r.model = "m<&>.gguf";
  r.model_identity = "id";
  r.code_version = "exe-1";
  r.protocol = {16, 48, 64};
  r.texts = {{"a.txt", "00000000000000aa", 48}};
  r.grid = {"fp16", "kivi:nominal_bits=2", "hqekv:bits=3.4", "hqekv:bits=0.5"};
  auto cell = [&](std::string spec, std::string fam, double bits, double kl) {
    ParetoCell c;
    c.text = "a.txt";
    c.spec = spec;
    c.family = fam;
    c.key = CellKey(r.code_version, r.model_identity, "00000000000000aa", spec, r.protocol);
    c.scored = 32;
    c.bits = bits;
    c.bits_after_prefill = bits + 0.1;
    c.kl = kl;
    c.kl_stderr = kl / 10;
    c.agree = 1 - kl;
    c.agree_stderr = 0.01;
    c.seconds = 0.25;
    return c;
  };
  r.cells = {cell("fp16", "fp16", 16.2, 0), cell("kivi:nominal_bits=2", "kivi", 3.38, 0.1),
             cell("hqekv:bits=3.4", "hqekv", 3.41, 0.0123456789)};
  ParetoCell failed = cell("hqekv:bits=0.5", "hqekv", 0, 0);
  failed.error = "budget 0.5 is impossible";
  r.cells.push_back(failed);
  return r;
}

TEST(ParetoResultsJson, RoundTripIsExact) {
  const ParetoResults r = Sample();
  const nlohmann::json j = ParetoResultsToJson(r);
  auto back = ParetoResultsFromJson(nlohmann::json::parse(j.dump()), "test");
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(ParetoResultsToJson(*back), j);
  ASSERT_EQ(back->cells.size(), 4u);
  EXPECT_EQ(back->cells[2].kl, 0.0123456789);
  EXPECT_EQ(back->cells[3].error, "budget 0.5 is impossible");
  EXPECT_EQ(back->protocol.max_tokens, 48);
  // The report of the re-read results is the same bytes.
  EXPECT_EQ(RenderParetoReport(*back).markdown, RenderParetoReport(r).markdown);

  nlohmann::json missing = j;
  missing["cells"][1].erase("kl");
  auto e = ParetoResultsFromJson(missing, "'r.json'");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.message().find("'kl'"), std::string::npos) << e.message();
  EXPECT_NE(e.message().find("r.json"), std::string::npos) << e.message();
  nlohmann::json other = j;
  other["format"] = kParetoFormatVersion + 1;
  EXPECT_NE(ParetoResultsFromJson(other, "f").message().find("format"), std::string::npos);
}

TEST(ParetoReport, TablesTargetAndPlot) {
  const ParetoReport rep = RenderParetoReport(Sample());
  const std::string& md = rep.markdown;
  EXPECT_NE(md.find("hqekv study pareto -o x"), std::string::npos);
  EXPECT_NE(md.find("## Target check"), std::string::npos);
  // 3.4 bits: hqekv 0.0123 at 3.41 bits vs kivi 0.1 -> 0.12 PASS, +0.3% of B,
  // 0.12 / 0.8 = 0.15 of the need.
  EXPECT_NE(md.find("| 0.12 | 0.8 | **PASS**: +0.3% of B; KL ratio / need = 0.15 |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("`hqekv:bits=0.5`: budget 0.5 is impossible"), std::string::npos);
  // Sorted by true bits: kivi (3.38) before hqekv (3.41) before fp16.
  const size_t kivi = md.find("| `kivi:nominal_bits=2` |"), hq = md.find("| `hqekv:bits=3.4` |"),
               fp16 = md.find("| `fp16` |");
  ASSERT_NE(kivi, std::string::npos);
  EXPECT_LT(kivi, hq);
  EXPECT_LT(hq, fp16);
  EXPECT_NE(md.find("| 4.73 |"), std::string::npos);  // 16 / 3.38 x smaller than fp16
  ASSERT_EQ(rep.svgs.size(), 1u);
  EXPECT_EQ(rep.svgs[0].first, "pareto-a.svg");
  const std::string& svg = rep.svgs[0].second;
  EXPECT_NE(svg.find("m&lt;&amp;&gt;.gguf"), std::string::npos);  // escaped title
  EXPECT_NE(svg.find("<path d=\"M"), std::string::npos);          // the frontier step line
  for (const char* label : {">0.01<", ">0.1<", ">0<", ">kivi<", ">hqekv<", ">fp16<"})
    EXPECT_NE(svg.find(label), std::string::npos) << label;
}

TEST(ParetoPlot, LabelsEveryDecade) {
  const std::string svg =
      RenderParetoSvg("t", {"hqekv", "kivi"}, {{"hqekv", 2, 3e-6, true}, {"kivi", 4, 0.5, false}});
  for (const char* label : {">1e-6<", ">1e-5<", ">1e-4<", ">0.001<", ">0.01<", ">0.1<", ">1<"})
    EXPECT_NE(svg.find(label), std::string::npos) << label;
  EXPECT_NE(svg.find(ParetoColour(FamilyStyle("hqekv"))), std::string::npos);
  EXPECT_NE(svg.find(ParetoColour(FamilyStyle("kivi"))), std::string::npos);
  EXPECT_NE(std::string(ParetoShapeName(0)), ParetoShapeName(1));
  EXPECT_NE(RenderParetoSvg("t", {}, {}).find("no data"), std::string::npos);
}

TEST(ParetoSvgName, BaseNameSanitized) {
  EXPECT_EQ(ParetoSvgName("data/text/wiki.test.raw"), "pareto-wiki.test.svg");
  EXPECT_EQ(ParetoSvgName("a b/c d.txt"), "pareto-c_d.svg");
}

// A real run on the bundled model: tiny protocol, cache reuse and invalidation.
class ParetoRun : public ::testing::Test {
 protected:
  ParetoOptions Options() const {
    ParetoOptions o;
    o.model = test::kSourceRoot + "/models/stories260K.gguf";
    o.texts = {test::kSourceRoot + "/data/text/tinystories_val_subset.txt"};
    o.grid = {"fp16", "kivi:nominal_bits=2,residual=32"};
    o.protocol = {32, 64, 64};
    o.code_version = "test-1";
    return o;
  }
  // Runs and records which cells were reused.
  ParetoResults Run(ParetoOptions o, const ParetoResults* prev, std::vector<bool>* reused) {
    reused->clear();
    o.on_cell = [&](int, int, const ParetoCell&, bool r) { reused->push_back(r); };
    auto r = RunParetoStudy(o, prev, nullptr);
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : ParetoResults{};
  }
};

TEST_F(ParetoRun, ComputesReusesAndInvalidates) {
  std::vector<bool> reused;
  const ParetoResults first = Run(Options(), nullptr, &reused);
  ASSERT_EQ(first.cells.size(), 2u);
  EXPECT_EQ(reused, (std::vector<bool>{false, false}));
  const ParetoCell& fp16 = first.cells[0];
  EXPECT_EQ(fp16.kl, 0.0);
  EXPECT_EQ(fp16.agree, 1.0);
  EXPECT_EQ(fp16.scored, 32);
  EXPECT_GE(fp16.bits, 16.0);
  const ParetoCell& kivi = first.cells[1];
  EXPECT_EQ(kivi.family, "kivi");
  EXPECT_GT(kivi.kl, 0.0);
  EXPECT_GT(kivi.kl_stderr, 0.0);
  EXPECT_LT(kivi.bits, fp16.bits);

  // Same inputs: every cell reused, same numbers.
  ParetoResults again = Run(Options(), &first, &reused);
  EXPECT_EQ(reused, (std::vector<bool>{true, true}));
  EXPECT_EQ(ParetoResultsToJson(again)["cells"], ParetoResultsToJson(first)["cells"]);

  // A new spec: only it runs.
  ParetoOptions more = Options();
  more.grid.push_back("int8");
  Run(more, &first, &reused);
  EXPECT_EQ(reused, (std::vector<bool>{true, true, false}));

  // Another code version, protocol or --fresh: recomputed.
  ParetoOptions code = Options();
  code.code_version = "test-2";
  Run(code, &first, &reused);
  EXPECT_EQ(reused, (std::vector<bool>{false, false}));
  ParetoOptions proto = Options();
  proto.protocol.prefill = 40;
  Run(proto, &first, &reused);
  EXPECT_EQ(reused, (std::vector<bool>{false, false}));
  ParetoOptions fresh = Options();
  fresh.fresh = true;
  const ParetoResults recomputed = Run(fresh, &first, &reused);
  EXPECT_EQ(reused, (std::vector<bool>{false, false}));
  EXPECT_EQ(recomputed.cells[1].kl, kivi.kl);  // deterministic
}

TEST_F(ParetoRun, SavesAfterEveryComputedCell) {
  int saves = 0;
  size_t last = 0;
  auto r = RunParetoStudy(Options(), nullptr, [&](const ParetoResults& p) {
    ++saves;
    last = p.cells.size();
    return Status::Ok();
  });
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(saves, 3);  // after each of the 2 cells, and at the end
  EXPECT_EQ(last, 2u);
}

TEST_F(ParetoRun, BadInputIsAnError) {
  ParetoOptions o = Options();
  o.texts = {"/nonexistent/text.txt"};
  auto r = RunParetoStudy(o, nullptr, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("/nonexistent/text.txt"), std::string::npos) << r.message();
  o = Options();
  o.grid = {"fp16", "nope"};
  EXPECT_NE(RunParetoStudy(o, nullptr, nullptr).message().find("nope"), std::string::npos);
  o = Options();
  o.protocol = {64, 64, 64};  // nothing scored
  EXPECT_NE(RunParetoStudy(o, nullptr, nullptr).message().find("--max-tokens"), std::string::npos);
}

}  // namespace
}  // namespace hqekv::eval
