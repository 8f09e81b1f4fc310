#include "eval/run/tasks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "eval/run/rng.h"

namespace hqekv::eval {
namespace {

// Uncommon concrete nouns (not TinyStories vocabulary) for the word passkey.
const char* const kRareWords[] = {
    "marmalade", "saxophone", "lighthouse", "porcupine",   "telescope", "avalanche", "chandelier",
    "harpoon",   "quartz",    "labyrinth",  "mongoose",    "trombone",  "glacier",   "periscope",
    "cinnamon",  "walrus",    "accordion",  "volcano",     "pelican",   "compass",   "tapestry",
    "falcon",    "lantern",   "meteor",     "anchovy",     "catapult",  "obsidian",  "gondola",
    "parsnip",   "zeppelin",  "armadillo",  "kaleidoscope"};
// Keys of the multi-key needle.
const char* const kKeyNames[] = {
    "apple",  "river",  "candle", "garden", "mirror", "pocket", "basket",  "window",
    "ladder", "button", "rocket", "pillow", "carpet", "hammer", "feather", "bottle",
    "wagon",  "helmet", "pencil", "kettle", "violin", "teapot", "blanket", "saddle",
    "tunnel", "shovel", "bucket", "ribbon", "cookie", "anchor", "spoon",   "castle"};

template <size_t N>
std::string Pick(const char* const (&list)[N], Rng& rng) {
  return list[rng.Below(N)];
}

std::string Digits5(Rng& rng) { return std::to_string(rng.Range(10000, 99999)); }

std::string VarName(Rng& rng) {
  std::string s;
  for (int i = 0; i < 5; ++i) s.push_back(static_cast<char>('A' + rng.Below(26)));
  return s;
}

// Consecutive sentences of the corpus from a random start (wrapping), each
// with its token count, until `budget` tokens are reached.
struct Filler {
  std::vector<std::string> sentences;
  std::vector<int> tokens;
};

Filler TakeSentences(const Corpus& c, size_t start, int budget, const TokenCounter& count) {
  Filler f;
  int used = 0;
  for (size_t k = 0; k < c.sentences.size(); ++k) {
    const std::string& s = c.sentences[(start + k) % c.sentences.size()];
    const int t = std::max(1, count(s));
    if (used + t > budget) {
      if (used == 0) continue;  // a first sentence longer than the budget: start at the next
      break;
    }
    f.sentences.push_back(s);
    f.tokens.push_back(t);
    used += t;
  }
  return f;
}

struct Insert {
  double pos;  // fraction of the filler tokens before the insert, in [0, 1]
  std::string text;
};

// head + filler sentences with the inserts placed at their token fractions + tail.
std::string Assemble(const std::string& head, const Filler& f, std::vector<Insert> inserts,
                     const std::string& tail) {
  std::stable_sort(inserts.begin(), inserts.end(),
                   [](const Insert& a, const Insert& b) { return a.pos < b.pos; });
  const int total = std::accumulate(f.tokens.begin(), f.tokens.end(), 0);
  std::string out = head;
  auto add = [&out](const std::string& s) {
    if (s.empty()) return;
    if (!out.empty()) out.push_back(' ');
    out += s;
  };
  size_t ins = 0;
  int before = 0;
  for (size_t i = 0; i <= f.sentences.size(); ++i) {
    // Place every insert whose target is at or before `before` tokens.
    while (ins < inserts.size() &&
           (i == f.sentences.size() || inserts[ins].pos * total <= before + 0.5 * f.tokens[i])) {
      add(inserts[ins++].text);
    }
    if (i == f.sentences.size()) break;
    add(f.sentences[i]);
    before += f.tokens[i];
  }
  add(tail);
  return out;
}

// Fills the haystack: sizes the filler so that BOS + prefill + continuation
// fits in spec.context_tokens, then trims sentence by sentence if the joined
// text tokenizes longer than the sum of its parts.
Status BuildHaystack(const TaskSpec& spec, const Corpus& corpus, Rng& rng,
                     const TokenCounter& count, const std::string& head,
                     const std::vector<Insert>& inserts, const std::string& tail,
                     const std::string& continuation, TaskInstance* inst) {
  int fixed = 1 + count(head) + count(tail) + (continuation.empty() ? 0 : count(continuation));
  for (const Insert& i : inserts) fixed += count(i.text);
  const int budget = spec.context_tokens - fixed - 2;  // 2: slack for joins
  if (budget < 8) {
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "task %s: context of %d tokens is too short (the fixed parts need %d tokens + 10 "
                  "of filler)",
                  TaskName(spec.kind), spec.context_tokens, fixed);
    return MakeError(buf);
  }
  Filler f = TakeSentences(corpus, rng.Below(corpus.sentences.size()), budget, count);
  if (f.sentences.empty())
    return MakeError("corpus '" + corpus.name + "' has no sentence short enough");
  for (int attempt = 0; attempt < 64; ++attempt) {
    inst->prefill = Assemble(head, f, inserts, tail);
    const int total = 1 + count(inst->prefill) + (continuation.empty() ? 0 : count(continuation));
    if (total <= spec.context_tokens) {
      inst->continuation = continuation;
      return Status::Ok();
    }
    if (f.sentences.size() <= 1) break;
    f.sentences.pop_back();
    f.tokens.pop_back();
  }
  return MakeError(std::string("task ") + TaskName(spec.kind) + ": could not fit the prompt in " +
                   std::to_string(spec.context_tokens) + " tokens");
}

// Consecutive sentences from `start` until at least `tokens` tokens.
std::string Passage(const Corpus& c, size_t start, int tokens, const TokenCounter& count) {
  std::string out;
  for (size_t k = 0; k < c.sentences.size(); ++k) {
    if (!out.empty()) out.push_back(' ');
    out += c.sentences[(start + k) % c.sentences.size()];
    if (count(out) >= tokens) break;
  }
  return out;
}

Status CheckSpec(const TaskSpec& s) {
  if (s.context_tokens < 16 || s.context_tokens > (1 << 22))
    return MakeError("task context_tokens must be in [16, 4194304], got " +
                     std::to_string(s.context_tokens));
  if (!(s.depth >= 0 && s.depth <= 1)) return MakeError("task depth must be in [0, 1]");
  if (s.n_keys < 1 || s.n_keys > 32) return MakeError("multikey n_keys must be in [1, 32]");
  if (s.n_hops < 1 || s.n_hops > 64) return MakeError("vartrack n_hops must be in [1, 64]");
  if (s.n_chains < 1 || s.n_chains > 16) return MakeError("vartrack n_chains must be in [1, 16]");
  if ((s.kind == TaskKind::kCopy || s.kind == TaskKind::kLm) &&
      (s.span_tokens < 2 || s.span_tokens >= s.context_tokens))
    return MakeError("copy/lm span_tokens must be in [2, context_tokens)");
  return Status::Ok();
}

}  // namespace

const char* TaskName(TaskKind k) {
  switch (k) {
    case TaskKind::kPasskey:
      return "passkey";
    case TaskKind::kMultiKey:
      return "multikey";
    case TaskKind::kVarTrack:
      return "vartrack";
    case TaskKind::kCopy:
      return "copy";
    case TaskKind::kLm:
      return "lm";
  }
  return "?";
}

Result<TaskKind> ParseTaskName(const std::string& name) {
  for (TaskKind k : {TaskKind::kPasskey, TaskKind::kMultiKey, TaskKind::kVarTrack, TaskKind::kCopy,
                     TaskKind::kLm}) {
    if (name == TaskName(k)) return k;
  }
  return MakeError("unknown task '" + name + "' (known: passkey, multikey, vartrack, copy, lm)");
}

std::string TaskSpec::Key() const {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s ctx=%d depth=%.4f word=%d keys=%d hops=%d chains=%d span=%d",
                TaskName(kind), context_tokens, depth, word_key ? 1 : 0, n_keys, n_hops, n_chains,
                span_tokens);
  return buf;
}

Result<TaskInstance> MakeTask(const TaskSpec& spec, const Corpus& corpus, uint64_t seed,
                              const TokenCounter& count) {
  HQEKV_RETURN_IF_ERROR(CheckSpec(spec));
  if (corpus.sentences.size() < 4)
    return MakeError("corpus '" + corpus.name + "' has fewer than 4 sentences");
  Rng rng(MixSeed(seed, static_cast<uint64_t>(spec.kind) + 1));
  TaskInstance inst;
  inst.task = TaskName(spec.kind);
  inst.seed = seed;
  inst.context_tokens = spec.context_tokens;
  inst.depth = spec.depth;

  switch (spec.kind) {
    case TaskKind::kPasskey: {
      const std::string key = spec.word_key ? Pick(kRareWords, rng) : Digits5(rng);
      const std::string what = spec.word_key ? "secret word" : "pass key";
      const std::string head =
          "There is an important piece of information hidden inside a lot of irrelevant text. "
          "Find it and remember it.";
      const std::string needle =
          "The " + what + " is " + key + ". Remember it. " + key + " is the " + what + ".";
      const std::string tail = "What is the " + what + "? The " + what + " is";
      HQEKV_RETURN_IF_ERROR(
          BuildHaystack(spec, corpus, rng, count, head, {{spec.depth, needle}}, tail, "", &inst));
      inst.scoring = Scoring::kExactMatch;
      inst.answers = {key};
      inst.max_new_tokens = std::max(6, count(" " + key) + 2);
      inst.chance = spec.word_key ? 1.0 / (sizeof kRareWords / sizeof kRareWords[0]) : 1e-5;
      return inst;
    }
    case TaskKind::kMultiKey: {
      std::vector<std::string> names;
      while (static_cast<int>(names.size()) < spec.n_keys) {
        std::string n = Pick(kKeyNames, rng);
        if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
      }
      std::vector<Insert> inserts;
      std::vector<std::string> values;
      for (int i = 0; i < spec.n_keys; ++i) {
        values.push_back(Digits5(rng));
        // The asked pair (i == 0) sits at the requested depth, the others anywhere.
        const double pos = i == 0 ? spec.depth : rng.Uniform();
        inserts.push_back(
            {pos, "The special magic number for " + names[i] + " is " + values[i] + "."});
      }
      const std::string head =
          "Some special magic numbers are hidden inside the following text. Remember them.";
      const std::string tail = "What is the special magic number for " + names[0] +
                               "? The special magic number for " + names[0] + " is";
      HQEKV_RETURN_IF_ERROR(
          BuildHaystack(spec, corpus, rng, count, head, inserts, tail, "", &inst));
      inst.scoring = Scoring::kExactMatch;
      inst.answers = {values[0]};
      inst.max_new_tokens = std::max(6, count(" " + values[0]) + 2);
      inst.chance = 1.0 / spec.n_keys;  // answering any number seen in the text
      return inst;
    }
    case TaskKind::kVarTrack: {
      std::vector<Insert> inserts;
      std::string asked, value;
      std::vector<std::string> used;
      for (int c = 0; c < spec.n_chains; ++c) {
        const std::string v = Digits5(rng);
        // Positions of the chain's hops: increasing, from `depth` (asked chain)
        // or a random start (distractors) to the end of the haystack.
        const double start = c == 0 ? spec.depth : rng.Uniform() * 0.5;
        std::string prev;
        for (int h = 0; h < spec.n_hops; ++h) {
          std::string name;
          do {
            name = VarName(rng);
          } while (std::find(used.begin(), used.end(), name) != used.end());
          used.push_back(name);
          const double pos = start + (1.0 - start) * h / spec.n_hops;
          const std::string rhs = h == 0 ? v : "VAR " + prev;
          inserts.push_back({pos, "VAR " + name + " = " + rhs + "."});
          prev = name;
        }
        if (c == 0) {
          asked = prev;
          value = v;
        }
      }
      const std::string head =
          "Memorize and track the chain of variable assignments hidden in the following text.";
      const std::string tail =
          "What is the value of VAR " + asked + "? The value of VAR " + asked + " is";
      HQEKV_RETURN_IF_ERROR(
          BuildHaystack(spec, corpus, rng, count, head, inserts, tail, "", &inst));
      inst.scoring = Scoring::kExactMatch;
      inst.answers = {value};
      inst.max_new_tokens = std::max(6, count(" " + value) + 2);
      inst.chance = 1.0 / spec.n_chains;
      return inst;
    }
    case TaskKind::kCopy: {
      // The passage comes from a random place of the corpus, the filler from another.
      // Passage() stops at the sentence that reaches span_tokens, so one long sentence
      // can overshoot; a place whose passage exceeds 1.5 x span_tokens is redrawn (the
      // copy appears twice, an overshoot can leave no room for the filler).
      std::string passage;
      for (int attempt = 0; attempt < 64; ++attempt) {
        passage = Passage(corpus, rng.Below(corpus.sentences.size()), spec.span_tokens, count);
        if (count(passage) <= spec.span_tokens + spec.span_tokens / 2) break;
      }
      HQEKV_RETURN_IF_ERROR(
          BuildHaystack(spec, corpus, rng, count, "", {{spec.depth, passage}}, "", passage, &inst));
      inst.scoring = Scoring::kTeacherForced;
      inst.score_from = 1;  // the first token of the repeat cannot be known to be a repeat
      inst.chance = 0;
      return inst;
    }
    case TaskKind::kLm: {
      // A window of consecutive sentences: the first context - span tokens are
      // prefilled, the next span tokens teacher-forced.
      const size_t start = rng.Below(corpus.sentences.size());
      const int prefill_budget = spec.context_tokens - spec.span_tokens - 1;
      Filler pre = TakeSentences(corpus, start, prefill_budget, count);
      if (pre.sentences.empty())
        return MakeError("lm: corpus sentences are longer than the prefill budget");
      const size_t next = (start + pre.sentences.size()) % corpus.sentences.size();
      std::string cont = Passage(corpus, next, spec.span_tokens, count);
      // Trim the prefill until everything fits.
      inst.depth = -1;
      for (;;) {
        std::string p;
        for (const auto& s : pre.sentences) p += (p.empty() ? "" : " ") + s;
        if (1 + count(p) + count(cont) <= spec.context_tokens || pre.sentences.size() <= 1) {
          inst.prefill = p;
          break;
        }
        // Drop from the front so that the continuation still follows the prefill.
        pre.sentences.erase(pre.sentences.begin());
        pre.tokens.erase(pre.tokens.begin());
      }
      if (1 + count(inst.prefill) + count(cont) > spec.context_tokens)
        return MakeError("lm: could not fit the window in " + std::to_string(spec.context_tokens) +
                         " tokens");
      inst.continuation = cont;
      inst.scoring = Scoring::kTeacherForced;
      inst.score_from = 0;
      return inst;
    }
  }
  return MakeError("unknown task kind");
}

}  // namespace hqekv::eval
