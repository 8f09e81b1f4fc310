// hqekv: KV-cache compression for long-context LLM inference.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cli/llama_compat.h"
#include "cli/number_flags.h"
#include "cli/registry.h"
#include "cli/suggest.h"
#include "core/file.h"

namespace hqekv::cli {
namespace {
std::vector<std::pair<int, CommandFactory>>& Registry() {
  static std::vector<std::pair<int, CommandFactory>> r;
  return r;
}
}  // namespace

CommandRegistrar::CommandRegistrar(int order, CommandFactory factory) {
  Registry().emplace_back(order, std::move(factory));
}

namespace {
// llama.cpp's GPU and batch flags on every command that loads a model (it
// has -m/--model), warned about once the command line is parsed.
void AddLlamaCompat(CLI::App& cmd, std::vector<std::unique_ptr<LlamaCompatFlags>>& keep) {
  for (CLI::App* sub : cmd.get_subcommands([](CLI::App*) { return true; })) {
    AddLlamaCompat(*sub, keep);
    if (sub->get_option_no_throw("--model") == nullptr) continue;
    auto& flags = keep.emplace_back(std::make_unique<LlamaCompatFlags>());
    flags->Add(sub, sub->get_option_no_throw("-b") != nullptr);
    LlamaCompatFlags* f = flags.get();
    sub->parse_complete_callback([f, sub] { f->Warn(sub->get_name().c_str()); });
  }
}
}  // namespace

void AddAllCommands(CLI::App& app, int* rc) {
  auto& r = Registry();
  std::stable_sort(r.begin(), r.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [order, factory] : r) factory(app, rc);
}

}  // namespace hqekv::cli

int main(int argc, char** argv) {
  CLI::App app{
      "hqekv: hybrid quantization and eviction of the KV cache for long-context LLM inference"};
  app.require_subcommand(1);
  // Flags take no value: `--kv-report=3` is an error, not a silent "true". Subcommands inherit the
  // option defaults of their parent, so this covers every flag of every command.
  app.option_defaults()->disable_flag_override();
  app.set_version_flag("--version", "hqekv 0.1.0");
  int rc = 0;
  hqekv::cli::AddAllCommands(app, &rc);
  std::vector<std::unique_ptr<hqekv::cli::LlamaCompatFlags>> compat;
  hqekv::cli::AddLlamaCompat(app, compat);
  // Every numeric flag through the one checked parser (cli/number_flags.h).
  hqekv::cli::CheckAllNumericFlags(app);
  // llama.cpp's multi-letter single-dash spellings (`-ngl`, `-fa`, `-sys`,
  // `-ctk`, ...), read as long options (cli/llama_compat.h).
  std::vector<const char*> args(argv, argv + argc);
  hqekv::cli::RewriteLlamaDashFlags(args);
  try {
    app.parse(argc, args.data());
  } catch (const CLI::ParseError& e) {
    // Exit codes: 0 success, 1 runtime error, 2 usage error (CLI11's own
    // codes, 105-115, are one class for a user: the command line is wrong).
    const int code = app.exit(e) == 0 ? 0 : 2;  // --help / --version print to stdout
    if (code != 0) {
      for (const std::string& line : hqekv::cli::Suggestions(app, args)) {
        std::fprintf(stderr, "hqekv: %s\n", line.c_str());
      }
    }
    if (const hqekv::Status st = hqekv::CheckStdout(); !st.ok()) {
      std::fprintf(stderr, "hqekv: error: %s\n", st.message().c_str());
      return code != 0 ? code : 1;
    }
    return code;
  } catch (const std::exception& e) {  // last line of defence: never crash on bad input
    std::fprintf(stderr, "hqekv: error: %s\n", e.what());
    return 1;
  }
  // Output lost on the way (a full disk, /dev/full) is a failure, not exit 0.
  if (const hqekv::Status st = hqekv::CheckStdout(); !st.ok()) {
    std::fprintf(stderr, "hqekv: error: %s\n", st.message().c_str());
    return rc != 0 ? rc : 1;
  }
  return rc;
}
