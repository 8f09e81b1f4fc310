#include "eval/report/report.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "eval/report/report_svg.h"
#include "eval/report/report_tables.h"
#include "eval/study/pareto_plot.h"

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

namespace hqekv::eval {
namespace {

// data-name of every series group of an eval plot -> the colour it is drawn
// with (the first stroke in the group: its line, or its legend line).
std::vector<std::pair<std::string, std::string>> SeriesColours(const std::string& svg) {
  std::vector<std::pair<std::string, std::string>> out;
  const std::string tag = "data-name=\"";
  for (size_t p = svg.find(tag); p != std::string::npos; p = svg.find(tag, p + 1)) {
    const size_t a = p + tag.size(), b = svg.find('"', a);
    const size_t s = svg.find("stroke=\"#", b);
    out.emplace_back(svg.substr(a, b - a), svg.substr(s + 8, 7));
  }
  return out;
}

TEST(PlotStyle, AFamilyHasTheSameColourInEveryPlot) {
  // h2o only has a copy cell, listed first: it comes first in the copy plot
  // and is absent elsewhere, so the families' positions differ between plots.
  EvalRun run = SampleRun();
  run.cells.insert(run.cells.begin(), Q("h2o:bits=3", "copy", 0.5, 0.2, 3));
  run.cells.push_back(Q("kivi:nominal_bits=4", "copy", 0.8, 0.02, 5));
  const std::string html = ReportHtml(run);
  std::map<std::string, std::set<std::string>> colours;  // family -> colours seen
  size_t groups = 0;
  for (const auto& [name, colour] : SeriesColours(html)) {
    colours[name.substr(0, name.find(':'))].insert(colour);
    ++groups;
  }
  EXPECT_GE(groups, 8u);
  for (const std::string f : {"fp16", "kivi", "h2o"}) {
    ASSERT_EQ(colours[f].size(), 1u) << f;
    EXPECT_EQ(*colours[f].begin(), StyleColour(FamilyStyle(f))) << f;
  }
  EXPECT_NE(*colours["kivi"].begin(), *colours["fp16"].begin());
  // The Pareto study's plot draws kivi (listed first there) in the same colour.
  const std::string pareto =
      RenderParetoSvg("t", {"kivi", "fp16"}, {{"kivi", 3, 0.1, true}, {"fp16", 16, 0, true}});
  const size_t label = pareto.find(">kivi</text>");
  ASSERT_NE(label, std::string::npos);
  // The legend's marker is the line before the label's <text>.
  const size_t text_at = pareto.rfind("<text", label);
  const size_t from = pareto.rfind('\n', text_at - 2) + 1;
  const std::string marker = pareto.substr(from, text_at - from);
  EXPECT_NE(marker.find(StyleColour(FamilyStyle("kivi"))), std::string::npos) << marker;
  // Two policies of one family in one plot: the second's line is dashed.
  EXPECT_NE(html.find("stroke-dasharray=\"6,3\""), std::string::npos);
  EXPECT_EQ(FamilyStyle("hqekv"), 0);
  EXPECT_EQ(FamilyStyle("no-such-family"), FamilyStyle("no-such-family"));
}

TEST(PlotStyle, LongTitlesWrapWithinThePicture) {
  const std::string title =
      "data/text/pg11_alice_in_wonderland.txt: KL vs true bits (models/stories260K.gguf) and more";
  for (const std::string& svg :
       {RenderParetoSvg(title, {"hqekv"}, {{"hqekv", 3, 0.1, true}}),
        RenderSvg(Plot{title, "x", "y", {{"hqekv", {{1, 0.5}}}}}, 620, 340)}) {
    const size_t width = std::stoul(svg.substr(svg.find("width=\"") + 7));
    int lines = 0;
    for (size_t p = svg.find("font-weight=\"bold\">"); p != std::string::npos;
         p = svg.find("font-weight=\"bold\">", p + 1)) {
      const size_t a = p + 19, b = svg.find("</text>", a);
      const std::string line = svg.substr(a, b - a);
      EXPECT_LE(TextWidth(line, 14), width - 16.0) << line;
      ++lines;
    }
    EXPECT_GE(lines, 2) << svg.substr(0, 600);
  }
  const SvgTitle one = RenderTitle("short", 10, 20, "start", 300);
  EXPECT_EQ(one.lines, 1);
  // A single word wider than the line is squeezed, not cut off.
  EXPECT_NE(RenderTitle(std::string(80, 'w'), 10, 20, "start", 300).svg.find("textLength"),
            std::string::npos);
}

}  // namespace
}  // namespace hqekv::eval
