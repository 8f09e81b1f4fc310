// "Did you mean ...?" for a mistyped subcommand or flag: after CLI11 refuses a
// command line, the arguments are walked again against the command tree and
// every unknown name gets the closest known one (edit distance). Header-only:
// the CLI is one executable.
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace hqekv::cli {

// Levenshtein distance (insert, delete, substitute; each 1).
inline size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The known name closest to `word`, or "" when none is close: within a third
// of the word's length (at least 1, at most 3 edits), or a name that starts
// with the word (an abbreviation of 3 or more letters).
inline std::string ClosestName(std::string_view word, const std::vector<std::string>& names) {
  std::string best;
  size_t best_d = std::min<size_t>(3, std::max<size_t>(1, word.size() / 3)) + 1;
  for (const std::string& n : names) {
    const size_t d = EditDistance(word, n);
    if (d < best_d) best_d = d, best = n;
  }
  if (best.empty() && word.size() >= 3) {
    for (const std::string& n : names) {
      if (n.compare(0, word.size(), word) == 0) return n;
    }
  }
  return best;
}

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
