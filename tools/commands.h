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

/// The source revision this binary was built from (`git describe --always --dirty`, e.g. "4e75934" or
/// "4e75934-dirty"), or "unknown" when the source was not a git checkout. Generated at build time
/// (cmake/git_revision.cmake).
const char* git_revision();

/// "bertrain VERSION (git REVISION)": what `bertrain --version` and `bertrain info` print first.
std::string version_line();

}  // namespace bertrain::cli
