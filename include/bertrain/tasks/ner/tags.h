// tags.h: tag schemes of token classification (IOB1, IOB2, IOBES, or plain labels such as POS tags), chunk
// extraction exactly as conlleval.pl / seqeval's default mode, conversion between schemes, and the entity-level
// and token-level metrics of conlleval / seqeval.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace bertrain::ner {

/// How a file's labels mark chunks. `none`: the labels are plain classes (UPOS/XPOS tags); no chunks, only
/// token accuracy.
///  - iob1 (CoNLL-2003's original): I-X inside a chunk; B-X only to start a chunk right after another X chunk.
///  - iob2 (BIO): every chunk starts with B-X, continues with I-X.
///  - iobes: single-token chunks S-X; longer ones B-X I-X ... E-X.
enum class TagScheme { iob1, iob2, iobes, none };

/// "iob1", "iob2" (also "bio"), "iobes" (also "bioes"), "none"; case-insensitive. Throws bertrain::Error naming
/// the accepted values otherwise.
TagScheme parse_tag_scheme(std::string_view name);
const char* tag_scheme_name(TagScheme scheme);

/// A label split as seqeval's default mode splits it: prefix = first character, type = after the first '-'
/// ("B-PER" -> 'B', "PER"; "O" -> 'O', "_"; "I-creative-work" -> 'I', "creative-work").
struct SplitTag {
  char prefix = 'O';
  std::string type;
};
SplitTag split_tag(std::string_view tag);

/// Empty when `tag` is well-formed under `scheme`, else why not: "O", or P-TYPE with a non-empty TYPE and P in
/// {B, I} (iob1, iob2) or {B, I, E, S} (iobes). Every label is well-formed under `none`.
std::string tag_problem(std::string_view tag, TagScheme scheme);

/// One chunk: tokens [begin, end] (inclusive, as seqeval's tuples) of entity type `type`.
struct Chunk {
  std::string type;
  int64_t begin = 0;
  int64_t end = 0;
  bool operator==(const Chunk&) const = default;
  auto operator<=>(const Chunk&) const = default;
};

/// The chunks of one tag sequence, seqeval.metrics.sequence_labeling.get_entities (default mode, prefix tags),
/// which for B/I/O tags is conlleval.pl's startOfChunk/endOfChunk: a chunk ends after E or S, before B or S, at
/// O, and at a change of type; it starts at B or S, at I or E after O, E or S (an I- after O or after another
/// type starts a chunk, so ill-formed IOB2 still yields chunks), and at any change of type. Works for all three
/// schemes (IOB1's B-X after I-X starts a new chunk). Chunks in order of their start.
std::vector<Chunk> extract_chunks(const std::vector<std::string>& tags);

/// Renders chunks over `length` tokens in `scheme` (iob1: I-X, and B-X for a chunk that starts right after a
/// chunk of the same type ends; iob2: B-X I-X...; iobes: S-X, or B-X I-X... E-X); other tokens "O".
/// Throws bertrain::Error for `none` or a chunk outside [0, length).
std::vector<std::string> render_chunks(const std::vector<Chunk>& chunks, int64_t length, TagScheme scheme);

/// render_chunks(extract_chunks(tags), tags.size(), to): the same chunks in another scheme. Lossless for
/// well-formed input; ill-formed input is first read as extract_chunks reads it. `none` -> `none` is the
/// identity; throws bertrain::Error for any other conversion involving `none`.
std::vector<std::string> convert_tags(const std::vector<std::string>& tags, TagScheme to);

/// Precision, recall and F1 of one entity type (or of all, micro-averaged), as seqeval's classification_report
/// and conlleval: precision = correct / predicted chunks, recall = correct / gold chunks, F1 = 2PR / (P + R);
/// each 0 when its denominator is 0 (seqeval's zero_division default; conlleval prints 0.00). Fractions, not
/// percentages.
struct ChunkScore {
  double precision = 0, recall = 0, f1 = 0;
  int64_t gold = 0;       ///< chunks in the gold tags ("number" in Hugging Face's seqeval metric)
  int64_t predicted = 0;  ///< chunks in the predicted tags
  int64_t correct = 0;    ///< chunks with the same type, begin and end in both
};

/// The metrics of a labelled set: micro-averaged chunk scores (`overall`), per type (sorted by name; types
/// found only in the predictions included, as seqeval), and token accuracy = tokens whose predicted label equals
/// the gold label exactly / all tokens (conlleval's "accuracy", seqeval accuracy_score, the POS metric).
struct NerMetrics {
  ChunkScore overall;
  std::map<std::string, ChunkScore> per_type;
  double accuracy = 0;
  int64_t tokens = 0;
};

/// Scores sentences of predicted labels against gold ones. Each sentence's chunks are extracted separately
/// (conlleval and seqeval put an O between sentences, which is the same). With `chunks` false (TagScheme none)
/// only accuracy and tokens are set. Throws bertrain::Error when the sentence counts or a sentence's lengths
/// differ, naming the sentence.
NerMetrics compute_ner_metrics(const std::vector<std::vector<std::string>>& gold,
                               const std::vector<std::vector<std::string>>& predicted, bool chunks = true);

}  // namespace bertrain::ner
