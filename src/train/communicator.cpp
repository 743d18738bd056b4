// communicator.cpp: the single-process communicator and the process-wide world (MPI when launched by mpirun
// and built with it).
#include "bertrain/train/communicator.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "bertrain/core/error.h"
#ifdef BERTRAIN_HAVE_MPI
#include "train/communicator_mpi.h"
#endif

namespace bertrain {

namespace {

class SingleProcessCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string description() const override { return "single process"; }
  void allreduce(double*, int64_t, ReduceOp) override {}
  void broadcast(void*, int64_t, int root) override {
    BERTRAIN_CHECK(root == 0, "broadcast from rank ", root, " in a single-process job");
  }
  void barrier() override {}
  void start_allreduce_sum(Tensor& buffer) override {
    BERTRAIN_CHECK(buffer.dtype() == DType::f32 || buffer.dtype() == DType::f64 || buffer.dtype() == DType::bf16,
                   "start_allreduce_sum: f32, f64 or bf16 buffers only, got ", buffer.desc());
  }
  void progress() override {}
  void wait_all() override {}
  [[noreturn]] void abort(int code, const std::string& message) override {
    std::fprintf(stderr, "bertrain: rank 0: %s\n", message.c_str());
    std::fflush(stderr);
    std::_Exit(code);
  }
};

std::mutex g_mu;
std::shared_ptr<Communicator> g_world;

/// An environment variable as an int, or -1 when unset or not a number.
int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return -1;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  return end && *end == '\0' ? static_cast<int>(x) : -1;
}

/// The number of ranks the launcher started, or -1 when not launched by an MPI launcher.
int launcher_world_size() {
  for (const char* k : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const int n = env_int(k);
    if (n > 0) return n;
  }
  return std::getenv("PMIX_RANK") ? 0 : -1;  // PMIx without a size variable: unknown but launched
}

}  // namespace

std::shared_ptr<Communicator> make_single_process_communicator() {
  return std::make_shared<SingleProcessCommunicator>();
}

bool built_with_mpi() {
#ifdef BERTRAIN_HAVE_MPI
  return true;
#else
  return false;
#endif
}

std::shared_ptr<Communicator> init_world(int* argc, char*** argv) {
  std::lock_guard<std::mutex> lock(g_mu);
  BERTRAIN_CHECK(!g_world, "init_world() called twice");
  const int launched = launcher_world_size();
  double timeout = 1800;
  if (const char* t = std::getenv("BERTRAIN_COLLECTIVE_TIMEOUT"); t && *t) {
    char* end = nullptr;
    timeout = std::strtod(t, &end);
    BERTRAIN_CHECK(end && *end == '\0' && timeout >= 0, "BERTRAIN_COLLECTIVE_TIMEOUT: expected seconds >= 0, got '",
                   t, "'");
  }
#ifdef BERTRAIN_HAVE_MPI
  if (launched >= 0) g_world = detail::make_mpi_world(argc, argv, timeout);
#else
  (void)argc;
  (void)argv;
  BERTRAIN_CHECK(launched <= 1, "this bertrain was built without MPI (-DBERTRAIN_WITH_MPI=OFF) but was started by "
                 "an MPI launcher with ", launched, " ranks: every rank would train alone and overwrite the same "
                 "output_dir. Rebuild with OpenMPI (libopenmpi-dev) or run it without mpirun.");
#endif
  if (!g_world) g_world = make_single_process_communicator();
  return g_world;
}

std::shared_ptr<Communicator> world() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_world) g_world = make_single_process_communicator();
  return g_world;
}

void finalize_world() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_world.reset();
#ifdef BERTRAIN_HAVE_MPI
  detail::finalize_mpi();
#endif
}

}  // namespace bertrain
