// schedule.cpp: learning-rate schedules (see schedule.h for the reference each formula reproduces).
#include "bertrain/schedule/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "bertrain/core/error.h"

namespace bertrain {

double lr_linear_warmup(double peak, double step, double warmup_steps) {
  BERTRAIN_CHECK(warmup_steps > 0, "lr_linear_warmup: warmup_steps must be > 0, got ", warmup_steps);
  return peak * (step / warmup_steps);
}

double lr_poly_decay(double lr, double step, double decay_steps, double power, double end_lr) {
  BERTRAIN_CHECK(decay_steps > 0, "lr_poly_decay: decay_steps must be > 0, got ", decay_steps);
  const double s = std::clamp(step, 0.0, decay_steps);
  return (lr - end_lr) * std::pow(1.0 - s / decay_steps, power) + end_lr;
}

double lr_cosine_decay(double lr, double step, double decay_steps, double end_lr) {
  BERTRAIN_CHECK(decay_steps > 0, "lr_cosine_decay: decay_steps must be > 0, got ", decay_steps);
  const double s = std::clamp(step, 0.0, decay_steps);
  return end_lr + (lr - end_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * s / decay_steps));
}

LrSchedule::LrSchedule(const LrScheduleOptions& o) : opt_(o) {
  BERTRAIN_CHECK(std::isfinite(o.learning_rate) && o.learning_rate >= 0,
                 "LrScheduleOptions.learning_rate must be finite and >= 0, got ", o.learning_rate);
  BERTRAIN_CHECK(o.num_train_steps > 0, "LrScheduleOptions.num_train_steps must be > 0, got ", o.num_train_steps);
  BERTRAIN_CHECK(o.num_warmup_steps >= -1, "LrScheduleOptions.num_warmup_steps must be >= 0 (or -1 to use ",
                 "warmup_proportion), got ", o.num_warmup_steps);
  BERTRAIN_CHECK(o.num_warmup_steps <= o.num_train_steps, "LrScheduleOptions.num_warmup_steps (",
                 o.num_warmup_steps, ") must not exceed num_train_steps (", o.num_train_steps, ")");
  BERTRAIN_CHECK(o.warmup_proportion >= 0 && o.warmup_proportion <= 1,
                 "LrScheduleOptions.warmup_proportion must be in [0, 1], got ", o.warmup_proportion);
  BERTRAIN_CHECK(std::isfinite(o.power) && o.power > 0, "LrScheduleOptions.power must be > 0, got ", o.power);
  BERTRAIN_CHECK(o.end_learning_rate >= 0 && o.end_learning_rate <= o.learning_rate,
                 "LrScheduleOptions.end_learning_rate must be in [0, learning_rate = ", o.learning_rate, "], got ",
                 o.end_learning_rate);
  const double total = static_cast<double>(o.num_train_steps);
  if (o.num_warmup_steps >= 0) {
    warmup_steps_ = o.num_warmup_steps;
    warmup_fraction_ = static_cast<double>(o.num_warmup_steps) / total;
  } else {
    warmup_fraction_ = o.warmup_proportion;
    const double w = total * o.warmup_proportion;
    // google-research/bert run_classifier: int(num_train_steps * warmup_proportion); Hugging Face
    // TrainingArguments.get_warmup_steps: math.ceil(num_training_steps * warmup_ratio).
    warmup_steps_ = static_cast<int64_t>(o.convention == LrConvention::hugging_face ? std::ceil(w) : std::floor(w));
  }
  if (o.convention == LrConvention::nvidia) {
    // NVIDIA compares the proportion itself: update k warms up while (k + 1) / total < w (the same expression as
    // lr()), so the warmup has ceil(w * total) - 1 updates, e.g. 2000 for 7038 x 0.2843 = 2000.9, 9 for 100 x 0.1.
    int64_t j = std::max<int64_t>(0, static_cast<int64_t>(std::ceil(warmup_fraction_ * total)) - 1);
    while (j + 1 <= o.num_train_steps && static_cast<double>(j + 1) / total < warmup_fraction_) ++j;
    while (j > 0 && static_cast<double>(j) / total >= warmup_fraction_) --j;
    warmup_steps_ = j;
  }
}

double LrSchedule::lr(int64_t step) const {
  BERTRAIN_CHECK(step >= 0, "LrSchedule::lr: step must be >= 0, got ", step);
  const LrScheduleOptions& o = opt_;
  const double lr0 = o.learning_rate, end = o.end_learning_rate;
  const double total = static_cast<double>(o.num_train_steps);
  const double s = static_cast<double>(step);
  const double W = static_cast<double>(warmup_steps_);
  double out = 0.0;
  switch (o.convention) {
    case LrConvention::google_bert: {
      if (warmup_steps_ > 0 && step < warmup_steps_) return lr_linear_warmup(lr0, s, W);
      switch (o.decay) {
        case LrDecay::constant: out = lr0; break;
        case LrDecay::linear: out = lr_poly_decay(lr0, s, total, 1.0, end); break;
        case LrDecay::poly: out = lr_poly_decay(lr0, s, total, o.power, end); break;
        case LrDecay::cosine: out = lr_cosine_decay(lr0, s, total, end); break;
      }
      break;
    }
    case LrConvention::nvidia: {
      const double p = (s + 1.0) / total;  // last_epoch = optimizer step + 1
      const double w = warmup_fraction_;
      if (p < w) return lr0 * p / w;
      switch (o.decay) {
        case LrDecay::constant: out = lr0; break;
        case LrDecay::linear: {
          // LinearWarmUpScheduler: lr * max((p - 1) / (w - 1), 0)
          const double f = w < 1.0 ? std::max((p - 1.0) / (w - 1.0), 0.0) : 0.0;
          out = end + (lr0 - end) * f;
          break;
        }
        case LrDecay::poly: out = p >= 1.0 ? end : (lr0 - end) * std::pow(1.0 - p, o.power) + end; break;
        case LrDecay::cosine: out = lr_cosine_decay(lr0, std::min(p, 1.0), 1.0, end); break;
      }
      break;
    }
    case LrConvention::hugging_face: {
      if (step < warmup_steps_) return lr0 * s / std::max(1.0, W);
      const double span = std::max(1.0, total - W);
      switch (o.decay) {
        case LrDecay::constant: out = lr0; break;
        case LrDecay::linear: out = lr0 * std::max(0.0, (total - s) / span); break;
        case LrDecay::poly:
          out = s > total ? end : (lr0 - end) * std::pow(1.0 - (s - W) / span, o.power) + end;
          break;
        case LrDecay::cosine: out = lr_cosine_decay(lr0, s - W, span, end); break;
      }
      break;
    }
  }
  return std::max(out, 0.0);
}

LrSchedulePhases::LrSchedulePhases(const std::vector<LrScheduleOptions>& phases) {
  BERTRAIN_CHECK(!phases.empty(), "LrSchedulePhases: expected at least one phase, got none");
  int64_t start = 0;
  for (size_t i = 0; i < phases.size(); ++i) {
    try {
      phases_.emplace_back(phases[i]);
    } catch (const Error& e) {
      throw Error("LrSchedulePhases: phase " + std::to_string(i) + ": " + e.what());
    }
    starts_.push_back(start);
    start += phases[i].num_train_steps;
  }
}

LrSchedulePoint LrSchedulePhases::at(int64_t global_step) const {
  BERTRAIN_CHECK(global_step >= 0, "LrSchedulePhases::at: global_step must be >= 0, got ", global_step);
  int p = num_phases() - 1;
  for (int i = 0; i + 1 < num_phases(); ++i) {
    if (global_step < starts_[i + 1]) {
      p = i;
      break;
    }
  }
  LrSchedulePoint pt;
  pt.phase = p;
  pt.phase_step = global_step - starts_[p];
  pt.lr = phases_[p].lr(pt.phase_step);
  return pt;
}

int64_t LrSchedulePhases::phase_start(int phase) const {
  BERTRAIN_CHECK(phase >= 0 && phase < num_phases(), "LrSchedulePhases::phase_start: phase ", phase,
                 " out of range [0, ", num_phases(), ")");
  return starts_[phase];
}

}  // namespace bertrain
