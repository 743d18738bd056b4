// squad.cpp: SQuAD reading (read_squad_examples), features (convert_examples_to_features, doc_stride windows,
// max context) and batches, following google-research/bert run_squad.py.
#include "bertrain/tasks/squad/squad.h"

#include <algorithm>
#include <cstdlib>
#include <unordered_map>

#include "bertrain/core/error.h"
#include "bertrain/text/utf8.h"
#include "tasks/squad/json.h"
#include "bertrain/text/unicode.h"

namespace bertrain::squad {

using nlohmann::json;
using ::bertrain::detail::str_cat;

namespace {

// The reference's is_whitespace in read_squad_examples (not the tokenizer's: U+00A0 is not whitespace here).
bool is_squad_whitespace(char32_t c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == 0x202F; }

// The code point offset of the occurrence of `needle` in `hay` whose start is nearest to `near` (the earlier
// one on a tie), or -1.
int64_t nearest_occurrence(std::string_view hay, std::string_view needle, int64_t near) {
  std::vector<char32_t> h, n;
  text::utf8_decode_append(hay, h);
  text::utf8_decode_append(needle, n);
  int64_t best = -1;
  for (size_t i = 0; n.size() <= h.size() && i + n.size() <= h.size(); ++i) {
    if (!std::equal(n.begin(), n.end(), h.begin() + static_cast<std::ptrdiff_t>(i))) continue;
    const int64_t at = static_cast<int64_t>(i);
    if (best < 0 || std::abs(at - near) < std::abs(best - near)) best = at;
  }
  return best;
}

}  // namespace

void squad_split_paragraph(std::string_view paragraph_text, std::vector<std::string>& doc_tokens,
                           std::vector<int32_t>& char_to_word_offset, std::vector<uint8_t>* glued) {
  std::vector<char32_t> cps;
  text::utf8_decode_append(paragraph_text, cps);
  doc_tokens.clear();
  char_to_word_offset.clear();
  char_to_word_offset.reserve(cps.size());
  if (glued) glued->clear();
  bool prev_is_whitespace = true, prev_is_cjk = false;
  for (char32_t c : cps) {
    if (is_squad_whitespace(c)) {
      prev_is_whitespace = true;
    } else {
      const bool cjk = text::unicode::flags(c) & text::unicode::kChinese;
      if (prev_is_whitespace || cjk || prev_is_cjk) {
        if (glued) glued->push_back(!prev_is_whitespace && !doc_tokens.empty());
        doc_tokens.emplace_back();
      }
      text::utf8_append(doc_tokens.back(), c);
      prev_is_whitespace = false;
      prev_is_cjk = cjk;
    }
    char_to_word_offset.push_back(static_cast<int32_t>(doc_tokens.size()) - 1);
  }
}

SquadReadResult parse_squad_examples(std::string_view json_text, bool is_training, bool version_2_with_negative,
                                     const std::string& source) {
  using namespace detail;
  const json root = parse_json(json_text, source);
  require_object(root, source, "top level");
  SquadReadResult r;
  if (auto it = root.find("version"); it != root.end() && it->is_string()) r.version = it->get<std::string>();
  const json& data = array_field(root, "data", source, "top level");
  std::vector<int32_t> char_to_word_offset;
  for (size_t a = 0; a < data.size(); ++a) {
    const std::string art_where = str_cat("article ", a);
    const json& paragraphs = array_field(data[a], "paragraphs", source, art_where);
    for (size_t p = 0; p < paragraphs.size(); ++p) {
      const std::string par_where = str_cat("article ", a, ", paragraph ", p);
      const std::string& context = string_field(paragraphs[p], "context", source, par_where);
      auto doc_tokens = std::make_shared<std::vector<std::string>>();
      auto glued = std::make_shared<std::vector<uint8_t>>();
      squad_split_paragraph(context, *doc_tokens, char_to_word_offset, glued.get());
      std::shared_ptr<const std::vector<uint8_t>> shared_glued;
      if (std::find(glued->begin(), glued->end(), 1) != glued->end()) shared_glued = glued;
      const int64_t context_len = static_cast<int64_t>(char_to_word_offset.size());
      std::shared_ptr<const std::vector<std::string>> shared_doc = doc_tokens;
      const json& qas = array_field(paragraphs[p], "qas", source, par_where);
      for (size_t q = 0; q < qas.size(); ++q) {
        ++r.num_questions;
        const std::string q_where = str_cat(par_where, ", question ", q);
        const std::string& qas_id = string_field(qas[q], "id", source, q_where);
        const std::string id_where = str_cat("question id '", qas_id, "'");
        SquadExample ex;
        ex.qas_id = qas_id;
        ex.question_text = string_field(qas[q], "question", source, id_where);
        ex.doc_tokens = shared_doc;
        ex.doc_token_glued = shared_glued;
        // Answers are validated in both modes (a SQuAD answer_start outside its context is bad data), though
        // the reference looks at them only when training.
        const json* answers = nullptr;
        if (auto it = qas[q].find("answers"); it != qas[q].end() || is_training) {
          answers = &array_field(qas[q], "answers", source, id_where);
          for (size_t k = 0; k < answers->size(); ++k) {
            const std::string a_where = str_cat(id_where, ", answer ", k);
            const std::string& text = string_field((*answers)[k], "text", source, a_where);
            const int64_t start = int_field((*answers)[k], "answer_start", source, a_where);
            const int64_t len = static_cast<int64_t>(text::utf8_length(text));
            if (shared_glued) continue;  // CJK paragraphs: answer_start is repaired below (CMRC has -1 too)
            BERTRAIN_CHECK(start >= 0, source, ": ", a_where, ": answer_start ", start, " is negative");
            BERTRAIN_CHECK(start + std::max<int64_t>(len, 1) <= context_len, source, ": ", a_where,
                           ": answer_start ", start, " with a text of ", len,
                           " characters runs past the end of its context (", context_len, " characters)");
          }
        }
        if (is_training) {
          if (version_2_with_negative) ex.is_impossible = bool_field(qas[q], "is_impossible", source, id_where);
          BERTRAIN_CHECK(answers->size() == 1 || ex.is_impossible, source, ": ", id_where,
                         ": for training, each question should have exactly 1 answer, got ", answers->size());
          if (!ex.is_impossible) {
            const json& answer = (*answers)[0];
            ex.orig_answer_text = answer["text"].get<std::string>();
            int64_t answer_offset = answer["answer_start"].get<int64_t>();
            const int64_t answer_length = static_cast<int64_t>(text::utf8_length(ex.orig_answer_text));
            BERTRAIN_CHECK(answer_length > 0, source, ": ", id_where, ": the answer text is empty");
            if (shared_glued) {
              // CMRC 2018 as published: about 2% of answer_starts do not point at their text (some past the end).
              // Take the occurrence of the text nearest to answer_start; none: skip the question, as the
              // reference skips answers it cannot find.
              answer_offset = nearest_occurrence(context, ex.orig_answer_text, answer_offset);
              if (answer_offset < 0) {
                ++r.num_skipped;
                r.skipped_ids.push_back(ex.qas_id);
                continue;
              }
              if (answer_offset != answer["answer_start"].get<int64_t>()) ++r.num_repaired;
            }
            ex.start_position = char_to_word_offset[answer_offset];
            ex.end_position = char_to_word_offset[answer_offset + answer_length - 1];
            // The reference keeps only answers whose text can be recovered from the words of the span. (A
            // start_position of -1, an answer starting in the paragraph's leading whitespace, is never
            // recoverable; Python would slice from the last word there.)
            std::string actual_text;
            for (int32_t w = ex.start_position; ex.start_position >= 0 && w <= ex.end_position; ++w) {
              if (w > ex.start_position && !(shared_glued && (*shared_glued)[w])) actual_text += ' ';
              actual_text += (*doc_tokens)[w];
            }
            const std::string cleaned = detail::python_split_join(ex.orig_answer_text);
            if (ex.start_position < 0 || actual_text.find(cleaned) == std::string::npos) {
              ++r.num_skipped;
              r.skipped_ids.push_back(ex.qas_id);
              continue;
            }
          } else {
            ex.start_position = -1;
            ex.end_position = -1;
            ex.orig_answer_text.clear();
            ++r.num_impossible;
          }
        }
        r.examples.push_back(std::move(ex));
      }
    }
  }
  return r;
}

SquadReadResult read_squad_examples(const std::string& input_file, bool is_training, bool version_2_with_negative) {
  const std::string text = detail::read_text_file(input_file, "SQuAD file");
  return parse_squad_examples(text, is_training, version_2_with_negative, input_file);
}

// ---------------------------------------------------------------------------------------------------------

void SquadFeatureOptions::validate() const {
  BERTRAIN_CHECK(max_query_length >= 0, "max_query_length must be >= 0, got ", max_query_length);
  BERTRAIN_CHECK(max_seq_length > max_query_length + 3, "The max_seq_length (", max_seq_length,
                 ") must be greater than max_query_length (", max_query_length, ") + 3: lower --max_query_length, or "
                 "raise --max_seq_length (at most the model's max_position_embeddings)");
  BERTRAIN_CHECK(doc_stride >= 1, "doc_stride must be >= 1, got ", doc_stride);
}

std::vector<DocSpan> make_doc_spans(int32_t num_doc_tokens, int32_t max_tokens_for_doc, int32_t doc_stride) {
  BERTRAIN_CHECK(max_tokens_for_doc >= 1, "SQuAD windows: max_tokens_for_doc must be >= 1, got ", max_tokens_for_doc);
  BERTRAIN_CHECK(doc_stride >= 1, "SQuAD windows: doc_stride must be >= 1, got ", doc_stride);
  std::vector<DocSpan> spans;
  int32_t start_offset = 0;
  while (start_offset < num_doc_tokens) {
    const int32_t length = std::min(num_doc_tokens - start_offset, max_tokens_for_doc);
    spans.push_back({start_offset, length});
    if (start_offset + length == num_doc_tokens) break;
    start_offset += std::min(length, doc_stride);
  }
  return spans;
}

std::vector<int32_t> max_context_spans(const std::vector<DocSpan>& doc_spans, int32_t num_doc_tokens) {
  std::vector<int32_t> best_span(static_cast<size_t>(std::max(num_doc_tokens, 0)), -1);
  std::vector<double> best_score(best_span.size(), 0.0);
  for (size_t s = 0; s < doc_spans.size(); ++s) {
    const DocSpan& span = doc_spans[s];
    const int32_t end = span.start + span.length - 1;
    for (int32_t position = std::max(span.start, 0); position <= end && position < num_doc_tokens; ++position) {
      const int32_t num_left_context = position - span.start;
      const int32_t num_right_context = end - position;
      const double score = std::min(num_left_context, num_right_context) + 0.01 * span.length;
      if (best_span[position] < 0 || score > best_score[position]) {
        best_score[position] = score;
        best_span[position] = static_cast<int32_t>(s);
      }
    }
  }
  return best_span;
}

namespace {

// Word pieces of one paragraph, kept while consecutive examples share it.
struct TokenizedDoc {
  const std::vector<std::string>* doc = nullptr;
  std::vector<int32_t> tok_to_orig_index;
  std::vector<int32_t> orig_to_tok_index;
  std::vector<std::string> all_doc_tokens;
  std::vector<int32_t> all_doc_ids;
};

// The reference's _improve_answer_span. Word pieces contain no spaces and are never empty, so comparing
// " ".join of two lists is comparing the lists; the only end that can match a start is start + n - 1.
std::pair<int32_t, int32_t> improve_answer_span(const std::vector<std::string>& doc_tokens, int32_t input_start,
                                                int32_t input_end, const std::vector<std::string>& answer_tokens) {
  const int32_t n = static_cast<int32_t>(answer_tokens.size());
  for (int32_t new_start = input_start; new_start <= input_end; ++new_start) {
    const int32_t new_end = new_start + n - 1;
    if (n == 0 || new_end > input_end) continue;
    if (std::equal(answer_tokens.begin(), answer_tokens.end(), doc_tokens.begin() + new_start))
      return {new_start, new_end};
  }
  return {input_start, input_end};
}

}  // namespace

void convert_examples_to_features(const std::vector<SquadExample>& examples, const text::FullTokenizer& tokenizer,
                                  const SquadFeatureOptions& options,
                                  const std::function<void(SquadFeature&&)>& output_fn) {
  options.validate();
  const text::Vocab& vocab = tokenizer.vocab();
  vocab.require_special_tokens({text::Vocab::kCls, text::Vocab::kSep}, "SQuAD features");
  const int32_t cls_id = vocab.id(text::Vocab::kCls), sep_id = vocab.id(text::Vocab::kSep);
  const int32_t T = options.max_seq_length;
  int64_t unique_id = 1000000000;
  TokenizedDoc td;

  for (size_t example_index = 0; example_index < examples.size(); ++example_index) {
    const SquadExample& example = examples[example_index];
    BERTRAIN_CHECK(example.doc_tokens != nullptr, "SQuAD example '", example.qas_id, "' has no doc_tokens");
    std::vector<std::string> query_tokens = tokenizer.tokenize(example.question_text);
    if (static_cast<int>(query_tokens.size()) > options.max_query_length) query_tokens.resize(options.max_query_length);
    const std::vector<int32_t> query_ids = tokenizer.convert_tokens_to_ids(query_tokens);

    const std::vector<std::string>& doc = *example.doc_tokens;
    if (td.doc != &doc) {
      td.doc = &doc;
      td.tok_to_orig_index.clear();
      td.orig_to_tok_index.clear();
      td.all_doc_tokens.clear();
      for (size_t i = 0; i < doc.size(); ++i) {
        td.orig_to_tok_index.push_back(static_cast<int32_t>(td.all_doc_tokens.size()));
        for (auto& sub_token : tokenizer.tokenize(doc[i])) {
          td.tok_to_orig_index.push_back(static_cast<int32_t>(i));
          td.all_doc_tokens.push_back(std::move(sub_token));
        }
      }
      td.all_doc_ids = tokenizer.convert_tokens_to_ids(td.all_doc_tokens);
    }
    const int32_t num_doc = static_cast<int32_t>(td.all_doc_tokens.size());

    int32_t tok_start_position = -1, tok_end_position = -1;
    if (options.is_training && !example.is_impossible) {
      BERTRAIN_CHECK(example.start_position >= 0 && example.end_position >= example.start_position &&
                         example.end_position < static_cast<int32_t>(doc.size()),
                     "SQuAD training example '", example.qas_id, "' has no valid answer positions (read it with ",
                     "is_training = true)");
      tok_start_position = td.orig_to_tok_index[example.start_position];
      if (example.end_position < static_cast<int32_t>(doc.size()) - 1)
        tok_end_position = td.orig_to_tok_index[example.end_position + 1] - 1;
      else
        tok_end_position = num_doc - 1;
      std::tie(tok_start_position, tok_end_position) = improve_answer_span(
          td.all_doc_tokens, tok_start_position, tok_end_position, tokenizer.tokenize(example.orig_answer_text));
    }

    // The -3 accounts for [CLS], [SEP] and [SEP].
    const int32_t max_tokens_for_doc = T - static_cast<int32_t>(query_tokens.size()) - 3;
    const std::vector<DocSpan> doc_spans = make_doc_spans(num_doc, max_tokens_for_doc, options.doc_stride);
    const std::vector<int32_t> best_span = max_context_spans(doc_spans, num_doc);
    const int32_t doc_offset = static_cast<int32_t>(query_tokens.size()) + 2;

    for (size_t doc_span_index = 0; doc_span_index < doc_spans.size(); ++doc_span_index) {
      const DocSpan& span = doc_spans[doc_span_index];
      SquadFeature f;
      f.unique_id = unique_id;
      f.example_index = static_cast<int32_t>(example_index);
      f.doc_span_index = static_cast<int32_t>(doc_span_index);
      f.is_impossible = example.is_impossible;
      const int32_t n = doc_offset + span.length + 1;
      f.input_ids.assign(T, 0);
      f.input_mask.assign(T, 0);
      f.segment_ids.assign(T, 0);
      f.token_to_orig_map.assign(n, -1);
      f.token_is_max_context.assign(n, 0);
      f.input_ids[0] = cls_id;
      std::copy(query_ids.begin(), query_ids.end(), f.input_ids.begin() + 1);
      f.input_ids[doc_offset - 1] = sep_id;
      for (int32_t i = 0; i < span.length; ++i) {
        const int32_t split_token_index = span.start + i;
        f.token_to_orig_map[doc_offset + i] = td.tok_to_orig_index[split_token_index];
        f.token_is_max_context[doc_offset + i] = best_span[split_token_index] == static_cast<int32_t>(doc_span_index);
        f.input_ids[doc_offset + i] = td.all_doc_ids[split_token_index];
        f.segment_ids[doc_offset + i] = 1;
      }
      f.input_ids[n - 1] = sep_id;
      f.segment_ids[n - 1] = 1;
      std::fill(f.input_mask.begin(), f.input_mask.begin() + n, 1);
      if (!options.is_training) {
        f.tokens.reserve(n);
        f.tokens.emplace_back(text::Vocab::kCls);
        f.tokens.insert(f.tokens.end(), query_tokens.begin(), query_tokens.end());
        f.tokens.emplace_back(text::Vocab::kSep);
        f.tokens.insert(f.tokens.end(), td.all_doc_tokens.begin() + span.start,
                        td.all_doc_tokens.begin() + span.start + span.length);
        f.tokens.emplace_back(text::Vocab::kSep);
      }
      if (options.is_training && !example.is_impossible) {
        // A window that does not contain the whole annotation has nothing to predict: it points at [CLS].
        const int32_t doc_start = span.start, doc_end = span.start + span.length - 1;
        if (tok_start_position >= doc_start && tok_end_position <= doc_end) {
          f.start_position = tok_start_position - doc_start + doc_offset;
          f.end_position = tok_end_position - doc_start + doc_offset;
        }
      }
      output_fn(std::move(f));
      ++unique_id;
    }
  }
}

std::vector<SquadFeature> convert_examples_to_features(const std::vector<SquadExample>& examples,
                                                       const text::FullTokenizer& tokenizer,
                                                       const SquadFeatureOptions& options) {
  std::vector<SquadFeature> out;
  convert_examples_to_features(examples, tokenizer, options, [&](SquadFeature&& f) { out.push_back(std::move(f)); });
  return out;
}

SquadBatch make_squad_batch(const std::vector<SquadFeature>& features, const std::vector<size_t>& indices,
                            const tasks::PaddingOptions& padding) {
  BERTRAIN_CHECK(!indices.empty(), "make_squad_batch: no features given");
  for (size_t i : indices)
    BERTRAIN_CHECK(i < features.size(), "make_squad_batch: feature index ", i, " out of range (", features.size(),
                   " features)");
  const int64_t B = static_cast<int64_t>(indices.size());
  const int64_t max_len = static_cast<int64_t>(features[indices[0]].input_ids.size());
  BERTRAIN_CHECK(max_len > 0, "make_squad_batch: features of length 0");
  int64_t longest = 1;
  for (size_t i : indices) longest = std::max<int64_t>(longest, tasks::real_length(features[i].input_mask));
  const int64_t T = tasks::batch_seq_length(std::min(longest, max_len), max_len, padding);
  SquadBatch b;
  b.input_ids = Tensor::empty({B, T}, DType::i32);
  b.input_mask = Tensor::empty({B, T}, DType::i32);
  b.segment_ids = Tensor::empty({B, T}, DType::i32);
  b.start_positions = Tensor::empty({B}, DType::i32);
  b.end_positions = Tensor::empty({B}, DType::i32);
  int32_t* ids = b.input_ids.data<int32_t>();
  int32_t* mask = b.input_mask.data<int32_t>();
  int32_t* seg = b.segment_ids.data<int32_t>();
  for (int64_t r = 0; r < B; ++r) {
    const SquadFeature& f = features[indices[r]];
    BERTRAIN_CHECK(static_cast<int64_t>(f.input_ids.size()) == max_len &&
                       static_cast<int64_t>(f.input_mask.size()) == max_len &&
                       static_cast<int64_t>(f.segment_ids.size()) == max_len,
                   "make_squad_batch: feature ", indices[r], " has sequence length ", f.input_ids.size(),
                   ", expected ", max_len);
    std::copy(f.input_ids.begin(), f.input_ids.begin() + T, ids + r * T);
    std::copy(f.input_mask.begin(), f.input_mask.begin() + T, mask + r * T);
    std::copy(f.segment_ids.begin(), f.segment_ids.begin() + T, seg + r * T);
    b.start_positions.data<int32_t>()[r] = f.start_position;
    b.end_positions.data<int32_t>()[r] = f.end_position;
  }
  b.feature_indices = indices;
  return b;
}

SquadBatch make_squad_batch(const std::vector<SquadFeature>& features, size_t begin, size_t end,
                            const tasks::PaddingOptions& padding) {
  BERTRAIN_CHECK(begin < end && end <= features.size(), "make_squad_batch: range [", begin, ", ", end,
                 ") is empty or outside the ", features.size(), " features");
  std::vector<size_t> idx(end - begin);
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = begin + i;
  return make_squad_batch(features, idx, padding);
}

namespace detail {

std::string python_split_join(std::string_view s) {
  std::vector<char32_t> cps;
  text::utf8_decode_append(s, cps);
  std::string out;
  bool in_word = false;
  for (char32_t c : cps) {
    if (text::unicode::is_python_space(c)) {
      in_word = false;
      continue;
    }
    if (!in_word && !out.empty()) out += ' ';
    in_word = true;
    text::utf8_append(out, c);
  }
  return out;
}

}  // namespace detail

}  // namespace bertrain::squad
