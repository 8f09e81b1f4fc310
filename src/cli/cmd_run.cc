// `hqekv run`: generate text with a model and a (possibly compressed) KV
// cache, streaming it to stdout; one summary line on stderr at the end.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <nlohmann/json.hpp>
#include <vector>

#include "cache/kv_report.h"
#include "cache/kv_state.h"
#include "cli/generation_setup.h"
#include "core/file.h"
#include "cli/kv_flags.h"
#include "cli/model_args.h"
#include "cli/number_flags.h"
#include "cli/registry.h"
#include "model/generate.h"
#include "model/llama.h"
#include "model/sampler.h"
#include "policy/factory.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/stop_text.h"

namespace hqekv::cli::cmd_run {
namespace {

struct RunArgs {
  GenerationArgs gen;  // -m, --tokenizer, sampling, -t, -c, --kv, -ctk/-ctv
  std::string prompt, prompt_file;
  bool kv_report = false;
  bool json = false;  // the text and the summary as one JSON object on stdout, nothing streamed
  // Tokens and chat (llama.cpp conventions): control tokens written in the
  // prompt are parsed unless no_special; print_special prints generated
  // control tokens; chat renders the prompt as one user turn (after an
  // optional system turn) with the model's chat template.
  bool no_special = false, print_special = false, chat = false, ignore_eos = false;
  bool no_display_prompt = false, no_chat = false;
  std::string system, chat_template;
  std::string prompt_cache;  // --prompt-cache FILE (cache/kv_state.h)
  std::vector<std::string> stops;
  int n = 256;
  // Past --ctx (llama.cpp's context shift): keep the first `keep` prompt
  // tokens (after BOS; -1 = the whole prompt), drop half of the rest.
  int keep = 0;
  bool no_context_shift = false;
};

// Generated text on its way to stdout through the shared stop-string
// scanner (tokenizer/stop_text.h).
class StopScanner {
 public:
  explicit StopScanner(const std::vector<std::string>& stops) : text_(stops) {}
  // Appends a piece; true when a stop string now occurs (the text is cut there).
  bool Add(const std::string& piece) { return text_.Add(piece); }
  // No output at all (--json prints the text with the summary).
  void Silence() { silent_ = true; }
  std::string Printable() const { return text_.text(); }
  // Writes what no stop string can still claim (everything when final).
  void Flush(bool final) {
    if (silent_) return;
    const std::string out = final ? text_.Flush() : text_.Release();
    if (!out.empty()) {
      std::fwrite(out.data(), 1, out.size(), stdout);
      std::fflush(stdout);
    }
  }

 private:
  StopText text_;
  bool silent_ = false;
};

int Run(const RunArgs& a) {
  std::string prompt = a.prompt;
  if (!a.prompt_file.empty()) {
    auto text = ReadTextFile(a.prompt_file);
    if (!text.ok()) {
      std::fprintf(stderr, "hqekv run: error: %s\n", text.message().c_str());
      return 1;
    }
    prompt = std::move(text).value();
  }
  // Threads, sampler, model, context and cache as `chat` opens them; a
  // calibration profile must have been made for this model.
  auto opened = OpenGeneration(a.gen);
  if (!opened.ok()) {
    std::fprintf(stderr, "hqekv run: error: %s\n", opened.message().c_str());
    return 1;
  }
  Generation& g = *opened;
  const std::string& path = g.path;
  const ModelConfig& c = g.src->config;
  const int ctx = g.ctx;
  const Tokenizer& tok = *g.src->tokenizer;
  // Chat prints the reply only; --json prints nothing but its object.
  const bool echo_prompt = !a.chat && !a.json && !a.no_display_prompt;
  if (a.chat) {
    auto format = ResolveChatFormat(tok.chat_template(), a.chat_template, ChatTokensOf(tok));
    std::vector<ChatMessage> msgs;
    if (!a.system.empty()) msgs.push_back({"system", a.system});
    msgs.push_back({"user", prompt});
    auto rendered = format.ok() ? TryRenderChat(*format, msgs, /*add_generation_prompt=*/true)
                                : Result<std::string>(format.error());
    if (!rendered.ok()) {
      std::fprintf(stderr, "hqekv run: error: %s: %s\n", path.c_str(), rendered.message().c_str());
      return 1;
    }
    if (!format->fallback_note().empty())
      std::fprintf(stderr, "hqekv run: %s\n", format->fallback_note().c_str());
    prompt = std::move(*rendered);
  } else if (!a.system.empty() || !a.chat_template.empty()) {
    std::fprintf(stderr, "hqekv run: error: --system and --chat-template need --chat\n");
    return 1;
  }
  std::vector<int32_t> ids = tok.Encode(prompt, tok.add_bos() || prompt.empty(), !a.no_special);
  if (ids.empty()) {
    std::fprintf(stderr,
                 "hqekv run: error: empty prompt and the model's tokenizer has no BOS token\n");
    return 1;
  }
  if (static_cast<int>(ids.size()) >= ctx) {
    std::fprintf(stderr,
                 "hqekv run: error: the prompt has %zu tokens, more than the context of %d allows "
                 "(use a larger --ctx or a shorter prompt)\n",
                 ids.size(), ctx);
    return 1;
  }
  if (echo_prompt) {
    std::fwrite(prompt.data(), 1, prompt.size(), stdout);
    std::fflush(stdout);
  }
  GenerateOptions opt;
  opt.max_new = a.n;
  opt.context_shift = !a.no_context_shift;
  // As llama.cpp: --keep counts prompt tokens after the BOS, which is kept too.
  const int bos_kept = tok.bos() >= 0 && ids.front() == tok.bos() ? 1 : 0;
  const int n_prompt = static_cast<int>(ids.size());
  opt.n_keep = a.keep < 0 || a.keep + bos_kept > n_prompt ? n_prompt : a.keep + bos_kept;
  // --prompt-cache: a file whose tokens start the prompt (same model and
  // policy) skips their prefill; after the prefill the prompt's state is
  // saved to it. A damaged file or one made for another model is an error.
  KvStateMeta past;
  bool save_cache = !a.prompt_cache.empty();
  // Checked before the generation: the save happens after the prefill.
  if (save_cache && !std::filesystem::exists(a.prompt_cache)) {
    if (Status st = CheckWritable(a.prompt_cache); !st.ok()) {
      std::fprintf(stderr, "hqekv run: error: --prompt-cache: %s\n", st.message().c_str());
      return 1;
    }
  }
  if (save_cache && std::filesystem::exists(a.prompt_cache)) {
    auto file = ReadFileChecked(a.prompt_cache, uint64_t(1) << 36);
    auto header = file.ok() ? ReadKvStateHeader(*file) : Result<KvStateMeta>(file.error());
    if (!header.ok()) {
      std::fprintf(stderr, "hqekv run: error: --prompt-cache %s: %s\n", a.prompt_cache.c_str(),
                   header.message().c_str());
      return 1;
    }
    const bool prefix = header->spec == g.spec && header->tokens.size() <= ids.size() &&
                        std::equal(header->tokens.begin(), header->tokens.end(), ids.begin());
    if (prefix) {
      KvStateMeta expect;
      expect.model_identity = g.src->identity;
      expect.geometry = g.cache->geometry();
      auto loaded = LoadKvState(*file, expect, *g.cache);
      if (!loaded.ok()) {
        std::fprintf(stderr, "hqekv run: error: --prompt-cache %s: %s\n", a.prompt_cache.c_str(),
                     loaded.message().c_str());
        return 1;
      }
      past = std::move(*loaded);
      opt.n_past = static_cast<int>(past.tokens.size());
      opt.past_logits = &past.logits;
      save_cache = opt.n_past < static_cast<int>(ids.size());
    }
  }
  Status save_status;
  if (save_cache) {
    opt.on_prefilled = [&](const std::vector<float>& logits) {
      KvStateMeta meta;
      meta.model_identity = g.src->identity;
      meta.spec = g.spec;
      meta.geometry = g.cache->geometry();
      meta.tokens = ids;
      meta.logits = logits;
      auto bytes = EncodeKvState(*g.cache, meta);
      save_status = bytes.ok() ? WriteFileAtomic(a.prompt_cache, *bytes) : Status(bytes.error());
    };
  }
  StopScanner out(a.stops);
  if (a.json) out.Silence();
  int32_t prev = ids.back();
  // Decides the stop and decodes the token (Generate emits a token only when
  // this returns false, then on_token prints what the scanner releases).
  opt.is_eog = [&](int32_t t) {
    if (!a.ignore_eos && tok.IsEndOfGeneration(t)) return true;
    std::string piece = tok.DecodePiece(prev, t);
    if (a.print_special && tok.IsControl(t)) piece = tok.Piece(t);
    prev = t;
    return out.Add(piece);
  };
  auto r = Generate(*g.model, *g.cache, ids, *g.sampler, opt, [&](int32_t) { out.Flush(false); });
  out.Flush(true);
  if (!a.json) {
    std::fputc('\n', stdout);
    std::fflush(stdout);
  }
  if (!r.ok()) {
    std::fprintf(stderr, "hqekv run: error: %s\n", r.message().c_str());
    return 1;
  }
  if (!save_status.ok()) {
    std::fprintf(stderr, "hqekv run: error: --prompt-cache %s: %s\n", a.prompt_cache.c_str(),
                 save_status.message().c_str());
    return 1;
  }
  if (r->hit_context_end && static_cast<int>(r->tokens.size()) < a.n) {
    std::fprintf(stderr,
                 "hqekv run: error: the context of %d tokens is full after %zu of %d tokens "
                 "(--no-context-shift; use a larger --ctx)\n",
                 ctx, r->tokens.size(), a.n);
    return 1;
  }
  const KvStats st = g.cache->Stats();
  const int decoded_steps = std::max<int>(0, static_cast<int>(r->tokens.size()) - 1);
  // Tokens/s over the tokens the prefill computed: those restored from
  // --prompt-cache took no forward pass.
  const int computed = r->prompt_tokens - opt.n_past;
  const double prefill_tps =
      r->prefill_seconds > 0 && computed > 0 ? computed / r->prefill_seconds : 0.0;
  const double decode_tps =
      r->decode_seconds > 0 && decoded_steps > 0 ? decoded_steps / r->decode_seconds : 0.0;
  if (a.json) {
    const nlohmann::json j = {{"model", c.name},
                              {"kv", g.cache->Describe()},
                              {"text", out.Printable()},
                              {"prompt_tokens", r->prompt_tokens},
                              {"generated_tokens", r->tokens.size()},
                              {"context_full", r->hit_context_end},
                              {"context_shifts", r->context_shifts},
                              {"prefill_tok_s", prefill_tps},
                              {"decode_tok_s", decode_tps},
                              {"kv_bytes", st.bytes.total()},
                              {"bits_per_original_element", st.bits_per_original()},
                              {"true_bits_per_kept_element", st.true_bits()},
                              {"note", g.cache->BudgetNote()}};
    std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  std::fprintf(
      stderr,
      "[hqekv run] %s | kv %s | prompt %d tok, generated %zu tok%s%s | prefill %.1f tok/s, "
      "decode %.1f tok/s "
      "| %s (%lld bytes held, %.3f true bits per kept element)\n",
      c.name.c_str(), g.cache->Describe().c_str(), r->prompt_tokens, r->tokens.size(),
      r->hit_context_end ? " (context full)" : "",
      r->context_shifts > 0
          ? (" (" + std::to_string(r->context_shifts) + " context shifts)").c_str()
          : "",
      prefill_tps, decode_tps, MemorySummary(st).c_str(), static_cast<long long>(st.bytes.total()),
      st.true_bits());
  if (opt.n_past > 0) {
    std::fprintf(stderr, "[hqekv run] prompt cache: %d of %d prompt tokens restored from %s\n",
                 opt.n_past, r->prompt_tokens, a.prompt_cache.c_str());
  }
  const std::string note = g.cache->BudgetNote();
  if (!note.empty()) std::fprintf(stderr, "[hqekv run] note: %s\n", note.c_str());
  if (a.kv_report) std::fputs(FormatKvReport(st).c_str(), stderr);
  return 0;
}

const CommandRegistrar kRegister(10, [](CLI::App& app, int* rc) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* cmd =
      app.add_subcommand("run", "Generate text (streams to stdout; a summary line on stderr)");
  auto* p =
      cmd->add_option("-p,--prompt", a->prompt, "Prompt text (default: empty, generate from BOS)");
  cmd->add_option("-f,--file", a->prompt_file, "Read the prompt from a file")->excludes(p);
  cmd->add_option("-n,--n-predict", a->n, "Tokens to generate")
      ->check(IntFlag(0, 1 << 30))
      ->capture_default_str();
  AddGenerationFlags(cmd, a->gen);
  cmd->add_option("--keep", a->keep,
                  "Context shift: prompt tokens kept (after BOS) when the context is full "
                  "(-1 = the whole prompt)")
      ->capture_default_str();
  cmd->add_flag("--no-context-shift", a->no_context_shift,
                "Stop (exit 1) when the context is full instead of dropping the older half");
  cmd->add_flag("--json", a->json,
                "print the generated text and the summary (tokens, speed, KV memory) as one JSON "
                "object on stdout instead of streaming");
  cmd->add_flag("--kv-report", a->kv_report,
                "Print per-layer tier histograms and bytes of the KV cache at the end");
  cmd->add_flag("--no-special", a->no_special,
                "Control tokens written in the prompt stay plain text");
  cmd->add_flag("--special", a->print_special,
                "Print generated control tokens (hidden by default)");
  auto* chat = cmd->add_flag("--chat,--conversation", a->chat,
                             "Render the prompt as a user turn with the model's chat template "
                             "(-cnv)");
  cmd->add_flag("--no-conversation", a->no_chat, "Plain completion (the default; -no-cnv)")
      ->excludes(chat);
  cmd->add_option("--system,--system-prompt", a->system, "System message of --chat (-sys)");
  cmd->add_flag("--no-display-prompt", a->no_display_prompt,
                "Print only the generated text, not the prompt before it");
  cmd->add_option("--chat-template", a->chat_template,
                  "Chat format instead of the file's template: " + SupportedChatFormatNames());
  cmd->add_option("--stop,-r,--reverse-prompt", a->stops,
                  "Stop when the output contains this text (repeatable)");
  cmd->add_flag("--ignore-eos", a->ignore_eos, "Do not stop at end-of-generation tokens");
  cmd->add_option("--prompt-cache", a->prompt_cache,
                  "KV state file: reuse the prompt's compressed cache from it when it matches "
                  "(no prefill), else save it there (every KV policy)");
  cmd->callback([a, rc] { *rc = Run(*a); });
});

}  // namespace
}  // namespace hqekv::cli::cmd_run
