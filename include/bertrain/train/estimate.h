// estimate.h: a pretraining recipe's wall time on this machine, projected from a few timed steps of each phase
// (`bertrain estimate`). The steps are timed on synthetic batches of the phase's shapes, with the recipe's own
// model, precision and optimizer; evaluations are counted as PretrainTrainer runs them.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "bertrain/io/recipe.h"

namespace bertrain {

/// Evaluations PretrainTrainer runs in a phase covering global steps (first, first + n]: one at every multiple
/// of `every` before the phase's last step, and one at its end (train() and end_phase()). every <= 0: the one at
/// the end only.
int64_t evaluations_in_phase(int64_t first, int64_t n, int64_t every);

/// Forward passes of one evaluation: ceil(samples / batch) per evaluation shard (PretrainTrainer::evaluate), capped
/// at max_eval_steps when that is > 0. `shard_samples` holds each shard's number of instances.
int64_t eval_batches(const std::vector<int64_t>& shard_samples, int64_t batch, int64_t max_eval_steps);

/// One phase's projection. Times are seconds of wall time, each the median of the timed calls.
struct PhaseEstimate {
  int64_t max_seq_length = 0;
  int64_t train_batch_size = 0;
  int64_t micro_batch_size = 0;
  int64_t accumulation = 0;               ///< micro-batches per optimizer step
  double seconds_per_micro_batch = 0;     ///< forward + backward of one micro-batch
  double seconds_per_step = 0;            ///< accumulation micro-batches + clipping + the optimizer's update
  int64_t evaluations = 0;                ///< 0 when the recipe has no eval_dir
  int64_t batches_per_evaluation = 0;
  double seconds_per_evaluation = 0;      ///< forward passes in eval mode at the micro-batch size
  double projected_seconds = 0;           ///< num_train_steps steps and the evaluations
  // What the cluster model (project_cluster_step) needs besides:
  int64_t num_train_steps = 0;
  double seconds_optimizer = 0;           ///< clipping + the optimizer's update, once per step
  int threads = 1;                        ///< the threads the steps were timed with (bertrain::num_threads())
  /// The gradient buckets data-parallel training sums (GradientReducer, the recipe's allreduce_dtype), in start
  /// order: their bytes on the wire, and the backward time still to run after each one's gradients were complete
  /// (the median over the timed micro-batches): how long its sum can hide behind backward.
  std::vector<int64_t> bucket_bytes;
  std::vector<double> bucket_lead_seconds;
  /// The reducer's single-threaded copies after backward's end (the buckets not yet started copied in, every sum
  /// copied back into the gradients; median): exposed on every step of more than one rank, whatever the link.
  double seconds_after_backward = 0;
};

/// Times `micro_steps` micro-batches (and as many updates and evaluation batches) of each phase of `r` after one
/// untimed warm-up, and projects each phase's wall time; `on_phase(i, estimate)` is called as each phase i
/// (0-based) is done, so a long estimate can show its rows as they come. The shards of r.eval_dir are inspected
/// for their sizes only. Throws bertrain::Error when the model config, an evaluation shard or the optimizer
/// options are invalid, or micro_steps < 1.
/// `allreduce_bucket_mb` sizes the gradient buckets as `pretrain --allreduce_bucket_mb` does; the timed
/// micro-batches run with a GradientReducer armed (its copies into the buckets are part of their time, as in the
/// last micro-batch of a data-parallel step) to see when each bucket becomes ready.
std::vector<PhaseEstimate> estimate_recipe(const PretrainRecipe& r, int micro_steps,
                                           const std::function<void(size_t, const PhaseEstimate&)>& on_phase = {},
                                           double allreduce_bucket_mb = 25);

/// Seconds of a ring allreduce of `bytes` bytes over `ranks` ranks on links of `gbps` gigabits per second and
/// `latency_us` microseconds per message: 2 (R - 1) / R x bytes x 8 / (gbps x 1e9) + 2 (R - 1) x latency (R - 1
/// reduce-scatter and R - 1 allgather steps, each moving bytes / R over every link at once; Patarasuk and Yuan
/// 2009; Thakur, Rabenseifner and Gropp 2005). 0 for one rank. Throws bertrain::Error on ranks < 1 or gbps <= 0.
double ring_allreduce_seconds(double bytes, int ranks, double gbps, double latency_us);

/// The machines of a data-parallel job, for project_cluster_step.
struct ClusterOptions {
  int ranks_per_node = 1;
  /// Cores each rank computes with; compute time scales as threads timed / cores_per_rank. 0: as timed.
  double cores_per_rank = 0;
  double network_gbps = 10;       ///< between nodes: each node's link, each direction
  double network_latency_us = 5;  ///< per message between nodes
  /// Between the ranks of one node (shared memory), used when the whole job fits on one node.
  double node_gbps = 80;
  double node_latency_us = 1;
  double price_per_hour = 0;      ///< per node
  /// CPU time the transport takes from computation per byte a rank sends (its sends, receives and sums; ns/byte),
  /// as `bertrain bench allreduce` measures it over the link: the work runs on the cores that compute (in the
  /// gradient hooks, or a progress thread beside the kernels), so it is added to the compute, unscaled by the
  /// cores. 0: communication costs no compute.
  double comm_cpu_ns_per_byte = 0;
};

/// One phase's step on N ranks, as the model projects it. Seconds unless named otherwise.
struct ClusterStep {
  int ranks = 1;
  int64_t nodes = 1;
  bool feasible = true;            ///< false: train_batch_size is not a multiple of ranks (nothing else is set)
  int64_t sequences_per_rank = 0;  ///< train_batch_size / ranks
  double compute = 0;              ///< forward + backward of this rank's sequences, comm_cpu included
  double comm_cpu = 0;             ///< CPU time of the sums taken from the compute (comm_cpu_ns_per_byte x bytes)
  double allreduce = 0;            ///< first bucket's start to last bucket's end
  double exposed = 0;              ///< the part after backward's end
  double optimizer = 0;
  double step = 0;                 ///< compute + exposed + optimizer
  double efficiency = 1;           ///< step on 1 rank / (ranks x step): strong scaling at the same global batch
  double wall_seconds = 0;         ///< num_train_steps steps and the evaluations (split over the ranks)
  double cost = 0;                 ///< wall hours x nodes x price_per_hour
};

/// The model (docs/guides/cluster.md): each rank computes train_batch_size / N sequences at the timed seconds per
/// sequence, scaled by threads / cores_per_rank; the buckets' ring allreduces run one after another, each
/// starting when its gradients are ready (bucket_lead_seconds before backward's end, scaled like compute and by
/// the last micro-batch's size) and the previous sum is done, over the network when the job spans several nodes
/// (nodes = ceil(N / ranks_per_node)), else over shared memory; the sums' CPU time (comm_cpu_ns_per_byte x the
/// bytes each rank sends, 2 (N - 1) / N x the buckets' bytes) is added to the compute; the step is compute + the part of the sums after
/// backward + the reducer's copies after backward (seconds_after_backward, not scaled: one thread's memory
/// copies) + the optimizer. Throws bertrain::Error on ranks < 1 or invalid options.
ClusterStep project_cluster_step(const PhaseEstimate& e, const ClusterOptions& c, int ranks);

}  // namespace bertrain
