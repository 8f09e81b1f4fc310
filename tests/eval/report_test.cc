#include "eval/report/report.h"

#include <gtest/gtest.h>

#include "eval/report/report_svg.h"
#include "eval/report/report_tables.h"

namespace hqekv::eval {
namespace {

CellResult Q(const std::string& policy, const std::string& task, double acc, double kl, double bits,
             double chance = 0) {
  CellResult c;
  c.kind = "quality";
  c.task = task;
  c.policy = policy;
  c.family = policy.substr(0, policy.find(':'));
  c.accuracy = acc;
  c.kl = kl;
  c.agreement = 1 - kl;
  c.ppl = 2;
  c.chance = chance;
  c.bits_per_original = bits;
  c.true_bits = bits;
  c.context = 128;
  c.depth = 0.5;
  c.hash = "0123456789abcdef";
  return c;
}

EvalRun SampleRun() {
  EvalRun r;
  r.suite = "unit";
  r.model = "m<&>";
  r.command = "hqekv eval --suite unit";
  r.cells = {Q("fp16", "lm", 0.4, 0, 16),
             Q("fp16", "passkey", 0.0, 0, 16, 1e-5),
             Q("fp16", "copy", 0.9, 0, 16),
             Q("kivi:nominal_bits=2", "lm", 0.3, 0.05, 3),
             Q("kivi:nominal_bits=2", "passkey", 0.0, 0.1, 3, 1e-5),
             Q("kivi:nominal_bits=2", "copy", 0.7, 0.1, 3)};
  CellResult sp;
  sp.kind = "speed";
  sp.task = "speed";
  sp.policy = "fp16";
  sp.family = "fp16";
  sp.context = 256;
  sp.decode_tok_s = 1000;
  sp.kv_bytes = 4096;
  r.cells.push_back(sp);
  return r;
}

TEST(Report, FlagsTasksTheFp16CacheFails) {
  const Summary s = Summarize(SampleRun());
  ASSERT_EQ(s.verdicts.size(), 2u);  // passkey, copy (lm is not a retrieval task)
  EXPECT_EQ(s.verdicts[0].task, "passkey");
  EXPECT_FALSE(s.verdicts[0].usable);
  EXPECT_EQ(s.verdicts[0].note, "fp16 fails: not used to rank");
  EXPECT_TRUE(s.verdicts[1].usable);
  ASSERT_EQ(s.rows.size(), 2u);
  EXPECT_DOUBLE_EQ(s.rows[1].kl, 0.05);
  EXPECT_DOUBLE_EQ(s.rows[1].accuracy.at("copy"), 0.7);
  EXPECT_DOUBLE_EQ(s.rows[0].decode_tok_s, 1000);
  const std::string md = ReportMarkdown(SampleRun());
  // The task fp16 fails is out of the main table and listed last (issue 17).
  const size_t failed = md.find("## Tasks the fp16 cache fails (not used to rank)");
  ASSERT_NE(failed, std::string::npos);
  EXPECT_GT(failed, md.find("## Ranking"));
  EXPECT_GT(failed, md.find("## Memory and speed"));
  EXPECT_NE(md.find("### passkey accuracy", failed), std::string::npos);
  EXPECT_EQ(md.find("passkey ["), std::string::npos);  // no main-table column
  EXPECT_NE(md.find("copy [95% CI]"), std::string::npos);
  EXPECT_NE(md.find("| fp16 |"), std::string::npos);
  const std::string html = ReportHtml(SampleRun());
  EXPECT_LT(html.find("id=\"answer\""), html.find("id=\"plots\""));  // the answer first
  EXPECT_NE(html.find("<details id=\"fp16-fails\">"), std::string::npos);
}

TEST(Report, JsonRoundTrip) {
  const EvalRun r = SampleRun();
  auto back = RunFromJson(ResultsJson(r));
  ASSERT_TRUE(back.ok()) << back.message();
  ASSERT_EQ(back->cells.size(), r.cells.size());
  EXPECT_EQ(back->cells[3].policy, "kivi:nominal_bits=2");
  EXPECT_DOUBLE_EQ(back->cells[3].kl, 0.05);
  EXPECT_EQ(back->command, r.command);
  EXPECT_FALSE(RunFromJson(nlohmann::json::object()).ok());
  nlohmann::json bad = ResultsJson(r);
  bad["cells"][0]["kl"] = "not a number";
  EXPECT_FALSE(RunFromJson(bad).ok());
}

TEST(Report, HtmlIsSelfContainedAndEscaped) {
  const std::string html = ReportHtml(SampleRun());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_NE(html.find("m&lt;&amp;&gt;"), std::string::npos);
  EXPECT_EQ(html.find("m<&>"), std::string::npos);
  // Balanced svg elements.
  size_t open = 0, close = 0;
  for (size_t p = 0; (p = html.find("<svg", p)) != std::string::npos; ++p) ++open;
  for (size_t p = 0; (p = html.find("</svg>", p)) != std::string::npos; ++p) ++close;
  EXPECT_EQ(open, close);
  EXPECT_GE(open, 4u);
}

TEST(Svg, PlotsPointsAndHandlesEmpty) {
  Plot p;
  p.title = "t";
  p.series = {{"a", {{1, 0.5}, {2, 0.25}}}, {"b", {{1.5, 0.75}}}};
  p.y_unit = true;
  const std::string svg = RenderSvg(p);
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
  size_t circles = 0;
  for (size_t q = 0; (q = svg.find("<circle", q)) != std::string::npos; ++q) ++circles;
  EXPECT_EQ(circles, 3u);
  Plot empty;
  empty.title = "e";
  EXPECT_NE(RenderSvg(empty).find("no data"), std::string::npos);
  Plot logp;
  logp.log_y = true;
  logp.series = {{"k", {{2, 0.0}, {4, 1e-3}, {16, 0.1}}}};
  const std::string l = RenderSvg(logp);
  EXPECT_EQ(l.find("nan"), std::string::npos);
  EXPECT_EQ(l.find("inf"), std::string::npos);
}

}  // namespace
}  // namespace hqekv::eval

namespace hqekv::eval {
namespace {

// Two retrieval cells per policy with `trials` instances each: accuracies
// 0.9 / 0.8 / 0.7, KL 0.01 / 0.2 / 0.05.
EvalRun TieRun(double trials) {
  EvalRun r;
  r.suite = "unit";
  r.model = "m";
  const struct {
    const char* p;
    double acc, kl, bits;
  } rows[] = {{"fp16", 0.9, 0, 16}, {"a:bits=2", 0.8, 0.2, 2}, {"b:bits=2", 0.7, 0.05, 2}};
  for (const auto& x : rows) {
    CellResult lm = Q(x.p, "lm", 0.5, x.kl, x.bits);
    CellResult cp = Q(x.p, "copy", x.acc, x.kl, x.bits);
    cp.trials = trials;
    r.cells.push_back(lm);
    r.cells.push_back(cp);
  }
  return r;
}

TEST(RankPolicies, UsesKlWhenAccuraciesDoNotSeparateThePolicies) {
  // 4 instances each: every Wilson interval overlaps the best one, so KL
  // ranks: b (KL 0.05) dominates a (KL 0.2, same bits) although a's
  // accuracy is higher; fp16 (KL 0) leads front 1.
  const Summary few_s = Summarize(TieRun(4));  // the ranking points into it
  const Ranking few = RankPolicies(few_s);
  EXPECT_FALSE(few.by_accuracy);
  std::vector<std::string> order;
  for (const auto& x : few.rows) order.push_back(x.row->policy);
  EXPECT_EQ(order, (std::vector<std::string>{"fp16", "b:bits=2", "a:bits=2"}));
  EXPECT_NE(Answer(few_s).find("Ranked by KL"), std::string::npos);
  // 2000 instances: the intervals separate, accuracy ranks.
  const Summary many_s = Summarize(TieRun(2000));
  const Ranking many = RankPolicies(many_s);
  EXPECT_TRUE(many.by_accuracy);
  // Now a (0.8) dominates b (0.7) at the same bits: b drops to front 2.
  std::vector<std::string> by_acc;
  for (const auto& x : many.rows) by_acc.push_back(x.row->policy);
  EXPECT_EQ(by_acc, (std::vector<std::string>{"fp16", "a:bits=2", "b:bits=2"}));
  const std::string text = RankingText(many_s);
  EXPECT_NE(text.find("rank"), std::string::npos);
  EXPECT_NE(text.find("a:bits=2"), std::string::npos);
}

}  // namespace
}  // namespace hqekv::eval
