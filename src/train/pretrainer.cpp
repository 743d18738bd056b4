// pretrainer.cpp: the pretraining loop. One optimizer step = A micro-batches per rank; the masked-LM loss of
// every micro-batch is normalised by the masked-token count of the whole global batch and the next-sentence
// loss by the global batch size, so A micro-batches of B/A give the gradient of one batch of B. With R ranks
// (MPI) each rank runs A = G / (R B) micro-batches of its own samples; the masked-token count is summed over
// ranks before the first micro-batch, and TrainStep sums the gradients over ranks during the last backward,
// so R ranks x A micro-batches give the gradient of 1 rank x R A.
#include "bertrain/train/pretrainer.h"

#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
#include <optional>

#include "bertrain/data/hdf5_shard.h"
#include "bertrain/data/loader.h"
#include "bertrain/io/atomic_file.h"
#include "bertrain/io/checkpoint.h"
#include "bertrain/io/checkpoint_files.h"
#include "bertrain/io/config.h"
#include "bertrain/io/tokenizer_files.h"
#include "bertrain/models/bert.h"
#include "bertrain/ops/ops.h"
#include "bertrain/schedule/schedule.h"
#include "bertrain/text/vocab.h"
#include "bertrain/train/checkpoint_dir.h"
#include "bertrain/train/communicator.h"
#include "bertrain/train/optimizer_factory.h"
#include "bertrain/train/signals.h"
#include "bertrain/train/step_logger.h"
#include "bertrain/train/train_step.h"

namespace bertrain {

namespace fs = std::filesystem;

namespace {
constexpr uint64_t kInitStream = 0x1417;
}  // namespace

struct PretrainTrainer::Impl {
  PretrainRecipe r;
  PretrainOptions o;
  BertConfig cfg;
  std::unique_ptr<BertForPreTraining> model;
  NamedParameters params;
  std::unique_ptr<Optimizer> opt;
  std::unique_ptr<LrSchedulePhases> sched;
  std::unique_ptr<data::PretrainingLoader> loader;
  int loader_phase = -1;
  TrainState state;  // what trainer_state.json holds
  std::string vocab_sha;
  std::shared_ptr<Communicator> comm;  // one rank in a lone process
  std::unique_ptr<TrainStep> step;     // created by train()
  StepLogger log;

  Impl(const PretrainRecipe& recipe, const PretrainOptions& options)
      : r(recipe), o(options), log((fs::path(recipe.output_dir) / "metrics.jsonl").string(), false, false, 1) {
    comm = o.communicator ? o.communicator : world();
    if (comm->size() > 1) {
      o.world_size = comm->size();
      o.rank = comm->rank();
    }
    r.validate(o.world_size);
    r.resolve_micro_batch_size(o.world_size);  // not given: train_batch_size / ranks, one micro-batch per step
    log = StepLogger((fs::path(r.output_dir) / "metrics.jsonl").string(), o.rank == 0,
                     o.progress && isatty(STDERR_FILENO), r.log_every_steps,
                     !r.tensorboard ? "" : r.tensorboard_dir.empty() ? r.output_dir : r.tensorboard_dir);
    // Model config: bert_config_file, else config.json (or Google's bert_config.json) beside the init checkpoint.
    const std::string cfg_path = r.bert_config_file.empty() ? default_config_file(r.init_checkpoint) : r.bert_config_file;
    cfg = load_bert_config(cfg_path);
    cfg.architecture = kArchPreTraining;  // also when initialised from a finetuned checkpoint
    cfg.finetuning_task.clear();
    // The init checkpoint's own vocab.txt and casing (io/checkpoint_files.h) when the recipe names no vocab; a
    // vocab_file whose contents differ from the checkpoint's vocab.txt is refused.
    if (!r.init_checkpoint.empty()) {
      const CheckpointFiles ck = read_checkpoint_files(r.init_checkpoint, r.bert_config_file);
      if (ck.do_lower_case) {
        BERTRAIN_CHECK(!r.do_lower_case_given || r.do_lower_case == *ck.do_lower_case, "do_lower_case ",
                       r.do_lower_case, " contradicts the init checkpoint: ", ck.do_lower_case_source,
                       " says do_lower_case ", *ck.do_lower_case, "; leave do_lower_case out to use the checkpoint's");
        r.do_lower_case = *ck.do_lower_case;
      }
      if (r.vocab_file.empty() && !ck.vocab_file.empty()) {
        r.vocab_file = ck.vocab_file;
        spdlog::info("vocab_file: {} (from init_checkpoint), do_lower_case {}", r.vocab_file, r.do_lower_case);
      } else if (!r.vocab_file.empty() && !ck.vocab_file.empty()) {
        BERTRAIN_CHECK(same_file_contents(r.vocab_file, ck.vocab_file), "vocab_file ", r.vocab_file,
                       " contradicts the init checkpoint: it differs from ", ck.vocab_file,
                       "; leave vocab_file out to use the checkpoint's");
      }
    }
    if (!r.vocab_file.empty()) {
      text::Vocab v = text::Vocab::load(r.vocab_file);
      BERTRAIN_CHECK(static_cast<int64_t>(v.size()) <= cfg.vocab_size, "vocab file ", r.vocab_file, " has ",
                     v.size(), " entries but the model's vocab_size (", cfg_path, ") is ", cfg.vocab_size);
      v.require_special_tokens({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}, "pretraining");
      vocab_sha = v.sha256();
    }
    for (size_t i = 0; i < r.phases.size(); ++i)
      BERTRAIN_CHECK(r.phases[i].max_seq_length <= cfg.max_position_embeddings, "recipe: phases.", i + 1,
                     ".max_seq_length (", r.phases[i].max_seq_length, ") exceeds max_position_embeddings (",
                     cfg.max_position_embeddings, ") of ", cfg_path);
    Rng init(r.seed, kInitStream);
    model = std::make_unique<BertForPreTraining>(cfg, init);
    model->bert().set_activation_checkpointing(r.activation_checkpointing);
    model->bert().set_unpad(r.unpad);
    params = model->named_parameters();
    opt = make_optimizer(r.optimizer, params);
    std::vector<LrScheduleOptions> ph;
    for (const PhaseRecipe& p : r.phases) ph.push_back(p.schedule);
    if (!ph.empty()) sched = std::make_unique<LrSchedulePhases>(ph);
    if (!r.init_checkpoint.empty()) {
      LoadReport rep;
      load_model(r.init_checkpoint, *model, rep);
      spdlog::info("init_checkpoint {}: {}", r.init_checkpoint, rep.summary());
      // Evaluation alone reports the checkpoint's own global_step, as run_pretraining.py does.
      if (!r.do_train && fs::exists(fs::path(r.init_checkpoint) / "trainer_state.json"))
        state.global_step = TrainState::read(r.init_checkpoint).global_step;
    }
    if (o.only_phase > 0) {
      BERTRAIN_CHECK(o.only_phase <= static_cast<int>(r.phases.size()), "--phase ", o.only_phase,
                     ": the recipe has ", r.phases.size(), " phases");
      state.phase = o.only_phase - 1;
      state.global_step = sched->phase_start(state.phase);
    }
    if (o.resume) resume();
    if (r.bf16) {
      MatmulPrecisionGuard check(MatmulPrecision::bf16);  // throws here, before any work, without AVX-512
      log_bf16_outlook();
    }
  }

  /// A: micro-batches per rank per optimizer step of phase `ph`.
  int64_t accum_steps(int ph) const {
    const PhaseRecipe& p = r.phases[ph];
    return p.train_batch_size / (p.micro_batch_size * o.world_size);
  }
  int last_phase() const { return o.only_phase > 0 ? o.only_phase - 1 : static_cast<int>(r.phases.size()) - 1; }

  // ---------------------------------------------------------------- checkpoints
  void save(bool mid_step) {
    check_same_cursor();
    if (comm->size() > 1) {  // the ranks must not have drifted apart (collective; a pass over the weights)
      check_same_parameters(params, *comm);
      spdlog::debug("step {}: the weights are the same on all {} ranks", state.global_step, comm->size());
    }
    if (o.rank != 0) return;
    state.optimizer_step = opt->counters().step;
    state.learning_rate = sched ? sched->at(state.global_step).lr : 0.0;
    state.seed = r.seed;
    state.world_size = o.world_size;
    state.grad_accum_steps = state.phase < static_cast<int>(r.phases.size()) ? accum_steps(state.phase) : 0;
    state.vocab_sha256 = vocab_sha;
    state.recipe_json = pretrain_recipe_to_json(r);
    CheckpointContents c;
    c.model = model.get();
    c.config = &cfg;
    c.optimizer = opt.get();
    c.partial_gradients = mid_step ? &params : nullptr;
    c.state = &state;
    c.write_extra_files = [&](const std::string& dir) {
      if (!r.vocab_file.empty()) {
        BertTokenizerFiles t;
        t.vocab_file = r.vocab_file;
        t.do_lower_case = r.do_lower_case;
        t.model_max_length = cfg.max_position_embeddings;
        save_tokenizer_files(dir, t);
      }
      write_text_atomic((fs::path(dir) / "recipe.json").string(), pretrain_recipe_to_json(r));
    };
    const std::string path = save_checkpoint(r.output_dir, checkpoint_dir_name(state.global_step), state.global_step, c);
    prune_checkpoints(r.output_dir, r.save_total_limit);
    log.sync();
    spdlog::info("saved checkpoint {}{}", path, mid_step ? " (mid-step: partial gradient sum included)" : "");
  }

  /// The loader cursor is the same on every rank (each consumes A micro-batches per step): checks it against
  /// rank 0's before rank 0 saves it for all. Collective.
  void check_same_cursor() {
    if (comm->size() == 1) return;
    double c[3] = {static_cast<double>(state.data_cursor.epoch), static_cast<double>(state.data_cursor.sample),
                   static_cast<double>(state.data_cursor.micro)};
    double ref[3] = {c[0], c[1], c[2]};
    comm->broadcast(ref, sizeof ref, 0);
    BERTRAIN_ASSERT(ref[0] == c[0] && ref[1] == c[1] && ref[2] == c[2], "rank ", o.rank, " data cursor (", c[0], ", ",
                    c[1], ", ", c[2], ") differs from rank 0's (", ref[0], ", ", ref[1], ", ", ref[2], ")");
  }

  void resume() {
    std::optional<std::string> dir = newest_checkpoint(r.output_dir);
    if (!dir) {
      spdlog::info("--resume: no checkpoint in {}, starting from scratch", r.output_dir);
      return;
    }
    state = load_checkpoint(*dir, *model, opt.get(), params);
    // The cursor says where the step's global batch starts in the epoch's order (see LoaderCursor): it means the
    // same with any rank count and accumulation that keep the global batch; a step saved mid-way must be
    // finished with the micro-batches it was started with.
    if (state.phase < static_cast<int>(r.phases.size()) && state.phase_initialized) {
      const int64_t a_old = state.grad_accum_steps, a_new = accum_steps(state.phase);
      BERTRAIN_CHECK(state.micro_batch_index == 0 || a_old == a_new, *dir, " was saved in the middle of a step with ",
                     a_old, " micro-batches per rank; resume it with the same world size and micro_batch_size");
      if (state.data_cursor.legacy_position >= 0) convert_legacy_cursor(*dir);
      BERTRAIN_CHECK(state.data_cursor.micro == state.micro_batch_index, *dir, "/trainer_state.json: data_cursor.micro ",
                     state.data_cursor.micro, " differs from micro_batch_index ", state.micro_batch_index);
      if (!state.recipe_json.empty()) {
        const PretrainRecipe saved = pretrain_recipe_from_json(state.recipe_json, *dir + "/trainer_state.json");
        if (saved.shuffle_window_shards != r.shuffle_window_shards)
          spdlog::warn("{} was trained with shuffle_window_shards {}, this run uses {}: the rest of the epoch's sample "
                       "order is not the one the checkpoint's run would have seen", *dir, saved.shuffle_window_shards,
                       r.shuffle_window_shards);
      }
    }
    BERTRAIN_CHECK(state.micro_batch_index == 0 || comm->size() == 1, *dir, " was saved in the middle of a step "
                   "(one process, SIGINT/SIGTERM): resume it without mpirun, or from an earlier checkpoint");
    BERTRAIN_CHECK(state.micro_batch_index == 0 || state.partial_losses.size() == 3, *dir,
                   "/trainer_state.json: partial_losses must hold 3 values (loss, mlm, nsp)");
    if (comm->size() > 1) {  // all ranks must resume from the same checkpoint (output_dir shared or copied)
      double step0 = static_cast<double>(state.global_step);
      comm->broadcast(&step0, sizeof step0, 0);
      BERTRAIN_CHECK(step0 == static_cast<double>(state.global_step), "rank ", o.rank, " resumes from ", *dir,
                     " (global_step ", state.global_step, ") but rank 0 from global_step ", step0,
                     ": every rank must see the same output_dir");
    }
    log.truncate_after(state.global_step);
    spdlog::info("resumed from {} at global_step {} (phase {}, step {}{})", *dir, state.global_step, state.phase + 1,
                 state.phase_step,
                 state.micro_batch_index ? ", mid-step at micro-batch " + std::to_string(state.micro_batch_index)
                                         : std::string());
  }

  /// A cursor from a bertrain before the streaming loader counted one rank's micro-batches: keep the number of
  /// steps done in the epoch (its sample order is not reproduced: the loader's order changed).
  void convert_legacy_cursor(const std::string& dir) {
    data::LoaderCursor& c = state.data_cursor;
    const int64_t a_old = state.grad_accum_steps > 0 ? state.grad_accum_steps : accum_steps(state.phase);
    BERTRAIN_CHECK(state.micro_batch_index == 0, dir, " was saved in the middle of a step by a bertrain before the "
                   "streaming loader: resume from an earlier checkpoint");
    BERTRAIN_CHECK(c.legacy_position % a_old == 0, dir, ": data cursor position ", c.legacy_position,
                   " is not a multiple of grad_accum_steps ", a_old);
    c.sample = c.legacy_position / a_old * r.phases[state.phase].train_batch_size;
    c.micro = 0;
    c.legacy_position = -1;
    spdlog::warn("{}: the data cursor was written by a bertrain before the streaming loader; continuing after {} samples "
                 "of epoch {} in the new loader's order (not the order this checkpoint was trained with)", dir,
                 c.sample, c.epoch);
  }

  // ---------------------------------------------------------------- data
  void open_loader() {
    const PhaseRecipe& p = r.phases[state.phase];
    data::LoaderOptions lo;
    lo.input_dir = p.input_dir;
    lo.micro_batch_size = p.micro_batch_size;
    lo.world_size = o.world_size;
    lo.rank = o.rank;
    lo.grad_accum_steps = accum_steps(state.phase);
    lo.seed = r.seed + 1000003ULL * static_cast<uint64_t>(state.phase);
    lo.window_shards = r.shuffle_window_shards;
    lo.dynamic_masking = r.dynamic_masking;
    if (r.dynamic_masking) {
      BERTRAIN_CHECK(!r.vocab_file.empty(), "recipe: dynamic_masking needs vocab_file");
      text::Vocab v = text::Vocab::load(r.vocab_file);
      lo.vocab = std::make_shared<data::PretrainingVocab>(v.tokens());
    }
    loader = std::make_unique<data::PretrainingLoader>(lo, state.data_cursor);
    loader_phase = state.phase;
    BERTRAIN_CHECK(loader->max_seq_length() == p.max_seq_length, "phase ", state.phase + 1, ": the shards in ",
                   p.input_dir, " have max_seq_length ", loader->max_seq_length(), " but the recipe says ",
                   p.max_seq_length);
    BERTRAIN_CHECK(loader->max_predictions_per_seq() == p.max_predictions_per_seq, "phase ", state.phase + 1,
                   ": the shards in ", p.input_dir, " have max_predictions_per_seq ",
                   loader->max_predictions_per_seq(), " but the recipe says ", p.max_predictions_per_seq);
    const int64_t n = loader->num_samples(), g = loader->global_batch_size(), s = loader->num_shards();
    spdlog::info("phase {}: {} samples in {} shards of {}; {} steps of {} per epoch, so {} samples of each epoch's order "
                 "are not used that epoch (a different set every epoch: each epoch draws a new order); samples are "
                 "shuffled within windows of {} shards (about {:.0f} MB of this rank's rows each)",
                 state.phase + 1, n, s, p.input_dir, loader->steps_per_epoch(), g, n % g, r.shuffle_window_shards,
                 static_cast<double>(n) / static_cast<double>(s) * static_cast<double>(std::min<int64_t>(s, r.shuffle_window_shards)) *
                     static_cast<double>(6 * p.max_seq_length + 8 * p.max_predictions_per_seq + 1) / o.world_size / 1e6);
  }

  // ---------------------------------------------------------------- training
  /// A later phase keeps weights and moments but restarts the optimizer's step (bias correction), the data and
  /// the learning rate from zero, as NVIDIA's phase 2.
  void begin_phase() {
    const PhaseRecipe& p = r.phases[state.phase];
    if (!state.phase_initialized) {
      if (state.phase > 0 || o.only_phase > 0) opt->set_step(0);
      state.phase_step = 0;
      state.data_cursor = data::LoaderCursor{};
      state.phase_initialized = true;
    }
    if (state.phase_step > p.schedule.num_train_steps)
      spdlog::warn("phase {}: num_train_steps {} is below the {} steps already done: the phase ends at step {}",
                   state.phase + 1, p.schedule.num_train_steps, state.phase_step, state.phase_step);
    if (loader_phase != state.phase) open_loader();
    spdlog::info("phase {}/{}: {} steps, length {}, global batch {} = {} micro-batches of {} x {} ranks, lr {}",
                 state.phase + 1, r.phases.size(), p.schedule.num_train_steps, p.max_seq_length, p.train_batch_size,
                 accum_steps(state.phase), p.micro_batch_size, o.world_size, p.schedule.learning_rate);
  }

  /// Reads this rank's micro-batches of the step (those not done yet, when resumed mid-step) and runs one TrainStep
  /// on them. The masked-LM normaliser is the global batch's masked-token count, counted before the first
  /// micro-batch (so all of this rank's micro-batches are read first) or taken from a mid-step checkpoint.
  /// real_tokens: the tokens that are not padding in the micro-batches read (those of all ranks).
  StepStats train_one_step(double& data_wait, double& real_tokens) {
    const PhaseRecipe& p = r.phases[state.phase];
    const int64_t a = accum_steps(state.phase), g = p.train_batch_size, first = state.micro_batch_index;
    const auto t_data = std::chrono::steady_clock::now();
    const data::LoaderCursor start = loader->cursor();
    BERTRAIN_ASSERT(start.micro == first, "loader at micro-batch ", start.micro, " of the step, trainer at ", first);
    std::vector<data::PretrainingBatch> mb;
    for (int64_t m = first; m < a; ++m) mb.push_back(loader->next());
    loader->take_wait_seconds();  // the wait is part of the data time below
    double counts[2] = {0, 0};  // masked tokens, real tokens
    for (auto& b : mb) {
      for (int64_t i = 0; i < b.masked_lm_weights.numel(); ++i) counts[0] += b.masked_lm_weights.data<float>()[i];
      for (int64_t i = 0; i < b.attention_mask.numel(); ++i) counts[1] += b.attention_mask.data<int32_t>()[i] != 0;
    }
    const auto t_count = std::chrono::steady_clock::now();
    // Data time: the step's batches taken from the loader (its wait included) and their tokens counted; with the
    // compute, communication and optimizer times of TrainStep it tiles the step's wall time.
    data_wait = std::chrono::duration<double>(t_count - t_data).count();
    comm->allreduce(counts, 2);  // the global batch's counts (integers: exact in any order)
    const double count_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_count).count();
    real_tokens = counts[1];
    double wsum = counts[0];
    if (first != 0) wsum = state.step_masked_tokens;
    state.step_masked_tokens = wsum;
    auto micro_batch = [&](int64_t m) {
      const data::PretrainingBatch& b = mb[static_cast<size_t>(m - first)];
      spdlog::debug("step {} rank {} micro-batch {}: epoch {} samples {}", state.global_step + 1, o.rank, m, b.epoch,
                    fmt::join(b.sample_index, ","));
      BertInputs in{b.input_ids, b.token_type_ids, b.attention_mask,
                    state.global_step * g + (o.rank * a + m) * p.micro_batch_size, r.seed};
      PretrainingTargets t{b.masked_lm_positions, b.masked_lm_ids, b.masked_lm_weights,
                           r.next_sentence ? b.next_sentence_labels : Tensor(), wsum + 1e-5, static_cast<double>(g)};
      PretrainingOutput out = model->forward(in, t);
      out.loss.backward();
      if (o.on_micro_batch) o.on_micro_batch(MicroBatchEvent{state.global_step, m, b.epoch, b.step, b.sample_index});
      return std::vector<double>{out.loss.item(), out.mlm_loss.item(), out.nsp_loss.defined() ? out.nsp_loss.item() : 0.0};
    };
    const double lr = sched->phase(state.phase).lr(state.phase_step);
    StepStats st = step->run(a, micro_batch, lr, state, true);
    if (comm->size() > 1) st.times.comm_exposed += count_seconds;  // where a rank waits for the others' last step
    if (st.completed) {
      state.data_cursor = loader->cursor();
      state.step_masked_tokens = 0;
    } else {
      state.data_cursor = start;  // after the micro-batches whose gradients the checkpoint holds
      state.data_cursor.micro = state.micro_batch_index;
    }
    return st;
  }

  void log_step(const StepStats& st, double seconds, double data_wait, double real_tokens, int64_t first_phase_step) {
    const PhaseRecipe& p = r.phases[state.phase];
    const double g = static_cast<double>(p.train_batch_size);
    MetricsRecord rec = {{"step", state.global_step}, {"phase", int64_t{state.phase + 1}}, {"phase_step", state.phase_step},
                {"loss", st.losses[0]}, {"mlm_loss", st.losses[1]}, {"nsp_loss", st.losses[2]}, {"lr", st.lr},
                {"grad_norm", st.grad_norm}, {"sequences_per_second", g / seconds},
                {"tokens_per_second", g * static_cast<double>(p.max_seq_length) / seconds},
                {"real_tokens_per_second", real_tokens / seconds}, {"skipped", st.skipped},
                {"skipped_steps", state.skipped_steps}, {"data_wait_seconds", data_wait},
                {"data_wait_fraction", data_wait / seconds}};
    append_step_times(rec, st.times, seconds, comm->size());
    log.record(rec);

    StepProgress pr;
    pr.where = "phase " + std::to_string(state.phase + 1) + "/" + std::to_string(r.phases.size()) + " step " +
               std::to_string(state.phase_step) + "/" + std::to_string(p.schedule.num_train_steps);
    pr.loss = st.losses[0];
    pr.parts = {{"mlm", st.losses[1]}, {"nsp", st.losses[2]}};
    pr.lr = st.lr;
    pr.grad_norm = st.grad_norm;
    pr.sequences_per_second = g / seconds;
    pr.tokens_per_second = g * static_cast<double>(p.max_seq_length) / seconds;
    pr.data_wait_fraction = data_wait / seconds;
    set_progress_comm(pr, st.times, seconds, comm->size());
    pr.done = state.phase_step - first_phase_step;
    pr.total = p.schedule.num_train_steps - first_phase_step;
    pr.last = state.phase_step == p.schedule.num_train_steps;
    log.progress(pr, state.phase_step);
  }

  /// After the last step of a phase: evaluate, move the state to the next phase (not started yet) and save, so
  /// that a resume from this checkpoint begins the next phase afresh.
  /// A phase whose num_train_steps was cut on --resume (e.g. by a stop rule, experiments/long-run/pretrain_long_run.sh) to the
  /// step a mid-step checkpoint was taken at ends there: the unfinished step's micro-batches are dropped, not applied.
  void end_phase() {
    if (state.micro_batch_index != 0) {
      spdlog::warn("phase {} ends at step {} (num_train_steps {}): the unfinished step's {} micro-batch(es) are dropped",
                   state.phase + 1, state.phase_step, r.phases[state.phase].schedule.num_train_steps,
                   state.micro_batch_index);
      opt->zero_grad();
      state.micro_batch_index = 0;
      state.partial_losses.clear();
      state.step_masked_tokens = 0;
      state.data_cursor.micro = 0;
    }
    if (!r.eval_dir.empty()) evaluate(r.eval_dir);
    if (state.phase < last_phase()) {
      ++state.phase;
      state.phase_initialized = false;
      state.phase_step = 0;
      state.data_cursor = data::LoaderCursor{};
    }
    save(false);
  }

  int train() {
    BERTRAIN_CHECK(r.do_train, "train() with do_train=false");
    fs::create_directories(r.output_dir);
    if (o.rank == 0) write_text_atomic((fs::path(r.output_dir) / "recipe.json").string(), pretrain_recipe_to_json(r));
    // A new run starts a new log; a phase run on its own (--phase N) keeps the phases before it and replaces
    // any records of this phase and later that an earlier run left, so that every step appears once.
    if (!o.resume) {
      if (o.only_phase == 0)
        log.start_new();
      else
        log.truncate_after(state.global_step);
    }
    SignalGuard signals;
    TrainStepOptions so;
    so.clip_grad_norm = r.optimizer.clip_grad_norm;
    so.max_consecutive_skipped_steps = r.max_consecutive_skipped_steps;
    so.allreduce_bucket_mb = o.allreduce_bucket_mb;
    so.allreduce_dtype = r.allreduce_dtype;
    step = std::make_unique<TrainStep>(params, *opt, so, comm);
    model->train();
    const int last = last_phase();
    if (state.phase == last && state.phase_initialized && state.phase_step >= r.phases[state.phase].schedule.num_train_steps) {
      if (state.micro_batch_index != 0) {  // the last phase cut at a mid-step checkpoint: end it cleanly there
        end_phase();
        return 0;
      }
      spdlog::info("phase {} already finished at global_step {}: nothing to train", state.phase + 1, state.global_step);
      return 0;
    }
    for (bool more = true; more;) {
      more = state.phase < last;  // end_phase() moves the state on to the next phase
      const PhaseRecipe& p = r.phases[state.phase];
      begin_phase();
      log.restart_clock();
      const int64_t first = state.phase_step;
      while (state.phase_step < p.schedule.num_train_steps) {
        const auto t0 = std::chrono::steady_clock::now();
        double data_wait = 0, real_tokens = 0;
        const StepStats st = train_one_step(data_wait, real_tokens);
        if (!st.completed) {
          save(true);
          return 128 + st.stop_signal;
        }
        log_step(st, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), data_wait,
                 real_tokens, first);
        if (state.phase_step == p.schedule.num_train_steps) break;
        if (!r.eval_dir.empty() && r.eval_every_steps > 0 && state.global_step % r.eval_every_steps == 0)
          evaluate(r.eval_dir);
        if (r.save_checkpoints_steps > 0 && state.global_step % r.save_checkpoints_steps == 0) save(false);
        if (st.stop_signal) {
          spdlog::warn("signal {} received: saving checkpoint at step {}", st.stop_signal, state.global_step);
          save(false);
          return 128 + st.stop_signal;
        }
      }
      end_phase();
    }
    return 0;
  }

  // ---------------------------------------------------------------- evaluation
  PretrainEvalResult evaluate(const std::string& dir) {
    NoGradGuard ng;
    const bool was_training = model->is_training();
    model->eval();
    const std::vector<std::string> shards = data::list_eval_shards(dir);
    double wce = 0, wsum = 0, wcorrect = 0, nsp_ce = 0, nsp_correct = 0, nsp_n = 0;
    int64_t examples = 0, steps = 0;
    const int64_t bsz =
        r.phases.empty() ? 32 : r.phases[std::min<size_t>(state.phase, r.phases.size() - 1)].micro_batch_size;
    int64_t batch_no = 0;  // batches over all shards: rank k evaluates those with batch_no % R == k
    for (const std::string& path : shards) {
      data::PretrainingFeatures f = data::read_pretraining_shard(path);
      for (int64_t s = 0; s < f.size(); s += bsz) {
        if (r.max_eval_steps > 0 && steps >= r.max_eval_steps) break;
        ++steps;
        if ((batch_no++) % comm->size() != comm->rank()) continue;
        const int64_t b = std::min(bsz, f.size() - s);
        data::PretrainingBatch pb = data::make_pretraining_batch(f, s, b);
        PretrainingOutput out = model->forward(
            BertInputs{pb.input_ids, pb.token_type_ids, pb.attention_mask, 0, r.seed},
            PretrainingTargets{pb.masked_lm_positions, pb.masked_lm_ids, pb.masked_lm_weights,
                               r.next_sentence ? pb.next_sentence_labels : Tensor(), 1.0, 1.0});
        wce += out.mlm_loss.item();
        wsum += out.mlm_weight;
        wcorrect += out.mlm_correct;
        if (out.nsp_loss.defined()) {
          nsp_ce += out.nsp_loss.item();
          nsp_correct += out.nsp_correct;
          nsp_n += out.nsp_count;
        }
        examples += b;
      }
    }
    std::vector<double> sums = {wce, wsum, wcorrect, nsp_ce, nsp_correct, nsp_n, static_cast<double>(examples)};
    if (comm->size() > 1) comm->allreduce(sums.data(), static_cast<int64_t>(sums.size()));
    PretrainEvalResult e;
    e.masked_lm_loss = sums[0] / std::max(sums[1], 1e-12);
    e.masked_lm_accuracy = sums[2] / std::max(sums[1], 1e-12);
    e.next_sentence_loss = sums[5] > 0 ? sums[3] / sums[5] : 0;
    e.next_sentence_accuracy = sums[5] > 0 ? sums[4] / sums[5] : 0;
    e.loss = e.masked_lm_loss + e.next_sentence_loss;
    e.global_step = state.global_step;
    e.examples = static_cast<int64_t>(sums[6]);
    if (was_training) model->train();
    const MetricsRecord rec = {{"masked_lm_loss", e.masked_lm_loss}, {"masked_lm_accuracy", e.masked_lm_accuracy},
                               {"next_sentence_loss", e.next_sentence_loss},
                               {"next_sentence_accuracy", e.next_sentence_accuracy}, {"loss", e.loss},
                               {"global_step", e.global_step}};
    if (o.rank == 0) {
      fs::create_directories(r.output_dir);
      write_text_atomic((fs::path(r.output_dir) / "eval_results.json").string(), metrics_json(rec));
      MetricsRecord m = rec;
      m.emplace_back("step", state.global_step);
      m.emplace_back("eval", true);
      m.emplace_back("eval_examples", e.examples);
      if (r.do_train) log.record(m);
    }
    spdlog::info("eval at step {} on {} examples: masked_lm_loss {:.4f} masked_lm_accuracy {:.4f} "
                 "next_sentence_loss {:.4f} next_sentence_accuracy {:.4f}",
                 state.global_step, e.examples, e.masked_lm_loss, e.masked_lm_accuracy, e.next_sentence_loss,
                 e.next_sentence_accuracy);
    return e;
  }
};

PretrainTrainer::PretrainTrainer(const PretrainRecipe& recipe, const PretrainOptions& options)
    : impl_(std::make_unique<Impl>(recipe, options)) {}
PretrainTrainer::~PretrainTrainer() = default;
int PretrainTrainer::train() {
  MatmulPrecisionGuard mp(impl_->r.bf16 ? MatmulPrecision::bf16 : MatmulPrecision::f32);
  return impl_->train();
}
PretrainEvalResult PretrainTrainer::evaluate(const std::string& eval_dir) {
  MatmulPrecisionGuard mp(impl_->r.bf16 ? MatmulPrecision::bf16 : MatmulPrecision::f32);
  return impl_->evaluate(eval_dir);
}
int64_t PretrainTrainer::global_step() const { return impl_->state.global_step; }

}  // namespace bertrain
