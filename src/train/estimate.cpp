// estimate.cpp: the projection behind `bertrain estimate` (include/bertrain/train/estimate.h).
#include "bertrain/train/estimate.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>

#include "bertrain/autograd/variable.h"
#include "bertrain/core/error.h"
#include "bertrain/core/threads.h"
#include "bertrain/core/rng.h"
#include "bertrain/data/hdf5_shard.h"
#include "bertrain/data/synthetic.h"
#include "bertrain/io/config.h"
#include "bertrain/models/bert.h"
#include "bertrain/ops/ops.h"
#include "bertrain/optim/clip.h"
#include "bertrain/train/communicator.h"
#include "bertrain/train/grad_reducer.h"
#include "bertrain/train/optimizer_factory.h"

namespace bertrain {
namespace {

// The median of n timed calls of f, in seconds. A median, not a mean: one call slowed by a transient (another
// process ending, page faults of a first touch) moves a mean of a few calls by tens of percent.
double median(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  const size_t n = t.size();
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

template <class F>
double median_seconds(int n, F&& f) {
  std::vector<double> t;
  for (int k = 0; k < n; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(std::move(t));
}

}  // namespace

int64_t evaluations_in_phase(int64_t first, int64_t n, int64_t every) {
  int64_t k = 1;
  if (every > 0) k += (first + n - 1) / every - first / every;
  return k;
}

int64_t eval_batches(const std::vector<int64_t>& shard_samples, int64_t batch, int64_t max_eval_steps) {
  int64_t b = 0;
  for (int64_t n : shard_samples) b += (n + batch - 1) / batch;
  return max_eval_steps > 0 ? std::min(b, max_eval_steps) : b;
}

double ring_allreduce_seconds(double bytes, int ranks, double gbps, double latency_us) {
  BERTRAIN_CHECK(ranks >= 1, "ring_allreduce_seconds: ranks must be >= 1, got ", ranks);
  BERTRAIN_CHECK(gbps > 0 && latency_us >= 0, "ring_allreduce_seconds: bandwidth must be > 0 and latency >= 0, got ",
                 gbps, " Gb/s, ", latency_us, " us");
  if (ranks == 1) return 0;
  return allreduce_bytes_per_rank(bytes, ranks) * 8 / (gbps * 1e9) + 2.0 * (ranks - 1) * latency_us * 1e-6;
}

namespace {

ClusterStep project_step_alone(const PhaseEstimate& e, const ClusterOptions& c, int ranks) {
  ClusterStep s;
  s.ranks = ranks;
  s.nodes = (ranks + c.ranks_per_node - 1) / c.ranks_per_node;
  if (e.train_batch_size % ranks != 0) {
    s.feasible = false;
    return s;
  }
  s.sequences_per_rank = e.train_batch_size / ranks;
  const double scale = c.cores_per_rank > 0 ? static_cast<double>(e.threads) / c.cores_per_rank : 1.0;
  const double per_sequence = e.seconds_per_micro_batch / static_cast<double>(e.micro_batch_size);
  s.compute = static_cast<double>(s.sequences_per_rank) * per_sequence * scale;
  // The last micro-batch (whose backward hides the sums) holds min(micro, sequences per rank) sequences.
  const double last = static_cast<double>(std::min(e.micro_batch_size, s.sequences_per_rank)) /
                      static_cast<double>(e.micro_batch_size);
  const bool network = s.nodes > 1;
  double first_start = 0, end = -std::numeric_limits<double>::infinity();
  for (size_t k = 0; k < e.bucket_bytes.size(); ++k) {
    const double ready = -e.bucket_lead_seconds[k] * last * scale;  // backward ends at time 0
    const double start = std::max(ready, end);
    if (k == 0) first_start = start;
    end = start + ring_allreduce_seconds(static_cast<double>(e.bucket_bytes[k]), ranks,
                                         network ? c.network_gbps : c.node_gbps,
                                         network ? c.network_latency_us : c.node_latency_us);
  }
  if (ranks > 1 && !e.bucket_bytes.empty()) {
    s.allreduce = end - first_start;
    // The sums' tail after backward, and the copies that follow backward on every step: the last buckets into
    // their buffers, every sum back into the gradients (one thread's memcpy: not scaled with the cores).
    s.exposed = std::max(0.0, end) + e.seconds_after_backward;
    // The transport's CPU work (sends, receives, sums) runs on the cores that compute.
    double bytes = 0;
    for (int64_t b : e.bucket_bytes) bytes += static_cast<double>(b);
    s.comm_cpu = c.comm_cpu_ns_per_byte * 1e-9 * allreduce_bytes_per_rank(bytes, ranks);
    s.compute += s.comm_cpu;
  }
  s.optimizer = e.seconds_optimizer * scale;
  s.step = s.compute + s.exposed + s.optimizer;
  // Evaluation batches are split over the ranks (batch k on rank k mod N).
  double eval = 0;
  if (e.evaluations > 0 && e.batches_per_evaluation > 0) {
    const double per_batch = e.seconds_per_evaluation / static_cast<double>(e.batches_per_evaluation);
    eval = static_cast<double>(e.evaluations) *
           static_cast<double>((e.batches_per_evaluation + ranks - 1) / ranks) * per_batch * scale;
  }
  s.wall_seconds = static_cast<double>(e.num_train_steps) * s.step + eval;
  s.cost = s.wall_seconds / 3600 * static_cast<double>(s.nodes) * c.price_per_hour;
  return s;
}

}  // namespace

ClusterStep project_cluster_step(const PhaseEstimate& e, const ClusterOptions& c, int ranks) {
  BERTRAIN_CHECK(ranks >= 1, "cluster model: ranks must be >= 1, got ", ranks);
  BERTRAIN_CHECK(c.ranks_per_node >= 1, "cluster model: ranks_per_node must be >= 1, got ", c.ranks_per_node);
  BERTRAIN_CHECK(c.cores_per_rank >= 0 && c.price_per_hour >= 0 && c.comm_cpu_ns_per_byte >= 0,
                 "cluster model: cores_per_rank, price_per_hour and comm_cpu_ns_per_byte must be >= 0");
  BERTRAIN_CHECK(e.micro_batch_size >= 1 && e.train_batch_size >= 1 && e.threads >= 1,
                 "cluster model: a phase estimate without batch sizes or threads");
  BERTRAIN_CHECK(e.bucket_bytes.size() == e.bucket_lead_seconds.size(), "cluster model: ", e.bucket_bytes.size(),
                 " bucket sizes but ", e.bucket_lead_seconds.size(), " bucket lead times");
  ClusterStep s = project_step_alone(e, c, ranks);
  if (s.feasible && s.step > 0) s.efficiency = project_step_alone(e, c, 1).step / (ranks * s.step);
  return s;
}

std::vector<PhaseEstimate> estimate_recipe(const PretrainRecipe& r, int micro_steps,
                                           const std::function<void(size_t, const PhaseEstimate&)>& on_phase,
                                           double allreduce_bucket_mb) {
  BERTRAIN_CHECK(micro_steps >= 1, "estimate: micro_steps must be at least 1, got ", micro_steps);
  BERTRAIN_CHECK(allreduce_bucket_mb > 0, "estimate: allreduce_bucket_mb must be positive, got ", allreduce_bucket_mb);
  MatmulPrecisionGuard precision(r.bf16 ? MatmulPrecision::bf16 : MatmulPrecision::f32);
  BertConfig cfg = load_bert_config(r.bert_config_file);
  Rng rng(r.seed, 0x1417);
  BertForPreTraining model(cfg, rng);
  model.bert().set_activation_checkpointing(r.activation_checkpointing);
  model.bert().set_unpad(r.unpad);
  // The recipe's own optimizer (LAMB, AdamW, ...): its step time is part of every update.
  std::unique_ptr<Optimizer> opt = make_optimizer(r.optimizer, model.named_parameters());
  // The buckets of data-parallel training, summed by a lone process (a copy in, a copy out): when each is ready.
  GradientReducer reducer(model.named_parameters(), make_single_process_communicator(),
                          static_cast<int64_t>(allreduce_bucket_mb * (1 << 20)), r.allreduce_dtype);
  // The evaluation set the trainer reads at every evaluation (sizes only; nothing is loaded).
  std::vector<int64_t> eval_samples;
  if (!r.eval_dir.empty())
    for (const std::string& path : data::list_eval_shards(r.eval_dir))
      eval_samples.push_back(data::inspect_pretraining_shard(path).num_samples);
  std::vector<PhaseEstimate> out;
  int64_t first_step = 0;
  for (const PhaseRecipe& p : r.phases) {
    PhaseEstimate e;
    e.max_seq_length = p.max_seq_length;
    e.train_batch_size = p.train_batch_size;
    e.micro_batch_size = p.micro_batch_for(1);
    e.accumulation = p.train_batch_size / e.micro_batch_size;
    const data::PretrainingBatch b = data::synthetic_pretraining_batch(e.micro_batch_size, p.max_seq_length,
                                                                       p.max_predictions_per_seq, cfg.vocab_size, rng);
    const BertInputs in{b.input_ids, b.token_type_ids, b.attention_mask, 0, 0};
    PretrainingTargets tg{b.masked_lm_positions, b.masked_lm_ids, b.masked_lm_weights, b.next_sentence_labels};
    tg.mlm_normalizer = 1.0;
    // Warm-up (primitive creation, allocator cache; the reducer learns unused parameters), then the timed
    // micro-batches, each with the reducer armed as a step's last micro-batch is.
    reducer.arm();
    model.forward(in, tg).loss.backward();
    reducer.finish();
    std::vector<double> times, after;
    std::vector<std::vector<double>> leads(static_cast<size_t>(reducer.num_buckets()));
    for (int k = 0; k < micro_steps; ++k) {
      reducer.arm();
      const auto t0 = std::chrono::steady_clock::now();
      model.forward(in, tg).loss.backward();
      const auto t1 = std::chrono::steady_clock::now();
      times.push_back(std::chrono::duration<double>(t1 - t0).count());
      reducer.finish();
      after.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count());
      const GradientReducer::Timing& t = reducer.timing();
      for (size_t b = 0; b < leads.size(); ++b) leads[b].push_back(t.backward_end - t.bucket_ready[b]);
    }
    e.seconds_per_micro_batch = median(times);
    e.bucket_bytes = reducer.bucket_wire_bytes();
    for (auto& l : leads) e.bucket_lead_seconds.push_back(std::max(0.0, median(l)));
    e.seconds_after_backward = median(after);
    e.threads = num_threads();
    e.num_train_steps = p.schedule.num_train_steps;
    // The update as the trainer does it: global-norm clipping, then the optimizer. The first update allocates
    // the optimizer's moments, so one untimed update comes first.
    auto update = [&] {
      if (r.optimizer.clip_grad_norm > 0) clip_grad_norm(model.named_parameters(), r.optimizer.clip_grad_norm);
      opt->step(1e-4);
    };
    update();
    const double t_opt = median_seconds(micro_steps, update);
    e.seconds_optimizer = t_opt;
    opt->zero_grad();
    e.seconds_per_step = static_cast<double>(e.accumulation) * e.seconds_per_micro_batch + t_opt;
    const int64_t n = p.schedule.num_train_steps;
    e.projected_seconds = e.seconds_per_step * static_cast<double>(n);
    // Evaluation: forward passes in eval mode at the phase's micro-batch size (as PretrainTrainer::evaluate).
    if (!eval_samples.empty()) {
      e.evaluations = evaluations_in_phase(first_step, n, r.eval_every_steps);
      e.batches_per_evaluation = eval_batches(eval_samples, e.micro_batch_size, r.max_eval_steps);
      NoGradGuard ng;
      model.eval();
      model.forward(in, tg);  // warm-up
      const double t_fwd = median_seconds(micro_steps, [&] { model.forward(in, tg); });
      model.train();
      e.seconds_per_evaluation = static_cast<double>(e.batches_per_evaluation) * t_fwd;
      e.projected_seconds += static_cast<double>(e.evaluations) * e.seconds_per_evaluation;
    }
    first_step += n;
    out.push_back(e);
    if (on_phase) on_phase(out.size() - 1, e);
  }
  return out;
}

}  // namespace bertrain
