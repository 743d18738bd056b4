// schedule.h: learning-rate schedules as pure functions of the step: linear warmup, then polynomial, linear,
// cosine or constant decay, in the step conventions of google-research/bert, NVIDIA and Hugging Face.
#pragma once

#include <cstdint>
#include <vector>

namespace bertrain {

// ---- building blocks (all pure; lr in the caller's units, steps as counts) ----

/// Linear warmup from 0: peak * step / warmup_steps. warmup_steps > 0. google-research/bert optimization.py
/// (`warmup_percent_done * init_lr`), Hugging Face `get_*_schedule_with_warmup` (with max(1, warmup)).
double lr_linear_warmup(double peak, double step, double warmup_steps);
/// TensorFlow's tf.train.polynomial_decay with cycle=False: step is clamped to decay_steps, then
/// (lr - end_lr) * (1 - step / decay_steps)^power + end_lr. decay_steps > 0.
double lr_poly_decay(double lr, double step, double decay_steps, double power, double end_lr);
/// Half-cosine from lr to end_lr over decay_steps (step clamped to [0, decay_steps]):
/// end_lr + (lr - end_lr) * 0.5 * (1 + cos(pi * step / decay_steps)). tf.train.cosine_decay with alpha =
/// end_lr / lr, and Hugging Face get_cosine_schedule_with_warmup (num_cycles 0.5) when end_lr = 0.
double lr_cosine_decay(double lr, double step, double decay_steps, double end_lr);

// ---- whole schedules ----

/// Shape after warmup. `linear` is poly with power 1 except in the NVIDIA and Hugging Face conventions, where it
/// is their own linear scheduler (see LrConvention).
enum class LrDecay { constant, linear, poly, cosine };

/// Which reference's step convention and formulas to reproduce exactly. In all three, `step` passed to
/// LrSchedule::lr is the 0-based global step of the update about to be applied (0 for the first update).
enum class LrConvention {
  /// google-research/bert optimization.py create_optimizer: lr = polynomial_decay(init_lr, step,
  /// num_train_steps, end_lr, power) over the *whole* run (not offset by warmup); while step < warmup the
  /// warmup value init_lr * step / warmup replaces it. So step 0 gets lr 0, the peak is never reached
  /// (CASES C22: warmup 10, total 100 -> step 10 gives 0.9 * init_lr). warmup_proportion -> int(total * p).
  /// cosine uses tf.train.cosine_decay over the whole run the same way.
  google_bert,
  /// NVIDIA DeepLearningExamples PyTorch/LanguageModeling/BERT schedulers.py PolyWarmUpScheduler (and
  /// LinearWarmUpScheduler for `linear`): scheduler.step() runs before optimizer.step() and sets
  /// last_epoch = optimizer step + 1, so update `step` uses progress p = (step + 1) / total; warmup is the
  /// proportion w (num_warmup_steps / total when given in steps); p < w: lr * p / w; otherwise poly:
  /// lr * (1 - p)^power (power 0.5 in NVIDIA's BERT), linear: lr * max((p - 1) / (w - 1), 0). Past the end
  /// (p > 1) we return end_lr where NVIDIA's poly computes a negative number to a fractional power (NaN).
  /// end_lr (default 0) is added as in TF's polynomial_decay; NVIDIA has none (0). cosine: half-cosine over p.
  nvidia,
  /// Hugging Face transformers optimization.py: step < warmup: lr * step / max(1, warmup); linear
  /// (get_linear_schedule_with_warmup): lr * max(0, (total - step) / max(1, total - warmup)); poly
  /// (get_polynomial_decay_schedule_with_warmup): (lr - end_lr) * (1 - (step - warmup) / (total - warmup))^power
  /// + end_lr, end_lr past total; cosine (get_cosine_schedule_with_warmup, 0.5 cycles) over step - warmup;
  /// constant (get_constant_schedule_with_warmup). warmup_proportion -> ceil(total * p) as TrainingArguments.
  hugging_face,
};

/// Options of one schedule. Validated by LrSchedule's constructor.
struct LrScheduleOptions {
  double learning_rate = 0.0;     // peak (google-research/bert's init_lr), > 0
  int64_t num_train_steps = 0;    // total updates of this schedule (or phase), > 0
  int64_t num_warmup_steps = -1;  // >= 0; -1 means "use warmup_proportion"
  double warmup_proportion = 0.0; // in [0, 1]; used only when num_warmup_steps == -1
  LrDecay decay = LrDecay::poly;
  double power = 1.0;             // poly only: 1.0 google-research/bert, 0.5 NVIDIA; > 0
  double end_learning_rate = 0.0; // >= 0 and <= learning_rate
  LrConvention convention = LrConvention::google_bert;
};

/// A validated schedule: step -> learning rate. Throws bertrain::Error from the constructor on invalid
/// options (message names the field, the expected range and the value).
class LrSchedule {
 public:
  explicit LrSchedule(const LrScheduleOptions& options);
  /// Learning rate for the update with 0-based global step `step` (>= 0, throws otherwise). Never negative.
  double lr(int64_t step) const;
  /// The number of updates that take the warmup branch (updates 0 .. warmup_steps() - 1), the one rule that turns
  /// warmup_proportion p into steps for each convention: google_bert int(total * p) (run_classifier.py),
  /// hugging_face ceil(total * p) (TrainingArguments.get_warmup_steps), nvidia ceil(total * p) - 1 (it compares
  /// the proportion (k + 1) / total < p, schedulers.py; num_warmup_steps n means p = n / total there).
  int64_t warmup_steps() const { return warmup_steps_; }
  const LrScheduleOptions& options() const { return opt_; }

 private:
  LrScheduleOptions opt_;
  int64_t warmup_steps_ = 0;
  double warmup_fraction_ = 0.0;  // nvidia: the proportion w
};

/// Where a global step falls in a multi-phase schedule.
struct LrSchedulePoint {
  int phase = 0;           // 0-based phase index
  int64_t phase_step = 0;  // 0-based step within the phase (its own counter)
  double lr = 0.0;
};

/// Phases run back to back; each has its own base lr, warmup and length (num_train_steps) and restarts its
/// step counter at 0, so the lr re-warms from zero when phase 2 starts (LAMB BERT pretraining, You et al. 2019
/// section 4, and NVIDIA's run_pretraining.py phase 2). Steps past the last phase stay in the last phase
/// (its schedule clamps). Throws bertrain::Error on an empty list or an invalid phase (naming its index).
class LrSchedulePhases {
 public:
  explicit LrSchedulePhases(const std::vector<LrScheduleOptions>& phases);
  /// (phase, phase step, lr) for 0-based `global_step` >= 0.
  LrSchedulePoint at(int64_t global_step) const;
  /// Global step at which `phase` starts.
  int64_t phase_start(int phase) const;
  int num_phases() const { return static_cast<int>(phases_.size()); }
  const LrSchedule& phase(int i) const { return phases_.at(i); }

 private:
  std::vector<LrSchedule> phases_;
  std::vector<int64_t> starts_;
};

}  // namespace bertrain
