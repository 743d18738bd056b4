// grad_reducer.h: sums gradients over the ranks of a data-parallel job in buckets started while backward still
// runs (PyTorch DDP's Reducer, Li et al. 2020, "PyTorch Distributed", section 3.2): parameters in reverse
// registration order are grouped into buckets of about 25 MB; a bucket's in-place sum starts once all its
// gradients are complete, in bucket order on every rank.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "bertrain/optim/optimizer.h"
#include "bertrain/train/communicator.h"

namespace bertrain {

/// Throws bertrain::Error on this rank when its parameters differ from rank 0's (compared by two checksums in
/// double: the plain sum and a sum weighted by tensor position). Collective: every rank calls it.
void check_same_parameters(const NamedParameters& params, Communicator& comm);

/// Bytes one rank sends, averaged over the ranks, to sum `bytes` bytes over `ranks` ranks: 2 (R - 1) / R x bytes
/// (0 for one rank). A ring allreduce (reduce-scatter then allgather, Patarasuk and Yuan 2009) sends exactly
/// this from every rank; a binomial reduce followed by a binomial broadcast (OpenMPI libnbc's choice for in-place
/// sums) sends 2 (R - 1) x bytes in all, the same mean, but unevenly (the tree's root sends log2 R copies).
double allreduce_bytes_per_rank(double bytes, int ranks);

class GradientReducer {
 public:
  /// Installs a grad-ready hook on every parameter that needs a gradient (replacing any hook there); the
  /// destructor removes them. Buckets hold one dtype (f32 or f64) and at most `bucket_bytes` bytes, except a
  /// single parameter larger than that, which gets a bucket of its own. `wire` is the dtype the buckets are summed
  /// in: the parameters' own (DType::f32 or f64: exact sums), or DType::bf16 for f32 parameters (each gradient
  /// rounded to bf16 before sending, half the bytes; the partial sums are added in f32 and rounded to bf16, see
  /// Communicator::start_allreduce_sum; the sum is widened back to f32). `bucket_bytes` counts the parameters'
  /// bytes, so the buckets are the same whatever `wire`. Throws bertrain::Error for other dtypes.
  GradientReducer(const NamedParameters& params, std::shared_ptr<Communicator> comm,
                  int64_t bucket_bytes = int64_t{25} << 20, DType wire = DType::f32);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  /// The next backward() is the step's last: start each bucket's sum as soon as its gradients are ready.
  /// Backwards while not armed (earlier micro-batches) only accumulate locally.
  void arm();
  /// After the armed backward: starts the buckets not started yet (in order), waits for all, and writes the
  /// sums back into the gradients. Gradients undefined on this rank count as zeros and stay undefined.
  /// Parameters whose hook never fired are remembered as unused and from then on counted ready at arm(), so
  /// their buckets do not hold back the overlap (DDP's find_unused_parameters, learned on the first step).
  /// Throws bertrain::Error when the transport fails or times out.
  void finish();

  int64_t num_buckets() const { return static_cast<int64_t>(buckets_.size()); }
  /// Buckets whose sum started during the last armed backward (before finish()): the overlap achieved.
  int64_t started_during_backward() const { return started_early_; }
  /// Each bucket's size on the wire in bytes, in start order.
  std::vector<int64_t> bucket_wire_bytes() const;

  /// What the last arm() .. finish() took, in seconds of wall time (steady clock), on this rank.
  struct Timing {
    /// From the first bucket's start to the completion of the last sum, as this rank saw it: when the
    /// communicator's progress thread found them done (Communicator::sums_completed_at), else an MPI test in a
    /// grad-ready hook during backward or the wait in finish() (the wait polls every 200 us at most).
    double allreduce = 0;
    /// finish() from its call (backward is over) to its return: the buckets started late, the wait for the sums
    /// not complete yet, and the copy back into the gradients; the communication backward did not hide.
    double exposed = 0;
    int64_t wire_bytes = 0;  ///< the sum of bucket_wire_bytes()
    /// Per bucket (start order): seconds from arm() until its sum could start: its gradients complete and copied
    /// into the send buffer, and the buckets before it started (the ones started in finish(): backward_end or
    /// later; those of unused parameters only: at arm()).
    std::vector<double> bucket_ready;
    double backward_end = 0;  ///< seconds from arm() to the finish() call
  };
  const Timing& timing() const { return timing_; }

 private:
  struct Bucket {
    std::vector<size_t> params;  // indices into params_
    std::vector<int64_t> offsets;  // element offset of each in buffer
    Tensor buffer;  // the wire dtype
    int64_t pending = 0;
    bool started = false;
  };
  void on_ready(size_t i);
  void start_ready_buckets();
  void start(Bucket& b);

  std::vector<Variable> params_;
  std::vector<size_t> bucket_of_;
  std::vector<char> ready_, seen_, unused_;
  std::vector<Bucket> buckets_;
  std::shared_ptr<Communicator> comm_;
  size_t next_start_ = 0;
  bool armed_ = false, learned_unused_ = false;
  int64_t started_early_ = 0;
  DType wire_;
  Timing timing_;
  std::chrono::steady_clock::time_point t_arm_;
  double t_first_start_ = -1, t_done_ = -1;  // seconds from arm(); -1: not yet
  double since_arm() const;
};

}  // namespace bertrain
