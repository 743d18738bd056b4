// optim_test.cpp: optimizers against golden trajectories (tests/fixtures/optim_golden.json from
// tests/optim/gen_optim_golden.py), CASES C18 and C19, exact state round trips, clip_grad_norm, thread independence,
// and option validation.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bertrain/core/error.h"
#include "bertrain/core/rng.h"
#include "bertrain/core/threads.h"
#include "bertrain/optim/adamw.h"
#include "bertrain/optim/clip.h"
#include "bertrain/optim/lamb.h"
#include "bertrain/optim/lars.h"
#include "bertrain/optim/sgd.h"

using namespace bertrain;
using json = nlohmann::json;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << "cannot open " << path;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const json& golden() {
  static const json doc = json::parse(read_file(std::string(BERTRAIN_TEST_DATA_DIR) + "/optim_golden.json"));
  return doc;
}

std::vector<std::string> strings(const json& j) { return j.get<std::vector<std::string>>(); }

ParamRules rules_of(const json& o) {
  ParamRules r;
  r.exclude_from_weight_decay = strings(o.at("exclude_from_weight_decay"));
  if (o.contains("exclude_from_layer_adaptation"))
    r.exclude_from_layer_adaptation = strings(o.at("exclude_from_layer_adaptation"));
  return r;
}

WeightDecayMode mode_of(const json& o) {
  return o.at("weight_decay_mode").get<std::string>() == "l2" ? WeightDecayMode::l2 : WeightDecayMode::decoupled;
}

std::unique_ptr<Optimizer> make_optimizer(const json& v, const NamedParameters& params) {
  const std::string kind = v.at("optimizer");
  const json& o = v.at("options");
  if (kind == "adamw") {
    AdamWOptions a;
    a.beta1 = o.at("beta1");
    a.beta2 = o.at("beta2");
    a.eps = o.at("eps");
    a.weight_decay = o.at("weight_decay");
    a.bias_correction = o.at("bias_correction");
    a.weight_decay_mode = mode_of(o);
    a.rules = rules_of(o);
    return std::make_unique<AdamW>(params, a);
  }
  if (kind == "lamb") {
    LambOptions l;
    l.beta1 = o.at("beta1");
    l.beta2 = o.at("beta2");
    l.eps = o.at("eps");
    l.weight_decay = o.at("weight_decay");
    l.bias_correction = o.at("bias_correction");
    const std::string ad = o.at("adaptation");
    l.adaptation = ad == "all" ? LambAdaptation::all
                   : ad == "decayed_only" ? LambAdaptation::decayed_only
                                          : LambAdaptation::by_pattern;
    l.trust_clamp = o.at("trust_clamp");
    l.trust_clamp_min = o.at("trust_clamp_min");
    l.trust_clamp_max = o.at("trust_clamp_max");
    l.max_grad_norm = o.at("max_grad_norm");
    l.weight_decay_mode = mode_of(o);
    l.rules = rules_of(o);
    return std::make_unique<Lamb>(params, l);
  }
  if (kind == "lars") {
    LarsOptions l;
    l.momentum = o.at("momentum");
    l.weight_decay = o.at("weight_decay");
    l.trust_coefficient = o.at("trust_coefficient");
    l.eps = o.at("eps");
    l.rules = rules_of(o);
    return std::make_unique<Lars>(params, l);
  }
  EXPECT_EQ(kind, "sgd");
  SgdOptions s;
  s.momentum = o.at("momentum");
  s.dampening = o.at("dampening");
  s.nesterov = o.at("nesterov");
  s.weight_decay = o.at("weight_decay");
  s.rules = rules_of(o);
  return std::make_unique<Sgd>(params, s);
}

// Runs one golden variant in `dtype` and returns the largest error seen, measured as
// |got - want| / (|want| + floor).
double run_golden_variant(const json& v, DType dtype, double floor) {
  const json& doc = golden();
  const int steps = doc.at("steps");
  const double grad_scale = doc.at("grad_scale");
  NamedParameters params;
  std::vector<std::vector<double>> targets;
  for (const auto& p : doc.at("params")) {
    Shape shape(p.at("shape").get<std::vector<int64_t>>());
    params.emplace_back(p.at("name"), Variable(Tensor::from_vector(p.at("init").get<std::vector<double>>(), shape, dtype), true));
    targets.push_back(p.at("target").get<std::vector<double>>());
  }
  std::unique_ptr<Optimizer> opt = make_optimizer(v, params);
  double worst = 0.0;
  for (int t = 0; t < steps; ++t) {
    for (size_t i = 0; i < params.size(); ++i) {
      Variable& var = params[i].second;
      const std::vector<double> noise = doc.at("noise")[t][i].get<std::vector<double>>();
      std::vector<double> g(noise.size());
      for (size_t k = 0; k < g.size(); ++k) g[k] = grad_scale * (var.value().get(k) - targets[i][k]) + noise[k];
      var.mutable_grad() = Tensor::from_vector(g, var.shape(), dtype);
    }
    opt->step(v.at("lr")[t].get<double>());
    for (size_t i = 0; i < params.size(); ++i) {
      const std::vector<double> want = v.at("trajectory")[t][i].get<std::vector<double>>();
      for (size_t k = 0; k < want.size(); ++k) {
        const double got = params[i].second.value().get(k);
        EXPECT_TRUE(std::isfinite(got));
        worst = std::max(worst, std::fabs(got - want[k]) / (std::fabs(want[k]) + floor));
      }
    }
    if (v.contains("trust_ratios")) {
      const auto& lamb = dynamic_cast<const Lamb&>(*opt);
      for (size_t i = 0; i < params.size(); ++i) {
        const double want = v.at("trust_ratios")[t][i];
        worst = std::max(worst, std::fabs(lamb.last_trust_ratios()[i] - want) / (std::fabs(want) + floor));
      }
    }
  }
  return worst;
}

uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

// ---- golden trajectories ----

TEST(OptimGolden, DataMatchesGeneratorScript) {
  // Fails when tests/optim/gen_optim_golden.py changed but tests/fixtures/optim_golden.json was not regenerated.
  const std::string script = read_file(std::string(BERTRAIN_SOURCE_DIR) + "/tests/optim/gen_optim_golden.py");
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a64(script)));
  EXPECT_EQ(golden().at("script_fnv1a64").get<std::string>(), std::string(hex))
      << "regenerate: /usr/bin/python3 tests/optim/gen_optim_golden.py > tests/fixtures/optim_golden.json";
  EXPECT_GE(golden().at("variants").size(), 15u);
}

// Every variant and option set in f64 to 1e-6 relative (the bar for an optimizer; f64 parameters make it meaningful;
// measured worst is ~4e-13). SHOW_WORST=1 prints the worst error per variant.
// The floor 1e-12 only matters for elements that are exactly or nearly 0.
TEST(OptimGolden, AllVariantsF64) {
  for (const auto& v : golden().at("variants")) {
    const double worst = run_golden_variant(v, DType::f64, 1e-12);
    EXPECT_LT(worst, 1e-6) << v.at("name");
    if (getenv("SHOW_WORST")) printf("%s f64 %.3g\n", v.at("name").get<std::string>().c_str(), worst);
  }
}

// The same trajectories with f32 parameters and kernels (what training uses). f32 rounding (6e-8 per operation)
// compounds over 20 steps and is amplified where Adam divides by a tiny sqrt(v); measured worst is 1.6e-5 (LARS) of
// max(|value|, 0.01), so 1e-4 of it is the documented f32 tolerance.
TEST(OptimGolden, AllVariantsF32) {
  for (const auto& v : golden().at("variants")) {
    const double worst = run_golden_variant(v, DType::f32, 1e-2);
    EXPECT_LT(worst, 1e-4) << v.at("name");
    if (getenv("SHOW_WORST")) printf("%s f32 %.3g\n", v.at("name").get<std::string>().c_str(), worst);
  }
}

// ---- CASES C18: which parameters get weight decay ----

TEST(OptimCases, C18WeightDecayGroups) {
  const std::pair<const char*, bool> tf_names[] = {
      {"bert/embeddings/word_embeddings", true},
      {"bert/embeddings/position_embeddings", true},
      {"bert/embeddings/LayerNorm/gamma", false},
      {"bert/embeddings/LayerNorm/beta", false},
      {"bert/encoder/layer_0/attention/self/query/kernel", true},
      {"bert/encoder/layer_0/attention/self/query/bias", false},
      {"bert/encoder/layer_0/output/LayerNorm/gamma", false},
      {"bert/pooler/dense/kernel", true},
      {"cls/predictions/output_bias", false},
      {"cls/predictions/transform/LayerNorm/beta", false},
      {"cls/seq_relationship/output_weights", true},
  };
  const std::pair<const char*, bool> hf_names[] = {
      {"bert.embeddings.word_embeddings.weight", true},
      {"bert.embeddings.position_embeddings.weight", true},
      {"bert.embeddings.LayerNorm.weight", false},
      {"bert.embeddings.LayerNorm.bias", false},
      {"bert.encoder.layer.0.attention.self.query.weight", true},
      {"bert.encoder.layer.0.attention.self.query.bias", false},
      {"bert.encoder.layer.0.output.LayerNorm.weight", false},
      {"bert.pooler.dense.weight", true},
      {"cls.predictions.bias", false},
      {"cls.predictions.transform.LayerNorm.bias", false},
      {"cls.seq_relationship.weight", true},
  };
  for (const auto& names : {std::vector(std::begin(tf_names), std::end(tf_names)),
                            std::vector(std::begin(hf_names), std::end(hf_names))}) {
    NamedParameters params;
    for (const auto& [n, decay] : names) params.emplace_back(n, Variable(Tensor::full({2}, 1.0), true));
    Lamb lamb(params);  // default rules: google-research/bert's ["LayerNorm", "layer_norm", "bias"]
    ASSERT_EQ(lamb.params().size(), names.size());
    for (size_t i = 0; i < names.size(); ++i) {
      EXPECT_EQ(lamb.params()[i].weight_decay, names[i].second) << names[i].first;
      // tfa: exclude_from_layer_adaptation defaults to the decay exclusions.
      EXPECT_EQ(lamb.params()[i].layer_adaptation, names[i].second) << names[i].first;
    }
  }
  // Case-sensitive: Hugging Face's old ["layer_norm", "bias"] list never matched "LayerNorm" (transformers#4360).
  EXPECT_FALSE(name_matches_any("bert.embeddings.LayerNorm.weight", {"layer_norm", "bias"}));
  EXPECT_FALSE(name_matches_any("bert.embeddings.LayerNorm.weight", {"layernorm"}));
  EXPECT_TRUE(name_matches_any("bert.embeddings.LayerNorm.weight", {"LayerNorm"}));
}

// The decay flag must change the update, not only the bookkeeping: an excluded tensor with zero gradient stays put,
// a decayed one shrinks by lr * wd (AdamW, decoupled).
TEST(OptimCases, C18DecayOnlyWhereFlagged) {
  NamedParameters params = {{"bert.pooler.dense.weight", Variable(Tensor::full({3}, 2.0, DType::f64), true)},
                            {"bert.pooler.dense.bias", Variable(Tensor::full({3}, 2.0, DType::f64), true)}};
  for (auto& p : params) p.second.mutable_grad() = Tensor::zeros({3}, DType::f64);
  AdamWOptions o;
  o.weight_decay = 0.1;
  AdamW opt(params, o);
  opt.step(0.5);
  EXPECT_DOUBLE_EQ(params[0].second.value().get(0), 2.0 * (1 - 0.5 * 0.1));
  EXPECT_DOUBLE_EQ(params[1].second.value().get(0), 2.0);
  EXPECT_EQ(opt.param_names(true), std::vector<std::string>{"bert.pooler.dense.weight"});
  EXPECT_EQ(opt.param_names(false), std::vector<std::string>{"bert.pooler.dense.bias"});
}

// ---- CASES C19: LAMB trust ratio with a zero norm ----

TEST(OptimCases, C19ZeroNormTrustRatio) {
  for (DType dt : {DType::f32, DType::f64}) {
    LambOptions o;
    o.weight_decay = 0.01;
    o.eps = 1e-6;
    o.bias_correction = true;
    o.adaptation = LambAdaptation::all;  // make sure the trust-ratio path runs for this tensor
    NamedParameters params = {{"cls.predictions.bias", Variable(Tensor::zeros({2}, dt), true)}};
    params[0].second.mutable_grad() = Tensor::from_vector({0.1, -0.2}, {2}, dt);
    Lamb lamb(params, o);
    lamb.step(0.01);
    EXPECT_EQ(lamb.last_trust_ratios()[0], 1.0);
    const Tensor& w = params[0].second.value();
    EXPECT_NEAR(w.get(0), -0.0099999, 1e-6 * 0.0099999) << dtype_name(dt);
    EXPECT_NEAR(w.get(1), 0.00999995, 1e-6 * 0.00999995) << dtype_name(dt);
  }
  // g = 0, w = [3, 4], wd = 0: ||r|| = 0, so ratio 1 and r = 0: w unchanged, no NaN (0/0 avoided).
  LambOptions o;
  o.weight_decay = 0.0;
  o.adaptation = LambAdaptation::all;
  NamedParameters params = {{"bert.pooler.dense.weight", Variable(Tensor::from_vector({3, 4}, {2}), true)}};
  params[0].second.mutable_grad() = Tensor::zeros({2});
  Lamb lamb(params, o);
  for (int i = 0; i < 3; ++i) lamb.step(0.01);
  EXPECT_EQ(params[0].second.value().get(0), 3.0);
  EXPECT_EQ(params[0].second.value().get(1), 4.0);
  EXPECT_EQ(lamb.last_trust_ratios()[0], 1.0);
}

// ---- state round trip: 10 steps, save, load into a new optimizer, 10 more == 20 straight, bit for bit ----

namespace {

NamedParameters make_bertish_params(uint64_t seed) {
  Rng rng(seed);
  NamedParameters p;
  p.emplace_back("bert.embeddings.word_embeddings.weight", Variable(Tensor::truncated_normal({300, 64}, 0, 0.02, rng), true));
  p.emplace_back("bert.embeddings.LayerNorm.weight", Variable(Tensor::full({64}, 1.0), true));
  p.emplace_back("bert.embeddings.LayerNorm.bias", Variable(Tensor::zeros({64}), true));
  p.emplace_back("bert.encoder.layer.0.attention.self.query.weight", Variable(Tensor::truncated_normal({64, 64}, 0, 0.02, rng), true));
  p.emplace_back("bert.encoder.layer.0.attention.self.query.bias", Variable(Tensor::zeros({64}), true));
  p.emplace_back("bert.pooler.dense.weight", Variable(Tensor::zeros({64, 64}), true));
  return p;
}

void set_step_grads(NamedParameters& params, int step) {
  Rng rng(1234, static_cast<uint64_t>(step));
  for (auto& [n, v] : params) v.mutable_grad() = Tensor::uniform(v.shape(), -0.1, 0.1, rng, v.dtype());
}

bool bits_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

NamedParameters clone_params(const NamedParameters& src) {
  NamedParameters out;
  for (const auto& [n, v] : src) out.emplace_back(n, Variable(v.value().clone(), true));
  return out;
}

template <class Make>
void check_round_trip(Make make) {
  const NamedParameters init = make_bertish_params(7);
  // Straight: 20 steps.
  NamedParameters a = clone_params(init);
  auto opt_a = make(a);
  for (int s = 0; s < 20; ++s) {
    set_step_grads(a, s);
    opt_a->step(1e-3 * (1 + s % 3));
  }
  // Split: 10 steps, snapshot params + optimizer state, new optimizer, load, 10 more.
  NamedParameters b = clone_params(init);
  auto opt_b = make(b);
  for (int s = 0; s < 10; ++s) {
    set_step_grads(b, s);
    opt_b->step(1e-3 * (1 + s % 3));
  }
  std::vector<std::pair<std::string, Tensor>> saved;
  for (const auto& [n, t] : opt_b->state_tensors()) saved.emplace_back(n, t.clone());
  const OptimizerCounters counters = opt_b->counters();
  EXPECT_EQ(counters.step, 10);
  NamedParameters c = clone_params(b);
  opt_b.reset();
  auto opt_c = make(c);
  opt_c->load_state(saved, counters);
  for (int s = 10; s < 20; ++s) {
    set_step_grads(c, s);
    opt_c->step(1e-3 * (1 + s % 3));
  }
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(bits_equal(a[i].second.value(), c[i].second.value())) << a[i].first;
  const auto sa = opt_a->state_tensors(), sc = opt_c->state_tensors();
  ASSERT_EQ(sa.size(), sc.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    EXPECT_EQ(sa[i].first, sc[i].first);
    EXPECT_TRUE(bits_equal(sa[i].second, sc[i].second)) << sa[i].first;
  }
  EXPECT_EQ(opt_a->counters().step, opt_c->counters().step);
  // And the run actually moved the parameters.
  EXPECT_FALSE(bits_equal(a[0].second.value(), init[0].second.value()));
}

}  // namespace

TEST(OptimState, RoundTripAdamW) {
  check_round_trip([](const NamedParameters& p) { return std::make_unique<AdamW>(p); });
  AdamWOptions bert;
  bert.bias_correction = false;
  check_round_trip([&](const NamedParameters& p) { return std::make_unique<AdamW>(p, bert); });
}

TEST(OptimState, RoundTripLamb) {
  LambOptions nv;
  nv.adaptation = LambAdaptation::decayed_only;
  nv.max_grad_norm = 1.0;
  check_round_trip([](const NamedParameters& p) { return std::make_unique<Lamb>(p); });
  check_round_trip([&](const NamedParameters& p) { return std::make_unique<Lamb>(p, nv); });
}

TEST(OptimState, RoundTripLarsAndSgd) {
  check_round_trip([](const NamedParameters& p) { return std::make_unique<Lars>(p); });
  SgdOptions s;
  s.weight_decay = 0.01;
  check_round_trip([&](const NamedParameters& p) { return std::make_unique<Sgd>(p, s); });
}

TEST(OptimState, NamesAndLoadErrors) {
  NamedParameters p = make_bertish_params(1);
  Lamb lamb(p);
  auto st = lamb.state_tensors();
  ASSERT_EQ(st.size(), 2 * p.size());
  EXPECT_EQ(st[0].first, "exp_avg.bert.embeddings.word_embeddings.weight");
  EXPECT_EQ(st[p.size()].first, "exp_avg_sq.bert.embeddings.word_embeddings.weight");
  Sgd sgd(p);
  EXPECT_EQ(sgd.state_tensors()[0].first, "momentum_buffer.bert.embeddings.word_embeddings.weight");

  auto missing = st;
  missing.pop_back();
  EXPECT_THROW(lamb.load_state(missing, {3}), Error);
  auto extra = st;
  extra.emplace_back("exp_avg.unknown", Tensor::zeros({1}));
  EXPECT_THROW(lamb.load_state(extra, {3}), Error);
  auto wrong = st;
  wrong[1].second = Tensor::zeros({65});
  try {
    lamb.load_state(wrong, {3});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exp_avg.bert.embeddings.LayerNorm.weight"), std::string::npos) << e.what();
  }
  EXPECT_THROW(lamb.load_state(st, {-1}), Error);
  EXPECT_EQ(lamb.counters().step, 0);  // failed loads changed nothing
  lamb.load_state(st, {5});
  EXPECT_EQ(lamb.counters().step, 5);
}

// ---- clip_grad_norm ----

TEST(OptimClip, ValuesAndScaling) {
  Variable a(Tensor::zeros({2}), true), b(Tensor::zeros({1}), true), c(Tensor::zeros({3}), true);
  a.mutable_grad() = Tensor::from_vector({3, 4}, {2});
  b.mutable_grad() = Tensor::from_vector({12}, {1});
  // c has no gradient: skipped.
  std::vector<Variable> ps = {a, b, c};
  EXPECT_DOUBLE_EQ(global_grad_norm(ps), 13.0);
  EXPECT_DOUBLE_EQ(clip_grad_norm(ps, 100.0), 13.0);  // below max: untouched
  EXPECT_EQ(a.grad().get(0), 3.0f);
  EXPECT_DOUBLE_EQ(clip_grad_norm(ps, 1.0), 13.0);
  const float coef = static_cast<float>(1.0 / (13.0 + 1e-6));
  EXPECT_EQ(a.grad().get(0), 3.0f * coef);
  EXPECT_EQ(b.grad().get(0), 12.0f * coef);
  EXPECT_NEAR(global_grad_norm(ps), 1.0, 1e-6);
  EXPECT_THROW(clip_grad_norm(ps, 0.0), Error);
}

TEST(OptimClip, NonFiniteIsReportedAndNotScaled) {
  for (double bad : {std::numeric_limits<double>::infinity(), std::nan("")}) {
    Variable a(Tensor::zeros({2}), true), b(Tensor::zeros({2}), true);
    a.mutable_grad() = Tensor::from_vector({3, 4}, {2});
    b.mutable_grad() = Tensor::from_vector({1, bad}, {2});
    NamedParameters ps = {{"a", a}, {"b", b}};
    const double n = clip_grad_norm(ps, 1.0);
    EXPECT_FALSE(std::isfinite(n));
    if (std::isinf(bad)) EXPECT_TRUE(std::isinf(n));
    else EXPECT_TRUE(std::isnan(n));
    EXPECT_EQ(a.grad().get(0), 3.0);  // not scaled
    EXPECT_EQ(a.grad().get(1), 4.0);
  }
}

// Results must not depend on the thread count (fixed chunks combined in order).
TEST(OptimThreads, OneAndTwoThreadsBitIdentical) {
  const int saved = num_threads();
  Rng rng(5);
  // Several chunks per tensor (32768 elements per chunk) so the threads really split the work.
  Tensor big = Tensor::uniform({300000}, -1, 1, rng);
  Tensor mid = Tensor::uniform({70001}, -1, 1, rng);
  Tensor gbig = Tensor::uniform({300000}, -3, 3, rng), gmid = Tensor::uniform({70001}, -3, 3, rng);
  std::vector<double> norms;
  std::vector<Tensor> after_lamb, after_clip;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    Variable a(big.clone(), true), b(mid.clone(), true);
    a.mutable_grad() = gbig.clone();
    b.mutable_grad() = gmid.clone();
    NamedParameters ps = {{"bert.encoder.layer.0.output.dense.weight", a}, {"bert.pooler.dense.weight", b}};
    norms.push_back(clip_grad_norm(ps, 10.0));
    after_clip.push_back(a.grad().clone());
    LambOptions o;
    o.max_grad_norm = 1.0;
    Lamb lamb(ps, o);
    for (int s = 0; s < 3; ++s) lamb.step(1e-2);
    after_lamb.push_back(a.value().clone());
    after_lamb.push_back(b.value().clone());
  }
  set_num_threads(saved);
  EXPECT_EQ(std::memcmp(&norms[0], &norms[1], sizeof(double)), 0) << norms[0] << " vs " << norms[1];
  EXPECT_TRUE(bits_equal(after_clip[0], after_clip[1]));
  EXPECT_TRUE(bits_equal(after_lamb[0], after_lamb[2]));
  EXPECT_TRUE(bits_equal(after_lamb[1], after_lamb[3]));
  EXPECT_GT(norms[0], 10.0);  // clipping did happen
}

// ---- misc behaviour and validation ----

TEST(OptimBehaviour, ParamWithoutGradIsSkippedAndZeroGradKeepsBuffers) {
  Variable a(Tensor::full({4}, 1.0), true), b(Tensor::full({4}, 1.0), true);
  a.mutable_grad() = Tensor::full({4}, 0.5);
  AdamW opt({{"x.weight", a}, {"y.weight", b}});
  opt.step(0.1);
  EXPECT_NE(a.value().get(0), 1.0f);
  EXPECT_EQ(b.value().get(0), 1.0f);
  EXPECT_EQ(opt.state_tensors()[1].second.get(0), 0.0);  // exp_avg of y untouched
  const void* buf = a.grad().raw_data();
  opt.zero_grad();
  EXPECT_EQ(a.grad().raw_data(), buf);
  EXPECT_EQ(a.grad().get(2), 0.0f);
  EXPECT_THROW(opt.step(-1.0), Error);
  EXPECT_THROW(opt.step(std::nan("")), Error);
  a.mutable_grad() = Tensor::zeros({5});
  EXPECT_THROW(opt.step(0.1), Error);  // gradient shape differs from the parameter
}

TEST(OptimBehaviour, OptionValidation) {
  NamedParameters p = {{"w", Variable(Tensor::zeros({2}), true)}};
  auto msg = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  AdamWOptions a;
  a.beta1 = 1.0;
  EXPECT_NE(msg([&] { AdamW x(p, a); }).find("beta1 must be in [0, 1), got 1"), std::string::npos);
  a = {};
  a.beta2 = -0.1;
  EXPECT_NE(msg([&] { AdamW x(p, a); }).find("beta2"), std::string::npos);
  a = {};
  a.eps = 0;
  EXPECT_NE(msg([&] { AdamW x(p, a); }).find("eps"), std::string::npos);
  a = {};
  a.weight_decay = -1;
  EXPECT_NE(msg([&] { AdamW x(p, a); }).find("weight_decay"), std::string::npos);
  LambOptions l;
  l.trust_clamp = true;
  l.trust_clamp_min = 2;
  l.trust_clamp_max = 1;
  EXPECT_NE(msg([&] { Lamb x(p, l); }).find("trust_clamp"), std::string::npos);
  l = {};
  l.max_grad_norm = -1;
  EXPECT_NE(msg([&] { Lamb x(p, l); }).find("max_grad_norm"), std::string::npos);
  LarsOptions r;
  r.trust_coefficient = 0;
  EXPECT_NE(msg([&] { Lars x(p, r); }).find("trust_coefficient"), std::string::npos);
  SgdOptions s;
  s.momentum = 0;
  s.nesterov = true;
  EXPECT_NE(msg([&] { Sgd x(p, s); }).find("nesterov"), std::string::npos);
  // Parameters: empty list, duplicate names, the same Variable twice, integer dtype, empty pattern.
  EXPECT_NE(msg([&] { AdamW x(NamedParameters{}); }).find("at least one parameter"), std::string::npos);
  Variable v(Tensor::zeros({2}), true);
  EXPECT_NE(msg([&] { AdamW x({{"w", v}, {"w", Variable(Tensor::zeros({2}), true)}}); }).find("appears twice"),
            std::string::npos);
  EXPECT_NE(msg([&] { AdamW x({{"a", v}, {"b", v}}); }).find("same Variable"), std::string::npos);
  EXPECT_NE(msg([&] { AdamW x({{"ids", Variable(Tensor::zeros({2}, DType::i32))}}); }).find("f32 or f64"),
            std::string::npos);
  a = {};
  a.rules.exclude_from_weight_decay = {""};
  EXPECT_NE(msg([&] { AdamW x(p, a); }).find("empty pattern"), std::string::npos);
}
