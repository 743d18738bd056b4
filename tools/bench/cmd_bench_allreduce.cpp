// cmd_bench_allreduce.cpp: `mpirun -np R bertrain bench allreduce`: what summing a model's gradient buckets over
// the ranks costs on this transport. Two figures for `estimate`'s cluster model (docs/guides/cluster.md): the
// sums' wall time alone (and the bandwidth that gives), and the CPU time they take from computation running at the
// same time, in ns per byte a rank sends: what every bucket's sum adds to a fixed workload started beside it (a
// matmul and an elementwise pass per unit, the communicator advanced after each unit as the gradient hooks advance
// it): the workload's slowdown plus the wait for the sums still running after it, against the same workload alone,
// in alternating rounds. Over a link fast enough that the wire is not what the sums wait for, that is the CPU time
// the transport takes (its copies, sums, TCP stack, and the progress calls), which no overlap can hide when every
// core computes; over a slow link it also holds the wire's time, so measure it over a fast link of the transport.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bertrain/core/error.h"
#include "bertrain/core/rng.h"
#include "bertrain/models/bert.h"
#include "bertrain/ops/ops.h"
#include "bertrain/train/communicator.h"
#include "bertrain/train/grad_reducer.h"
#include "bench_util.h"
#include "commands.h"

namespace bertrain::cli {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Options {
  std::string model = "mini";
  double bucket_mb = 25;
  std::string dtype = "f32";
  int rounds = 5;
  double min_workload_seconds = 0.5;
};

/// Every element of every bucket set to rank + 1 (exact in f32 and bf16 for the small rank counts this runs with).
void fill(std::vector<Tensor>& buckets, int rank) {
  for (Tensor& b : buckets) b.fill(static_cast<double>(rank + 1));
}

/// Throws unless every bucket holds R (R + 1) / 2 (checked at its first, middle and last elements, or all).
void check_sums(const std::vector<Tensor>& buckets, int ranks, bool all) {
  const double want = ranks * (ranks + 1) / 2.0;
  for (size_t k = 0; k < buckets.size(); ++k) {
    const Tensor& b = buckets[k];
    const int64_t n = b.numel();
    auto check = [&](int64_t i) {
      BERTRAIN_CHECK(b.get(i) == want, "bench allreduce: bucket ", k, " element ", i, " is ", b.get(i),
                     " after the sum over ", ranks, " ranks, expected ", want);
    };
    if (all) {
      for (int64_t i = 0; i < n; ++i) check(i);
    } else {
      check(0);
      check(n / 2);
      check(n - 1);
    }
  }
}

int run(const Options& o) {
  std::shared_ptr<Communicator> comm = world();
  const int ranks = comm->size(), rank = comm->rank();
  BERTRAIN_CHECK(ranks >= 2, "bench allreduce measures a transport between ranks: run it under mpirun with 2 or more "
                 "ranks (e.g. mpirun -np 2 bertrain bench allreduce), got ", ranks, " rank");
  BERTRAIN_CHECK(o.dtype == "f32" || o.dtype == "bf16", "bench allreduce: --allreduce_dtype must be f32 or bf16, got '",
                 o.dtype, "'");
  BERTRAIN_CHECK(o.rounds >= 1, "bench allreduce: --rounds must be at least 1, got ", o.rounds);
  // The buckets data-parallel training sums for this model (GradientReducer's layout), as plain buffers.
  const BertConfig cfg = bench_model_config(o.model);
  std::vector<int64_t> sizes;
  {
    Rng rng(1);
    BertForPreTraining model(cfg, rng);
    GradientReducer reducer(model.named_parameters(), make_single_process_communicator(),
                            static_cast<int64_t>(o.bucket_mb * (1 << 20)), o.dtype == "bf16" ? DType::bf16 : DType::f32);
    sizes = reducer.bucket_wire_bytes();
  }
  const DType wire = o.dtype == "bf16" ? DType::bf16 : DType::f32;
  std::vector<Tensor> buckets;
  double total = 0;
  for (int64_t b : sizes) {
    buckets.push_back(Tensor::empty({b / static_cast<int64_t>(dtype_size(wire))}, wire));
    total += static_cast<double>(b);
  }
  const double sent = allreduce_bytes_per_rank(total, ranks);  // per rank, as metrics.jsonl's allreduce_bytes
  auto start_all = [&] {
    for (Tensor& b : buckets) comm->start_allreduce_sum(b);
  };

  // 1. The sums alone: start every bucket, wait for all.
  std::vector<double> alone;
  for (int r = 0; r < o.rounds + 1; ++r) {
    fill(buckets, rank);
    comm->barrier();
    const auto t0 = Clock::now();
    start_all();
    comm->wait_all();
    const double t = seconds_since(t0);
    check_sums(buckets, ranks, r == 0);
    if (r > 0) alone.push_back(t);  // the first round sets up connections and buffers
  }
  double t_alone = median_of(alone);
  comm->allreduce(&t_alone, 1, ReduceOp::max);

  // 2. The workload: units of a (256 x 768) x (768 x 768) matmul and an elementwise pass over 16 MB, with the
  // communicator advanced after each unit. Enough units to outlast the sums several times over.
  Rng rng(7);
  const Variable a(Tensor::uniform({256, 768}, -1, 1, rng)), w(Tensor::uniform({768, 768}, -1, 1, rng));
  const Variable x(Tensor::uniform({4 << 20}, -1, 1, rng));
  auto unit = [&] {
    NoGradGuard ng;
    Variable y = matmul(a, w);
    Variable z = add(mul(x, x), x);
    comm->progress();
  };
  for (int i = 0; i < 3; ++i) unit();
  std::vector<double> one;
  for (int i = 0; i < 9; ++i) {
    const auto t0 = Clock::now();
    unit();
    one.push_back(seconds_since(t0));
  }
  double units_d = std::ceil(std::max(o.min_workload_seconds, 4 * t_alone) / median_of(one));
  comm->broadcast(&units_d, sizeof units_d, 0);
  const int64_t units = static_cast<int64_t>(units_d);
  auto workload = [&] {
    for (int64_t i = 0; i < units; ++i) unit();
  };

  // 3. Alternating rounds: the workload alone, then the workload while every bucket is summed.
  std::vector<double> t_without, t_with, t_tail, t_done;
  for (int r = 0; r < o.rounds; ++r) {
    comm->barrier();
    auto t0 = Clock::now();
    workload();
    t_without.push_back(seconds_since(t0));
    fill(buckets, rank);
    comm->barrier();
    t0 = Clock::now();
    start_all();
    double done = -1;
    for (int64_t i = 0; i < units; ++i) {
      unit();
      if (done < 0 && comm->sums_complete()) done = seconds_since(t0);
    }
    const double t = seconds_since(t0);
    comm->wait_all();
    t_tail.push_back(seconds_since(t0) - t);
    t_with.push_back(t);
    t_done.push_back(done < 0 ? seconds_since(t0) : done);
    check_sums(buckets, ranks, false);
  }
  // Each rank's medians; the slowest rank's figures are the job's.
  double m[4] = {median_of(t_without), median_of(t_with), median_of(t_tail), median_of(t_done)};
  comm->allreduce(m, 4, ReduceOp::max);
  // What the sums added to this rank's time line: the workload's slowdown and the wait for the sums left after it.
  const double ns_per_byte = std::max(0.0, m[1] + m[2] - m[0]) / sent * 1e9;
  if (rank == 0) {
    std::printf("bench allreduce: %d ranks, %s (%s), %zu buckets of %.3g MB, %s on the wire: %.1f MB per step, each "
                "rank sends %.1f MB; every sum checked; medians of %d rounds, the slowest rank's\n",
                ranks, o.model.c_str(), comm->description().c_str(), buckets.size(), o.bucket_mb, o.dtype.c_str(),
                total / 1e6, sent / 1e6, o.rounds);
    std::printf("sums alone:          %9.4f s  (%.2f Gb/s sent per rank)\n", t_alone, sent * 8 / t_alone / 1e9);
    std::printf("workload alone:      %9.4f s  (%ld units)\n", m[0], static_cast<long>(units));
    std::printf("workload with sums:  %9.4f s  (sums complete after %.4f s; %.4f s left after the workload)\n", m[1],
                m[3], m[2]);
    std::printf("added to the workload: %.4f s (%.3g ns per byte sent)\n", m[1] + m[2] - m[0], ns_per_byte);
    std::printf("comm_cpu_ns_per_byte %.4f\n", ns_per_byte);
  }
  return 0;
}

BenchRegistrar reg{
    {"allreduce",
     "under mpirun: a model's gradient sums alone, and the CPU time they take from computation (for estimate's "
     "--comm_cpu_ns_per_byte)",
     [](CLI::App& sub) {
       auto o = std::make_shared<Options>();
       sub.add_option("--model", o->model, "tiny, mini, small, base or a config .json: whose gradient buckets to sum")
           ->capture_default_str();
       sub.add_option("--allreduce_bucket_mb", o->bucket_mb, "gradient bucket size, as pretrain's")
           ->check(CLI::PositiveNumber)
           ->capture_default_str();
       sub.add_option("--allreduce_dtype", o->dtype, "f32 or bf16, as pretrain's")->capture_default_str();
       sub.add_option("--rounds", o->rounds, "timed rounds of each measurement; medians are reported")
           ->check(CLI::Range(1, 1000))
           ->capture_default_str();
       sub.add_option("--min_workload_seconds", o->min_workload_seconds,
                      "the workload runs at least this long, and at least 4x the sums alone")
           ->check(CLI::PositiveNumber)
           ->capture_default_str();
       return std::function<int()>([o] { return run(*o); });
     }}};

}  // namespace
}  // namespace bertrain::cli
