// data_pretraining_test.cpp: pretraining instances (CASES.md C10-C13), input reading and bad input.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "bertrain/data/pretraining.h"

using namespace bertrain;
using namespace bertrain::data;
namespace fs = std::filesystem;

namespace {

// Specials first (as BERT's vocab.txt), then `words`.
PretrainingVocab make_vocab(const std::vector<std::string>& words) {
  std::vector<std::string> t = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  t.insert(t.end(), words.begin(), words.end());
  return PretrainingVocab(t);
}

std::vector<int32_t> ids_of(const PretrainingVocab& v, const std::string& text) {
  std::vector<int32_t> out;
  std::istringstream ss(text);
  std::string w;
  while (ss >> w) out.push_back(v.id(w));
  return out;
}

// Restores the unmasked tokens of an instance.
std::vector<int32_t> originals(const TrainingInstance& inst) {
  std::vector<int32_t> t = inst.tokens;
  for (size_t k = 0; k < inst.masked_lm_positions.size(); ++k)
    t[static_cast<size_t>(inst.masked_lm_positions[k])] = inst.masked_lm_labels[k];
  return t;
}

fs::path temp_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("bertrain_pdata_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------
// C10: what may be masked, 80/10/10, uniform random replacement, padded slots.

TEST(C10, NeverMasksSpecialsPositionsSortedLabelsOriginal) {
  PretrainingVocab v = make_vocab({"a", "b", "c", "d", "e"});
  std::vector<int32_t> unpadded = ids_of(v, "[CLS] a b c [SEP] d e [SEP]");
  std::vector<int32_t> padded = unpadded;
  padded.resize(16, v.pad_id());
  int masked_total = 0;
  for (uint64_t seed = 0; seed < 3000; ++seed) {
    for (const auto* toks : {&unpadded, &padded}) {
      Rng rng(seed, 5);
      MaskedLmPredictions m = create_masked_lm_predictions(*toks, 0.15, 20, false, v, rng);
      // ref budget: max(1, round(8 * 0.15)) = 1; for 16 tokens round(2.4) = 2.
      ASSERT_EQ(m.positions.size(), toks->size() == 8 ? 1u : 2u);
      for (size_t k = 0; k < m.positions.size(); ++k) {
        const int32_t p = m.positions[k];
        const int32_t orig = (*toks)[static_cast<size_t>(p)];
        EXPECT_NE(orig, v.cls_id());
        EXPECT_NE(orig, v.sep_id());
        EXPECT_NE(orig, v.pad_id());
        EXPECT_EQ(m.labels[k], orig);
        if (k > 0) {
          EXPECT_LT(m.positions[k - 1], p);
        }
      }
      // Only masked positions change.
      for (size_t i = 0; i < toks->size(); ++i)
        if (std::find(m.positions.begin(), m.positions.end(), static_cast<int32_t>(i)) == m.positions.end()) {
          EXPECT_EQ(m.tokens[i], (*toks)[i]);
        }
      masked_total += static_cast<int>(m.positions.size());
    }
  }
  EXPECT_EQ(masked_total, 3000 * 3);
}

TEST(C10, PaddedPredictionSlotsAreZero) {
  PretrainingVocab v = make_vocab({"a", "b", "c", "d", "e"});
  TrainingInstance inst;
  inst.tokens = ids_of(v, "[CLS] a [MASK] c [SEP] d e [SEP]");
  inst.segment_ids = {0, 0, 0, 0, 0, 1, 1, 1};
  inst.masked_lm_positions = {2, 6};
  inst.masked_lm_labels = {v.id("b"), v.id("e")};
  inst.is_random_next = true;
  PretrainingFeatures f(16, 20);
  f.append(inst);
  f.check_consistent("test");
  ASSERT_EQ(f.size(), 1);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(f.input_ids[i], i < 8 ? inst.tokens[i] : 0);
    EXPECT_EQ(f.input_mask[i], i < 8 ? 1 : 0);
    EXPECT_EQ(f.segment_ids[i], i < 8 ? inst.segment_ids[i] : 0);
  }
  EXPECT_EQ(f.masked_lm_positions[0], 2);
  EXPECT_EQ(f.masked_lm_positions[1], 6);
  EXPECT_EQ(f.masked_lm_ids[1], v.id("e"));
  for (int k = 2; k < 20; ++k) {
    EXPECT_EQ(f.masked_lm_positions[k], 0);
    EXPECT_EQ(f.masked_lm_ids[k], 0);
  }
  EXPECT_EQ(f.next_sentence_labels[0], 1);  // 1 = random next, as ref
  // Too long for T or too many predictions for P: a clear error.
  PretrainingFeatures small(4, 20);
  EXPECT_THROW(small.append(inst), Error);
  PretrainingFeatures fewp(16, 1);
  EXPECT_THROW(fewp.append(inst), Error);
}

TEST(C10, EightyTenTenSplitAndUniformRandomOverWholeVocab) {
  // A vocab of 20 ids; the sequence is [CLS] a*98 [SEP], so a random replacement is recognisable unless it
  // draws "a" or [MASK]. Every other id, specials included, must come up uniformly.
  std::vector<std::string> words;
  // std::string("w").append(...), not "w" + ...: GCC 12 reports a false -Wrestrict on operator+ (bug 105651).
  for (int i = 0; i < 15; ++i) words.push_back(std::string("w").append(std::to_string(i)));
  PretrainingVocab v = make_vocab(words);
  ASSERT_EQ(v.size(), 20u);
  const int32_t a = v.id("w0");
  std::vector<int32_t> toks(100, a);
  toks.front() = v.cls_id();
  toks.back() = v.sep_id();
  int64_t n_mask = 0, n_keep = 0, n_rand = 0;
  std::vector<int64_t> rand_counts(v.size(), 0);
  for (uint64_t seed = 0; seed < 8000; ++seed) {
    Rng rng(seed, 11);
    MaskedLmPredictions m = create_masked_lm_predictions(toks, 0.15, 20, false, v, rng);
    ASSERT_EQ(m.positions.size(), 15u);  // round(100 * 0.15)
    for (int32_t p : m.positions) {
      const int32_t o = m.tokens[static_cast<size_t>(p)];
      if (o == v.mask_id()) {
        ++n_mask;
      } else if (o == a) {
        ++n_keep;
      } else {
        ++n_rand;
        ++rand_counts[static_cast<size_t>(o)];
      }
    }
  }
  const double total = static_cast<double>(n_mask + n_keep + n_rand);
  ASSERT_GE(total, 1e5);
  // A random draw equal to "a" counts as kept and one equal to [MASK] as masked: 0.1/20 each.
  EXPECT_NEAR(n_mask / total, 0.8 + 0.1 / 20, 0.01);
  EXPECT_NEAR(n_keep / total, 0.1 + 0.1 / 20, 0.01);
  EXPECT_NEAR(n_rand / total, 0.1 * 18 / 20, 0.01);
  // Uniform over the 18 recognisable ids, [PAD] [UNK] [CLS] [SEP] included: chi-square, df 17, p = 0.001.
  const double expect = static_cast<double>(n_rand) / 18.0;
  double chi2 = 0;
  for (size_t id = 0; id < v.size(); ++id) {
    if (static_cast<int32_t>(id) == a || static_cast<int32_t>(id) == v.mask_id()) continue;
    EXPECT_GT(rand_counts[id], 0) << "id " << id << " (" << v.token(static_cast<int32_t>(id)) << ") never drawn";
    chi2 += (rand_counts[id] - expect) * (rand_counts[id] - expect) / expect;
  }
  EXPECT_LT(chi2, 40.79);
}

TEST(C10, BudgetRoundsHalfToEvenAsPython) {
  EXPECT_EQ(masked_lm_budget(30, 0.15, 100), 4);   // 30 * 0.15 == 4.5 -> 4
  EXPECT_EQ(masked_lm_budget(10, 0.15, 100), 2);   // 1.5 -> 2
  EXPECT_EQ(masked_lm_budget(14, 0.15, 100), 2);   // 2.1
  EXPECT_EQ(masked_lm_budget(3, 0.15, 100), 1);    // max(1, 0)
  EXPECT_EQ(masked_lm_budget(128, 0.15, 20), 19);  // 19.2
  EXPECT_EQ(masked_lm_budget(512, 0.15, 20), 20);  // capped
}

// ---------------------------------------------------------------------------------------------------
// C11: whole-word masking.

TEST(C11, WholeWordsOnlyAndOverBudgetGroupsSkipped) {
  PretrainingVocab v = make_vocab({"un", "##aff", "##able", "is", "a", "word", "sha", "##re", "##hold", "##er", "go"});
  std::vector<int32_t> toks = ids_of(v, "[CLS] un ##aff ##able is a word [SEP] sha ##re ##hold ##er go [SEP]");
  ASSERT_EQ(toks.size(), 14u);
  const std::set<int32_t> allowed = {4, 5, 6, 12};  // is a word go
  std::map<std::pair<int32_t, int32_t>, int> seen;
  for (uint64_t seed = 0; seed < 5000; ++seed) {
    Rng rng(seed, 3);
    MaskedLmPredictions m = create_masked_lm_predictions(toks, 0.15, 20, true, v, rng);
    ASSERT_EQ(m.positions.size(), 2u);
    for (int32_t p : m.positions) EXPECT_TRUE(allowed.count(p)) << "masked position " << p;
    EXPECT_LT(m.positions[0], m.positions[1]);
    ++seen[{m.positions[0], m.positions[1]}];
  }
  EXPECT_EQ(seen.size(), 6u);  // every pair of the four single-piece words occurs
}

TEST(C11, MaskedSetIsAUnionOfWholeWordsOverManySeeds) {
  std::vector<std::string> words = {"x", "y", "z", "##p", "##q"};
  PretrainingVocab v = make_vocab(words);
  for (uint64_t seed = 0; seed < 2000; ++seed) {
    Rng gen(seed, 100);
    // Random sequence with words of 1-4 pieces.
    std::vector<int32_t> toks = {v.cls_id()};
    const int nwords = 5 + static_cast<int>(gen.randint(40));
    for (int w = 0; w < nwords; ++w) {
      toks.push_back(v.id(words[gen.randint(3)]));
      const int extra = static_cast<int>(gen.randint(4));
      for (int k = 0; k < extra; ++k) toks.push_back(v.id(words[3 + gen.randint(2)]));
      if (w == nwords / 2) toks.push_back(v.sep_id());
    }
    toks.push_back(v.sep_id());
    Rng rng(seed, 4);
    MaskedLmPredictions m = create_masked_lm_predictions(toks, 0.15, 20, true, v, rng);
    const int budget = masked_lm_budget(toks.size(), 0.15, 20);
    EXPECT_LE(static_cast<int>(m.positions.size()), budget);
    EXPECT_GE(m.positions.size(), 1u);
    std::set<int32_t> masked(m.positions.begin(), m.positions.end());
    for (int32_t p : m.positions) {
      // The whole word around p: back to its first piece, forward over "##" pieces.
      size_t b = static_cast<size_t>(p), e = static_cast<size_t>(p) + 1;
      while (b > 0 && v.is_continuation(toks[b])) --b;
      while (e < toks.size() && v.is_continuation(toks[e])) ++e;
      // ref groups "##" only with real pieces; a [SEP] never starts a word here (we never put ## after it)
      for (size_t i = b; i < e; ++i) EXPECT_TRUE(masked.count(static_cast<int32_t>(i))) << "seed " << seed;
      EXPECT_NE(toks[static_cast<size_t>(p)], v.cls_id());
      EXPECT_NE(toks[static_cast<size_t>(p)], v.sep_id());
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// C12: next-sentence prediction.

namespace {
// Documents whose token ids tell which document they came from: doc_of[id].
struct Corpus {
  std::unique_ptr<PretrainingVocab> vocab;
  std::vector<Document> docs;
  std::map<int32_t, int> doc_of;
};

Corpus make_corpus(const std::vector<std::vector<std::vector<std::string>>>& text) {
  Corpus c;
  std::vector<std::string> words;
  for (const auto& d : text)
    for (const auto& s : d)
      for (const auto& w : s)
        if (std::find(words.begin(), words.end(), w) == words.end()) words.push_back(w);
  c.vocab = std::make_unique<PretrainingVocab>(make_vocab(words));
  for (size_t di = 0; di < text.size(); ++di) {
    Document d;
    for (const auto& s : text[di]) {
      Sentence ids;
      for (const auto& w : s) {
        ids.push_back(c.vocab->id(w));
        c.doc_of[ids.back()] = static_cast<int>(di);
      }
      d.push_back(ids);
    }
    c.docs.push_back(d);
  }
  return c;
}

// The documents of the A and B segments of an instance (originals restored).
std::pair<std::set<int>, std::set<int>> docs_of_segments(const Corpus& c, const TrainingInstance& inst) {
  std::vector<int32_t> t = originals(inst);
  std::set<int> da, db;
  for (size_t i = 0; i < t.size(); ++i) {
    auto it = c.doc_of.find(t[i]);
    if (it == c.doc_of.end()) continue;  // [CLS]/[SEP]
    (inst.segment_ids[i] == 0 ? da : db).insert(it->second);
  }
  return {da, db};
}
}  // namespace

TEST(C12, SingleSentenceDocumentsAreAlwaysRandomNext) {
  Corpus c = make_corpus({{{"a1", "a2", "a3"}}, {{"b1", "b2"}}, {{"c1", "c2", "c3", "c4"}}});
  for (uint64_t seed = 0; seed < 200; ++seed) {
    PretrainingOptions o;
    o.max_seq_length = 32;
    o.dupe_factor = 3;
    o.random_seed = seed;
    PretrainingStats st;
    auto inst = create_training_instances(c.docs, o, *c.vocab, st);
    ASSERT_EQ(inst.size(), 9u);
    for (const auto& i : inst) {
      EXPECT_TRUE(i.is_random_next);
      auto [da, db] = docs_of_segments(c, i);
      ASSERT_EQ(da.size(), 1u);
      for (int d : db) EXPECT_NE(d, *da.begin());
    }
    EXPECT_EQ(st.random_next, 9);
    EXPECT_EQ(st.skipped_random_pairs, 0);
  }
}

TEST(C12, SingleDocumentNeverLabelsRandomAndCountsSkips) {
  Corpus c = make_corpus({{{"s1", "t1"}, {"s2"}, {"s3", "t3", "u3"}, {"s4"}, {"s5", "t5"}, {"s6"}}});
  int64_t skipped = 0, made = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    PretrainingOptions o;
    o.max_seq_length = 8;  // max_num_tokens 5: chunks of 2-3 sentences
    o.dupe_factor = 2;
    o.random_seed = seed;
    PretrainingStats st;
    auto inst = create_training_instances(c.docs, o, *c.vocab, st);
    for (const auto& i : inst) {
      EXPECT_FALSE(i.is_random_next);
      // B is the true continuation: every A token precedes every B token in document order (the ids were
      // assigned in document order and are unique here).
      std::vector<int32_t> t = originals(i);
      int32_t max_a = -1, min_b = 1 << 30;
      for (size_t k = 1; k + 1 < t.size(); ++k) {
        if (t[k] == c.vocab->sep_id()) continue;
        if (i.segment_ids[k] == 0)
          max_a = std::max(max_a, t[k]);
        else
          min_b = std::min(min_b, t[k]);
      }
      EXPECT_LT(max_a, min_b);
    }
    EXPECT_EQ(st.random_next, 0);
    EXPECT_EQ(st.instances, static_cast<int64_t>(inst.size()));
    skipped += st.skipped_random_pairs;
    made += st.instances;
  }
  EXPECT_GT(skipped, 0);
  EXPECT_GT(made, 0);
}

TEST(C12, RandomNextImpliesOtherDocumentAndNspIsBalanced) {
  // 30 documents of 3-12 sentences of 1-6 tokens each.
  std::vector<std::vector<std::vector<std::string>>> text;
  Rng gen(7, 0);
  for (int d = 0; d < 30; ++d) {
    std::vector<std::vector<std::string>> doc;
    const int ns = 3 + static_cast<int>(gen.randint(10));
    for (int s = 0; s < ns; ++s) {
      std::vector<std::string> sent;
      const int nt = 1 + static_cast<int>(gen.randint(6));
      for (int t = 0; t < nt; ++t) sent.push_back(std::string("d").append(std::to_string(d) + "s" + std::to_string(s) + "t" + std::to_string(t)));
      doc.push_back(sent);
    }
    text.push_back(doc);
  }
  Corpus c = make_corpus(text);
  PretrainingOptions o;
  o.max_seq_length = 16;
  o.dupe_factor = 20;
  PretrainingStats st;
  auto inst = create_training_instances(c.docs, o, *c.vocab, st);
  ASSERT_GT(inst.size(), 1000u);
  for (const auto& i : inst) {
    auto [da, db] = docs_of_segments(c, i);
    ASSERT_EQ(da.size(), 1u);
    if (i.is_random_next) {
      for (int d : db) EXPECT_NE(d, *da.begin());
    } else {
      EXPECT_EQ(db, da);
    }
    EXPECT_LE(i.tokens.size(), 16u);
    EXPECT_EQ(i.tokens.front(), c.vocab->cls_id());
    EXPECT_EQ(i.tokens.back(), c.vocab->sep_id());
  }
  // Chunks of one sentence are forced random, so the share is a little above one half.
  const double frac = static_cast<double>(st.random_next) / static_cast<double>(st.instances);
  EXPECT_GT(frac, 0.45);
  EXPECT_LT(frac, 0.75);
}

// ---------------------------------------------------------------------------------------------------
// C13: pair truncation.

TEST(C13, PretrainingTruncationTableAndContiguousSlices) {
  const std::vector<std::tuple<int, int, int, int>> table = {{5, 5, 3, 3}, {7, 2, 4, 2}, {2, 7, 2, 4}, {3, 3, 3, 3}};
  for (auto [la, lb, wa, wb] : table) {
    std::set<int> fronts;
    for (uint64_t seed = 0; seed < 200; ++seed) {
      std::vector<int> a(la), b(lb);
      for (int i = 0; i < la; ++i) a[i] = i;
      for (int i = 0; i < lb; ++i) b[i] = 100 + i;
      Rng rng(seed, 0);
      truncate_seq_pair(a, b, 6, rng);
      ASSERT_EQ(static_cast<int>(a.size()), wa);
      ASSERT_EQ(static_cast<int>(b.size()), wb);
      for (size_t i = 1; i < a.size(); ++i) EXPECT_EQ(a[i], a[i - 1] + 1);
      for (size_t i = 1; i < b.size(); ++i) EXPECT_EQ(b[i], b[i - 1] + 1);
      fronts.insert(a.front() * 1000 + b.front());
    }
    // Whenever something is cut, both ends get cut across seeds (front and back at random).
    if (la + lb > 6) {
      EXPECT_GT(fronts.size(), 1u);
    }
  }
}

TEST(C13, ClassifierTruncationPopsTheBack) {
  std::vector<std::string> a = {"a1", "a2", "a3", "a4", "a5"}, b = {"b1", "b2", "b3", "b4", "b5"};
  truncate_seq_pair_back(a, b, 9 - 3);
  EXPECT_EQ(a, (std::vector<std::string>{"a1", "a2", "a3"}));
  EXPECT_EQ(b, (std::vector<std::string>{"b1", "b2", "b3"}));
  std::vector<int> c = {1, 2, 3, 4, 5, 6, 7}, d = {9};
  truncate_seq_pair_back(c, d, 4);
  EXPECT_EQ(c, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(d, (std::vector<int>{9}));
}

// ---------------------------------------------------------------------------------------------------
// Options, thread-count independence, reading.

TEST(PretrainingOptions, ValidateErrorsAndWarnings) {
  PretrainingOptions o;
  EXPECT_TRUE(o.validate().empty());  // 128 * 0.15 = 19.2 -> 19 <= 20
  o.max_seq_length = 512;
  EXPECT_EQ(o.validate().size(), 1u);  // 77 wanted, 20 given
  o.max_predictions_per_seq = 80;
  EXPECT_TRUE(o.validate().empty());
  o.max_predictions_per_seq = 400;
  EXPECT_EQ(o.validate().size(), 1u);
  PretrainingOptions bad;
  bad.max_seq_length = 4;
  EXPECT_THROW(bad.validate(), Error);
  bad = {};
  bad.masked_lm_prob = 0;
  EXPECT_THROW(bad.validate(), Error);
  bad = {};
  bad.dupe_factor = 0;
  EXPECT_THROW(bad.validate(), Error);
  EXPECT_THROW(make_vocab({"a", "a"}), Error);
  EXPECT_THROW(PretrainingVocab({"[PAD]", "[CLS]", "[SEP]"}), Error);
}

TEST(CreateTrainingInstances, IndependentOfThreadCount) {
  std::vector<std::vector<std::vector<std::string>>> text;
  Rng gen(9, 0);
  for (int d = 0; d < 40; ++d) {
    std::vector<std::vector<std::string>> doc;
    for (int s = 0; s < 2 + static_cast<int>(gen.randint(15)); ++s) {
      std::vector<std::string> sent;
      for (int t = 0; t < 1 + static_cast<int>(gen.randint(9)); ++t) sent.push_back(std::string("w").append(std::to_string(gen.randint(50))));
      doc.push_back(sent);
    }
    text.push_back(doc);
  }
  Corpus c = make_corpus(text);
  PretrainingOptions o;
  o.max_seq_length = 24;
  o.dupe_factor = 5;
  o.do_whole_word_mask = true;
  const int saved = omp_get_max_threads();
  std::vector<std::vector<TrainingInstance>> runs;
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    PretrainingStats st;
    runs.push_back(create_training_instances(c.docs, o, *c.vocab, st));
  }
  omp_set_num_threads(saved);
  for (size_t r = 1; r < runs.size(); ++r) {
    ASSERT_EQ(runs[r].size(), runs[0].size());
    for (size_t i = 0; i < runs[0].size(); ++i) {
      EXPECT_EQ(runs[r][i].tokens, runs[0][i].tokens);
      EXPECT_EQ(runs[r][i].masked_lm_positions, runs[0][i].masked_lm_positions);
      EXPECT_EQ(runs[r][i].is_random_next, runs[0][i].is_random_next);
    }
  }
  // A different seed gives different instances.
  o.random_seed = 1;
  PretrainingStats st;
  auto other = create_training_instances(c.docs, o, *c.vocab, st);
  bool differs = other.size() != runs[0].size();
  for (size_t i = 0; !differs && i < other.size(); ++i) differs = other[i].tokens != runs[0][i].tokens;
  EXPECT_TRUE(differs);
}

namespace {
// Whitespace tokenizer over a fixed vocab; unknown words map to [UNK].
TokenizeFn whitespace_tokenizer(const PretrainingVocab& v) {
  return [&v](std::string_view line) {
    std::vector<int32_t> out;
    std::istringstream ss{std::string(line)};
    std::string w;
    while (ss >> w) out.push_back(v.contains(w) ? v.id(w) : v.id("[UNK]"));
    return out;
  };
}
void write_file(const fs::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary);
  f << s;
}
}  // namespace

TEST(ReadDocuments, DocumentsSentencesAndBadRecords) {
  PretrainingVocab v = make_vocab({"a", "b", "c", "d"});
  fs::path dir = temp_dir("read");
  // Blank lines (also whitespace-only, also U+3000) split documents; a bad UTF-8 line and an over-long
  // line are skipped without splitting.
  std::string long_line(kMaxLineBytes + 1, 'a');
  write_file(dir / "one.txt", "a b\n c \n\n \t\nd\n\xff\xfe bad\nb\n" + long_line + "\n\xe3\x80\x80\nc c\r\n\xc3\x28\n");
  write_file(dir / "empty.txt", "");
  write_file(dir / "two.txt", "d d\nc");
  PretrainingStats st;
  auto docs = read_documents({(dir / "one.txt").string(), (dir / "empty.txt").string(), (dir / "two.txt").string()},
                             whitespace_tokenizer(v), st);
  ASSERT_EQ(docs.size(), 4u);
  EXPECT_EQ(docs[0], (Document{ids_of(v, "a b"), ids_of(v, "c")}));
  EXPECT_EQ(docs[1], (Document{ids_of(v, "d"), ids_of(v, "b")}));
  EXPECT_EQ(docs[2], (Document{ids_of(v, "c c")}));
  EXPECT_EQ(docs[3], (Document{ids_of(v, "d d"), ids_of(v, "c")}));  // a new file starts a new document
  EXPECT_EQ(st.skipped_non_utf8_lines, 2);
  EXPECT_EQ(st.skipped_long_lines, 1);
  EXPECT_EQ(st.skipped_empty_files, 1);
  EXPECT_EQ(st.documents, 4);
  EXPECT_EQ(st.files, 3);
  // One warning per kind and file, naming file and line.
  ASSERT_EQ(st.warnings.size(), 3u);
  EXPECT_NE(st.warnings[0].find("one.txt:6: invalid UTF-8"), std::string::npos) << st.warnings[0];
  EXPECT_NE(st.warnings[1].find("one.txt:8: line of"), std::string::npos) << st.warnings[1];
  EXPECT_NE(st.warnings[2].find("empty.txt: empty file"), std::string::npos) << st.warnings[2];
  fs::remove_all(dir);
}

TEST(ReadDocuments, MissingFileIsFatalAndNamesIt) {
  PretrainingVocab v = make_vocab({"a"});
  PretrainingStats st;
  try {
    read_documents({"/nonexistent/bertrain/corpus.txt"}, whitespace_tokenizer(v), st);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/bertrain/corpus.txt"), std::string::npos);
  }
  EXPECT_THROW(expand_input_globs("/nonexistent/bertrain/*.txt"), Error);
  // No documents at all is fatal too.
  EXPECT_THROW(create_training_instances({}, PretrainingOptions{}, v, st), Error);
}

TEST(ReadDocuments, Utf8Validation) {
  EXPECT_TRUE(is_valid_utf8("h\xc3\xa9llo \xf0\xa0\x80\x80"));
  EXPECT_FALSE(is_valid_utf8("\xc0\xaf"));          // overlong
  EXPECT_FALSE(is_valid_utf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(is_valid_utf8("abc\xe2\x82"));       // truncated
}
