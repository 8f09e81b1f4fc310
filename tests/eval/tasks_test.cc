#include "eval/run/tasks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include "core/hash.h"
#include "eval/run/rng.h"
#include "toy_model.h"

namespace hqekv::eval {
namespace {

using testing::WordCount;

const Corpus& Stories() {
  static const Corpus c = [] {
    auto r = LoadCorpus("tinystories",
                        std::string(HQEKV_SOURCE_DIR) + "/data/text/tinystories_val_subset.txt");
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? std::move(r).value() : Corpus{};
  }();
  return c;
}

int Count(const std::string& s) { return WordCount(s); }

TaskSpec Spec(TaskKind k, int ctx = 300, double depth = 0.5) {
  TaskSpec s;
  s.kind = k;
  s.context_tokens = ctx;
  s.depth = depth;
  return s;
}

TEST(Corpus, SplitsSentencesAndCollapsesWhitespace) {
  Corpus c = SplitSentences("t", "Hello  there.\nHow are\tyou? \"Fine!\" he said.\n\nNew para");
  ASSERT_EQ(c.sentences.size(), 5u);
  EXPECT_EQ(c.sentences[0], "Hello there.");
  EXPECT_EQ(c.sentences[1], "How are you?");
  EXPECT_EQ(c.sentences[2], "\"Fine!\"");  // a closing quote ends the sentence with it
  EXPECT_EQ(c.sentences[3], "he said.");
  EXPECT_EQ(c.sentences[4], "New para");
}

TEST(Corpus, LoadErrorsNameTheFile) {
  auto r = LoadCorpus("x", "/nonexistent/file.txt");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("/nonexistent/file.txt"), std::string::npos);
}

TEST(Tasks, SameSeedSameInstanceDifferentSeedDifferent) {
  for (TaskKind k : {TaskKind::kPasskey, TaskKind::kMultiKey, TaskKind::kVarTrack, TaskKind::kCopy,
                     TaskKind::kLm}) {
    auto a = MakeTask(Spec(k), Stories(), 11, Count);
    auto b = MakeTask(Spec(k), Stories(), 11, Count);
    auto c = MakeTask(Spec(k), Stories(), 12, Count);
    ASSERT_TRUE(a.ok() && b.ok() && c.ok())
        << TaskName(k) << ": " << (a.ok() ? c.message() : a.message());
    EXPECT_EQ(a->prefill, b->prefill) << TaskName(k);
    EXPECT_EQ(a->continuation, b->continuation);
    EXPECT_EQ(a->answers, b->answers);
    EXPECT_NE(a->prefill, c->prefill) << TaskName(k);
  }
}

// Pinned values: a change to the generators (or the RNG) must be deliberate,
// since it invalidates every cached cell and published number.
TEST(Tasks, PinnedAnswers) {
  auto a = MakeTask(Spec(TaskKind::kPasskey), Stories(), 1, Count);
  auto m = MakeTask(Spec(TaskKind::kMultiKey), Stories(), 1, Count);
  ASSERT_TRUE(a.ok() && m.ok());
  EXPECT_EQ(a->answers, std::vector<std::string>{"37883"});
  EXPECT_EQ(m->answers, std::vector<std::string>{"48414"});
}

// Every text of one instance of each task, and the stream seeds, pinned by
// hash: the generators' bits (the SplitMix64 stream of eval/run/rng.h) must not
// move when code is reorganised.
TEST(Tasks, PinnedInstanceTexts) {
  const std::map<TaskKind, uint64_t> want = {
      {TaskKind::kPasskey, 0x141ae7a5a5093693ull},  {TaskKind::kMultiKey, 0xddc69bd2bab23646ull},
      {TaskKind::kVarTrack, 0x4558e9c34d662cdeull}, {TaskKind::kCopy, 0xfa47c1535b5ee6c6ull},
      {TaskKind::kLm, 0x665561988b5de85full},
  };
  for (const auto& [k, hash] : want) {
    auto t = MakeTask(Spec(k), Stories(), 7, Count);
    ASSERT_TRUE(t.ok()) << TaskName(k) << ": " << t.message();
    uint64_t h = Fnv1a64(t->prefill);
    h = Fnv1a64(t->continuation, h);
    for (const auto& a : t->answers) h = Fnv1a64(a, h);
    EXPECT_EQ(h, hash) << TaskName(k) << " 0x" << std::hex << h;
  }
  EXPECT_EQ(MixSeed(1, 2, 3), 11066911893388219453ull) << std::hex << MixSeed(1, 2, 3);
  Rng r(5);
  EXPECT_EQ(r.Next(), 10284945619046896904ull) << std::hex << Rng(5).Next();
}

TEST(Tasks, PasskeyNeedleAtDepthQuestionLast) {
  for (double depth : {0.0, 0.5, 1.0}) {
    auto a = MakeTask(Spec(TaskKind::kPasskey, 400, depth), Stories(), 3, Count);
    ASSERT_TRUE(a.ok()) << a.message();
    const std::string& p = a->prefill;
    const std::string key = a->answers.at(0);
    ASSERT_EQ(key.size(), 5u);
    EXPECT_TRUE(std::all_of(key.begin(), key.end(), ::isdigit));
    const size_t needle = p.find("The pass key is " + key + ".");
    ASSERT_NE(needle, std::string::npos);
    // The question is the end of the prompt, after the haystack.
    const std::string q = "What is the pass key? The pass key is";
    ASSERT_GE(p.size(), q.size());
    EXPECT_EQ(p.substr(p.size() - q.size()), q);
    // Depth, measured in words of the filler before the needle.
    const double frac = double(WordCount(p.substr(0, needle))) / WordCount(p);
    EXPECT_NEAR(frac, depth, 0.12) << "depth " << depth;
    EXPECT_LE(1 + Count(p), 400);
    EXPECT_GE(1 + Count(p), 400 - 40) << "haystack should nearly fill the context";
    EXPECT_EQ(a->scoring, Scoring::kExactMatch);
    EXPECT_GT(a->max_new_tokens, 0);
  }
}

TEST(Tasks, WordPasskeyUsesAWord) {
  TaskSpec s = Spec(TaskKind::kPasskey);
  s.word_key = true;
  auto a = MakeTask(s, Stories(), 5, Count);
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(std::all_of(a->answers[0].begin(), a->answers[0].end(), ::isalpha));
  EXPECT_NE(a->prefill.find("The secret word is " + a->answers[0]), std::string::npos);
}

TEST(Tasks, MultiKeyHasDistinctKeysAndAsksOne) {
  TaskSpec s = Spec(TaskKind::kMultiKey, 500);
  s.n_keys = 5;
  auto a = MakeTask(s, Stories(), 9, Count);
  ASSERT_TRUE(a.ok()) << a.message();
  std::regex re("The special magic number for (\\w+) is (\\d{5})\\.");
  std::set<std::string> names;
  std::string asked_value;
  const std::string& p = a->prefill;
  for (auto it = std::sregex_iterator(p.begin(), p.end(), re); it != std::sregex_iterator(); ++it) {
    names.insert((*it)[1]);
    if (p.find("magic number for " + (*it)[1].str() + "? ") != std::string::npos)
      asked_value = (*it)[2];
  }
  EXPECT_EQ(names.size(), 5u);
  EXPECT_EQ(asked_value, a->answers.at(0));
  EXPECT_DOUBLE_EQ(a->chance, 0.2);
}

TEST(Tasks, VarTrackChainResolvesToTheAnswer) {
  TaskSpec s = Spec(TaskKind::kVarTrack, 500, 0.2);
  s.n_hops = 4;
  s.n_chains = 3;
  auto a = MakeTask(s, Stories(), 4, Count);
  ASSERT_TRUE(a.ok()) << a.message();
  // Resolve the asked variable by following the assignments in the text.
  std::map<std::string, std::string> rhs;
  std::regex re("VAR ([A-Z]{5}) = (VAR [A-Z]{5}|\\d{5})\\.");
  const std::string& p = a->prefill;
  int assignments = 0;
  for (auto it = std::sregex_iterator(p.begin(), p.end(), re); it != std::sregex_iterator();
       ++it, ++assignments)
    rhs[(*it)[1]] = (*it)[2];
  EXPECT_EQ(assignments, 12);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(p, m, std::regex("What is the value of VAR ([A-Z]{5})\\?")));
  std::string v = m[1];
  int hops = 0;
  while (rhs.count(v) && hops < 10) {
    v = rhs[v];
    if (v.rfind("VAR ", 0) == 0) v = v.substr(4);
    ++hops;
  }
  EXPECT_EQ(hops, 4);
  EXPECT_EQ(v, a->answers.at(0));
}

TEST(Tasks, CopyRepeatsThePassage) {
  TaskSpec s = Spec(TaskKind::kCopy, 300, 0.25);
  s.span_tokens = 30;
  auto a = MakeTask(s, Stories(), 2, Count);
  ASSERT_TRUE(a.ok()) << a.message();
  EXPECT_EQ(a->scoring, Scoring::kTeacherForced);
  EXPECT_GE(Count(a->continuation), 30);
  EXPECT_NE(a->prefill.find(a->continuation), std::string::npos);
  EXPECT_EQ(a->score_from, 1);
  EXPECT_LE(1 + Count(a->prefill) + Count(a->continuation), 300);
}

TEST(Tasks, LmContinuationFollowsThePrefill) {
  TaskSpec s = Spec(TaskKind::kLm, 200);
  s.span_tokens = 50;
  auto a = MakeTask(s, Stories(), 8, Count);
  ASSERT_TRUE(a.ok()) << a.message();
  // prefill + " " + continuation is a contiguous piece of the corpus.
  const std::string joined = a->prefill + " " + a->continuation;
  std::string text;
  for (const auto& x : Stories().sentences) text += x + " ";
  EXPECT_NE(text.find(joined), std::string::npos);
  EXPECT_LE(1 + Count(a->prefill) + Count(a->continuation), 200);
  EXPECT_GE(Count(a->continuation), 50);
}

TEST(Tasks, RejectsBadSpecs) {
  EXPECT_FALSE(MakeTask(Spec(TaskKind::kPasskey, 8), Stories(), 1, Count).ok());
  EXPECT_FALSE(MakeTask(Spec(TaskKind::kPasskey, 300, 1.5), Stories(), 1, Count).ok());
  auto tiny = MakeTask(Spec(TaskKind::kPasskey, 40), Stories(), 1, Count);
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.message().find("too short"), std::string::npos) << tiny.message();
  EXPECT_FALSE(MakeTask(Spec(TaskKind::kPasskey), Corpus{"empty", {}}, 1, Count).ok());
  EXPECT_FALSE(ParseTaskName("nope").ok());
  EXPECT_EQ(*ParseTaskName("vartrack"), TaskKind::kVarTrack);
}

TEST(Tasks, SizesWithTheModelTokenizer) {
  testing::ToyModel m;
  TokenCounter bytes = [&m](const std::string& s) { return int(m.Encode(s, false).size()); };
  auto a = MakeTask(Spec(TaskKind::kPasskey, 1000, 0.3), Stories(), 6, bytes);
  ASSERT_TRUE(a.ok()) << a.message();
  EXPECT_LE(m.Encode(a->prefill, true).size(), 1000u);
}

}  // namespace
}  // namespace hqekv::eval
