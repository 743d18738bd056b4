// estimate.cpp: the projection behind `bertrain estimate` (include/bertrain/train/estimate.h).
#include "bertrain/train/estimate.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "bertrain/autograd/variable.h"
#include "bertrain/core/error.h"
#include "bertrain/core/rng.h"
#include "bertrain/data/hdf5_shard.h"
#include "bertrain/data/synthetic.h"
#include "bertrain/io/config.h"
#include "bertrain/models/bert.h"
#include "bertrain/ops/ops.h"
#include "bertrain/optim/clip.h"
#include "bertrain/train/optimizer_factory.h"

namespace bertrain {
namespace {

// The median of n timed calls of f, in seconds. A median, not a mean: one call slowed by a transient (another
// process ending, page faults of a first touch) moves a mean of a few calls by tens of percent.
template <class F>
double median_seconds(int n, F&& f) {
  std::vector<double> t;
  for (int k = 0; k < n; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
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

std::vector<PhaseEstimate> estimate_recipe(const PretrainRecipe& r, int micro_steps,
                                           const std::function<void(size_t, const PhaseEstimate&)>& on_phase) {
  BERTRAIN_CHECK(micro_steps >= 1, "estimate: micro_steps must be at least 1, got ", micro_steps);
  MatmulPrecisionGuard precision(r.bf16 ? MatmulPrecision::bf16 : MatmulPrecision::f32);
  BertConfig cfg = load_bert_config(r.bert_config_file);
  Rng rng(r.seed, 0x1417);
  BertForPreTraining model(cfg, rng);
  model.bert().set_activation_checkpointing(r.activation_checkpointing);
  model.bert().set_unpad(r.unpad);
  // The recipe's own optimizer (LAMB, AdamW, ...): its step time is part of every update.
  std::unique_ptr<Optimizer> opt = make_optimizer(r.optimizer, model.named_parameters());
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
    model.forward(in, tg).loss.backward();  // warm-up: primitive creation, allocator cache
    e.seconds_per_micro_batch = median_seconds(micro_steps, [&] { model.forward(in, tg).loss.backward(); });
    // The update as the trainer does it: global-norm clipping, then the optimizer. The first update allocates
    // the optimizer's moments, so one untimed update comes first.
    auto update = [&] {
      if (r.optimizer.clip_grad_norm > 0) clip_grad_norm(model.named_parameters(), r.optimizer.clip_grad_norm);
      opt->step(1e-4);
    };
    update();
    const double t_opt = median_seconds(micro_steps, update);
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
