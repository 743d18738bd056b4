// squad_predictions.cpp: SQuAD post-processing as google-research/bert run_squad.py write_predictions:
// n-best spans, get_final_text, softmax, the v2 null score and the three JSON files.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <numeric>

#include "bertrain/core/error.h"
#include "bertrain/io/atomic_file.h"
#include "bertrain/tasks/squad/squad.h"
#include "bertrain/text/utf8.h"
#include "tasks/squad/json.h"
#include "bertrain/text/unicode.h"

namespace bertrain::squad {

using nlohmann::ordered_json;

std::vector<int32_t> get_best_indexes(const std::vector<float>& logits, int n_best_size) {
  std::vector<int32_t> idx(logits.size());
  std::iota(idx.begin(), idx.end(), 0);
  // Python's sorted(..., reverse=True) is stable: equal logits keep index order.
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  if (static_cast<int>(idx.size()) > n_best_size) idx.resize(std::max(n_best_size, 0));
  return idx;
}

std::vector<double> compute_softmax(const std::vector<double>& scores) {
  if (scores.empty()) return {};
  double max_score = scores[0];
  for (double s : scores)
    if (s > max_score) max_score = s;
  std::vector<double> probs;
  probs.reserve(scores.size());
  double total_sum = 0.0;
  for (double s : scores) {
    probs.push_back(std::exp(s - max_score));
    total_sum += probs.back();
  }
  for (double& p : probs) p /= total_sum;
  return probs;
}

namespace {

// Code points of a string without its spaces (U+0020 only, as _strip_spaces), and for each kept
// character its index in the original.
void strip_spaces(const std::vector<char32_t>& text, std::vector<char32_t>& ns_text, std::vector<size_t>& ns_to_s) {
  ns_text.clear();
  ns_to_s.clear();
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == U' ') continue;
    ns_to_s.push_back(i);
    ns_text.push_back(text[i]);
  }
}

std::vector<char32_t> decode(std::string_view s) {
  std::vector<char32_t> out;
  text::utf8_decode_append(s, out);
  return out;
}

}  // namespace

FinalText get_final_text_span(std::string_view pred_text, std::string_view orig_text, bool do_lower_case) {
  const text::BasicTokenizer tokenizer(do_lower_case);
  std::string tok_text_u8;
  for (const auto& t : tokenizer.tokenize(orig_text)) {
    if (!tok_text_u8.empty()) tok_text_u8 += ' ';
    tok_text_u8 += t;
  }
  const std::vector<char32_t> tok_text = decode(tok_text_u8);
  const std::vector<char32_t> pred = decode(pred_text);
  const std::vector<char32_t> orig = decode(orig_text);
  const FinalText whole{std::string(orig_text), 0, static_cast<int64_t>(orig.size())};

  // str.find on code points (the empty string is found at 0).
  auto found = std::search(tok_text.begin(), tok_text.end(), pred.begin(), pred.end());
  if (found == tok_text.end() && !pred.empty()) return whole;
  const int64_t start_position = found - tok_text.begin();
  const int64_t end_position = start_position + static_cast<int64_t>(pred.size()) - 1;

  std::vector<char32_t> orig_ns, tok_ns;
  std::vector<size_t> orig_ns_to_s, tok_ns_to_s;
  strip_spaces(orig, orig_ns, orig_ns_to_s);
  strip_spaces(tok_text, tok_ns, tok_ns_to_s);
  if (orig_ns.size() != tok_ns.size()) return whole;

  // tok_s_to_ns: position in tok_text -> position without spaces (only for non-space characters).
  std::vector<int64_t> tok_s_to_ns(tok_text.size(), -1);
  for (size_t i = 0; i < tok_ns_to_s.size(); ++i) tok_s_to_ns[tok_ns_to_s[i]] = static_cast<int64_t>(i);
  auto map_position = [&](int64_t pos) -> int64_t {
    if (pos < 0 || pos >= static_cast<int64_t>(tok_s_to_ns.size()) || tok_s_to_ns[pos] < 0) return -1;
    const int64_t ns = tok_s_to_ns[pos];
    if (ns >= static_cast<int64_t>(orig_ns_to_s.size())) return -1;
    return static_cast<int64_t>(orig_ns_to_s[ns]);
  };
  const int64_t orig_start_position = map_position(start_position);
  if (orig_start_position < 0) return whole;
  const int64_t orig_end_position = map_position(end_position);
  if (orig_end_position < 0) return whole;

  FinalText out{std::string(), orig_start_position, orig_end_position + 1};
  for (int64_t i = orig_start_position; i <= orig_end_position; ++i) text::utf8_append(out.text, orig[i]);
  return out;
}

std::string get_final_text(std::string_view pred_text, std::string_view orig_text, bool do_lower_case) {
  return get_final_text_span(pred_text, orig_text, do_lower_case).text;
}

namespace {

struct PrelimPrediction {
  size_t feature_index;  // index into this example's features
  int32_t start_index;
  int32_t end_index;
  double start_logit;
  double end_logit;
};

// The reference's de-tokenizing of a predicted word-piece span: join, drop " ##" then "##", then collapse
// whitespace (" ".join(text.strip().split())).
std::string detokenize(const std::vector<std::string>& tokens, int32_t start, int32_t end) {
  std::string joined;
  for (int32_t i = start; i <= end; ++i) {
    if (i > start) joined += ' ';
    joined += tokens[i];
  }
  auto replace_all = [](std::string& s, const std::string& from) {
    std::string out;
    size_t pos = 0;
    for (;;) {
      const size_t hit = s.find(from, pos);
      if (hit == std::string::npos) break;
      out.append(s, pos, hit - pos);
      pos = hit + from.size();
    }
    out.append(s, pos, std::string::npos);
    s.swap(out);
  };
  replace_all(joined, " ##");
  replace_all(joined, "##");
  return detail::python_split_join(joined);
}

}  // namespace

SquadPredictions compute_predictions(const std::vector<SquadExample>& examples,
                                     const std::vector<SquadFeature>& features,
                                     const std::vector<std::vector<float>>& start_logits,
                                     const std::vector<std::vector<float>>& end_logits,
                                     const SquadPredictOptions& options) {
  BERTRAIN_CHECK(start_logits.size() == features.size() && end_logits.size() == features.size(),
                 "SQuAD predictions: expected start and end logits for each of the ", features.size(),
                 " features, got ", start_logits.size(), " and ", end_logits.size());
  BERTRAIN_CHECK(options.n_best_size >= 1, "n_best_size must be >= 1, got ", options.n_best_size);
  BERTRAIN_CHECK(options.max_answer_length >= 1, "max_answer_length must be >= 1, got ", options.max_answer_length);
  std::vector<std::vector<size_t>> example_to_features(examples.size());
  for (size_t i = 0; i < features.size(); ++i) {
    const SquadFeature& f = features[i];
    BERTRAIN_CHECK(f.example_index >= 0 && static_cast<size_t>(f.example_index) < examples.size(),
                   "SQuAD predictions: feature ", i, " names example ", f.example_index, " of ", examples.size());
    BERTRAIN_CHECK(static_cast<int32_t>(f.tokens.size()) == f.num_tokens() && !f.tokens.empty(),
                   "SQuAD predictions: feature ", i, " has no tokens (features for predictions must be made with ",
                   "is_training = false)");
    BERTRAIN_CHECK(start_logits[i].size() >= f.tokens.size() && end_logits[i].size() >= f.tokens.size(),
                   "SQuAD predictions: feature ", i, " has ", f.tokens.size(), " tokens but ", start_logits[i].size(),
                   " start and ", end_logits[i].size(), " end logits");
    example_to_features[f.example_index].push_back(i);
  }
  const bool v2 = options.version_2_with_negative;

  SquadPredictions out;
  out.version_2_with_negative = v2;
  for (size_t example_index = 0; example_index < examples.size(); ++example_index) {
    const SquadExample& example = examples[example_index];
    const std::vector<size_t>& feats = example_to_features[example_index];
    std::vector<PrelimPrediction> prelim;
    double score_null = 1000000;  // large and positive, as the reference
    size_t min_null_feature_index = 0;
    double null_start_logit = 0, null_end_logit = 0;
    for (size_t fi = 0; fi < feats.size(); ++fi) {
      const SquadFeature& f = features[feats[fi]];
      const std::vector<float>& sl = start_logits[feats[fi]];
      const std::vector<float>& el = end_logits[feats[fi]];
      const std::vector<int32_t> start_indexes = get_best_indexes(sl, options.n_best_size);
      const std::vector<int32_t> end_indexes = get_best_indexes(el, options.n_best_size);
      if (v2) {
        const double feature_null_score = static_cast<double>(sl[0]) + static_cast<double>(el[0]);
        if (feature_null_score < score_null) {
          score_null = feature_null_score;
          min_null_feature_index = fi;
          null_start_logit = sl[0];
          null_end_logit = el[0];
        }
      }
      const int32_t n = f.num_tokens();
      for (int32_t s : start_indexes) {
        for (int32_t e : end_indexes) {
          if (s >= n || e >= n) continue;
          if (f.token_to_orig_map[s] < 0 || f.token_to_orig_map[e] < 0) continue;
          if (!f.token_is_max_context[s]) continue;
          if (e < s) continue;
          if (e - s + 1 > options.max_answer_length) continue;
          prelim.push_back({fi, s, e, static_cast<double>(sl[s]), static_cast<double>(el[e])});
        }
      }
    }
    if (v2) prelim.push_back({min_null_feature_index, 0, 0, null_start_logit, null_end_logit});
    std::stable_sort(prelim.begin(), prelim.end(), [](const PrelimPrediction& a, const PrelimPrediction& b) {
      return a.start_logit + a.end_logit > b.start_logit + b.end_logit;
    });

    std::vector<SquadNbestEntry> nbest;
    std::vector<std::string> seen;
    auto is_seen = [&](const std::string& t) { return std::find(seen.begin(), seen.end(), t) != seen.end(); };
    for (const PrelimPrediction& pred : prelim) {
      if (static_cast<int>(nbest.size()) >= options.n_best_size) break;
      const SquadFeature& f = features[feats[pred.feature_index]];
      std::string final_text;
      int32_t orig_doc_start = -1, orig_doc_end = -1;
      int64_t text_begin = -1, text_end = -1;
      if (pred.start_index > 0) {  // a non-null prediction
        const std::string tok_text = detokenize(f.tokens, pred.start_index, pred.end_index);
        orig_doc_start = f.token_to_orig_map[pred.start_index];
        orig_doc_end = f.token_to_orig_map[pred.end_index];
        std::string orig_text;
        for (int32_t w = orig_doc_start; w <= orig_doc_end; ++w) {
          // Words split apart only by the CJK rule were adjacent in the paragraph: no space between them.
          if (w > orig_doc_start && !(example.doc_token_glued && (*example.doc_token_glued)[w])) orig_text += ' ';
          orig_text += (*example.doc_tokens)[w];
        }
        FinalText ft = get_final_text_span(tok_text, orig_text, options.do_lower_case);
        final_text = std::move(ft.text);
        text_begin = ft.begin;
        text_end = ft.end;
        if (is_seen(final_text)) continue;
        seen.push_back(final_text);
      } else {
        final_text.clear();
        if (!is_seen(final_text)) seen.push_back(final_text);
      }
      nbest.push_back({final_text, 0.0, pred.start_logit, pred.end_logit, orig_doc_start, orig_doc_end, text_begin,
                       text_end});
    }
    if (v2 && !is_seen("")) nbest.push_back({"", 0.0, null_start_logit, null_end_logit});
    // In very rare edge cases there is no valid prediction: the reference adds a nonce "empty" entry. With v2
    // the list always holds "", and the reference would then crash looking for a non-null entry; insert the
    // nonce first in that case (as Hugging Face's port does).
    if (nbest.empty()) nbest.push_back({"empty", 0.0, 0.0, 0.0});
    if (v2 && std::none_of(nbest.begin(), nbest.end(), [](const SquadNbestEntry& e) { return !e.text.empty(); }))
      nbest.insert(nbest.begin(), {"empty", 0.0, 0.0, 0.0});

    std::vector<double> total_scores;
    const SquadNbestEntry* best_non_null = nullptr;
    for (const auto& entry : nbest) {
      total_scores.push_back(entry.start_logit + entry.end_logit);
      if (!best_non_null && !entry.text.empty()) best_non_null = &entry;
    }
    const std::vector<double> probs = compute_softmax(total_scores);
    for (size_t i = 0; i < nbest.size(); ++i) nbest[i].probability = probs[i];

    out.qas_ids.push_back(example.qas_id);
    if (!v2) {
      out.predictions.push_back(nbest[0].text);
    } else {
      const double score_diff = score_null - best_non_null->start_logit - best_non_null->end_logit;
      out.null_odds.push_back(score_diff);
      out.predictions.push_back(score_diff > options.null_score_diff_threshold ? std::string()
                                                                                : best_non_null->text);
    }
    out.nbest.push_back(std::move(nbest));
  }
  return out;
}

namespace {
// json.dumps(obj, indent=4) + "\n" with Python's default ensure_ascii=True.
std::string dump_python(const ordered_json& j) { return j.dump(4, ' ', true) + "\n"; }
}  // namespace

std::string SquadPredictions::predictions_json() const {
  ordered_json j = ordered_json::object();
  for (size_t i = 0; i < qas_ids.size(); ++i) j[qas_ids[i]] = predictions[i];
  return dump_python(j);
}

std::string SquadPredictions::nbest_json() const {
  ordered_json j = ordered_json::object();
  for (size_t i = 0; i < qas_ids.size(); ++i) {
    ordered_json list = ordered_json::array();
    for (const auto& e : nbest[i]) {
      ordered_json o = ordered_json::object();
      o["text"] = e.text;
      o["probability"] = e.probability;
      o["start_logit"] = e.start_logit;
      o["end_logit"] = e.end_logit;
      list.push_back(std::move(o));
    }
    j[qas_ids[i]] = std::move(list);
  }
  return dump_python(j);
}

std::string SquadPredictions::null_odds_json() const {
  ordered_json j = ordered_json::object();
  for (size_t i = 0; i < qas_ids.size() && i < null_odds.size(); ++i) j[qas_ids[i]] = null_odds[i];
  return dump_python(j);
}

SquadPredictions write_predictions(const std::vector<SquadExample>& examples,
                                   const std::vector<SquadFeature>& features,
                                   const std::vector<std::vector<float>>& start_logits,
                                   const std::vector<std::vector<float>>& end_logits,
                                   const SquadPredictOptions& options, const std::string& output_dir) {
  SquadPredictions p = compute_predictions(examples, features, start_logits, end_logits, options);
  std::error_code ec;
  std::filesystem::create_directories(output_dir, ec);
  BERTRAIN_CHECK(!ec, "cannot create output directory '", output_dir, "': ", ec.message());
  const std::filesystem::path dir(output_dir);
  write_text_atomic((dir / "predictions.json").string(), p.predictions_json());
  write_text_atomic((dir / "nbest_predictions.json").string(), p.nbest_json());
  if (options.version_2_with_negative) write_text_atomic((dir / "null_odds.json").string(), p.null_odds_json());
  return p;
}

}  // namespace bertrain::squad
