// "Did you mean ...?" for a mistyped subcommand or flag: after CLI11 refuses a
// command line, the arguments are walked again against the command tree and
// every unknown name gets the closest known one (core/closest_name.h).
// Header-only: the CLI is one executable.
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "core/closest_name.h"

namespace hqekv::cli {

// Every spelling of every option of `cmd`, with its dashes ("--temp", "-s").
inline std::vector<std::string> OptionSpellings(const CLI::App& cmd) {
  std::vector<std::string> out;
  for (const CLI::Option* o : cmd.get_options()) {
    for (const std::string& l : o->get_lnames()) out.push_back("--" + l);
    for (const std::string& s : o->get_snames()) out.push_back("-" + s);
  }
  return out;
}

// One "did you mean" line for each unknown subcommand or flag in `args`
// (argv after llama.cpp's aliases), walking subcommands as CLI11 does.
inline std::vector<std::string> Suggestions(CLI::App& app, const std::vector<const char*>& args) {
  std::vector<std::string> out;
  CLI::App* cur = &app;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string arg = args[i];
    if (arg == "--") break;
    if (arg.size() > 1 && arg[0] == '-') {
      const std::string name = arg.substr(0, arg.find('='));
      const CLI::Option* opt = cur->get_option_no_throw(name);
      if (opt == nullptr && name.size() > 2 && name[1] != '-') {
        // `-n8` (short option with its value attached) is a known form.
        opt = cur->get_option_no_throw(name.substr(0, 2));
        if (opt != nullptr) continue;
      }
      if (opt == nullptr) {
        const std::string near = ClosestName(name, OptionSpellings(*cur));
        out.push_back(
            "unknown flag " + name +
            (near.empty() ? std::string(" (see --help)") : "; did you mean " + near + "?"));
        continue;
      }
      // Skip the value of an option that takes one (not `--flag=value`).
      if (opt->get_items_expected_max() > 0 && name.size() == arg.size() && i + 1 < args.size() &&
          args[i + 1][0] != '-') {
        ++i;
      }
      continue;
    }
    const std::vector<CLI::App*> all = cur->get_subcommands([](CLI::App*) { return true; });
    const auto sub =
        std::find_if(all.begin(), all.end(), [&](CLI::App* s) { return s->check_name(arg); });
    if (sub != all.end()) {
      cur = *sub;
      continue;
    }
    std::vector<std::string> subs;
    for (const CLI::App* s : all) subs.push_back(s->get_name());
    if (!subs.empty()) {
      const std::string near = ClosestName(arg, subs);
      out.push_back("unknown command " + arg +
                    (near.empty() ? std::string(" (see --help)") : "; did you mean " + near + "?"));
    }
    break;  // positional values: nothing more to check reliably
  }
  return out;
}

}  // namespace hqekv::cli
