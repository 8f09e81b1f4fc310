// `hqekv policies`: lists every KV policy, its parameters, defaults, ranges
// and help (the table of policy/spec.h); with --check SPEC, parses a spec and
// prints its normalized form or the error.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "cli/registry.h"
#include "policy/spec.h"

namespace hqekv::cli::cmd_policies {
namespace {

struct PoliciesArgs {
  std::string check;
};

int RunPolicies(const PoliciesArgs& a) {
  if (a.check.empty()) {
    std::fputs(policy::PoliciesHelp().c_str(), stdout);
    return 0;
  }
  auto r = policy::ParseSpec(a.check);
  if (!r.ok()) {
    std::fprintf(stderr, "hqekv policies: error: %s\n", r.message().c_str());
    return 1;
  }
  std::printf("%s\n", r->name.c_str());
  for (const auto& [k, v] : r->values) {
    std::printf("  %s=%s%s\n", k.c_str(), v.c_str(), r->Given(k) ? "" : "  (default)");
  }
  return 0;
}

const CommandRegistrar kRegistrar(80, [](CLI::App& app, int* rc) {
  auto args = std::make_shared<PoliciesArgs>();
  CLI::App* sub =
      app.add_subcommand("policies", "List the KV-cache policies (--kv SPEC) and their parameters");
  sub->add_option("--check", args->check, "Parse a spec and print its values (defaults filled in)");
  sub->callback([args, rc] { *rc = RunPolicies(*args); });
});

}  // namespace
}  // namespace hqekv::cli::cmd_policies
