// pretraining.h: masked-LM / next-sentence pretraining instances, made rule for rule as google-research/bert
// create_pretraining_data.py does (commit eedf571), from documents that are already tokenized into ids.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bertrain/core/error.h"
#include "bertrain/core/rng.h"

namespace bertrain::data {

/// What instance creation needs from a vocabulary: the token of each id (id order, as ref's
/// `list(tokenizer.vocab.keys())`), the special ids, and which ids are "##" continuation pieces.
/// Independent of the tokenizer so that the algorithm is testable with a hand-made vocab.
class PretrainingVocab {
 public:
  /// `tokens[i]` is the token of id i. Throws bertrain::Error when [PAD], [CLS], [SEP] or [MASK] is
  /// missing (they are needed by pretraining data) or a token occurs twice.
  explicit PretrainingVocab(std::vector<std::string> tokens);
  size_t size() const { return tokens_.size(); }
  const std::string& token(int32_t id) const;
  /// The id of `token`; throws bertrain::Error when it is not in the vocab.
  int32_t id(std::string_view token) const;
  bool contains(std::string_view token) const;
  /// True for a WordPiece continuation ("##..."), the test ref uses for whole-word grouping.
  bool is_continuation(int32_t id) const { return continuation_[static_cast<size_t>(id)] != 0; }
  int32_t pad_id() const { return pad_id_; }
  int32_t cls_id() const { return cls_id_; }
  int32_t sep_id() const { return sep_id_; }
  int32_t mask_id() const { return mask_id_; }

 private:
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<uint8_t> continuation_;
  int32_t pad_id_ = 0, cls_id_ = 0, sep_id_ = 0, mask_id_ = 0;
};

/// The flags of create_pretraining_data.py, with its defaults.
struct PretrainingOptions {
  int max_seq_length = 128;           // T
  int max_predictions_per_seq = 20;   // P
  double masked_lm_prob = 0.15;
  int dupe_factor = 10;
  double short_seq_prob = 0.1;
  uint64_t random_seed = 12345;
  bool do_whole_word_mask = false;
  int num_shards = 1;

  /// Throws bertrain::Error for values the algorithm cannot run with (max_seq_length < 5, probabilities
  /// outside [0, 1], dupe_factor or max_predictions_per_seq < 1, ...). Returns warnings for legal but
  /// suspicious settings: max_predictions_per_seq below round(max_seq_length * masked_lm_prob) (full
  /// sequences then mask fewer than masked_lm_prob of their tokens, as ref silently does) or far above it.
  std::vector<std::string> validate() const;
};

/// One sentence pair, before padding. Tokens and labels are vocab ids.
struct TrainingInstance {
  std::vector<int32_t> tokens;               // [CLS] A [SEP] B [SEP], masked
  std::vector<int8_t> segment_ids;           // 0 for [CLS] A [SEP], 1 for B [SEP]
  std::vector<int32_t> masked_lm_positions;  // strictly increasing
  std::vector<int32_t> masked_lm_labels;     // original ids at those positions
  bool is_random_next = false;
};

/// A sentence is a list of token ids; a document a list of sentences.
using Sentence = std::vector<int32_t>;
using Document = std::vector<Sentence>;

/// Counters of instance creation and of input reading (shown in the CLI summary).
struct PretrainingStats {
  int64_t files = 0;
  int64_t bytes = 0;                  // input bytes read
  int64_t lines = 0;
  int64_t documents = 0;              // non-empty documents
  int64_t sentences = 0;
  int64_t tokens = 0;                 // corpus tokens (one copy, not times dupe_factor)
  int64_t instances = 0;
  int64_t instance_tokens = 0;        // tokens in all instances, incl. [CLS]/[SEP]
  int64_t masked_tokens = 0;          // masked_lm positions in all instances
  int64_t random_next = 0;            // instances with is_random_next
  int64_t skipped_random_pairs = 0;   // random next wanted but no other document exists (C12)
  int64_t skipped_non_utf8_lines = 0;
  int64_t skipped_long_lines = 0;     // lines over kMaxLineBytes
  int64_t skipped_empty_files = 0;
  int64_t chinese_ref_marks = 0;      // characters marked as continuing a word (--chinese_ref_file)
  /// One message per kind of bad record and file ("file:line: ..."), for the log.
  std::vector<std::string> warnings;
  void merge(const PretrainingStats& o);
};

/// Lines longer than this (bytes) are skipped and counted, as DESIGN.md section 4 asks for.
inline constexpr size_t kMaxLineBytes = 1 << 20;

/// ref `truncate_seq_pair`: while len(a) + len(b) > max_num_tokens, drop one token from the longer list
/// (ties: b), from the front or the back with probability 1/2 each (one `rng.uniform() < 0.5` per removal).
/// The result is a contiguous slice of each input. CASES.md C13.
template <class T>
void truncate_seq_pair(std::vector<T>& a, std::vector<T>& b, size_t max_num_tokens, Rng& rng) {
  while (a.size() + b.size() > max_num_tokens) {
    std::vector<T>& t = a.size() > b.size() ? a : b;
    BERTRAIN_ASSERT(!t.empty());
    if (rng.uniform() < 0.5)
      t.erase(t.begin());
    else
      t.pop_back();
  }
}

/// run_classifier.py `_truncate_seq_pair`: the same loop but always popping the back of the longer list
/// (ties: b); deterministic. For the sentence-pair classifiers. CASES.md C13.
template <class T>
void truncate_seq_pair_back(std::vector<T>& a, std::vector<T>& b, size_t max_length) {
  while (a.size() + b.size() > max_length) {
    if (a.size() > b.size())
      a.pop_back();
    else
      b.pop_back();
  }
}

/// Result of masking one sequence.
struct MaskedLmPredictions {
  std::vector<int32_t> tokens;     // the input with masked positions replaced
  std::vector<int32_t> positions;  // strictly increasing
  std::vector<int32_t> labels;     // original ids at `positions`
};

/// A Sentence id with this bit set is a character that continues a word of a Chinese word segmentation
/// (mark_chinese_ref_words, from --chinese_ref_file): whole-word masking groups it with the token before it.
/// It never leaves instance creation: create_masked_lm_predictions clears it in its tokens and labels, so the
/// input ids and labels are the plain characters (用, never ##用: CASES.md C34, brightmart/roberta_zh#84).
inline constexpr int32_t kWordContinuationBit = 1 << 30;

/// The candidate groups of ref `create_masked_lm_predictions`, in sequence order: every position except [CLS],
/// [SEP] and [PAD] starts a group, except that with `do_whole_word_mask` a "##" piece joins the group before it
/// (as ref, even across a [SEP]) and so does a token marked with kWordContinuationBit when the token before it
/// is a candidate (a segmenter word never spans a special token). Throws bertrain::Error for an id outside the
/// vocab.
std::vector<std::vector<int32_t>> masked_lm_candidate_groups(const std::vector<int32_t>& tokens,
                                                             bool do_whole_word_mask, const PretrainingVocab& vocab);

/// ref `create_masked_lm_predictions`. Candidates are all positions except [CLS] and [SEP] (and [PAD],
/// which ref never sees at this point; excluding it keeps padded inputs safe, CASES.md C10); with
/// `do_whole_word_mask` a "##" piece joins the previous candidate group. The groups are shuffled
/// (Fisher-Yates as Python's random.shuffle); num_to_predict = min(max_predictions_per_seq,
/// max(1, int(round(len(tokens) * masked_lm_prob)))) with Python's round half to even; a group that would
/// exceed the budget is skipped, not cut (C11). Each chosen position becomes [MASK] with p 0.8, stays with
/// p 0.1, or becomes an id drawn uniformly from the whole vocab, specials included (C10). Returns positions
/// sorted. The groups are masked_lm_candidate_groups(tokens, do_whole_word_mask); the 80/10/10 choice is drawn
/// per position (per character of a Chinese word, ymcui/Chinese-BERT-wwm#33). kWordContinuationBit is cleared in
/// the returned tokens and labels. Throws bertrain::Error for an id outside the vocab.
MaskedLmPredictions create_masked_lm_predictions(const std::vector<int32_t>& tokens, double masked_lm_prob,
                                                 int max_predictions_per_seq, bool do_whole_word_mask,
                                                 const PretrainingVocab& vocab, Rng& rng);

/// ref `num_to_predict` for a sequence of `len` tokens (Python: int(round(len * p)), half to even).
int masked_lm_budget(size_t len, double masked_lm_prob, int max_predictions_per_seq);

/// ref `create_instances_from_document` for all_documents[document_index], drawing from `rng`.
/// Deviation from ref (CASES.md C12): a random next sentence is drawn uniformly from the OTHER documents
/// (one draw, no 10 retries that may fall back to the same document), so is_random_next implies that B
/// comes from a different document than A. When the corpus holds a single document no random B exists:
/// the pair is skipped and counted in stats.skipped_random_pairs; A's sentences are consumed and the
/// rest are put back, as ref does for a random pair. Throws bertrain::Error when options.max_seq_length < 5.
std::vector<TrainingInstance> create_instances_from_document(const std::vector<Document>& all_documents,
                                                             size_t document_index,
                                                             const PretrainingOptions& options,
                                                             const PretrainingVocab& vocab, Rng& rng,
                                                             PretrainingStats& stats);

/// ref `create_training_instances` after reading: removes empty documents, shuffles the documents, makes
/// the instances of every (dupe, document) and shuffles all instances. Reproducible and independent of
/// the thread count: the document shuffle uses Rng(seed, stream 0), the instance shuffle Rng(seed, 1), and
/// document d of dupe k its own stream 2 + k * num_documents + d; the per-document work runs in parallel
/// (OpenMP) and is concatenated in (dupe, document) order. Throws bertrain::Error when no document is left.
std::vector<TrainingInstance> create_training_instances(std::vector<Document> all_documents,
                                                        const PretrainingOptions& options,
                                                        const PretrainingVocab& vocab, PretrainingStats& stats);
/// The same with `seed` in place of options.random_seed (create-pretraining-data keys each window of
/// documents by its own seed).
std::vector<TrainingInstance> create_training_instances(std::vector<Document> all_documents,
                                                        const PretrainingOptions& options,
                                                        const PretrainingVocab& vocab, PretrainingStats& stats,
                                                        uint64_t seed);

/// Hugging Face's Chinese whole-word-masking reference file (examples/research_projects/mlm_wwm/run_chinese_ref.py):
/// one JSON list of integers per line, the positions (in the line's BERT tokens with [CLS] at 0) of the non-initial
/// characters of multi-character words made only of CJK characters.
struct ChineseRef {
  std::string path;
  std::vector<std::vector<int32_t>> lines;
};

/// Reads a reference file. Throws bertrain::Error naming the file and line when it cannot be read, a line is not
/// a JSON list of integers, or a list is not strictly increasing.
ChineseRef read_chinese_ref(const std::string& path);
ChineseRef parse_chinese_ref(std::string_view text, const std::string& source);
/// One line of a reference file (line `lineno` of `source`, for errors).
std::vector<int32_t> parse_chinese_ref_line(std::string_view line, const std::string& source, int64_t lineno);

/// True when `token` is one code point of BasicTokenizer's _is_chinese_char ranges (what run_chinese_ref.py keeps).
bool is_cjk_character_token(std::string_view token);

/// Marks the characters `positions` of one line's ids (without [CLS]: position p is ids[p - 1]) with
/// kWordContinuationBit. Throws bertrain::Error naming ref_source and ref_line (1-based) when a position is
/// outside 1..ids.size() (0 is [CLS], ids.size() + 1 the [SEP]), is not a single CJK character, or is
/// word-initial: position 1, or a token after one that is not a CJK character (a Chinese word is CJK throughout).
void mark_chinese_ref_words(std::vector<int32_t>& ids, const std::vector<int32_t>& positions,
                            const PretrainingVocab& vocab, const std::string& ref_source, int64_t ref_line);

/// Chinese word segmentations for read_documents: `files[k]` is the reference file of input file k.
struct ChineseRefOptions {
  std::vector<std::string> files;
  const PretrainingVocab* vocab = nullptr;
};

/// The warning for --do_whole_word_mask on Chinese text without a segmentation (google-research/bert#780: every
/// CJK character is then its own word, so whole-word masking silently masks single characters), or "" when
/// `docs` holds no CJK character token. Counts the CJK character tokens of `docs`.
std::string chinese_whole_word_mask_warning(const std::vector<Document>& docs, const PretrainingVocab& vocab);

/// Turns a line of text into token ids (the BERT FullTokenizer in the CLI). Must be thread-safe.
using TokenizeFn = std::function<std::vector<int32_t>(std::string_view line)>;

/// Progress callback: (bytes of input processed so far, total input bytes). Called from one thread at a time.
using ProgressFn = std::function<void(int64_t done, int64_t total)>;

/// Reads one-sentence-per-line UTF-8 files with blank lines between documents, as ref: each line is
/// stripped (Python str.strip whitespace), an empty line starts a new document, a line whose tokens are
/// empty is dropped. Each file starts a new document (ref lets the last document of a file run on into
/// the next file when the file does not end with a blank line; bertrain does not). Only "\n" ends a line. Lines with invalid UTF-8 and lines longer than
/// kMaxLineBytes are skipped and counted, as are empty files; the first of each kind per file is reported
/// in stats.warnings with file and line. Tokenization runs in parallel (OpenMP) over blocks of lines; the
/// result does not depend on the thread count. Throws bertrain::Error when a file is missing or unreadable.
/// With `chinese_ref`, input file k's lines are marked from chinese_ref->files[k] (mark_chinese_ref_words): the
/// reference has one line per input line, or one per non-blank input line (run_chinese_ref.py drops blank lines);
/// throws bertrain::Error naming both files and the line counts otherwise, or when the file counts differ.
std::vector<Document> read_documents(const std::vector<std::string>& files, const TokenizeFn& tokenize,
                                     PretrainingStats& stats, const ProgressFn& progress = {},
                                     const ChineseRefOptions* chinese_ref = nullptr);

/// True when an input line (without its "\n", `bytes` long) is blank for read_documents, i.e. a document
/// boundary: at most kMaxLineBytes, valid UTF-8 and nothing but Python str.isspace() whitespace. These are also
/// the lines that Hugging Face's run_chinese_ref.py leaves out of its reference file.
bool is_blank_input_line(std::string_view line, int64_t bytes);

/// Turns a line and the line of a side file that goes with it (e.g. a Chinese whole-word reference line) into
/// token ids; `side_path` and `side_line_no` (1-based) are for error messages. Also called with an empty `line`
/// for a blank input line whose side line is not empty, to validate it (the result is dropped). Must be
/// thread-safe; may throw bertrain::Error.
using SideTokenizeFn = std::function<std::vector<int32_t>(std::string_view line, std::string_view side_line,
                                                          const std::string& side_path, int64_t side_line_no)>;

/// One input line as read: its text without "\n" (empty when the line is longer than kMaxLineBytes: readers
/// need not keep it), the side file's line for it (empty without a side file, or without a side line for it),
/// that side line's 1-based number (0: none), the input line's length in bytes.
struct InputLine {
  std::string_view text;
  std::string_view side;
  int64_t bytes = 0;
  int64_t side_line = 0;
};

/// How a side file's lines go with its input file's: one per input line, or one per non-blank input line
/// (is_blank_input_line; run_chinese_ref.py's reference files). A side file with as many lines as its input
/// file's non-blank lines is read the second way, one with as many as all its lines the first way.
enum class SidePairing : uint8_t { every_line, non_blank_lines };

/// The documents of consecutive lines of one input file, by read_documents' rules (bad lines skipped, counted
/// and reported once per call with `path` and their line number, first_line + index + 1). A text line is
/// stripped and tokenized with `side_tokenize(line, side, side_path, side_line)` when given, else
/// `tokenize(line)`, in parallel (OpenMP) over blocks of lines; `report(bytes)` is called as blocks finish.
/// Counts lines, documents, sentences and tokens into `stats` (not files or bytes). The lines start a new
/// document. Rethrows the first error of `tokenize` / `side_tokenize` in line order.
std::vector<Document> documents_from_lines(const std::string& path, int64_t first_line,
                                           const std::vector<InputLine>& lines, const TokenizeFn& tokenize,
                                           const SideTokenizeFn& side_tokenize, PretrainingStats& stats,
                                           const std::function<void(int64_t bytes)>& report = {},
                                           const std::string& side_path = {});

/// The side tokenizer of a Chinese whole-word segmentation (--chinese_ref_file): `tokenize(line)`, then the
/// side line parsed as one line of a reference file (parse_chinese_ref) and marked with mark_chinese_ref_words
/// (errors name the reference file and line). Adds the marked characters to `*marks` when given.
SideTokenizeFn chinese_ref_side_tokenize(TokenizeFn tokenize, const PretrainingVocab& vocab,
                                         std::atomic<int64_t>* marks = nullptr);

/// Expands comma-separated glob(3) patterns, sorted within each pattern; throws bertrain::Error when a
/// pattern matches nothing.
std::vector<std::string> expand_input_globs(const std::string& patterns);

/// True when `s` is valid UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF).
bool is_valid_utf8(std::string_view s);

/// Padded features of N instances, in the layout of NVIDIA DeepLearningExamples' HDF5 shards
/// (ref write_instance_to_example_files: ids, mask and segments padded with 0 to T; masked positions and ids
/// padded with 0 to P; label 1 = random next). Row-major.
struct PretrainingFeatures {
  int64_t max_seq_length = 0;            // T
  int64_t max_predictions_per_seq = 0;   // P
  std::vector<int32_t> input_ids;            // (N, T)
  std::vector<int8_t> input_mask;            // (N, T)
  std::vector<int8_t> segment_ids;           // (N, T)
  std::vector<int32_t> masked_lm_positions;  // (N, P)
  std::vector<int32_t> masked_lm_ids;        // (N, P)
  std::vector<int8_t> next_sentence_labels;  // (N)

  PretrainingFeatures() = default;
  PretrainingFeatures(int64_t max_seq_length, int64_t max_predictions_per_seq);
  int64_t size() const { return static_cast<int64_t>(next_sentence_labels.size()); }
  /// Pads and appends one instance; throws bertrain::Error when it is longer than T or has more than P
  /// predictions.
  void append(const TrainingInstance& inst);
  /// Throws bertrain::Error naming `what` when the vector sizes do not match N, T and P.
  void check_consistent(const std::string& what) const;
  bool operator==(const PretrainingFeatures&) const = default;
};

}  // namespace bertrain::data
