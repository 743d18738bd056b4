// squad_evaluate.cpp: the official SQuAD v1.1 and v2.0 metrics (evaluate-v1.1.py, evaluate-v2.0.py).
#include "bertrain/tasks/squad/evaluate.h"

#include <utf8proc.h>

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "bertrain/core/error.h"
#include "bertrain/tasks/squad/squad.h"
#include "bertrain/text/utf8.h"
#include "tasks/squad/json.h"
#include "bertrain/text/unicode.h"

namespace bertrain::squad {

using nlohmann::json;
using ::bertrain::detail::str_cat;
using nlohmann::ordered_json;

namespace {

// Python 3 re's Unicode \w: str.isalnum() (letters L*, numbers N*) or '_'.
bool is_word_char(char32_t c) {
  if (c < 128) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  const int cat = utf8proc_get_property(static_cast<utf8proc_int32_t>(c))->category;
  return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
         (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
}

bool is_ascii_punctuation(char32_t c) {
  return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
}

// normalize_answer(s).split(): the normalized tokens.
std::vector<std::string> normalized_tokens(std::string_view s) {
  std::vector<char32_t> cps, lowered;
  text::utf8_decode_append(s, cps);
  text::unicode::python_lower_append(cps.data(), cps.size(), lowered);
  // remove_punc
  std::vector<char32_t> text;
  text.reserve(lowered.size());
  for (char32_t c : lowered)
    if (!is_ascii_punctuation(c)) text.push_back(c);
  // remove_articles: \b(a|an|the)\b matches exactly a maximal run of word characters equal to an article
  // (\b before needs a non-word character or the start, \b after a non-word character or the end).
  std::vector<char32_t> no_articles;
  no_articles.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (!is_word_char(text[i])) {
      no_articles.push_back(text[i++]);
      continue;
    }
    size_t j = i;
    while (j < text.size() && is_word_char(text[j])) ++j;
    const std::u32string_view run(text.data() + i, j - i);
    if (run == U"a" || run == U"an" || run == U"the") no_articles.push_back(U' ');
    else no_articles.insert(no_articles.end(), text.begin() + i, text.begin() + j);
    i = j;
  }
  // white_space_fix: str.split() on Python whitespace.
  std::vector<std::string> tokens;
  bool in_word = false;
  for (char32_t c : no_articles) {
    if (text::unicode::is_python_space(c)) {
      in_word = false;
      continue;
    }
    if (!in_word) tokens.emplace_back();
    in_word = true;
    text::utf8_append(tokens.back(), c);
  }
  return tokens;
}

// sum((Counter(a) & Counter(b)).values())
int64_t num_common(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::unordered_map<std::string_view, int64_t> count;
  for (const auto& t : a) ++count[t];
  int64_t same = 0;
  for (const auto& t : b) {
    auto it = count.find(t);
    if (it != count.end() && it->second > 0) {
      --it->second;
      ++same;
    }
  }
  return same;
}

double token_f1(int64_t num_same, size_t num_pred, size_t num_gold) {
  const double precision = 1.0 * static_cast<double>(num_same) / static_cast<double>(num_pred);
  const double recall = 1.0 * static_cast<double>(num_same) / static_cast<double>(num_gold);
  return (2 * precision * recall) / (precision + recall);
}

std::string join(const std::vector<std::string>& t) {
  std::string s;
  for (size_t i = 0; i < t.size(); ++i) {
    if (i) s += ' ';
    s += t[i];
  }
  return s;
}

// Python's repr of a float, as json.dumps writes it (nlohmann writes the same shortest round-trip digits).
std::string py_float(double v) { return json(v).dump(); }

}  // namespace

std::string normalize_answer(std::string_view s) { return join(normalized_tokens(s)); }

int exact_match_score(std::string_view prediction, std::string_view ground_truth) {
  return normalize_answer(prediction) == normalize_answer(ground_truth) ? 1 : 0;
}

double f1_score_v1(std::string_view prediction, std::string_view ground_truth) {
  const auto pred = normalized_tokens(prediction);
  const auto gold = normalized_tokens(ground_truth);
  const int64_t num_same = num_common(pred, gold);
  if (num_same == 0) return 0;
  return token_f1(num_same, pred.size(), gold.size());
}

double compute_f1_v2(std::string_view gold_text, std::string_view prediction) {
  // get_tokens: [] for an empty string, else normalize_answer(s).split().
  const auto gold = gold_text.empty() ? std::vector<std::string>{} : normalized_tokens(gold_text);
  const auto pred = prediction.empty() ? std::vector<std::string>{} : normalized_tokens(prediction);
  if (gold.empty() || pred.empty()) return gold == pred ? 1 : 0;
  const int64_t num_same = num_common(gold, pred);
  if (num_same == 0) return 0;
  return token_f1(num_same, pred.size(), gold.size());
}

// ---------------------------------------------------------------------------------------------------------

int SquadGold::major_version() const {
  if (version == "1.1" || version == "v1.1" || version == "1.0" || version == "v1.0") return 1;
  if (version == "v2.0" || version == "2.0") return 2;
  throw Error("SQuAD data file: unknown \"version\" '" + version + "' (expected \"1.1\" or \"v2.0\")");
}

SquadGold parse_squad_gold(std::string_view json_text, const std::string& source) {
  using namespace detail;
  const json root = parse_json(json_text, source);
  require_object(root, source, "top level");
  SquadGold g;
  if (auto it = root.find("version"); it != root.end() && it->is_string()) g.version = it->get<std::string>();
  const json& data = array_field(root, "data", source, "top level");
  for (size_t a = 0; a < data.size(); ++a) {
    const json& paragraphs = array_field(data[a], "paragraphs", source, str_cat("article ", a));
    for (size_t p = 0; p < paragraphs.size(); ++p) {
      const std::string par_where = str_cat("article ", a, ", paragraph ", p);
      const json& qas = array_field(paragraphs[p], "qas", source, par_where);
      for (size_t q = 0; q < qas.size(); ++q) {
        SquadGoldQuestion gq;
        gq.id = string_field(qas[q], "id", source, str_cat(par_where, ", question ", q));
        const std::string id_where = str_cat("question id '", gq.id, "'");
        const json& answers = array_field(qas[q], "answers", source, id_where);
        for (size_t k = 0; k < answers.size(); ++k)
          gq.answers.push_back(string_field(answers[k], "text", source, str_cat(id_where, ", answer ", k)));
        g.questions.push_back(std::move(gq));
      }
    }
  }
  return g;
}

SquadGold read_squad_gold(const std::string& data_file) {
  return parse_squad_gold(detail::read_text_file(data_file, "SQuAD data file"), data_file);
}

std::unordered_map<std::string, std::string> parse_squad_predictions(std::string_view json_text,
                                                                     const std::string& source) {
  const json root = detail::parse_json(json_text, source);
  detail::require_object(root, source, "top level");
  std::unordered_map<std::string, std::string> preds;
  for (auto it = root.begin(); it != root.end(); ++it) {
    BERTRAIN_CHECK(it->is_string(), source, ": the prediction for '", it.key(), "' should be a string, got ",
                   it->dump());
    preds[it.key()] = it->get<std::string>();
  }
  return preds;
}

std::unordered_map<std::string, std::string> read_squad_predictions(const std::string& prediction_file) {
  return parse_squad_predictions(detail::read_text_file(prediction_file, "prediction file"), prediction_file);
}

std::vector<std::pair<std::string, double>> parse_squad_na_probs(std::string_view json_text, const std::string& source) {
  const ordered_json root = detail::parse_json<ordered_json>(json_text, source);
  BERTRAIN_CHECK(root.is_object(), source, ": expected a JSON object of question id -> number, got ", root.type_name());
  std::vector<std::pair<std::string, double>> out;
  for (auto it = root.begin(); it != root.end(); ++it) {
    BERTRAIN_CHECK(it->is_number(), source, ": the value for '", it.key(), "' should be a number, got ", it->dump());
    out.emplace_back(it.key(), it->get<double>());
  }
  return out;
}

std::vector<std::pair<std::string, double>> read_squad_na_probs(const std::string& na_prob_file) {
  return parse_squad_na_probs(detail::read_text_file(na_prob_file, "na_prob file"), na_prob_file);
}

// ---------------------------------------------------------------------------------------------------------

SquadEvalV1 evaluate_v1(const SquadGold& gold, const std::unordered_map<std::string, std::string>& predictions) {
  SquadEvalV1 r;
  int64_t exact_match = 0;
  double f1 = 0;
  for (const auto& q : gold.questions) {
    ++r.total;
    auto it = predictions.find(q.id);
    if (it == predictions.end()) {
      r.unanswered.push_back(q.id);
      continue;
    }
    // metric_max_over_ground_truths; max() of an empty list raises in Python.
    BERTRAIN_CHECK(!q.answers.empty(), "SQuAD v1.1 evaluation: question '", q.id, "' has no gold answer");
    int em = 0;
    double best_f1 = 0;
    for (size_t k = 0; k < q.answers.size(); ++k) {
      const int e = exact_match_score(it->second, q.answers[k]);
      const double f = f1_score_v1(it->second, q.answers[k]);
      em = k == 0 ? e : std::max(em, e);
      best_f1 = k == 0 ? f : std::max(best_f1, f);
    }
    exact_match += em;
    f1 += best_f1;
  }
  BERTRAIN_CHECK(r.total > 0, "SQuAD v1.1 evaluation: the data file has no questions");
  r.exact_match = 100.0 * static_cast<double>(exact_match) / static_cast<double>(r.total);
  r.f1 = 100.0 * f1 / static_cast<double>(r.total);
  return r;
}

std::string SquadEvalV1::to_json() const {
  return "{\"exact_match\": " + py_float(exact_match) + ", \"f1\": " + py_float(f1) + "}";
}

std::pair<double, double> find_best_thresh(const std::unordered_map<std::string, std::string>& predictions,
                                           const std::unordered_map<std::string, double>& scores,
                                           const std::vector<std::pair<std::string, double>>& na_probs,
                                           const std::unordered_map<std::string, bool>& qid_to_has_ans) {
  int64_t num_no_ans = 0;
  for (const auto& [qid, has] : qid_to_has_ans)
    if (!has) ++num_no_ans;
  double cur_score = static_cast<double>(num_no_ans);
  double best_score = cur_score;
  double best_thresh = 0.0;
  std::vector<size_t> order(na_probs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return na_probs[a].second < na_probs[b].second; });
  for (size_t i : order) {
    const std::string& qid = na_probs[i].first;
    auto s = scores.find(qid);
    if (s == scores.end()) continue;
    double diff;
    auto h = qid_to_has_ans.find(qid);
    BERTRAIN_CHECK(h != qid_to_has_ans.end(), "find_best_thresh: question '", qid, "' is not in the data file");
    if (h->second) {
      diff = s->second;
    } else {
      auto p = predictions.find(qid);
      diff = (p != predictions.end() && !p->second.empty()) ? -1 : 0;
    }
    cur_score += diff;
    if (cur_score > best_score) {
      best_score = cur_score;
      best_thresh = na_probs[i].second;
    }
  }
  BERTRAIN_CHECK(!scores.empty(), "find_best_thresh: no scored questions");
  return {100.0 * best_score / static_cast<double>(scores.size()), best_thresh};
}

namespace {

struct RawScores {
  std::vector<std::string> qids;  // dataset order, first occurrence of each id
  std::unordered_map<std::string, double> exact, f1;
  std::unordered_map<std::string, bool> has_ans;
};

// make_qid_to_has_ans + get_raw_scores of evaluate-v2.0.py.
RawScores raw_scores_v2(const SquadGold& gold, const std::unordered_map<std::string, std::string>& predictions) {
  RawScores r;
  for (const auto& q : gold.questions) {
    if (!r.has_ans.count(q.id)) r.qids.push_back(q.id);
    r.has_ans[q.id] = !q.answers.empty();
    std::vector<std::string_view> gold_answers;
    for (const auto& a : q.answers)
      if (!normalize_answer(a).empty()) gold_answers.push_back(a);
    if (gold_answers.empty()) gold_answers.push_back("");  // unanswerable: only "" is right
    auto p = predictions.find(q.id);
    BERTRAIN_CHECK(p != predictions.end(), "SQuAD v2.0 evaluation: missing prediction for question '", q.id,
                   "' (the official script fails there)");
    double em = 0, f1 = 0;
    for (size_t k = 0; k < gold_answers.size(); ++k) {
      const double e = exact_match_score(gold_answers[k], p->second);
      const double f = compute_f1_v2(gold_answers[k], p->second);
      em = k == 0 ? e : std::max(em, e);
      f1 = k == 0 ? f : std::max(f1, f);
    }
    r.exact[q.id] = em;
    r.f1[q.id] = f1;
  }
  return r;
}

}  // namespace

SquadEvalV2 evaluate_v2(const SquadGold& gold, const std::unordered_map<std::string, std::string>& predictions,
                        const std::vector<std::pair<std::string, double>>* na_probs, double na_prob_thresh) {
  const RawScores raw = raw_scores_v2(gold, predictions);
  BERTRAIN_CHECK(!raw.qids.empty(), "SQuAD v2.0 evaluation: the data file has no questions");
  std::unordered_map<std::string, double> na;
  if (na_probs)
    for (const auto& [qid, v] : *na_probs) na[qid] = v;
  // apply_no_ans_threshold
  std::unordered_map<std::string, double> exact_thresh, f1_thresh;
  for (const auto& qid : raw.qids) {
    double p = 0.0;
    if (na_probs) {
      auto it = na.find(qid);
      BERTRAIN_CHECK(it != na.end(), "SQuAD v2.0 evaluation: the na_prob file has no value for question '", qid, "'");
      p = it->second;
    }
    if (p > na_prob_thresh) {
      exact_thresh[qid] = f1_thresh[qid] = raw.has_ans.at(qid) ? 0.0 : 1.0;
    } else {
      exact_thresh[qid] = raw.exact.at(qid);
      f1_thresh[qid] = raw.f1.at(qid);
    }
  }
  // make_eval_dict: sums in dataset order.
  auto eval = [&](bool filter, bool want_has, double& ex, double& f1) -> int64_t {
    double se = 0, sf = 0;
    int64_t total = 0;
    for (const auto& qid : raw.qids) {
      if (filter && raw.has_ans.at(qid) != want_has) continue;
      se += exact_thresh[qid];
      sf += f1_thresh[qid];
      ++total;
    }
    if (total > 0) {
      ex = 100.0 * se / static_cast<double>(total);
      f1 = 100.0 * sf / static_cast<double>(total);
    }
    return total;
  };
  SquadEvalV2 r;
  r.total = eval(false, false, r.exact, r.f1);
  double e = 0, f = 0;
  if ((r.has_ans_total = eval(true, true, e, f)) > 0) {
    r.has_ans_exact = e;
    r.has_ans_f1 = f;
  }
  if ((r.no_ans_total = eval(true, false, e, f)) > 0) {
    r.no_ans_exact = e;
    r.no_ans_f1 = f;
  }
  if (na_probs) {
    SquadBestThresh b;
    std::tie(b.best_exact, b.best_exact_thresh) = find_best_thresh(predictions, raw.exact, *na_probs, raw.has_ans);
    std::tie(b.best_f1, b.best_f1_thresh) = find_best_thresh(predictions, raw.f1, *na_probs, raw.has_ans);
    r.best = b;
  }
  return r;
}

std::string SquadEvalV2::to_json() const {
  ordered_json j = ordered_json::object();
  j["exact"] = exact;
  j["f1"] = f1;
  j["total"] = total;
  if (has_ans_exact) {
    j["HasAns_exact"] = *has_ans_exact;
    j["HasAns_f1"] = *has_ans_f1;
    j["HasAns_total"] = has_ans_total;
  }
  if (no_ans_exact) {
    j["NoAns_exact"] = *no_ans_exact;
    j["NoAns_f1"] = *no_ans_f1;
    j["NoAns_total"] = no_ans_total;
  }
  if (best) {
    j["best_exact"] = best->best_exact;
    j["best_exact_thresh"] = best->best_exact_thresh;
    j["best_f1"] = best->best_f1;
    j["best_f1_thresh"] = best->best_f1_thresh;
  }
  return j.dump(2, ' ', true);
}

SquadBestThresh find_best_null_threshold(const SquadGold& gold, const SquadPredictions& predictions) {
  BERTRAIN_CHECK(predictions.version_2_with_negative && predictions.null_odds.size() == predictions.qas_ids.size(),
                 "find_best_null_threshold: needs predictions made with version_2_with_negative");
  std::unordered_map<std::string, std::string> preds;
  std::vector<std::pair<std::string, double>> na_probs;
  for (size_t i = 0; i < predictions.qas_ids.size(); ++i) {
    preds[predictions.qas_ids[i]] = predictions.predictions[i];
    na_probs.emplace_back(predictions.qas_ids[i], predictions.null_odds[i]);
  }
  const SquadEvalV2 r = evaluate_v2(gold, preds, &na_probs);
  return *r.best;
}

std::string squad_evaluate_json(const SquadGold& gold, const std::unordered_map<std::string, std::string>& predictions,
                                const std::vector<std::pair<std::string, double>>* na_probs, double na_prob_thresh) {
  if (gold.major_version() == 1) {
    BERTRAIN_CHECK(na_probs == nullptr, "SQuAD evaluation: a na_prob file applies to v2.0 data only, the data file is "
                                        "version ",
                   gold.version);
    return evaluate_v1(gold, predictions).to_json();
  }
  return evaluate_v2(gold, predictions, na_probs, na_prob_thresh).to_json();
}

}  // namespace bertrain::squad
