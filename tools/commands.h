// commands.h: each subcommand lives in its own tools/cmd_<name>.cpp and registers itself here.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace bertrain::cli {

/// A subcommand: `setup` adds its options to `sub`; the returned function runs it and returns the exit code.
struct Command {
  std::string name;
  std::string help;
  std::function<std::function<int()>(CLI::App& sub)> setup;
};

/// The registry; a file adds a command with a static `Registrar`.
std::vector<Command>& registry();

struct Registrar {
  explicit Registrar(Command c) { registry().push_back(std::move(c)); }
};

/// Parses "true"/"false"/"1"/"0" the way google-research/bert's absl flags accept them.
bool parse_bool_flag(const std::string& name, const std::string& value);

}  // namespace bertrain::cli
