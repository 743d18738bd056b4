// cmrc2018.h: the official CMRC 2018 evaluation (ymcui/cmrc2018 baseline/cmrc2018_evaluate.py, version v6 at
// commit c0eb1b6: "compatible for both original and SQuAD-style CMRC 2018 datasets, support python3"), the latest
// version of the script: mixed segmentation (each CJK character U+4E00-U+9FA5 and each listed punctuation mark
// a segment, the runs between them split by NLTK's word tokenizer), F1 from the longest common substring of
// segments, EM after removing the listed punctuation, the maximum over the gold answers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bertrain/tasks/squad/evaluate.h"

namespace bertrain::squad {

/// The script's mixed_segmentation(in_str, rm_punc): Python str.lower() and strip(), then character by
/// character: with rm_punc the script's sp_char marks (- : _ * ^ / \ ~ ` + = ， 。 ： ？ ！ “ ” ； ’ 《 》 · 、
/// 「 」 （ ） － ～ 『 』; its "……" entry is two characters and never matches one) are dropped; a character in
/// [U+4E00, U+9FA5] or in sp_char is a segment of its own; the runs between are split by
/// nltk_word_tokenize. Throws bertrain::Error if `s` is not well-formed UTF-8.
std::vector<std::string> cmrc_mixed_segmentation(std::string_view s, bool rm_punc);

/// The script's remove_punctuation: lower(), strip(), every sp_char character removed.
std::string cmrc_remove_punctuation(std::string_view s);

/// NLTK's word_tokenize as the script calls it on a run of non-CJK text: the NLTKWordTokenizer (Treebank)
/// rules: starting quotes (" -> ``), final period, ':' and ',' before a non-digit, "...", ; @ # $ % &, ? !,
/// "' " , *, brackets and parentheses, "--", ending quotes (" -> ''), the clitics 's 'm 'd 'll 're 've n't and
/// cannot / gimme / gonna / gotta / lemme / wanna / 'tis / 'twas, then a whitespace split.
/// Deviation: punkt sentence splitting (word_tokenize's first step) is not done; it changes the result only
/// for a run holding two English sentences, where a period inside the run would be split off.
std::vector<std::string> nltk_word_tokenize(std::string_view s);

/// The script's calc_f1_score for one prediction: for each gold answer, lcs = the longest common contiguous
/// run of segments (find_lcs) of mixed_segmentation(answer, True) and of the prediction; 0 when lcs is 0, else
/// 2PR/(P+R) with P = lcs / prediction segments and R = lcs / answer segments; the maximum over answers
/// (a fraction). Throws bertrain::Error when `answers` is empty (the script's max() of an empty list fails).
double cmrc_f1_score(const std::vector<std::string>& answers, std::string_view prediction);

/// The script's calc_em_score: 1 when remove_punctuation(prediction) equals remove_punctuation of an answer.
int cmrc_em_score(const std::vector<std::string>& answers, std::string_view prediction);

/// The script's evaluate() and printout.
struct CmrcEval {
  double f1 = 0, em = 0;  ///< percentages over all questions (an unanswered one counts 0)
  int64_t total = 0, skip = 0;
  std::vector<std::string> unanswered;  ///< ids without a prediction, in file order
  /// What the script prints: json.dumps(OrderedDict) of AVERAGE, F1, EM (strings "%.3f"), TOTAL, SKIP and
  /// FILE (`prediction_file`), no newline.
  std::string to_json(const std::string& prediction_file) const;
};

/// Scores predictions against a SQuAD-format data file read with read_squad_gold (ids as written, answers
/// in file order). Throws bertrain::Error when there are no questions, or a predicted question has no answer.
CmrcEval evaluate_cmrc2018(const SquadGold& gold, const std::unordered_map<std::string, std::string>& predictions);

}  // namespace bertrain::squad
