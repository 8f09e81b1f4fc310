// `hqekv chat`: an interactive conversation. User turns come from stdin one
// line each (a terminal or a pipe); answers stream to stdout, one line of
// figures per turn on stderr. The KV cache (under its --kv policy) is kept
// across turns: each turn prefills only its own tokens, the text between the
// end of the last answer and the new assistant prompt, found by rendering the
// conversation with a sentinel in place of the last answer. /reset forgets
// the conversation and empties the cache; /exit or end of input ends. Ctrl-C
// stops the current answer; a second one, or one at the prompt, ends.
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "cache/kv_report.h"
#include "cli/generation_setup.h"
#include "cli/registry.h"
#include "model/generate_step.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/stop_text.h"

namespace hqekv::cli::cmd_chat {
namespace {

struct ChatArgs {
  GenerationArgs gen;
  std::string system, chat_template;
  std::vector<std::string> stops;
  int n = 256;  // tokens per answer at most
  bool no_special = false, ignore_eos = false;
  bool conversation = false;  // llama.cpp's -cnv: chat always is one
};

// Ctrl-C presses not yet handled (set by the handler, read by the loops).
std::atomic<int> g_interrupts{0};
extern "C" void OnInterrupt(int) { g_interrupts.fetch_add(1); }

// SIGINT without SA_RESTART: a read blocked at the prompt returns (EINTR), so
// Ctrl-C there ends the session instead of waiting for a line.
void InstallInterruptHandler() {
  struct sigaction sa = {};
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
}

// Stands for the last answer while the conversation is rendered again: what
// precedes it is in the cache, what follows it is the new turn's text.
constexpr const char* kAnswerSentinel = "\x01hqekv-answer\x01";

class ChatSession {
 public:
  ChatSession(const ChatArgs& a, Generation& g, const ChatFormat& format)
      : a_(a), g_(g), tok_(*g.src->tokenizer), format_(format) {
    stops_ = a.stops;
    stops_.push_back(ChatEndOfTurnText(format));
    Reset();
  }

  void Reset() {
    messages_.clear();
    if (!a_.system.empty()) messages_.push_back({"system", a_.system});
    g_.cache->Reset();
    seq_.Clear();
    cached_text_.clear();
  }

  // One user turn: prefill its text, stream the answer. false: stop the session.
  // True when the last Turn error left the session as it was before the
  // turn (a turn too long for the context): the conversation goes on.
  bool turn_refused() const { return turn_refused_; }

  Result<bool> Turn(const std::string& user) {
    turn_refused_ = false;
    ++turn_;
    messages_.push_back({"user", user});
    auto new_ids = NewTurnTokens();
    if (!new_ids.ok()) {
      messages_.pop_back();  // e.g. the template's raise_exception: the turn is not kept
      return new_ids.error();
    }
    std::vector<int32_t> ids = std::move(*new_ids);
    const int held = static_cast<int>(seq_.window.size());  // 0 when re-rendered from scratch
    HQEKV_RETURN_IF_ERROR(MakeRoom(static_cast<int>(ids.size())));
    HQEKV_RETURN_IF_ERROR(
        DecodeTokens(*g_.model, *g_.cache, seq_, ids.data(), static_cast<int>(ids.size())));
    HQEKV_ASSIGN_OR_RETURN(cached_text_,
                           TryRenderChat(format_, messages_, /*add_generation_prompt=*/true));

    StopText out(stops_);
    int32_t prev = ids.back();
    StepOptions step;
    step.context_shift = true;
    step.n_keep = KeepTokens();
    step.is_eog = [&](int32_t t) {
      if (!a_.ignore_eos && tok_.IsEndOfGeneration(t)) return true;
      const std::string piece = tok_.DecodePiece(prev, t);
      prev = t;
      return out.Add(piece);
    };
    int generated = 0;
    bool interrupted = false;
    for (; generated < a_.n; ++generated) {
      if (g_interrupts.load() > 0) {
        interrupted = true;
        break;
      }
      HQEKV_ASSIGN_OR_RETURN(StepResult s,
                             GenerateStep(*g_.model, *g_.cache, *g_.sampler, seq_, step,
                                          [&](int32_t) { Print(out.Release()); }));
      if (s.end == StepEnd::kEndOfGeneration) break;
    }
    Print(out.Flush());
    Print("\n");
    messages_.push_back({"assistant", out.text()});
    const KvStats st = g_.cache->Stats();
    std::fprintf(stderr,
                 "[hqekv chat] turn %d | prefilled %zu tok (cache held %d) | generated %d tok%s | "
                 "cache %zu tok, %d context shifts | %s (%lld bytes held, %.3f true bits per kept "
                 "element)\n",
                 turn_, ids.size(), held, generated, interrupted ? " (interrupted)" : "",
                 seq_.window.size(), seq_.context_shifts, MemorySummary(st).c_str(),
                 static_cast<long long>(st.bytes.total()), st.true_bits());
    if (interrupted) {
      // A second Ctrl-C while the answer was being stopped ends the session.
      const bool twice = g_interrupts.load() > 1;
      g_interrupts.store(0);
      if (twice) return false;
    }
    return true;
  }

 private:
  static void Print(const std::string& s) {
    if (s.empty()) return;
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
  }

  // Context shifts keep the BOS (the first window token) when there is one.
  int KeepTokens() const {
    return !seq_.window.empty() && tok_.bos() >= 0 && seq_.window.front() == tok_.bos() ? 1 : 0;
  }

  // The tokens of the text after what the cache holds. The conversation is
  // rendered with the sentinel for the last answer; when the text before it
  // is not what the cache holds (a template that rewrites history), the cache
  // is emptied and the whole conversation is prefilled.
  Result<std::vector<int32_t>> NewTurnTokens() {
    std::string text;
    if (!seq_.window.empty() && messages_.size() >= 2) {
      std::vector<ChatMessage> marked = messages_;
      marked[marked.size() - 2].content = kAnswerSentinel;
      auto full_or = TryRenderChat(format_, marked, true);
      const std::string full = full_or.ok() ? std::move(*full_or) : std::string();
      const size_t at = full.find(kAnswerSentinel);
      if (at != std::string::npos && full.compare(0, at, cached_text_) == 0)
        text = full.substr(at + std::string(kAnswerSentinel).size());
    }
    const bool fresh = text.empty();
    if (fresh) {
      g_.cache->Reset();
      seq_.Clear();
      HQEKV_ASSIGN_OR_RETURN(text, TryRenderChat(format_, messages_, true));
    }
    std::vector<int32_t> ids = tok_.Encode(text, fresh && tok_.add_bos(), !a_.no_special);
    if (ids.empty()) return MakeError("the turn's text encodes to no tokens");
    return ids;
  }

  // Context shifts until `n` more tokens fit (one more for the answer).
  Status MakeRoom(int n) {
    while (static_cast<int>(seq_.window.size()) + n + 1 > g_.ctx) {
      if (seq_.window.size() <= static_cast<size_t>(KeepTokens()) ||
          n + 1 + KeepTokens() > g_.ctx) {
        messages_.pop_back();
        turn_refused_ = true;
        return MakeError("the turn has " + std::to_string(n) +
                         " tokens, more than the context of " + std::to_string(g_.ctx) +
                         " holds (use a larger --ctx)");
      }
      HQEKV_RETURN_IF_ERROR(ShiftContext(*g_.model, *g_.cache, seq_, KeepTokens()));
    }
    return Status::Ok();
  }

  const ChatArgs& a_;
  Generation& g_;
  const Tokenizer& tok_;
  ChatFormat format_;
  std::vector<std::string> stops_;
  std::vector<ChatMessage> messages_;
  Sequence seq_;
  std::string cached_text_;  // the rendered text whose tokens precede the last answer in the cache
  int turn_ = 0;
  bool turn_refused_ = false;
};

// Most bytes of one typed turn: a line without end on stdin must not grow
// memory without bound (a turn this long is far past any context anyway).
constexpr size_t kMaxTurnBytes = size_t{1} << 20;

// One line of `in` into *line (without '\n'): false at end of input. A line
// longer than kMaxTurnBytes is read to its end and dropped (*too_long).
bool ReadTurn(std::istream& in, std::string* line, bool* too_long) {
  line->clear();
  *too_long = false;
  bool any = false;
  for (int c; (c = in.get()) != std::char_traits<char>::eof();) {
    any = true;
    if (c == '\n') return true;
    if (line->size() < kMaxTurnBytes) {
      line->push_back(static_cast<char>(c));
    } else {
      *too_long = true;
    }
  }
  return any;
}

int Chat(const ChatArgs& a) {
  auto g = OpenGeneration(a.gen);
  if (!g.ok()) {
    std::fprintf(stderr, "hqekv chat: error: %s\n", g.message().c_str());
    return 1;
  }
  auto format = ResolveChatFormat(g->src->tokenizer->chat_template(), a.chat_template,
                                  ChatTokensOf(*g->src->tokenizer));
  if (!format.ok()) {
    std::fprintf(stderr, "hqekv chat: error: %s: %s\n", g->path.c_str(), format.message().c_str());
    return 1;
  }
  std::fprintf(stderr, "[hqekv chat] %s | kv %s | template %s | /reset, /exit, Ctrl-C\n",
               g->src->config.name.c_str(), g->cache->Describe().c_str(), ChatFormatName(*format));
  if (!format->fallback_note().empty())
    std::fprintf(stderr, "[hqekv chat] %s\n", format->fallback_note().c_str());
  InstallInterruptHandler();
  ChatSession session(a, *g, *format);
  const bool tty = isatty(STDIN_FILENO);
  std::string line;
  for (;;) {
    if (tty) std::fputs("> ", stderr);
    bool too_long = false;
    if (!ReadTurn(std::cin, &line, &too_long) || g_interrupts.load() > 0) break;  // EOF or Ctrl-C
    if (too_long) {
      std::fprintf(stderr, "hqekv chat: error: the turn is longer than %zu bytes; not sent\n",
                   kMaxTurnBytes);
      continue;
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (line == "/exit") break;
    if (line == "/reset") {
      session.Reset();
      std::fputs("[hqekv chat] conversation reset\n", stderr);
      continue;
    }
    auto more = session.Turn(line);
    if (!more.ok()) {
      std::fprintf(stderr, "hqekv chat: error: %s\n", more.message().c_str());
      if (session.turn_refused()) continue;  // the conversation is as before the turn
      return 1;
    }
    if (!*more) break;
  }
  return 0;
}

const CommandRegistrar kRegister(11, [](CLI::App& app, int* rc) {
  auto a = std::make_shared<ChatArgs>();
  CLI::App* cmd = app.add_subcommand(
      "chat", "Interactive chat: user turns from stdin, answers on stdout, KV cache kept");
  AddGenerationFlags(cmd, a->gen);
  cmd->add_option("-n,--n-predict", a->n, "Tokens per answer at most")
      ->check(IntFlag(1, 1 << 30))
      ->capture_default_str();
  cmd->add_option("--system,--system-prompt", a->system, "System message (-sys)");
  cmd->add_flag("--conversation", a->conversation,
                "Accepted for llama.cpp's -cnv: chat is always a conversation");
  cmd->add_option("--chat-template", a->chat_template,
                  "Chat format instead of the file's template (" + SupportedChatFormatNames() +
                      ") or a Jinja template file");
  cmd->add_option("--stop,-r,--reverse-prompt", a->stops,
                  "End an answer when it contains this text (repeatable)");
  cmd->add_flag("--no-special", a->no_special, "Control tokens typed in a turn stay plain text");
  cmd->add_flag("--ignore-eos", a->ignore_eos, "Do not stop at end-of-generation tokens");
  cmd->callback([a, rc] { *rc = Chat(*a); });
});

}  // namespace
}  // namespace hqekv::cli::cmd_chat
