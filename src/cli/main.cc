// hqekv: KV-cache compression for long-context LLM inference.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "cli/number_flags.h"
#include "cli/registry.h"
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
  // Every numeric flag through the one checked parser (cli/number_flags.h).
  hqekv::cli::CheckAllNumericFlags(app);
  // llama.cpp's multi-letter single-dash spellings, read as long options
  // (CLI11 has none): `-np N` (slots of `serve`), `-ctk` / `-ctv` (KV cache
  // types, cli/kv_flags.h).
  std::vector<const char*> args(argv, argv + argc);
  for (auto& arg : args) {
    const std::string s = arg;
    if (s == "-np") arg = "--np";
    if (s == "-ctk") arg = "--cache-type-k";
    if (s == "-ctv") arg = "--cache-type-v";
  }
  try {
    app.parse(argc, args.data());
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // --help / --version print to stdout
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
