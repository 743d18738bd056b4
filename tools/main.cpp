// main.cpp: the `bertrain` executable. Parses the global flags, dispatches to a subcommand, and is the one
// place that catches bertrain::Error: it logs one clear line and returns a non-zero exit code. Under mpirun
// it sets up MPI (init_world) and, when a rank fails, ends the whole job naming that rank (never a hang).
// stdout carries data only (tokens, tables, listings, JSON results); logs, progress and errors go to stderr.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "bertrain/core/error.h"
#include "bertrain/core/threads.h"
#include "bertrain/core/version.h"
#include "bertrain/train/communicator.h"
#include "commands.h"

namespace bertrain::cli {

std::string version_line() { return std::string("bertrain ") + BERTRAIN_VERSION + " (git " + git_revision() + ")"; }

std::vector<Command>& registry() {
  static std::vector<Command> r;
  return r;
}

bool parse_bool_flag(const std::string& name, const std::string& v) {
  std::string s = v;
  std::transform(s.begin(), s.end(), s.begin(), ::tolower);
  if (s == "true" || s == "1" || s == "yes") return true;
  if (s == "false" || s == "0" || s == "no") return false;
  throw Error("--" + name + ": expected true or false, got '" + v + "'");
}

}  // namespace bertrain::cli

int main(int argc, char** argv) {
  using namespace bertrain;
  // Every log line (the library's too: they log through the default logger) goes to stderr, so that
  // `bertrain tokenize ... > tokens.txt` keeps errors out of the data.
  spdlog::set_default_logger(spdlog::stderr_color_mt("bertrain"));
  CLI::App app{"bertrain: BERT pretraining and finetuning on CPUs"};
  app.set_version_flag("--version", cli::version_line());
  app.require_subcommand(1);
  std::string log_level = "info";
  int num_threads = 0;
  app.add_option("--log_level", log_level, "trace, debug, info, warn, error, critical or off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  app.add_option("--num_threads", num_threads, "threads for kernels and oneDNN (default: OMP_NUM_THREADS or all cores)");

  auto& cmds = cli::registry();
  std::sort(cmds.begin(), cmds.end(), [](const cli::Command& a, const cli::Command& b) { return a.name < b.name; });
  std::vector<std::pair<CLI::App*, std::function<int()>>> runners;
  try {
    for (auto& c : cmds) {
      CLI::App* sub = app.add_subcommand(c.name, c.help);
      runners.emplace_back(sub, c.setup(*sub));
    }
  } catch (const std::exception& e) {
    std::cerr << "bertrain: internal error while setting up commands: " << e.what() << "\n";
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  // A file-size limit (ulimit -f) then makes write() fail with EFBIG, reported like a full disk, instead of
  // killing the process mid-write.
  std::signal(SIGXFSZ, SIG_IGN);
  spdlog::set_level(spdlog::level::from_str(log_level));
  spdlog::set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
  // MPI only when started by an MPI launcher (see init_world): a plain `bertrain ...` never initialises MPI.
  std::shared_ptr<Communicator> comm;
  try {
    comm = init_world(&argc, &argv);
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
  struct Finalize {
    ~Finalize() { finalize_world(); }
  } finalize;
  if (comm->size() > 1) {
    // Rank 0 owns the console; the others report warnings and errors only, each line naming its rank.
    spdlog::set_pattern("[%H:%M:%S.%e] [rank " + std::to_string(comm->rank()) + "] [%^%l%$] %v");
    if (comm->rank() != 0 && spdlog::get_level() < spdlog::level::warn) spdlog::set_level(spdlog::level::warn);
  }
  // A failing rank takes the job down at once: the others would otherwise wait for it in the next collective.
  auto fail = [&](const std::string& msg) {
    spdlog::error("{}", msg);
    if (comm->size() > 1) comm->abort(1, msg);
    return 1;
  };
  try {
    if (num_threads > 0) set_num_threads(num_threads);
    if (comm->size() > 1 && comm->rank() == 0) {
      // Ranks on one machine that each take every core slow each other down several-fold.
      const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
      const int ranks_here = local ? std::atoi(local) : 1;
      const unsigned cores = std::thread::hardware_concurrency();
      if (ranks_here > 1 && cores > 0 && static_cast<unsigned>(ranks_here * bertrain::num_threads()) > cores)
        spdlog::warn("{} ranks on this machine x {} threads each > {} cores: give --num_threads (cores per rank) or "
                     "bind ranks with mpirun --map-by socket --bind-to socket", ranks_here, bertrain::num_threads(), cores);
    }
    for (auto& [sub, run] : runners)
      if (sub->parsed()) return run();
  } catch (const bertrain::Error& e) {
    return fail(e.what());
  } catch (const std::exception& e) {
    return fail(std::string("unexpected error: ") + e.what());
  }
  return 0;
}
