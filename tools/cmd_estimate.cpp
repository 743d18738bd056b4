// cmd_estimate.cpp: `bertrain estimate --config R`: times a few training steps of each phase of a recipe on
// this machine (synthetic batches of the phase's shapes), and the evaluation passes the recipe's eval_dir and
// eval_every_steps imply, and projects the wall time and cost of the whole run (bertrain/train/estimate.h).
// With --ranks or --network_gbps it also projects the run data-parallel on a cluster of N = 1, 2, 4, ... ranks
// (project_cluster_step; docs/guides/cluster.md).
#include <algorithm>
#include <cstdio>
#include <vector>

#include "bertrain/io/recipe.h"
#include "bertrain/train/estimate.h"
#include "commands.h"

namespace bertrain::cli {
namespace {

struct ClusterFlags {
  int ranks = 0;  // 0: no cluster table unless network_gbps was given
  bool network_given = false;
  ClusterOptions c;
};

void print_cluster(const std::vector<PhaseEstimate>& phases, const ClusterFlags& f) {
  const ClusterOptions& c = f.c;
  std::vector<int> ns;
  const int top = std::max(1024, f.ranks);
  for (int n = 1; n <= top; n *= 2) ns.push_back(n);
  if (f.ranks > 0 && std::find(ns.begin(), ns.end(), f.ranks) == ns.end()) ns.push_back(f.ranks);
  std::sort(ns.begin(), ns.end());
  std::printf("\ncluster model: %d rank(s) per node, %s cores per rank, network %.3g Gb/s and %.3g us between nodes, "
              "%.3g Gb/s and %.3g us within one; ring allreduce of each gradient bucket, started when backward has "
              "it ready; the sums take %.3g ns of CPU per byte sent from the compute\n",
              c.ranks_per_node, c.cores_per_rank > 0 ? std::to_string(c.cores_per_rank).c_str() : "as timed",
              c.network_gbps, c.network_latency_us, c.node_gbps, c.node_latency_us, c.comm_cpu_ns_per_byte);
  std::vector<double> wall(ns.size(), 0), cost(ns.size(), 0);
  std::vector<bool> ok(ns.size(), true);
  for (size_t i = 0; i < phases.size(); ++i) {
    const PhaseEstimate& e = phases[i];
    double mb = 0;
    for (int64_t b : e.bucket_bytes) mb += static_cast<double>(b) / 1e6;
    std::printf("phase %zu: global batch %ld, %zu gradient buckets, %.1f MB per step on the wire\n", i + 1,
                (long)e.train_batch_size, e.bucket_bytes.size(), mb);
    std::printf("%7s %6s %8s %10s %10s %10s %10s %10s %6s %11s\n", "ranks", "nodes", "seq/rank", "compute s",
                "allreduce s", "exposed s", "step s", "seq/s", "eff", "comm cpu s");
    for (size_t k = 0; k < ns.size(); ++k) {
      const ClusterStep s = project_cluster_step(e, c, ns[k]);
      if (!s.feasible) {
        ok[k] = false;
        std::printf("%7d %6ld %8s  (the global batch of %ld does not split over %d ranks)\n", ns[k], (long)s.nodes, "-",
                    (long)e.train_batch_size, ns[k]);
        continue;
      }
      wall[k] += s.wall_seconds;
      cost[k] += s.cost;
      std::printf("%7d %6ld %8ld %10.4f %11.4f %10.4f %10.4f %10.1f %5.1f%% %11.4f\n", ns[k], (long)s.nodes,
                  (long)s.sequences_per_rank, s.compute, s.allreduce, s.exposed, s.step,
                  static_cast<double>(e.train_batch_size) / s.step, 100 * s.efficiency, s.comm_cpu);
    }
  }
  std::printf("whole recipe:\n%7s %6s %12s %10s %12s\n", "ranks", "nodes", "wall hours", "eff", "cost");
  for (size_t k = 0; k < ns.size(); ++k) {
    if (!ok[k]) continue;
    const int64_t nodes = (ns[k] + c.ranks_per_node - 1) / c.ranks_per_node;
    const double eff = wall[k] > 0 ? wall[0] / (ns[k] * wall[k]) : 0;
    char price[32] = "-";
    if (c.price_per_hour > 0) std::snprintf(price, sizeof price, "%.2f", cost[k]);
    std::printf("%7d %6ld %12.3f %9.1f%% %12s\n", ns[k], (long)nodes, wall[k] / 3600, 100 * eff, price);
  }
}

int run(const std::string& config, const std::vector<std::string>& extras, double price, int micro_steps,
        double bucket_mb, ClusterFlags cluster) {
  const PretrainRecipe r = load_pretrain_recipe(config, parse_flag_overrides(extras, "estimate"));
  std::printf("%-6s %8s %8s %8s %6s %12s %12s %14s\n", "phase", "length", "batch", "micro", "accum", "s/micro", "s/step",
              "projected");
  std::fflush(stdout);
  double total = 0;
  // Each row as its phase is timed (a long recipe's estimate takes minutes).
  const std::vector<PhaseEstimate> phases = estimate_recipe(r, micro_steps, [&](size_t i, const PhaseEstimate& e) {
    char eval_note[160] = "";
    if (e.evaluations > 0)
      std::snprintf(eval_note, sizeof eval_note, "  (with %ld evaluations of %ld batches, %.1f s each)",
                    (long)e.evaluations, (long)e.batches_per_evaluation, e.seconds_per_evaluation);
    std::printf("%-6zu %8ld %8ld %8ld %6ld %12.3f %12.2f %13.2fh%s\n", i + 1, (long)e.max_seq_length,
                (long)e.train_batch_size, (long)e.micro_batch_size, (long)e.accumulation, e.seconds_per_micro_batch,
                e.seconds_per_step, e.projected_seconds / 3600, eval_note);
    std::fflush(stdout);
    total += e.projected_seconds;
  }, bucket_mb);
  std::printf("projected wall time of the whole recipe on this machine: %.2f hours (%.1f days)\n", total / 3600,
              total / 86400);
  if (price > 0) std::printf("cost at %.4f per hour: %.2f\n", price, total / 3600 * price);
  if (cluster.ranks > 0 || cluster.network_given) {
    cluster.c.price_per_hour = price;
    print_cluster(phases, cluster);
  }
  return 0;
}

Registrar reg{{"estimate", "time a few steps of each phase of a recipe and project the whole run's wall time and cost",
               [](CLI::App& sub) {
                 auto config = std::make_shared<std::string>();
                 auto price = std::make_shared<double>(0.0);
                 auto steps = std::make_shared<int>(5);
                 auto bucket_mb = std::make_shared<double>(25);
                 auto cl = std::make_shared<ClusterFlags>();
                 sub.add_option("--config", *config, "recipe JSON")->required();
                 sub.add_option("--price_per_hour", *price, "machine (with --ranks: node) price per hour, for the cost");
                 sub.add_option("--micro_steps", *steps, "timed micro-batches (and updates, and evaluation batches) per phase; each is timed alone and the "
                                "median is used")->check(CLI::Range(1, 1000000));
                 sub.add_option("--allreduce_bucket_mb", *bucket_mb, "gradient bucket size, as pretrain's")
                     ->check(CLI::PositiveNumber);
                 sub.add_option("--ranks", cl->ranks, "project data-parallel training on up to this many ranks "
                                "(a table for 1, 2, 4, ... 1024 and this)")->check(CLI::Range(1, 1 << 20));
                 sub.add_option("--ranks_per_node", cl->c.ranks_per_node, "ranks on each node")
                     ->check(CLI::Range(1, 1 << 16));
                 sub.add_option("--cores_per_rank", cl->c.cores_per_rank, "cores each rank computes with (compute "
                                "time scales as the threads timed here / this; default: as timed)")
                     ->check(CLI::PositiveNumber);
                 auto* net = sub.add_option("--network_gbps", cl->c.network_gbps, "bandwidth of each node's link, Gb/s")
                                 ->check(CLI::PositiveNumber);
                 sub.add_option("--network_latency_us", cl->c.network_latency_us, "latency per message between nodes, us")
                     ->check(CLI::NonNegativeNumber);
                 sub.add_option("--node_gbps", cl->c.node_gbps, "bandwidth between the ranks of one node, Gb/s")
                     ->check(CLI::PositiveNumber);
                 sub.add_option("--node_latency_us", cl->c.node_latency_us, "latency per message within a node, us")
                     ->check(CLI::NonNegativeNumber);
                 sub.add_option("--comm_cpu_ns_per_byte", cl->c.comm_cpu_ns_per_byte, "CPU time the sums take from "
                                "the compute per byte a rank sends, ns (measure it with mpirun ... bench allreduce "
                                "over the link; default 0: none)")
                     ->check(CLI::NonNegativeNumber);
                 sub.allow_extras();
                 sub.footer("Other flags override recipe keys as in pretrain: --key=value, --key value, or a bare "
                            "--flag (true); --phases.N.key for phase N.");
                 return std::function<int()>([&sub, config, price, steps, bucket_mb, cl, net] {
                   cl->network_given = net->count() > 0;
                   return run(*config, sub.remaining(), *price, *steps, *bucket_mb, *cl);
                 });
               }}};

}  // namespace
}  // namespace bertrain::cli
