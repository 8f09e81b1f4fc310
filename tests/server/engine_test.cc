// The serving engine (server/engine.h) driven directly, without HTTP, on the
// bundled model: behaviours that end-to-end scripts cannot pin down. Each
// test is named after the class of fault it guards against:
//   slot reuse   a pinned slot's cache serves a new prompt only when its
//                tokens are, token by token, a prefix of that prompt (else a
//                conversation would continue on another's KV);
//   admission    the new request's own reservation counts against
//                --kv-budget-mb (else the server over-admits);
//   queueing     a request pinned to a busy slot does not hold up the
//                requests behind it while other slots are idle;
//   bounds       counts from flags are refused before any thread starts;
//   profiles     a request names profiles of the operator's directory, never
//                a path;
//   restore      a restored slot counts against the budget and in
//                kv_bytes_held.
#include "server/engine.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "io/model_source.h"
#include "../temp_path.h"

namespace hqekv::server {
namespace {

using std::chrono::milliseconds;

const std::string& ModelPath() {
  static const std::string p = std::string(HQEKV_SOURCE_DIR) + "/models/stories260K.gguf";
  return p;
}

std::unique_ptr<ModelSource> Source() {
  auto src = LoadModel(ModelPath());
  EXPECT_TRUE(src.ok()) << src.message();
  return std::move(*src);
}

std::unique_ptr<Engine> MakeEngine(const ModelSource& src, EngineOptions o) {
  auto e = Engine::Create(src, o);
  EXPECT_TRUE(e.ok()) << e.message();
  return e.ok() ? std::move(*e) : nullptr;
}

CompletionRequest Req(const std::string& prompt, int max_tokens, int id_slot = -1) {
  CompletionRequest r;
  r.prompt = prompt;
  r.max_tokens = max_tokens;
  r.id_slot = id_slot;
  r.ignore_eos = true;  // a fixed number of tokens, whatever the model says
  return r;
}

struct Done {
  std::string text;
  FinishEvent fin;
  std::chrono::steady_clock::time_point at;
};

// Waits (at most 60 s) for the request to finish.
Done Wait(RequestChannel& ch) {
  Done d;
  std::vector<TokenEvent> ev;
  std::optional<FinishEvent> fin;
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fin && std::chrono::steady_clock::now() < limit) ch.Wait(milliseconds(20), &ev, &fin);
  d.at = std::chrono::steady_clock::now();
  EXPECT_TRUE(fin.has_value()) << "the request did not finish within 60 s";
  if (fin) d.fin = *fin;
  for (const auto& e : ev) d.text += e.text;
  return d;
}

Done RunToEnd(Engine& e, const CompletionRequest& r) {
  ApiError err;
  auto ch = e.Submit(r, &err);
  EXPECT_NE(ch, nullptr) << err.message;
  if (!ch) return {};
  return Wait(*ch);
}

const std::string kPromptA = "Once upon a time, there was a little dog named Max. He liked to run";
const std::string kPromptB =
    "The sun was hot and the girl went to the park with her mom to play on the big swing";

TEST(EngineSlotReuse, PinnedSlotReusesOnlyATokenByTokenPrefix) {
  auto src = Source();
  EngineOptions o;
  o.n_slots = 2;
  o.ctx = 256;
  auto e = MakeEngine(*src, o);
  ASSERT_NE(e, nullptr);
  // max_tokens 1: the one sampled token never runs, so slot 0 keeps exactly A's prompt.
  Done a = RunToEnd(*e, Req(kPromptA, 1, 0));
  ASSERT_EQ(a.fin.reason, "length");
  // The same prompt again on slot 0: every token comes from the cache.
  Done again = RunToEnd(*e, Req(kPromptA, 1, 0));
  EXPECT_EQ(again.fin.usage.cached_tokens, a.fin.usage.prompt_tokens);
  EXPECT_EQ(again.text, a.text);
  // Another conversation, at least as long as the slot's history, on slot 0:
  // nothing may be taken from A's cache, and the answer is B's own.
  Done ref = RunToEnd(*MakeEngine(*src, o), Req(kPromptB, 12, 1));
  ASSERT_GE(ref.fin.usage.prompt_tokens, a.fin.usage.prompt_tokens);
  Done b = RunToEnd(*e, Req(kPromptB, 12, 0));
  EXPECT_EQ(b.fin.usage.cached_tokens, 0) << "slot 0 continued B on A's KV cache";
  EXPECT_EQ(b.text, ref.text);
}

TEST(EngineAdmission, TheNewRequestsOwnReservationCountsAgainstTheBudget) {
  auto src = Source();
  EngineOptions o;
  o.n_slots = 2;
  o.ctx = 256;
  const int max_tokens = 120;
  // The reservation of one request (prompt + max_tokens positions).
  const Tokenizer& tok = *src->tokenizer;
  const int n_prompt = static_cast<int>(tok.Encode(kPromptA, tok.add_bos(), false).size());
  int64_t one = 0;
  {
    auto probe = MakeEngine(*src, o);
    ASSERT_NE(probe, nullptr);
    ApiError err;
    one = probe->ReservationBytes(probe->options().kv, n_prompt + max_tokens, &err);
    ASSERT_GT(one, 0) << err.message;
  }
  // Room for one request, not two: the second must wait for the first.
  o.kv_budget_bytes = one + one / 2;
  auto e = MakeEngine(*src, o);
  ASSERT_NE(e, nullptr);
  ApiError err;
  auto c1 = e->Submit(Req(kPromptA, max_tokens), &err);
  ASSERT_NE(c1, nullptr) << err.message;
  auto c2 = e->Submit(Req(kPromptA, max_tokens), &err);
  ASSERT_NE(c2, nullptr) << err.message;
  Done d1 = Wait(*c1), d2 = Wait(*c2);
  EXPECT_EQ(d1.fin.reason, "length");
  EXPECT_EQ(d2.fin.reason, "length");
  EXPECT_EQ(d1.text, d2.text);  // served one after the other, same greedy answer
  const EngineCounters m = e->Counters();
  EXPECT_LE(m.kv_reserved_peak, o.kv_budget_bytes) << "admitted past --kv-budget-mb";
  EXPECT_EQ(m.slots_busy_peak, 1);
  EXPECT_EQ(m.kv_reserved, 0);
}

TEST(EngineQueueing, ARequestPinnedToABusySlotDoesNotBlockOthers) {
  auto src = Source();
  EngineOptions o;
  o.n_slots = 2;
  o.ctx = 256;
  auto e = MakeEngine(*src, o);
  ASSERT_NE(e, nullptr);
  ApiError err;
  auto long_a = e->Submit(Req(kPromptA, 200, 0), &err);  // slot 0, a while
  ASSERT_NE(long_a, nullptr) << err.message;
  auto pinned = e->Submit(Req(kPromptB, 4, 0), &err);  // waits for slot 0
  ASSERT_NE(pinned, nullptr) << err.message;
  auto free_c = e->Submit(Req(kPromptB, 4), &err);  // any slot: slot 1 is idle
  ASSERT_NE(free_c, nullptr) << err.message;
  // The three polled together: each finish time is when it arrived.
  Done a, p, c;
  bool fa = false, fp = false, fc = false;
  std::vector<TokenEvent> ev;
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!(fa && fp && fc) && std::chrono::steady_clock::now() < limit) {
    for (auto [ch, d, f] : {std::tuple{long_a.get(), &a, &fa}, std::tuple{pinned.get(), &p, &fp},
                            std::tuple{free_c.get(), &c, &fc}}) {
      if (*f) continue;
      std::optional<FinishEvent> fin;
      ch->Wait(milliseconds(1), &ev, &fin);
      if (fin) {
        d->fin = *fin;
        d->at = std::chrono::steady_clock::now();
        *f = true;
      }
    }
  }
  ASSERT_TRUE(fa && fp && fc) << "not every request finished within 60 s";
  EXPECT_EQ(c.fin.reason, "length");
  EXPECT_LT(c.at, a.at) << "the unpinned request waited behind one pinned to a busy slot";
  EXPECT_GE(p.at, a.at);  // the pinned one did wait for its slot
  EXPECT_EQ(p.fin.reason, "length");
}

TEST(EngineBounds, CountsFromFlagsAreRefusedBeforeStarting) {
  auto src = Source();
  auto refused = [&](EngineOptions o, const std::string& words) {
    auto e = Engine::Create(*src, o);
    ASSERT_FALSE(e.ok()) << words;
    EXPECT_NE(e.message().find(words), std::string::npos) << e.message();
  };
  EngineOptions o;
  o.queue_max = 100000;
  refused(o, "--queue must be in [0, 1024]");
  o = {};
  o.default_max_tokens = 0;
  refused(o, "--max-tokens must be in [1,");
  o.default_max_tokens = -5;
  refused(o, "--max-tokens must be in [1,");
  o = {};
  o.n_slots = 100000;
  refused(o, "-np must be in [1, 256]");
  o = {};
  o.kv_budget_bytes = -1;
  refused(o, "--kv-budget-mb");
  o = {};
  o.profile_dir = "/nonexistent/profiles";
  refused(o, "is not a directory");
}

TEST(EngineProfiles, RequestsNameProfilesOfTheServersDirectoryNeverPaths) {
  auto src = Source();
  EngineOptions o;
  o.ctx = 128;
  auto e = MakeEngine(*src, o);
  ASSERT_NE(e, nullptr);
  auto refused = [](Engine& eng, const std::string& kv, const std::string& words) {
    CompletionRequest r = Req("Once", 2);
    r.kv = kv;
    ApiError err;
    EXPECT_EQ(eng.Submit(r, &err), nullptr) << kv;
    EXPECT_EQ(err.status, 400) << kv;
    EXPECT_NE(err.message.find(words), std::string::npos) << kv << ": " << err.message;
    return err.message;
  };
  // Without --profile-dir: no profile at all, and the answer is the same
  // whether the path exists, is a directory or is missing.
  const std::string m1 = refused(*e, "hqekv:profile=/etc/passwd", "takes no profile=");
  const std::string m2 = refused(*e, "hqekv:profile=/nonexistent", "takes no profile=");
  const std::string m3 = refused(*e, "hqekv:profile=/tmp", "takes no profile=");
  EXPECT_EQ(m1, m2);
  EXPECT_EQ(m1, m3);
  // With a directory: names in it only.
  o.profile_dir = std::string(HQEKV_SOURCE_DIR) + "/profiles/stories260K";
  auto p = MakeEngine(*src, o);
  ASSERT_NE(p, nullptr);
  refused(*p, "hqekv:profile=../refmodel-4l/x.json", "must name a profile");
  refused(*p, "hqekv:profile=/etc/passwd", "must name a profile");
  refused(*p, "hqekv:profile=.hidden", "must name a profile");
  refused(*p, "hqekv:profile=nothere", "no profile 'nothere'");
  CompletionRequest r = Req("Once upon a time", 4);
  r.kv = "hqekv:profile=hqekv-3.2-nominal";  // .json added
  Done d = RunToEnd(*p, r);
  EXPECT_EQ(d.fin.reason, "length") << d.fin.error;
}

TEST(EngineRestore, ARestoredSlotCountsAgainstTheBudgetAndInBytesHeld) {
  auto src = Source();
  const std::string dir = hqekv::test::TempPath("engine_restore");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  EngineOptions o;
  o.ctx = 256;
  o.slot_save_path = dir;
  int64_t saved_bytes = 0, reserve = 0;
  {
    auto e = MakeEngine(*src, o);
    ASSERT_NE(e, nullptr);
    Done d = RunToEnd(*e, Req(kPromptA + " " + kPromptB, 1, 0));
    ApiError rerr;
    reserve = e->ReservationBytes(e->options().kv, d.fin.usage.prompt_tokens + 1, &rerr);
    ASSERT_GT(reserve, 0) << rerr.message;
    ASSERT_EQ(d.fin.reason, "length");
    std::string info;
    ApiError err;
    ASSERT_TRUE(e->SaveSlot(0, "s.kv", &info, &err)) << err.message;
    saved_bytes = d.fin.usage.kv_bytes;
    ASSERT_GT(saved_bytes, 0);
  }
  // A budget smaller than the state: refused, nothing held.
  o.kv_budget_bytes = saved_bytes / 2;
  {
    auto e = MakeEngine(*src, o);
    ASSERT_NE(e, nullptr);
    std::string info;
    ApiError err;
    EXPECT_FALSE(e->RestoreSlot(0, "s.kv", &info, &err));
    EXPECT_NE(err.message.find("budget"), std::string::npos) << err.message;
    EXPECT_EQ(e->Counters().kv_bytes_held, 0);
  }
  // Room for it and for a request: restored, and counted in kv_bytes_held at once.
  o.kv_budget_bytes = saved_bytes + 2 * reserve;
  auto e = MakeEngine(*src, o);
  ASSERT_NE(e, nullptr);
  std::string info;
  ApiError err;
  ASSERT_TRUE(e->RestoreSlot(0, "s.kv", &info, &err)) << err.message;
  EXPECT_EQ(e->Counters().kv_bytes_held, saved_bytes);
  // The restored prompt is served from the cache.
  Done d = RunToEnd(*e, Req(kPromptA + " " + kPromptB, 1, 0));
  EXPECT_GT(d.fin.usage.cached_tokens, 0);
}

TEST(EngineCancellation, ACancelledRequestFreesItsSlotAndAQueuedOneIsNeverServed) {
  auto src = Source();
  EngineOptions o;
  o.n_slots = 1;
  o.ctx = 256;
  auto e = MakeEngine(*src, o);
  ASSERT_NE(e, nullptr);
  ApiError err;
  auto a = e->Submit(Req(kPromptA, 200), &err);
  ASSERT_NE(a, nullptr) << err.message;
  auto b = e->Submit(Req(kPromptB, 200), &err);  // waits for the one slot
  ASSERT_NE(b, nullptr) << err.message;
  b->Cancel();
  // Cancel A once it has produced a token.
  std::vector<TokenEvent> ev;
  std::optional<FinishEvent> fin;
  while (ev.empty() && !fin) a->Wait(milliseconds(5), &ev, &fin);
  a->Cancel();
  Done da = Wait(*a), db = Wait(*b);
  if (fin) da.fin = *fin;
  EXPECT_EQ(da.fin.reason, "cancelled");
  EXPECT_EQ(db.fin.reason, "cancelled");
  const EngineCounters m = e->Counters();
  const Tokenizer& tok = *src->tokenizer;
  const int64_t n_a = static_cast<int64_t>(tok.Encode(kPromptA, tok.add_bos(), false).size());
  EXPECT_EQ(m.prompt_tokens, n_a) << "the cancelled queued request was admitted";
  EXPECT_LT(m.generated_tokens, 200) << "the cancelled request ran to its end";
  EXPECT_EQ(m.slots_busy, 0);
  EXPECT_EQ(m.kv_reserved, 0);
  // The slot is free again.
  Done c = RunToEnd(*e, Req(kPromptB, 3));
  EXPECT_EQ(c.fin.reason, "length");
}

// Slot saves go through the one output-path rule: a link the operator put in
// --slot-save-path stays a link and its target gets the state.
TEST(EngineSlotSave, FollowsTheOutputPathRule) {
  auto src = Source();
  const std::string dir = hqekv::test::TempPath("engine_save_link");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::filesystem::create_symlink("real.kv", dir + "/link.kv");
  EngineOptions o;
  o.ctx = 128;
  o.slot_save_path = dir;
  auto e = MakeEngine(*src, o);
  ASSERT_NE(e, nullptr);
  ASSERT_EQ(RunToEnd(*e, Req(kPromptA, 1, 0)).fin.reason, "length");
  std::string info;
  ApiError err;
  ASSERT_TRUE(e->SaveSlot(0, "link.kv", &info, &err)) << err.message;
  EXPECT_TRUE(std::filesystem::is_symlink(dir + "/link.kv"));
  EXPECT_TRUE(std::filesystem::is_regular_file(std::filesystem::symlink_status(dir + "/real.kv")));
  EXPECT_GT(std::filesystem::file_size(dir + "/real.kv"), 0u);
  ASSERT_TRUE(e->RestoreSlot(0, "link.kv", &info, &err)) << err.message;
}

}  // namespace
}  // namespace hqekv::server
