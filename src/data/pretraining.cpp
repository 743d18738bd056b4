// pretraining.cpp: instance creation of google-research/bert create_pretraining_data.py on token ids,
// reading of one-sentence-per-line corpora, and padding to NVIDIA-layout features.
#include "bertrain/data/pretraining.h"

#include <glob.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <fstream>
#include <mutex>
#include <sstream>

#include "bertrain/text/unicode.h"

namespace bertrain::data {

// ---------------------------------------------------------------------------------------------------
// Vocab

PretrainingVocab::PretrainingVocab(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {
  BERTRAIN_CHECK(!tokens_.empty(), "pretraining vocab is empty");
  ids_.reserve(tokens_.size());
  continuation_.resize(tokens_.size());
  for (size_t i = 0; i < tokens_.size(); ++i) {
    auto [it, fresh] = ids_.emplace(tokens_[i], static_cast<int32_t>(i));
    BERTRAIN_CHECK(fresh, "vocab: token '", tokens_[i], "' occurs twice (ids ", it->second, " and ", i, ")");
    continuation_[i] = tokens_[i].size() >= 2 && tokens_[i][0] == '#' && tokens_[i][1] == '#';
  }
  auto special = [&](const char* t) {
    auto it = ids_.find(t);
    BERTRAIN_CHECK(it != ids_.end(), "vocab: pretraining data needs the special token ", t,
                   ", which the vocab (", tokens_.size(), " tokens) does not have");
    return it->second;
  };
  pad_id_ = special("[PAD]");
  cls_id_ = special("[CLS]");
  sep_id_ = special("[SEP]");
  mask_id_ = special("[MASK]");
}

const std::string& PretrainingVocab::token(int32_t id) const {
  BERTRAIN_CHECK(id >= 0 && static_cast<size_t>(id) < tokens_.size(), "token id ", id, " outside the vocab of ",
                 tokens_.size());
  return tokens_[static_cast<size_t>(id)];
}

int32_t PretrainingVocab::id(std::string_view token) const {
  auto it = ids_.find(std::string(token));
  BERTRAIN_CHECK(it != ids_.end(), "token '", token, "' is not in the vocab");
  return it->second;
}

bool PretrainingVocab::contains(std::string_view token) const { return ids_.count(std::string(token)) != 0; }

// ---------------------------------------------------------------------------------------------------
// Options and stats

std::vector<std::string> PretrainingOptions::validate() const {
  BERTRAIN_CHECK(max_seq_length >= 5, "max_seq_length must be at least 5 ([CLS] a [SEP] b [SEP] with a target of ",
                 "2 tokens), got ", max_seq_length);
  BERTRAIN_CHECK(max_predictions_per_seq >= 1, "max_predictions_per_seq must be >= 1, got ", max_predictions_per_seq);
  BERTRAIN_CHECK(masked_lm_prob > 0.0 && masked_lm_prob <= 1.0, "masked_lm_prob must be in (0, 1], got ",
                 masked_lm_prob);
  BERTRAIN_CHECK(short_seq_prob >= 0.0 && short_seq_prob <= 1.0, "short_seq_prob must be in [0, 1], got ",
                 short_seq_prob);
  BERTRAIN_CHECK(dupe_factor >= 1, "dupe_factor must be >= 1, got ", dupe_factor);
  BERTRAIN_CHECK(num_shards >= 1, "num_shards must be >= 1, got ", num_shards);
  std::vector<std::string> warnings;
  const int want = masked_lm_budget(static_cast<size_t>(max_seq_length), masked_lm_prob, 1 << 30);
  if (max_predictions_per_seq < want)
    warnings.push_back(detail::str_cat(
        "max_predictions_per_seq=", max_predictions_per_seq, " is below round(max_seq_length * masked_lm_prob) = ",
        want, ": full-length sequences will mask only ", max_predictions_per_seq, " tokens (ref caps silently)"));
  if (max_predictions_per_seq > std::max(want + 5, want * 2))
    warnings.push_back(detail::str_cat("max_predictions_per_seq=", max_predictions_per_seq,
                                       " is far above round(max_seq_length * masked_lm_prob) = ", want,
                                       ": the extra prediction slots are always padding"));
  return warnings;
}

void PretrainingStats::merge(const PretrainingStats& o) {
  files += o.files;
  bytes += o.bytes;
  lines += o.lines;
  documents += o.documents;
  sentences += o.sentences;
  tokens += o.tokens;
  instances += o.instances;
  instance_tokens += o.instance_tokens;
  masked_tokens += o.masked_tokens;
  random_next += o.random_next;
  skipped_random_pairs += o.skipped_random_pairs;
  skipped_non_utf8_lines += o.skipped_non_utf8_lines;
  skipped_long_lines += o.skipped_long_lines;
  skipped_empty_files += o.skipped_empty_files;
  chinese_ref_marks += o.chinese_ref_marks;
  warnings.insert(warnings.end(), o.warnings.begin(), o.warnings.end());
}

// ---------------------------------------------------------------------------------------------------
// Python random equivalents on our Rng.

namespace {

// random.randint(a, b): inclusive.
int64_t py_randint(Rng& rng, int64_t a, int64_t b) {
  BERTRAIN_ASSERT(b >= a);
  return a + static_cast<int64_t>(rng.randint(static_cast<uint64_t>(b - a + 1)));
}

// random.shuffle: for i in reversed(range(1, n)): j = randbelow(i + 1); swap.
template <class T>
void py_shuffle(std::vector<T>& v, Rng& rng) {
  for (size_t i = v.size(); i-- > 1;) {
    size_t j = static_cast<size_t>(rng.randint(i + 1));
    std::swap(v[i], v[j]);
  }
}

}  // namespace

int masked_lm_budget(size_t len, double masked_lm_prob, int max_predictions_per_seq) {
  // Python 3 round() is round-half-to-even on the double product; nearbyint in the default rounding mode is
  // the same (e.g. 30 * 0.15 == 4.5 -> 4, 10 * 0.15 == 1.5 -> 2).
  const double r = std::nearbyint(static_cast<double>(len) * masked_lm_prob);
  const int64_t n = std::max<int64_t>(1, static_cast<int64_t>(r));
  return static_cast<int>(std::min<int64_t>(max_predictions_per_seq, n));
}

namespace {

// Candidate groups as (start, count) over `members`: a flat list keeps this allocation-light.
void candidate_groups(const std::vector<int32_t>& tokens, bool do_whole_word_mask, const PretrainingVocab& vocab,
                      std::vector<int32_t>& members, std::vector<std::pair<int32_t, int32_t>>& groups) {
  const int32_t vsize = static_cast<int32_t>(vocab.size());
  members.reserve(tokens.size());
  groups.reserve(tokens.size());
  bool prev_candidate = false;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const bool marked = (tokens[i] & kWordContinuationBit) != 0;
    const int32_t t = tokens[i] & ~kWordContinuationBit;
    BERTRAIN_CHECK(tokens[i] >= 0 && t < vsize, "token id ", t, " at position ", i, " outside the vocab of ", vsize);
    if (t == vocab.cls_id() || t == vocab.sep_id() || t == vocab.pad_id()) {
      prev_candidate = false;
      continue;
    }
    // ref appends a "##" piece to the last group even across a [SEP]; kept as is. A segmenter's word does not.
    if (do_whole_word_mask && !groups.empty() && (vocab.is_continuation(t) || (marked && prev_candidate))) {
      members.push_back(static_cast<int32_t>(i));
      ++groups.back().second;
    } else {
      groups.emplace_back(static_cast<int32_t>(members.size()), 1);
      members.push_back(static_cast<int32_t>(i));
    }
    prev_candidate = true;
  }
}

}  // namespace

std::vector<std::vector<int32_t>> masked_lm_candidate_groups(const std::vector<int32_t>& tokens,
                                                             bool do_whole_word_mask, const PretrainingVocab& vocab) {
  std::vector<int32_t> members;
  std::vector<std::pair<int32_t, int32_t>> groups;
  candidate_groups(tokens, do_whole_word_mask, vocab, members, groups);
  std::vector<std::vector<int32_t>> out;
  for (const auto& [off, count] : groups) out.emplace_back(members.begin() + off, members.begin() + off + count);
  return out;
}

MaskedLmPredictions create_masked_lm_predictions(const std::vector<int32_t>& raw_tokens, double masked_lm_prob,
                                                 int max_predictions_per_seq, bool do_whole_word_mask,
                                                 const PretrainingVocab& vocab, Rng& rng) {
  const int32_t vsize = static_cast<int32_t>(vocab.size());
  std::vector<int32_t> members;
  std::vector<std::pair<int32_t, int32_t>> groups;  // (offset into members, count)
  candidate_groups(raw_tokens, do_whole_word_mask, vocab, members, groups);
  py_shuffle(groups, rng);

  // The word marks have done their work: tokens and labels are plain ids from here on.
  std::vector<int32_t> tokens = raw_tokens;
  for (int32_t& t : tokens) t &= ~kWordContinuationBit;
  MaskedLmPredictions out;
  out.tokens = tokens;
  const int num_to_predict = masked_lm_budget(tokens.size(), masked_lm_prob, max_predictions_per_seq);
  // Groups are disjoint by construction, so ref's covered_indexes test never fires; the budget rule does.
  std::vector<std::pair<int32_t, int32_t>> masked;  // (position, label)
  masked.reserve(static_cast<size_t>(num_to_predict));
  for (const auto& [off, count] : groups) {
    if (static_cast<int>(masked.size()) >= num_to_predict) break;
    if (static_cast<int>(masked.size()) + count > num_to_predict) continue;  // C11: skip, never cut
    for (int32_t k = 0; k < count; ++k) {
      const int32_t index = members[static_cast<size_t>(off + k)];
      int32_t masked_token;
      if (rng.uniform() < 0.8) {
        masked_token = vocab.mask_id();
      } else if (rng.uniform() < 0.5) {
        masked_token = tokens[static_cast<size_t>(index)];
      } else {
        masked_token = static_cast<int32_t>(rng.randint(static_cast<uint64_t>(vsize)));
      }
      out.tokens[static_cast<size_t>(index)] = masked_token;
      masked.emplace_back(index, tokens[static_cast<size_t>(index)]);
    }
  }
  BERTRAIN_ASSERT(static_cast<int>(masked.size()) <= num_to_predict);
  std::sort(masked.begin(), masked.end());
  out.positions.reserve(masked.size());
  out.labels.reserve(masked.size());
  for (const auto& [p, l] : masked) {
    out.positions.push_back(p);
    out.labels.push_back(l);
  }
  return out;
}

std::vector<TrainingInstance> create_instances_from_document(const std::vector<Document>& all_documents,
                                                             size_t document_index,
                                                             const PretrainingOptions& options,
                                                             const PretrainingVocab& vocab, Rng& rng,
                                                             PretrainingStats& stats) {
  BERTRAIN_CHECK(options.max_seq_length >= 5, "max_seq_length must be at least 5, got ", options.max_seq_length);
  BERTRAIN_ASSERT(document_index < all_documents.size());
  const Document& document = all_documents[document_index];
  const int64_t ndocs = static_cast<int64_t>(all_documents.size());

  // Account for [CLS], [SEP], [SEP].
  const int64_t max_num_tokens = options.max_seq_length - 3;
  int64_t target_seq_length = max_num_tokens;
  if (rng.uniform() < options.short_seq_prob) target_seq_length = py_randint(rng, 2, max_num_tokens);

  std::vector<TrainingInstance> instances;
  std::vector<const Sentence*> current_chunk;
  int64_t current_length = 0;
  int64_t i = 0;
  const int64_t n = static_cast<int64_t>(document.size());
  while (i < n) {
    const Sentence& segment = document[static_cast<size_t>(i)];
    current_chunk.push_back(&segment);
    current_length += static_cast<int64_t>(segment.size());
    if (i == n - 1 || current_length >= target_seq_length) {
      if (!current_chunk.empty()) {
        const int64_t chunk = static_cast<int64_t>(current_chunk.size());
        int64_t a_end = 1;
        if (chunk >= 2) a_end = py_randint(rng, 1, chunk - 1);
        std::vector<int32_t> tokens_a;
        for (int64_t j = 0; j < a_end; ++j)
          tokens_a.insert(tokens_a.end(), current_chunk[j]->begin(), current_chunk[j]->end());

        std::vector<int32_t> tokens_b;
        bool is_random_next = false;
        bool skip = false;
        if (chunk == 1 || rng.uniform() < 0.5) {
          is_random_next = true;
          const int64_t target_b_length = target_seq_length - static_cast<int64_t>(tokens_a.size());
          if (ndocs < 2) {
            // C12: no other document to draw B from; ref would reuse this one and mislabel the pair.
            skip = true;
            ++stats.skipped_random_pairs;
          } else {
            // Uniform over the other documents (bertrain deviation, see the header).
            int64_t random_document_index = py_randint(rng, 0, ndocs - 2);
            if (random_document_index >= static_cast<int64_t>(document_index)) ++random_document_index;
            const Document& random_document = all_documents[static_cast<size_t>(random_document_index)];
            const int64_t random_start = py_randint(rng, 0, static_cast<int64_t>(random_document.size()) - 1);
            for (size_t j = static_cast<size_t>(random_start); j < random_document.size(); ++j) {
              tokens_b.insert(tokens_b.end(), random_document[j].begin(), random_document[j].end());
              if (static_cast<int64_t>(tokens_b.size()) >= target_b_length) break;
            }
          }
          // The segments after A were not used: put them back.
          i -= chunk - a_end;
        } else {
          for (int64_t j = a_end; j < chunk; ++j)
            tokens_b.insert(tokens_b.end(), current_chunk[j]->begin(), current_chunk[j]->end());
        }
        if (!skip) {
          truncate_seq_pair(tokens_a, tokens_b, static_cast<size_t>(max_num_tokens), rng);
          BERTRAIN_ASSERT(!tokens_a.empty() && !tokens_b.empty());

          std::vector<int32_t> tokens;
          tokens.reserve(tokens_a.size() + tokens_b.size() + 3);
          tokens.push_back(vocab.cls_id());
          tokens.insert(tokens.end(), tokens_a.begin(), tokens_a.end());
          tokens.push_back(vocab.sep_id());
          tokens.insert(tokens.end(), tokens_b.begin(), tokens_b.end());
          tokens.push_back(vocab.sep_id());
          TrainingInstance inst;
          inst.segment_ids.assign(tokens.size(), 1);
          std::fill(inst.segment_ids.begin(), inst.segment_ids.begin() + static_cast<int64_t>(tokens_a.size()) + 2, 0);
          MaskedLmPredictions m = create_masked_lm_predictions(tokens, options.masked_lm_prob,
                                                               options.max_predictions_per_seq,
                                                               options.do_whole_word_mask, vocab, rng);
          inst.tokens = std::move(m.tokens);
          inst.masked_lm_positions = std::move(m.positions);
          inst.masked_lm_labels = std::move(m.labels);
          inst.is_random_next = is_random_next;
          ++stats.instances;
          stats.instance_tokens += static_cast<int64_t>(inst.tokens.size());
          stats.masked_tokens += static_cast<int64_t>(inst.masked_lm_positions.size());
          stats.random_next += is_random_next ? 1 : 0;
          instances.push_back(std::move(inst));
        }
      }
      current_chunk.clear();
      current_length = 0;
    }
    ++i;
  }
  return instances;
}

std::vector<TrainingInstance> create_training_instances(std::vector<Document> all_documents,
                                                        const PretrainingOptions& options,
                                                        const PretrainingVocab& vocab, PretrainingStats& stats) {
  return create_training_instances(std::move(all_documents), options, vocab, stats, options.random_seed);
}

std::vector<TrainingInstance> create_training_instances(std::vector<Document> all_documents,
                                                        const PretrainingOptions& options,
                                                        const PretrainingVocab& vocab, PretrainingStats& stats,
                                                        uint64_t seed) {
  options.validate();
  std::erase_if(all_documents, [](const Document& d) { return d.empty(); });
  BERTRAIN_CHECK(!all_documents.empty(), "no documents in the input: nothing to make pretraining instances from");
  Rng doc_rng(seed, 0);
  py_shuffle(all_documents, doc_rng);

  const int64_t ndocs = static_cast<int64_t>(all_documents.size());
  const int64_t ntasks = ndocs * options.dupe_factor;
  std::vector<std::vector<TrainingInstance>> per_task(static_cast<size_t>(ntasks));
  std::vector<PretrainingStats> per_task_stats(static_cast<size_t>(ntasks));
#pragma omp parallel for schedule(dynamic, 16)
  for (int64_t t = 0; t < ntasks; ++t) {
    const int64_t d = t % ndocs;  // t = dupe * ndocs + d
    Rng rng(seed, 2 + static_cast<uint64_t>(t));
    per_task[static_cast<size_t>(t)] =
        create_instances_from_document(all_documents, static_cast<size_t>(d), options, vocab, rng,
                                       per_task_stats[static_cast<size_t>(t)]);
  }
  size_t total = 0;
  for (const auto& v : per_task) total += v.size();
  std::vector<TrainingInstance> instances;
  instances.reserve(total);
  for (int64_t t = 0; t < ntasks; ++t) {
    for (auto& inst : per_task[static_cast<size_t>(t)]) instances.push_back(std::move(inst));
    std::vector<TrainingInstance>().swap(per_task[static_cast<size_t>(t)]);
    stats.merge(per_task_stats[static_cast<size_t>(t)]);
  }
  Rng inst_rng(seed, 1);
  py_shuffle(instances, inst_rng);
  return instances;
}

// ---------------------------------------------------------------------------------------------------
// Reading

bool is_valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* e = p + s.size();
  while (p < e) {
    unsigned c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    int n;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      n = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (e - p <= n) return false;
    for (int k = 1; k <= n; ++k) {
      if ((p[k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[k] & 0x3F);
    }
    static constexpr uint32_t kMin[4] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    p += n + 1;
  }
  return true;
}

namespace {

// Python str.isspace() code points (what str.strip() removes).
bool py_isspace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Decodes the code point starting at s[i] of valid UTF-8; sets len.
uint32_t decode_at(std::string_view s, size_t i, size_t& len) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) {
    len = 1;
    return c;
  }
  size_t n = (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : 3;
  uint32_t cp = c & (n == 1 ? 0x1F : n == 2 ? 0x0F : 0x07);
  for (size_t k = 1; k <= n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  len = n + 1;
  return cp;
}

// Python str.strip() of valid UTF-8.
std::string_view py_strip(std::string_view s) {
  size_t b = 0;
  while (b < s.size()) {
    size_t len;
    if (!py_isspace(decode_at(s, b, len))) break;
    b += len;
  }
  size_t e = s.size();
  while (e > b) {
    size_t start = e - 1;
    while (start > b && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t len;
    if (!py_isspace(decode_at(s, start, len))) break;
    e = start;
  }
  return s.substr(b, e - b);
}

std::string read_whole_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  BERTRAIN_CHECK(f.good(), "cannot open input file '", path, "' (missing or unreadable)");
  std::ostringstream ss;
  ss << f.rdbuf();
  BERTRAIN_CHECK(!f.bad(), "error while reading input file '", path, "'");
  return std::move(ss).str();
}

enum class LineKind : uint8_t { text, blank, bad_utf8, too_long };

}  // namespace

std::vector<std::string> expand_input_globs(const std::string& patterns) {
  std::vector<std::string> files;
  std::stringstream ss(patterns);
  std::string pat;
  while (std::getline(ss, pat, ',')) {
    if (pat.empty()) continue;
    glob_t g{};
    int rc = ::glob(pat.c_str(), 0, nullptr, &g);
    if (rc == GLOB_NOMATCH || (rc == 0 && g.gl_pathc == 0)) {
      globfree(&g);
      BERTRAIN_CHECK(false, "input_file pattern '", pat, "' matches no file");
    }
    if (rc != 0) {
      globfree(&g);
      BERTRAIN_CHECK(false, "input_file pattern '", pat, "': glob failed (", rc == GLOB_ABORTED ? "read error" : "out of memory",
                     ")");
    }
    std::vector<std::string> here(g.gl_pathv, g.gl_pathv + g.gl_pathc);
    globfree(&g);
    std::sort(here.begin(), here.end());
    files.insert(files.end(), here.begin(), here.end());
  }
  BERTRAIN_CHECK(!files.empty(), "no input files given (input_file='", patterns, "')");
  return files;
}

std::vector<int32_t> parse_chinese_ref_line(std::string_view line, const std::string& source, int64_t lineno) {
  // A JSON list of integers, as json.dumps writes it: "[2, 4, 6]" or "[]".
  std::vector<int32_t> v;
  size_t i = 0;
  auto skip_ws = [&] {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
  };
  skip_ws();
  BERTRAIN_CHECK(i < line.size() && line[i] == '[', source, ":", lineno, ": expected a JSON list of token positions ",
                 "such as [2, 4], got '", line.substr(0, 40), "'");
  ++i;
  skip_ws();
  bool closed = false;
  while (i < line.size()) {
    if (line[i] == ']' && v.empty()) {
      closed = true;
      ++i;
      break;
    }
    size_t b = i;
    while (i < line.size() && line[i] >= '0' && line[i] <= '9') ++i;
    BERTRAIN_CHECK(i > b && i - b <= 9, source, ":", lineno, ": expected a non-negative integer position at column ", b + 1);
    const int32_t p = static_cast<int32_t>(std::stol(std::string(line.substr(b, i - b))));
    BERTRAIN_CHECK(v.empty() || p > v.back(), source, ":", lineno, ": positions must be strictly increasing, got ",
                   p, " after ", v.empty() ? 0 : v.back());
    v.push_back(p);
    skip_ws();
    if (i < line.size() && line[i] == ',') {
      ++i;
      skip_ws();
      continue;
    }
    if (i < line.size() && line[i] == ']') {
      closed = true;
      ++i;
    }
    break;
  }
  skip_ws();
  BERTRAIN_CHECK(closed && i == line.size(), source, ":", lineno, ": malformed list of positions '", line.substr(0, 60),
                 "'");
  return v;
}

ChineseRef parse_chinese_ref(std::string_view text, const std::string& source) {
  ChineseRef r;
  r.path = source;
  int64_t lineno = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    r.lines.push_back(parse_chinese_ref_line(line, source, ++lineno));
  }
  return r;
}

ChineseRef read_chinese_ref(const std::string& path) { return parse_chinese_ref(read_whole_file(path), path); }

bool is_cjk_character_token(std::string_view token) {
  if (token.empty() || token.size() > 4 || !is_valid_utf8(token)) return false;
  size_t len = 0;
  const uint32_t cp = decode_at(token, 0, len);
  return len == token.size() && (text::unicode::flags(cp) & text::unicode::kChinese);
}

void mark_chinese_ref_words(std::vector<int32_t>& ids, const std::vector<int32_t>& positions,
                            const PretrainingVocab& vocab, const std::string& ref_source, int64_t ref_line) {
  const int32_t n = static_cast<int32_t>(ids.size());
  for (const int32_t p : positions) {
    BERTRAIN_CHECK(p >= 1 && p <= n, ref_source, ":", ref_line, ": position ", p, " is outside the line's tokens 1..",
                   n, " ([CLS] is 0, [SEP] ", n + 1, ")");
    const std::string& tok = vocab.token(ids[static_cast<size_t>(p - 1)] & ~kWordContinuationBit);
    BERTRAIN_CHECK(is_cjk_character_token(tok), ref_source, ":", ref_line, ": position ", p, " is the token '", tok,
                   "', not a CJK character (run_chinese_ref.py marks only characters of all-CJK words)");
    BERTRAIN_CHECK(p >= 2 && is_cjk_character_token(vocab.token(ids[static_cast<size_t>(p - 2)] & ~kWordContinuationBit)),
                   ref_source, ":", ref_line, ": position ", p, " ('", tok, "') is word-initial: ",
                   p == 1 ? std::string("the first token of the line") :
                            "the token before it, '" + vocab.token(ids[static_cast<size_t>(p - 2)] & ~kWordContinuationBit) +
                                "', is not a CJK character",
                   ", so it cannot continue a Chinese word");
    ids[static_cast<size_t>(p - 1)] |= kWordContinuationBit;
  }
}

std::string chinese_whole_word_mask_warning(const std::vector<Document>& docs, const PretrainingVocab& vocab) {
  std::vector<uint8_t> cjk(vocab.size());
  for (size_t i = 0; i < vocab.size(); ++i) cjk[i] = is_cjk_character_token(vocab.token(static_cast<int32_t>(i)));
  int64_t n = 0, total = 0;
  for (const auto& d : docs)
    for (const auto& s : d)
      for (int32_t id : s) {
        ++total;
        const int32_t t = id & ~kWordContinuationBit;
        n += (t >= 0 && static_cast<size_t>(t) < cjk.size() && cjk[static_cast<size_t>(t)]) ? 1 : 0;
      }
  if (n == 0) return {};
  return detail::str_cat("--do_whole_word_mask without --chinese_ref_file: ", n, " of ", total,
                         " tokens are CJK characters, each a word of its own for WordPiece, so they are masked one ",
                         "character at a time (google-research/bert#780); give a word segmentation with ",
                         "--chinese_ref_file (scripts/chinese_ref.py writes one)");
}

SideTokenizeFn chinese_ref_side_tokenize(TokenizeFn tokenize, const PretrainingVocab& vocab,
                                         std::atomic<int64_t>* marks) {
  return [tokenize = std::move(tokenize), &vocab, marks](std::string_view line, std::string_view side_line,
                                                         const std::string& side_path, int64_t side_line_no) {
    std::vector<int32_t> ids = line.empty() ? std::vector<int32_t>{} : tokenize(line);
    const std::vector<int32_t> pos = parse_chinese_ref_line(side_line, side_path, side_line_no);
    mark_chinese_ref_words(ids, pos, vocab, side_path, side_line_no);
    if (marks) *marks += static_cast<int64_t>(pos.size());
    return ids;
  };
}

bool is_blank_input_line(std::string_view line, int64_t bytes) {
  return bytes <= static_cast<int64_t>(kMaxLineBytes) && is_valid_utf8(line) && py_strip(line).empty();
}

std::vector<Document> documents_from_lines(const std::string& path, int64_t first_line,
                                           const std::vector<InputLine>& lines, const TokenizeFn& tokenize,
                                           const SideTokenizeFn& side_tokenize, PretrainingStats& stats,
                                           const std::function<void(int64_t bytes)>& report,
                                           const std::string& side_path) {
  const int64_t nlines = static_cast<int64_t>(lines.size());
  stats.lines += nlines;
  std::vector<LineKind> kind(lines.size());
  std::vector<Sentence> ids(lines.size());
  constexpr int64_t kBlock = 1024;
  const int64_t nblocks = (nlines + kBlock - 1) / kBlock;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(nblocks));
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t blk = 0; blk < nblocks; ++blk) {
    int64_t bytes = 0;
    try {
      for (int64_t l = blk * kBlock; l < std::min(nlines, (blk + 1) * kBlock); ++l) {
        const InputLine& in = lines[static_cast<size_t>(l)];
        bytes += in.bytes + 1;
        if (in.bytes > static_cast<int64_t>(kMaxLineBytes)) {
          kind[static_cast<size_t>(l)] = LineKind::too_long;
        } else if (!is_valid_utf8(in.text)) {
          kind[static_cast<size_t>(l)] = LineKind::bad_utf8;
        } else {
          std::string_view s = py_strip(in.text);
          if (s.empty()) {
            kind[static_cast<size_t>(l)] = LineKind::blank;
            if (side_tokenize && !in.side.empty()) side_tokenize({}, in.side, side_path, in.side_line);  // validates
          } else {
            kind[static_cast<size_t>(l)] = LineKind::text;
            ids[static_cast<size_t>(l)] = side_tokenize ? side_tokenize(s, in.side, side_path, in.side_line) : tokenize(s);
          }
        }
      }
    } catch (...) {
      errors[static_cast<size_t>(blk)] = std::current_exception();
    }
    if (report) report(bytes);
  }
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  // Assemble documents in line order (independent of the thread count).
  std::vector<Document> docs(1);
  bool warned_utf8 = false, warned_long = false;
  for (int64_t l = 0; l < nlines; ++l) {
    switch (kind[static_cast<size_t>(l)]) {
      case LineKind::blank:
        docs.emplace_back();
        break;
      case LineKind::text:
        if (!ids[static_cast<size_t>(l)].empty()) docs.back().push_back(std::move(ids[static_cast<size_t>(l)]));
        break;
      case LineKind::bad_utf8:
        ++stats.skipped_non_utf8_lines;
        if (!warned_utf8)
          stats.warnings.push_back(detail::str_cat(path, ":", first_line + l + 1,
                                                   ": invalid UTF-8, line skipped (further such lines in this "
                                                   "file are only counted)"));
        warned_utf8 = true;
        break;
      case LineKind::too_long:
        ++stats.skipped_long_lines;
        if (!warned_long)
          stats.warnings.push_back(detail::str_cat(path, ":", first_line + l + 1, ": line of ",
                                                   lines[static_cast<size_t>(l)].bytes, " bytes exceeds ", kMaxLineBytes,
                                                   ", skipped (further such lines in this file are only counted)"));
        warned_long = true;
        break;
    }
  }
  std::erase_if(docs, [](const Document& d) { return d.empty(); });
  stats.documents += static_cast<int64_t>(docs.size());
  for (const auto& d : docs) {
    stats.sentences += static_cast<int64_t>(d.size());
    for (const auto& sent : d) stats.tokens += static_cast<int64_t>(sent.size());
  }
  return docs;
}

std::vector<Document> read_documents(const std::vector<std::string>& files, const TokenizeFn& tokenize,
                                     PretrainingStats& stats, const ProgressFn& progress,
                                     const ChineseRefOptions* chinese_ref) {
  if (chinese_ref) {
    BERTRAIN_CHECK(chinese_ref->files.size() == files.size(), "--chinese_ref_file: ", chinese_ref->files.size(),
                   " reference file(s) for ", files.size(), " input file(s); give one per input file, in order");
    BERTRAIN_CHECK(chinese_ref->vocab != nullptr, "read_documents: a Chinese reference needs the vocab");
  }
  // Sizes first, so a missing file fails before any work and progress has a total.
  int64_t total_bytes = 0;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary | std::ios::ate);
    BERTRAIN_CHECK(in.good(), "cannot open input file '", f, "' (missing or unreadable)");
    total_bytes += static_cast<int64_t>(in.tellg());
  }
  std::atomic<int64_t> done_bytes{0};
  std::mutex progress_mu;
  auto report = [&](int64_t add) {
    int64_t now = done_bytes.fetch_add(add) + add;
    if (progress && progress_mu.try_lock()) {
      progress(now, total_bytes);
      progress_mu.unlock();
    }
  };
  std::atomic<int64_t> marks{0};
  const SideTokenizeFn ref_tokenize =
      chinese_ref ? chinese_ref_side_tokenize(tokenize, *chinese_ref->vocab, &marks) : SideTokenizeFn();

  std::vector<Document> docs;
  for (const auto& path : files) {
    const std::string text = read_whole_file(path);
    ++stats.files;
    stats.bytes += static_cast<int64_t>(text.size());
    if (text.find_first_not_of(" \t\n\r\v\f") == std::string::npos) {
      ++stats.skipped_empty_files;
      stats.warnings.push_back(detail::str_cat(path, ": empty file (no text), skipped"));
      report(static_cast<int64_t>(text.size()));
      continue;
    }
    std::vector<InputLine> lines;
    for (size_t pos = 0; pos < text.size();) {
      size_t nl = text.find('\n', pos);
      if (nl == std::string::npos) nl = text.size();
      lines.push_back(InputLine{std::string_view(text.data() + pos, nl - pos), {}, static_cast<int64_t>(nl - pos)});
      pos = nl + 1;
    }
    std::string ref_text, ref_path;
    if (chinese_ref) {
      // One reference line per input line, or per non-blank input line (run_chinese_ref.py drops blank lines).
      ref_path = chinese_ref->files[static_cast<size_t>(&path - files.data())];
      ref_text = read_whole_file(ref_path);
      std::vector<std::string_view> ref_lines;
      for (size_t pos = 0; pos < ref_text.size();) {
        size_t nl = ref_text.find('\n', pos);
        if (nl == std::string::npos) nl = ref_text.size();
        ref_lines.emplace_back(ref_text.data() + pos, nl - pos);
        pos = nl + 1;
      }
      int64_t nonblank = 0;
      for (const InputLine& l : lines) nonblank += is_blank_input_line(l.text, l.bytes) ? 0 : 1;
      const int64_t nlines = static_cast<int64_t>(lines.size()), nref = static_cast<int64_t>(ref_lines.size());
      BERTRAIN_CHECK(nref == nlines || nref == nonblank, ref_path, ": ", nref, " lines, but the input ", path, " has ",
                     nlines, " lines (", nonblank, " non-blank); a reference needs one line per input line, or per "
                     "non-blank input line as run_chinese_ref.py writes it");
      int64_t r = 0;
      for (InputLine& l : lines) {
        if (nref != nlines && is_blank_input_line(l.text, l.bytes)) continue;
        l.side_line = r + 1;
        l.side = ref_lines[static_cast<size_t>(r++)];
      }
    }
    for (Document& d : documents_from_lines(path, 0, lines, tokenize, ref_tokenize, stats, report, ref_path))
      docs.push_back(std::move(d));
  }
  stats.chinese_ref_marks += marks.load();
  return docs;
}

// ---------------------------------------------------------------------------------------------------
// Features

PretrainingFeatures::PretrainingFeatures(int64_t t, int64_t p) : max_seq_length(t), max_predictions_per_seq(p) {
  BERTRAIN_CHECK(t > 0 && p > 0, "features need max_seq_length > 0 and max_predictions_per_seq > 0, got ", t, " and ",
                 p);
}

void PretrainingFeatures::append(const TrainingInstance& inst) {
  const size_t T = static_cast<size_t>(max_seq_length), P = static_cast<size_t>(max_predictions_per_seq);
  BERTRAIN_CHECK(inst.tokens.size() <= T, "instance of ", inst.tokens.size(), " tokens exceeds max_seq_length ", T);
  BERTRAIN_CHECK(inst.segment_ids.size() == inst.tokens.size(), "instance has ", inst.tokens.size(), " tokens but ",
                 inst.segment_ids.size(), " segment ids");
  BERTRAIN_CHECK(inst.masked_lm_positions.size() <= P && inst.masked_lm_labels.size() == inst.masked_lm_positions.size(),
                 "instance has ", inst.masked_lm_positions.size(), " masked positions and ", inst.masked_lm_labels.size(),
                 " labels; at most max_predictions_per_seq=", P, " allowed");
  const size_t n = inst.tokens.size();
  input_ids.insert(input_ids.end(), inst.tokens.begin(), inst.tokens.end());
  input_ids.resize(input_ids.size() + (T - n), 0);
  input_mask.resize(input_mask.size() + n, 1);
  input_mask.resize(input_mask.size() + (T - n), 0);
  segment_ids.insert(segment_ids.end(), inst.segment_ids.begin(), inst.segment_ids.end());
  segment_ids.resize(segment_ids.size() + (T - n), 0);
  const size_t m = inst.masked_lm_positions.size();
  masked_lm_positions.insert(masked_lm_positions.end(), inst.masked_lm_positions.begin(), inst.masked_lm_positions.end());
  masked_lm_positions.resize(masked_lm_positions.size() + (P - m), 0);
  masked_lm_ids.insert(masked_lm_ids.end(), inst.masked_lm_labels.begin(), inst.masked_lm_labels.end());
  masked_lm_ids.resize(masked_lm_ids.size() + (P - m), 0);
  next_sentence_labels.push_back(inst.is_random_next ? 1 : 0);
}

void PretrainingFeatures::check_consistent(const std::string& what) const {
  const size_t N = next_sentence_labels.size(), T = static_cast<size_t>(max_seq_length),
               P = static_cast<size_t>(max_predictions_per_seq);
  auto chk = [&](size_t got, size_t want, const char* name) {
    BERTRAIN_CHECK(got == want, what, ": dataset '", name, "' has ", got, " values, expected ", want, " (N=", N,
                   ", max_seq_length=", T, ", max_predictions_per_seq=", P, ")");
  };
  chk(input_ids.size(), N * T, "input_ids");
  chk(input_mask.size(), N * T, "input_mask");
  chk(segment_ids.size(), N * T, "segment_ids");
  chk(masked_lm_positions.size(), N * P, "masked_lm_positions");
  chk(masked_lm_ids.size(), N * P, "masked_lm_ids");
}

}  // namespace bertrain::data
