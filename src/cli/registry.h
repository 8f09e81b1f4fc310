// Subcommand registry: each cmd_*.cc file registers its subcommand with a
// static CommandRegistrar, so adding a command never touches main.cc.
#pragma once

#include <functional>
#include <string>

namespace CLI {
class App;
}

namespace hqekv::cli {

// Adds a subcommand to `app`. The subcommand's callback must store the
// process exit code in *rc (0 = success) and print errors to stderr.
using CommandFactory = std::function<void(CLI::App& app, int* rc)>;

struct CommandRegistrar {
  // `order` sorts the commands in --help (lower first).
  CommandRegistrar(int order, CommandFactory factory);
};

void AddAllCommands(CLI::App& app, int* rc);

}  // namespace hqekv::cli
