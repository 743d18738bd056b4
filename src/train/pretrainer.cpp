// pretrainer.cpp: the pretraining loop. One optimizer step = A micro-batches per rank; the masked-LM loss of
// every micro-batch is normalised by the masked-token count of the whole global batch and the next-sentence
// loss by the global batch size, so A micro-batches of B/A give the gradient of one batch of B. With R ranks
// (MPI) each rank runs A = G / (R B) micro-batches of its own samples; the masked-token count is summed over ranks
// before the first micro-batch, and the gradients are summed over ranks during the last micro-batch's backward
// (GradientReducer), so R ranks x A micro-batches give the gradient of 1 rank x R A.
#include "bertrain/train/pretrainer.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "bertrain/data/hdf5_shard.h"
#include "bertrain/data/loader.h"
#include "bertrain/text/vocab.h"
#include "bertrain/io/checkpoint.h"
#include "bertrain/io/config.h"
#include "bertrain/io/safetensors.h"
#include "bertrain/models/bert.h"
#include "bertrain/optim/adamw.h"
#include "bertrain/optim/clip.h"
#include "bertrain/optim/lamb.h"
#include "bertrain/optim/lars.h"
#include "bertrain/optim/sgd.h"
#include "bertrain/ops/ops.h"
#include "bertrain/schedule/schedule.h"
#include "bertrain/train/communicator.h"
#include "bertrain/train/checkpoint_dir.h"
#include "bertrain/train/grad_reducer.h"
#include "bertrain/train/optimizer_factory.h"
#include "bertrain/train/signals.h"

namespace bertrain {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr uint64_t kInitStream = 0x1417;

std::string fmt_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  char buf[32];
  const long t = std::lround(s);
  std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  return buf;
}

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

  // Trainer state (what trainer_state.json holds).
  int64_t global_step = 0;
  int phase = 0;  // 0-based
  int64_t phase_step = 0;
  data::LoaderCursor cursor;  // where the next optimizer step's micro-batches start
  int64_t skipped_steps = 0, consecutive_skipped = 0;
  int64_t micro_index = 0;  // > 0: resumed mid-step, gradients of micro-batches [0, micro_index) are restored
  double partial_loss = 0, partial_mlm = 0, partial_nsp = 0;  // their loss sums, so the step logs the full loss
  bool phase_initialized = false;

  std::string vocab_sha;

  // Data parallelism (MPI): comm has one rank in a lone process, and then reducer is null.
  std::shared_ptr<Communicator> comm;
  std::unique_ptr<GradientReducer> reducer;

  Impl(const PretrainRecipe& recipe, const PretrainOptions& options) : r(recipe), o(options) {
    comm = o.communicator ? o.communicator : world();
    if (comm->size() > 1) {
      o.world_size = comm->size();
      o.rank = comm->rank();
    }
    r.validate(o.world_size);
    // Model config: bert_config_file, else config.json beside the init checkpoint.
    std::string cfg_path = r.bert_config_file;
    if (cfg_path.empty()) {
      fs::path ck(r.init_checkpoint);
      cfg_path = (fs::is_directory(ck) ? ck : ck.parent_path()) / "config.json";
    }
    cfg = load_bert_config(cfg_path);
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
    params = model->named_parameters();
    opt = make_optimizer(r.optimizer, params);
    std::vector<LrScheduleOptions> ph;
    for (const PhaseRecipe& p : r.phases) ph.push_back(schedule_of(p));
    if (!ph.empty()) sched = std::make_unique<LrSchedulePhases>(ph);
    if (!r.init_checkpoint.empty()) {
      LoadReport rep;
      load_model(r.init_checkpoint, *model, rep);
      spdlog::info("init_checkpoint {}: {}", r.init_checkpoint, rep.summary());
      // Evaluation alone reports the checkpoint's own global_step, as run_pretraining.py does.
      const fs::path st = fs::path(r.init_checkpoint) / "trainer_state.json";
      if (!r.do_train && fs::exists(st)) {
        try {
          global_step = json::parse(std::ifstream(st)).at("global_step").get<int64_t>();
        } catch (const json::exception& e) {
          throw Error(st.string() + ": " + e.what());
        }
      }
    }
    if (o.only_phase > 0) {
      BERTRAIN_CHECK(o.only_phase <= static_cast<int>(r.phases.size()), "--phase ", o.only_phase,
                     ": the recipe has ", r.phases.size(), " phases");
      phase = o.only_phase - 1;
      global_step = sched->phase_start(phase);
    }
    if (o.resume) resume();
    if (r.bf16) {
      MatmulPrecisionGuard check(MatmulPrecision::bf16);  // throws here, before any work, without AVX-512
      spdlog::info("bf16 mixed precision: matmuls in bf16 with f32 accumulation, f32 master weights ({})",
                   matmul_bf16_native() ? "native AVX512_BF16"
                                        : "this CPU has no AVX512_BF16: oneDNN emulates it, slower than f32");
    }
    if (comm->size() > 1) {
      check_same_parameters(params, *comm);  // same seed or same checkpoint on every rank
      BERTRAIN_CHECK(o.allreduce_bucket_mb > 0, "allreduce_bucket_mb must be positive, got ", o.allreduce_bucket_mb);
      reducer = std::make_unique<GradientReducer>(params, comm, static_cast<int64_t>(o.allreduce_bucket_mb * (1 << 20)));
      spdlog::info("data parallel: {}; gradients summed in {} buckets", comm->description(), reducer->num_buckets());
    }
  }

  /// The loader cursor is the same on every rank (each consumes A micro-batches per step): checks it against
  /// rank 0's before rank 0 saves it for all. Collective.
  void check_same_cursor() {
    if (comm->size() == 1) return;
    double c[2] = {static_cast<double>(cursor.epoch), static_cast<double>(cursor.position)};
    double ref[2] = {c[0], c[1]};
    comm->broadcast(ref, sizeof ref, 0);
    BERTRAIN_ASSERT(ref[0] == c[0] && ref[1] == c[1], "rank ", o.rank, " data cursor (", c[0], ", ", c[1],
                    ") differs from rank 0's (", ref[0], ", ", ref[1], ")");
  }

  // ---------------------------------------------------------------- checkpoints
  json state_json() const {
    return json{{"global_step", global_step},
                {"phase", phase + 1},
                {"phase_step", phase_step},
                {"data_cursor", json::parse(cursor.to_json())},
                {"skipped_steps", skipped_steps},
                {"consecutive_skipped_steps", consecutive_skipped},
                {"micro_batch_index", micro_index},
                {"partial_losses", {partial_loss, partial_mlm, partial_nsp}},
                {"phase_initialized", phase_initialized},
                {"optimizer_step", opt->counters().step},
                {"learning_rate", sched ? sched->at(global_step).lr : 0.0},
                {"dropout_seed", r.seed},
                {"world_size", o.world_size},
                {"grad_accum_steps", phase < static_cast<int>(r.phases.size()) ? accum_steps(phase) : 0},
                {"vocab_sha256", vocab_sha},
                {"recipe", json::parse(pretrain_recipe_to_json(r))}};
  }

  void save_checkpoint(bool partial) {
    check_same_cursor();
    if (o.rank != 0) return;
    CheckpointWriter w(r.output_dir, global_step);
    save_model(w.dir(), *model, cfg);
    std::vector<std::pair<std::string, Tensor>> st = opt->state_tensors();
    save_safetensors(w.path("optimizer.safetensors"), st);
    if (partial) {
      std::vector<std::pair<std::string, Tensor>> g;
      for (auto& [n, v] : params)
        if (v.grad().defined()) g.emplace_back(n, v.grad());
      save_safetensors(w.path("partial_gradients.safetensors"), g);
    }
    if (!r.vocab_file.empty()) fs::copy_file(r.vocab_file, w.path("vocab.txt"), fs::copy_options::overwrite_existing);
    write_text(w.path("tokenizer_config.json"),
               json{{"do_lower_case", r.do_lower_case}, {"model_max_length", cfg.max_position_embeddings},
                    {"tokenizer_class", "BertTokenizer"}, {"unk_token", "[UNK]"}, {"sep_token", "[SEP]"},
                    {"pad_token", "[PAD]"}, {"cls_token", "[CLS]"}, {"mask_token", "[MASK]"},
                    {"strip_accents", nullptr}, {"tokenize_chinese_chars", true}}
                   .dump(2));
    write_text(w.path("special_tokens_map.json"),
               json{{"unk_token", "[UNK]"}, {"sep_token", "[SEP]"}, {"pad_token", "[PAD]"}, {"cls_token", "[CLS]"},
                    {"mask_token", "[MASK]"}}
                   .dump(2));
    write_text(w.path("recipe.json"), pretrain_recipe_to_json(r));
    // trainer_state.json last: a directory is complete when it is renamed into place.
    write_text(w.path("trainer_state.json"), state_json().dump(2));
    w.commit();
    prune_checkpoints(r.output_dir, r.save_total_limit);
    spdlog::info("saved checkpoint {}{}", (fs::path(r.output_dir) / checkpoint_dir_name(global_step)).string(),
                 partial ? " (mid-step: partial gradient sum included)" : "");
  }

  void resume() {
    std::optional<std::string> dir = newest_checkpoint(r.output_dir);
    if (!dir) {
      spdlog::info("--resume: no checkpoint in {}, starting from scratch", r.output_dir);
      return;
    }
    json s;
    {
      std::ifstream f(fs::path(*dir) / "trainer_state.json");
      BERTRAIN_CHECK(f.good(), "cannot read ", *dir, "/trainer_state.json");
      try {
        s = json::parse(f);
      } catch (const json::exception& e) {
        throw Error(*dir + "/trainer_state.json: " + e.what());
      }
    }
    LoadReport rep;
    LoadOptions lo;
    lo.strict = true;
    load_model(*dir, *model, rep, lo);
    SafetensorsFile of = SafetensorsFile::open((fs::path(*dir) / "optimizer.safetensors").string());
    OptimizerCounters c;
    c.step = s.at("optimizer_step").get<int64_t>();
    opt->load_state(of.load_all(), c);
    global_step = s.at("global_step").get<int64_t>();
    phase = s.at("phase").get<int>() - 1;
    phase_step = s.at("phase_step").get<int64_t>();
    cursor = data::LoaderCursor::from_json(s.at("data_cursor").dump());
    skipped_steps = s.at("skipped_steps").get<int64_t>();
    consecutive_skipped = s.at("consecutive_skipped_steps").get<int64_t>();
    micro_index = s.at("micro_batch_index").get<int64_t>();
    // Another world size: the cursor counts this rank's micro-batches, A per step; rescale it to the new A.
    if (s.contains("grad_accum_steps") && phase < static_cast<int>(r.phases.size())) {
      const int64_t a_old = s.at("grad_accum_steps").get<int64_t>(), a_new = accum_steps(phase);
      if (a_old > 0 && a_old != a_new) {
        BERTRAIN_CHECK(micro_index == 0, *dir, " was saved in the middle of a step with ", a_old,
                       " micro-batches per rank; resume it with the same world size and micro_batch_size");
        BERTRAIN_CHECK(cursor.position % a_old == 0, *dir, ": data cursor position ", cursor.position,
                       " is not a multiple of grad_accum_steps ", a_old);
        cursor.position = cursor.position / a_old * a_new;
      }
    }
    BERTRAIN_CHECK(micro_index == 0 || comm->size() == 1, *dir, " was saved in the middle of a step (one process, "
                   "SIGINT/SIGTERM): resume it without mpirun, or from an earlier checkpoint");
    partial_loss = s.at("partial_losses").at(0).get<double>();
    partial_mlm = s.at("partial_losses").at(1).get<double>();
    partial_nsp = s.at("partial_losses").at(2).get<double>();
    phase_initialized = s.at("phase_initialized").get<bool>();
    if (micro_index > 0) {
      SafetensorsFile gf = SafetensorsFile::open((fs::path(*dir) / "partial_gradients.safetensors").string());
      for (auto& [n, v] : params)
        if (gf.contains(n)) v.mutable_grad() = gf.load(n);
    }
    if (comm->size() > 1) {  // all ranks must resume from the same checkpoint (output_dir shared or copied)
      double step0 = static_cast<double>(global_step);
      comm->broadcast(&step0, sizeof step0, 0);
      BERTRAIN_CHECK(step0 == static_cast<double>(global_step), "rank ", o.rank, " resumes from ", *dir,
                     " (global_step ", global_step, ") but rank 0 from global_step ", step0,
                     ": every rank must see the same output_dir");
    }
    if (o.rank == 0) truncate_metrics(global_step);
    spdlog::info("resumed from {} at global_step {} (phase {}, step {}{})", *dir, global_step, phase + 1, phase_step,
                 micro_index ? ", mid-step at micro-batch " + std::to_string(micro_index) : std::string());
  }

  // ---------------------------------------------------------------- metrics
  std::string metrics_path() const { return (fs::path(r.output_dir) / "metrics.jsonl").string(); }

  /// Drops metrics lines of steps after `step` (written after the checkpoint we resume from).
  void truncate_metrics(int64_t step) {
    std::ifstream in(metrics_path());
    if (!in.good()) return;
    std::string line, kept;
    while (std::getline(in, line)) {
      try {
        json j = json::parse(line);
        if (j.value("step", int64_t{0}) <= step) kept += line + "\n";
      } catch (const json::exception&) {
        // a line cut by a crash: dropped
      }
    }
    in.close();
    write_text(metrics_path(), kept);
  }

  void append_metrics(const json& j) {
    if (o.rank != 0) return;
    std::ofstream f(metrics_path(), std::ios::app);
    f << j.dump() << "\n";
  }

  // ---------------------------------------------------------------- data
  /// A: micro-batches per rank per optimizer step of `ph`.
  int64_t accum_steps(int ph) const {
    const PhaseRecipe& p = r.phases[ph];
    return p.train_batch_size / (p.micro_batch_size * o.world_size);
  }

  void open_loader() {
    const PhaseRecipe& p = r.phases[phase];
    data::LoaderOptions lo;
    lo.input_dir = p.input_dir;
    lo.micro_batch_size = p.micro_batch_size;
    lo.world_size = o.world_size;
    lo.rank = o.rank;
    lo.grad_accum_steps = p.train_batch_size / (p.micro_batch_size * o.world_size);
    lo.seed = r.seed + 1000003ULL * static_cast<uint64_t>(phase);
    lo.dynamic_masking = r.dynamic_masking;
    if (r.dynamic_masking) {
      BERTRAIN_CHECK(!r.vocab_file.empty(), "recipe: dynamic_masking needs vocab_file");
      text::Vocab v = text::Vocab::load(r.vocab_file);
      lo.vocab = std::make_shared<data::PretrainingVocab>(v.tokens());
    }
    loader = std::make_unique<data::PretrainingLoader>(lo, cursor);
    loader_phase = phase;
    BERTRAIN_CHECK(loader->max_seq_length() == p.max_seq_length, "phase ", phase + 1, ": the shards in ", p.input_dir,
                   " have max_seq_length ", loader->max_seq_length(), " but the recipe says ", p.max_seq_length);
    BERTRAIN_CHECK(loader->max_predictions_per_seq() == p.max_predictions_per_seq, "phase ", phase + 1,
                   ": the shards in ", p.input_dir, " have max_predictions_per_seq ",
                   loader->max_predictions_per_seq(), " but the recipe says ", p.max_predictions_per_seq);
  }

  // ---------------------------------------------------------------- training
  int train() {
    BERTRAIN_CHECK(r.do_train, "train() with do_train=false");
    fs::create_directories(r.output_dir);
    if (o.rank == 0) write_text((fs::path(r.output_dir) / "recipe.json").string(), pretrain_recipe_to_json(r));
    if (!o.resume && o.only_phase == 0 && o.rank == 0) write_text(metrics_path(), "");
    SignalGuard signals;
    const int last_phase = o.only_phase > 0 ? o.only_phase - 1 : static_cast<int>(r.phases.size()) - 1;
    model->train();
    const bool tty = o.progress && isatty(STDERR_FILENO);
    if (phase == last_phase && phase_initialized && phase_step >= r.phases[phase].num_train_steps) {
      spdlog::info("phase {} already finished at global_step {}: nothing to train", phase + 1, global_step);
      return 0;
    }
    for (; phase <= last_phase; ++phase) {
      const PhaseRecipe& p = r.phases[phase];
      if (!phase_initialized) {
        // A later phase keeps weights and moments but restarts the optimizer's step (bias correction) and the
        // learning rate from zero, as NVIDIA's phase 2.
        if (phase > 0 || o.only_phase > 0) opt->set_step(0);
        phase_step = 0;
        cursor = data::LoaderCursor{};
        phase_initialized = true;
      }
      if (loader_phase != phase) open_loader();
      const int64_t a = p.train_batch_size / (p.micro_batch_size * o.world_size);
      const int64_t g = p.train_batch_size;
      spdlog::info("phase {}/{}: {} steps, length {}, global batch {} = {} micro-batches of {} x {} ranks, lr {}",
                   phase + 1, r.phases.size(), p.num_train_steps, p.max_seq_length, g, a, p.micro_batch_size,
                   o.world_size, p.learning_rate);
      auto t_phase = std::chrono::steady_clock::now();
      const int64_t step_at_phase_start = phase_step;
      while (phase_step < p.num_train_steps) {
        auto t0 = std::chrono::steady_clock::now();
        cursor = loader->cursor();
        std::vector<data::PretrainingBatch> mb;
        for (int64_t m = 0; m < a; ++m) mb.push_back(loader->next());
        double wsum = 0;
        for (auto& b : mb)
          for (int64_t i = 0; i < b.masked_lm_weights.numel(); ++i) wsum += b.masked_lm_weights.data<float>()[i];
        comm->allreduce(&wsum, 1);  // the global batch's masked-token count (integers: exact in any order)
        double loss = partial_loss, mlm = partial_mlm, nsp = partial_nsp;
        for (int64_t m = micro_index; m < a; ++m) {
          const data::PretrainingBatch& b = mb[m];
          BertInputs in{b.input_ids, b.token_type_ids, b.attention_mask,
                        global_step * g + (o.rank * a + m) * p.micro_batch_size, r.seed};
          PretrainingTargets t{b.masked_lm_positions, b.masked_lm_ids, b.masked_lm_weights,
                               r.next_sentence ? b.next_sentence_labels : Tensor(), wsum + 1e-5, static_cast<double>(g)};
          PretrainingOutput out = model->forward(in, t);
          if (reducer && m == a - 1) reducer->arm();  // sums start as gradients complete
          out.loss.backward();
          loss += out.loss.item();
          mlm += out.mlm_loss.item();
          if (out.nsp_loss.defined()) nsp += out.nsp_loss.item();
          if (comm->size() == 1 && signal_received() && m + 1 < a) {  // MPI: at the step's end, all together
            micro_index = m + 1;
            partial_loss = loss;
            partial_mlm = mlm;
            partial_nsp = nsp;
            spdlog::warn("signal {} received during step {}: saving after micro-batch {}/{}", signal_received(),
                         global_step + 1, m + 1, a);
            save_checkpoint(true);
            return 128 + signal_received();
          }
        }
        micro_index = 0;
        partial_loss = partial_mlm = partial_nsp = 0;
        int stop_signal = signal_received();
        if (reducer) {
          const auto t_wait = std::chrono::steady_clock::now();
          reducer->finish();
          spdlog::debug("step {}: {} of {} gradient buckets started during backward; {:.1f} ms waiting for the sums "
                        "after backward", global_step + 1, reducer->started_during_backward(), reducer->num_buckets(),
                        1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t_wait).count());
          double st[4] = {loss, mlm, nsp, 0};
          comm->allreduce(st, 3);
          loss = st[0];
          mlm = st[1];
          nsp = st[2];
          double sig = stop_signal;  // a signal on any rank stops every rank after this step
          comm->allreduce(&sig, 1, ReduceOp::max);
          stop_signal = static_cast<int>(sig);
        }
        const double norm = r.optimizer.clip_grad_norm > 0 ? clip_grad_norm(params, r.optimizer.clip_grad_norm)
                                                           : global_grad_norm(params);
        const double lr = sched->phase(phase).lr(phase_step);
        bool skipped = false;
        if (!std::isfinite(norm) || !std::isfinite(loss)) {
          skipped = true;
          ++skipped_steps;
          ++consecutive_skipped;
          spdlog::warn("step {}: non-finite {} ({}), step skipped ({} in a row)", global_step + 1,
                       std::isfinite(norm) ? "loss" : "gradient norm", std::isfinite(norm) ? loss : norm,
                       consecutive_skipped);
          BERTRAIN_CHECK(consecutive_skipped < r.max_consecutive_skipped_steps, consecutive_skipped,
                         " consecutive steps had a non-finite loss or gradient norm (max_consecutive_skipped_steps = ",
                         r.max_consecutive_skipped_steps, "); stopping. The last good checkpoint is in ",
                         r.output_dir);
        } else {
          consecutive_skipped = 0;
          opt->step(lr);
        }
        opt->zero_grad();
        ++global_step;
        ++phase_step;
        const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_phase).count();
        const double eta = elapsed / static_cast<double>(phase_step - step_at_phase_start) *
                           static_cast<double>(p.num_train_steps - phase_step);
        json mj{{"step", global_step}, {"phase", phase + 1}, {"phase_step", phase_step}, {"loss", loss},
                {"mlm_loss", mlm}, {"nsp_loss", nsp}, {"lr", lr}, {"grad_norm", norm},
                {"sequences_per_second", static_cast<double>(g) / dt},
                {"tokens_per_second", static_cast<double>(g * p.max_seq_length) / dt}, {"skipped", skipped}};
        append_metrics(mj);
        if (o.rank == 0 && (phase_step % r.log_every_steps == 0 || phase_step == p.num_train_steps)) {
          char line[512];
          std::snprintf(line, sizeof line,
                        "phase %d/%zu step %lld/%lld | loss %.4f (mlm %.4f nsp %.4f) | lr %.3g | gnorm %.3g | "
                        "%.1f seq/s %.0f tok/s | eta %s",
                        phase + 1, r.phases.size(), (long long)phase_step, (long long)p.num_train_steps, loss, mlm,
                        nsp, lr, norm, static_cast<double>(g) / dt, static_cast<double>(g * p.max_seq_length) / dt,
                        fmt_duration(eta).c_str());
          if (tty) std::fprintf(stderr, "\r%s\x1b[K%s", line, phase_step == p.num_train_steps ? "\n" : "");
          else spdlog::info("{}", line);
        }
        cursor = loader->cursor();
        const bool end_of_phase = phase_step == p.num_train_steps;
        if (!r.eval_dir.empty() && r.eval_every_steps > 0 && global_step % r.eval_every_steps == 0 && !end_of_phase)
          evaluate(r.eval_dir);
        if (end_of_phase) break;
        if (r.save_checkpoints_steps > 0 && global_step % r.save_checkpoints_steps == 0) save_checkpoint(false);
        if (stop_signal) {
          spdlog::warn("signal {} received: saving checkpoint at step {}", stop_signal, global_step);
          save_checkpoint(false);
          return 128 + stop_signal;
        }
      }
      // End of phase: the next phase starts fresh (its own step counter, re-warm-up).
      if (!r.eval_dir.empty()) evaluate(r.eval_dir);
      if (phase < last_phase) {
        phase_initialized = false;
        ++phase;
        phase_step = 0;
        cursor = data::LoaderCursor{};
        save_checkpoint(false);
        --phase;  // the for-loop increments it
      } else {
        save_checkpoint(false);
      }
    }
    return 0;
  }

  // ---------------------------------------------------------------- evaluation
  PretrainEvalResult evaluate(const std::string& dir) {
    NoGradGuard ng;
    const bool was_training = model->is_training();
    model->eval();
    std::vector<std::string> shards = data::list_training_shards(dir);
    BERTRAIN_CHECK(!shards.empty(), "eval_dir ", dir, " has no HDF5 shards (files whose name contains 'training')");
    double wce = 0, wsum = 0, wcorrect = 0, nsp_ce = 0, nsp_correct = 0, nsp_n = 0;
    int64_t examples = 0, steps = 0;
    const int64_t bsz = r.phases.empty() ? 32 : r.phases[std::min<size_t>(phase, r.phases.size() - 1)].micro_batch_size;
    int64_t batch_no = 0;  // batches over all shards: rank k evaluates those with batch_no % R == k
    for (const std::string& path : shards) {
      data::PretrainingFeatures f = data::read_pretraining_shard(path);
      const int64_t t = f.max_seq_length, p = f.max_predictions_per_seq;
      for (int64_t s = 0; s < f.size(); s += bsz) {
        if (r.max_eval_steps > 0 && steps >= r.max_eval_steps) break;
        ++steps;
        if ((batch_no++) % comm->size() != comm->rank()) continue;
        const int64_t b = std::min(bsz, f.size() - s);
        Tensor ids = Tensor::from_data(f.input_ids.data() + s * t, {b, t});
        Tensor seg = Tensor::empty({b, t}, DType::i32), mask = Tensor::empty({b, t}, DType::i32);
        for (int64_t i = 0; i < b * t; ++i) {
          seg.data<int32_t>()[i] = f.segment_ids[s * t + i];
          mask.data<int32_t>()[i] = f.input_mask[s * t + i];
        }
        Tensor pos = Tensor::from_data(f.masked_lm_positions.data() + s * p, {b, p});
        Tensor mid = Tensor::from_data(f.masked_lm_ids.data() + s * p, {b, p});
        Tensor w = Tensor::empty({b, p});
        for (int64_t i = 0; i < b * p; ++i) w.data<float>()[i] = f.masked_lm_positions[s * p + i] != 0 ? 1.f : 0.f;
        Tensor nsl = Tensor::empty({b}, DType::i32);
        for (int64_t i = 0; i < b; ++i) nsl.data<int32_t>()[i] = f.next_sentence_labels[s + i];
        PretrainingOutput out = model->forward(BertInputs{ids, seg, mask, 0, r.seed},
                                               PretrainingTargets{pos, mid, w, r.next_sentence ? nsl : Tensor(), 1.0, 1.0});
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
    if (comm->size() > 1) {
      double sums[7] = {wce, wsum, wcorrect, nsp_ce, nsp_correct, nsp_n, static_cast<double>(examples)};
      comm->allreduce(sums, 7);
      wce = sums[0];
      wsum = sums[1];
      wcorrect = sums[2];
      nsp_ce = sums[3];
      nsp_correct = sums[4];
      nsp_n = sums[5];
      examples = static_cast<int64_t>(sums[6]);
    }
    PretrainEvalResult e;
    e.masked_lm_loss = wce / std::max(wsum, 1e-12);
    e.masked_lm_accuracy = wcorrect / std::max(wsum, 1e-12);
    e.next_sentence_loss = nsp_n > 0 ? nsp_ce / nsp_n : 0;
    e.next_sentence_accuracy = nsp_n > 0 ? nsp_correct / nsp_n : 0;
    e.loss = e.masked_lm_loss + e.next_sentence_loss;
    e.global_step = global_step;
    e.examples = examples;
    if (was_training) model->train();
    json j{{"masked_lm_loss", e.masked_lm_loss}, {"masked_lm_accuracy", e.masked_lm_accuracy},
           {"next_sentence_loss", e.next_sentence_loss}, {"next_sentence_accuracy", e.next_sentence_accuracy},
           {"loss", e.loss}, {"global_step", e.global_step}};
    if (o.rank == 0) {
      fs::create_directories(r.output_dir);
      write_text((fs::path(r.output_dir) / "eval_results.json").string(), j.dump(2));
      json m = j;
      m["step"] = global_step;
      m["eval"] = true;
      m["eval_examples"] = examples;
      if (r.do_train) append_metrics(m);
    }
    spdlog::info("eval at step {} on {} examples: masked_lm_loss {:.4f} masked_lm_accuracy {:.4f} "
                 "next_sentence_loss {:.4f} next_sentence_accuracy {:.4f}",
                 global_step, examples, e.masked_lm_loss, e.masked_lm_accuracy, e.next_sentence_loss,
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
int64_t PretrainTrainer::global_step() const { return impl_->global_step; }

}  // namespace bertrain
