// communicator.h: the processes of a data-parallel job as the trainers see them: rank, size, blocking sums of a
// few doubles, asynchronous in-place sums of gradient buckets, broadcast, barrier and abort. MPI stays behind
// this interface (src/train/communicator_mpi.cpp, built only with -DBERTRAIN_WITH_MPI=ON).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "bertrain/core/tensor.h"

namespace bertrain {

enum class ReduceOp { sum, max };

/// A group of ranks that run the same program on different data. Every collective must be called by every
/// rank, in the same order (MPI's rule). All calls come from one thread (the trainer's); the MPI communicator
/// may advance the started sums from a thread of its own.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "single process" or "MPI (OpenMPI 4.1.4)": for the start-up log line.
  virtual std::string description() const = 0;

  /// In-place reduction of n doubles over all ranks; blocks until done. Throws bertrain::Error when the
  /// transport fails or the collective waits longer than the timeout (a rank died or hangs).
  virtual void allreduce(double* data, int64_t n, ReduceOp op = ReduceOp::sum) = 0;
  /// Copies `bytes` bytes from `root`'s buffer into every other rank's. Throws as allreduce.
  virtual void broadcast(void* data, int64_t bytes, int root) = 0;
  /// Returns when every rank has called it. Throws as allreduce.
  virtual void barrier() = 0;

  /// Starts an in-place sum over ranks of `buffer` (contiguous f32, f64 or bf16; it must stay alive and untouched
  /// until wait_all()). Returns at once: the sum proceeds while the caller computes. Every rank must start
  /// the same buffers (same sizes, dtypes) in the same order. bf16 buffers (gradients compressed for the wire)
  /// are summed pairwise in f32, each partial sum rounded back to bf16 (round to nearest even), and every rank
  /// receives the same result. Throws bertrain::Error on other dtypes.
  virtual void start_allreduce_sum(Tensor& buffer) = 0;
  /// Lets started sums advance (MPI progresses non-blocking collectives only inside MPI calls); cheap.
  virtual void progress() = 0;
  /// True when no started sum is in flight any more, as the last progress() or wait_all() saw it (no
  /// communication). Communicators whose sums complete at once keep the default.
  virtual bool sums_complete() const { return true; }
  /// When the started sums were first seen all complete (steady_clock), by whichever test saw it: a progress
  /// thread's, progress() or wait_all(); the epoch (time_point{}) when unknown or still in flight.
  virtual std::chrono::steady_clock::time_point sums_completed_at() const { return {}; }
  /// Blocks until every started sum is complete. Throws as allreduce.
  virtual void wait_all() = 0;

  /// Ends the whole job: prints "bertrain: rank R: message" on stderr and terminates every rank with
  /// exit `code` (MPI_Abort). Never returns.
  [[noreturn]] virtual void abort(int code, const std::string& message) = 0;
};

/// The communicator of a lone process: rank 0 of 1; reductions and broadcasts leave the data as it is.
std::shared_ptr<Communicator> make_single_process_communicator();

/// True when this build of bertrain has MPI (-DBERTRAIN_WITH_MPI=ON).
bool built_with_mpi();

/// Sets up the job's processes once per program, from main(): when launched by mpirun (OpenMPI sets
/// OMPI_COMM_WORLD_SIZE; PMI_SIZE or PMIX_RANK for other launchers), MPI_Init_thread(MPI_THREAD_SERIALIZED)
/// and MPI_COMM_WORLD; with BERTRAIN_PROGRESS_THREAD=1 (and an MPI that gives SERIALIZED), a progress thread
/// advances the gradient sums while backward computes, else the gradient hooks do; otherwise a single process,
/// and MPI is never touched (no MPI_Init: `bertrain` run alone starts no ORTE daemon). Collectives give up with an error after BERTRAIN_COLLECTIVE_TIMEOUT seconds
/// (environment variable; default 1800, 0 = wait for ever). Throws bertrain::Error when launched by mpirun
/// with more than one rank but built without MPI, or when MPI_Init_thread fails.
std::shared_ptr<Communicator> init_world(int* argc, char*** argv);
/// The communicator init_world made, or a single-process one when it was never called (library users).
std::shared_ptr<Communicator> world();
/// MPI_Finalize when init_world initialised MPI; a no-op otherwise. Call once at the end of main().
void finalize_world();

}  // namespace bertrain
