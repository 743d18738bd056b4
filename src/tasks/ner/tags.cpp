// tags.cpp: tag schemes, chunks (seqeval's default mode = conlleval.pl's chunk rules) and their metrics.
#include "bertrain/tasks/ner/tags.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "bertrain/core/error.h"

namespace bertrain::ner {

TagScheme parse_tag_scheme(std::string_view name) {
  std::string n(name);
  for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (n == "iob1") return TagScheme::iob1;
  if (n == "iob2" || n == "bio") return TagScheme::iob2;
  if (n == "iobes" || n == "bioes") return TagScheme::iobes;
  if (n == "none") return TagScheme::none;
  BERTRAIN_CHECK(false, "unknown tag scheme '", name, "' (expected iob1, iob2, iobes or none)");
}

const char* tag_scheme_name(TagScheme s) {
  switch (s) {
    case TagScheme::iob1: return "iob1";
    case TagScheme::iob2: return "iob2";
    case TagScheme::iobes: return "iobes";
    case TagScheme::none: return "none";
  }
  return "?";
}

SplitTag split_tag(std::string_view tag) {
  // seqeval: tag = chunk[0]; type = chunk[1:].split('-', maxsplit=1)[-1] or '_'.
  // Built, not assigned from a literal: GCC 12 reports a false -Wrestrict on string = "_" at -O3 (bug 105329).
  if (tag.empty()) return SplitTag{'\0', std::string("_")};
  std::string_view rest = tag.substr(1);
  const size_t dash = rest.find('-');
  if (dash != std::string_view::npos) rest = rest.substr(dash + 1);
  return SplitTag{tag[0], std::string(rest.empty() ? std::string_view("_") : rest)};
}

std::string tag_problem(std::string_view tag, TagScheme scheme) {
  if (scheme == TagScheme::none || tag == "O") return {};
  const std::string_view prefixes = scheme == TagScheme::iobes ? "BIES" : "BI";
  if (tag.size() < 3 || tag[1] != '-' || prefixes.find(tag[0]) == std::string_view::npos)
    return detail::str_cat("label '", tag, "' is not O or ", scheme == TagScheme::iobes ? "B-, I-, E-, S-" : "B-, I-",
                           "TYPE, as ", tag_scheme_name(scheme), " tags must be");
  return {};
}

namespace {

// seqeval end_of_chunk: did a chunk end between the previous token and this one?
bool end_of_chunk(char prev_tag, char tag, const std::string& prev_type, const std::string& type) {
  if (prev_tag == 'E' || prev_tag == 'S') return true;
  if ((prev_tag == 'B' || prev_tag == 'I') && (tag == 'B' || tag == 'S' || tag == 'O')) return true;
  return prev_tag != 'O' && prev_tag != '.' && prev_type != type;
}

// seqeval start_of_chunk: does a chunk start at this token?
bool start_of_chunk(char prev_tag, char tag, const std::string& prev_type, const std::string& type) {
  if (tag == 'B' || tag == 'S') return true;
  if ((prev_tag == 'E' || prev_tag == 'S' || prev_tag == 'O') && (tag == 'E' || tag == 'I')) return true;
  return tag != 'O' && tag != '.' && prev_type != type;
}

}  // namespace

std::vector<Chunk> extract_chunks(const std::vector<std::string>& tags) {
  std::vector<Chunk> chunks;
  char prev_tag = 'O';
  std::string prev_type;
  int64_t begin = 0;
  const int64_t n = static_cast<int64_t>(tags.size());
  for (int64_t i = 0; i <= n; ++i) {  // a final "O" closes the last chunk
    const SplitTag t = i < n ? split_tag(tags[static_cast<size_t>(i)]) : SplitTag{'O', "_"};
    if (end_of_chunk(prev_tag, t.prefix, prev_type, t.type)) chunks.push_back({prev_type, begin, i - 1});
    if (start_of_chunk(prev_tag, t.prefix, prev_type, t.type)) begin = i;
    prev_tag = t.prefix;
    prev_type = t.type;
  }
  return chunks;
}

std::vector<std::string> render_chunks(const std::vector<Chunk>& chunks, int64_t length, TagScheme scheme) {
  BERTRAIN_CHECK(scheme != TagScheme::none, "render_chunks: tag scheme 'none' has no chunks");
  std::vector<std::string> out(static_cast<size_t>(length), "O");
  int64_t prev_end = -2;
  std::string prev_type;
  for (const Chunk& c : chunks) {
    BERTRAIN_CHECK(c.begin >= 0 && c.begin <= c.end && c.end < length, "render_chunks: chunk [", c.begin, ", ", c.end,
                   "] outside the ", length, " tokens");
    for (int64_t i = c.begin; i <= c.end; ++i) {
      char p = 'I';
      switch (scheme) {
        case TagScheme::iob1:
          p = (i == c.begin && prev_end == c.begin - 1 && prev_type == c.type) ? 'B' : 'I';
          break;
        case TagScheme::iob2:
          p = i == c.begin ? 'B' : 'I';
          break;
        case TagScheme::iobes:
          p = c.begin == c.end ? 'S' : i == c.begin ? 'B' : i == c.end ? 'E' : 'I';
          break;
        case TagScheme::none:
          break;
      }
      out[static_cast<size_t>(i)] = std::string(1, p) + "-" + c.type;
    }
    prev_end = c.end;
    prev_type = c.type;
  }
  return out;
}

std::vector<std::string> convert_tags(const std::vector<std::string>& tags, TagScheme to) {
  if (to == TagScheme::none) return tags;
  return render_chunks(extract_chunks(tags), static_cast<int64_t>(tags.size()), to);
}

namespace {

void finish(ChunkScore& s) {
  s.precision = s.predicted > 0 ? static_cast<double>(s.correct) / static_cast<double>(s.predicted) : 0.0;
  s.recall = s.gold > 0 ? static_cast<double>(s.correct) / static_cast<double>(s.gold) : 0.0;
  s.f1 = s.precision + s.recall > 0 ? 2 * s.precision * s.recall / (s.precision + s.recall) : 0.0;
}

}  // namespace

NerMetrics compute_ner_metrics(const std::vector<std::vector<std::string>>& gold,
                               const std::vector<std::vector<std::string>>& predicted, bool chunks) {
  BERTRAIN_CHECK(gold.size() == predicted.size(), "NER metrics: ", gold.size(), " gold sentences but ",
                 predicted.size(), " predicted ones");
  NerMetrics m;
  int64_t correct_tokens = 0;
  for (size_t s = 0; s < gold.size(); ++s) {
    BERTRAIN_CHECK(gold[s].size() == predicted[s].size(), "NER metrics: sentence ", s, " has ", gold[s].size(),
                   " gold labels but ", predicted[s].size(), " predicted ones");
    for (size_t i = 0; i < gold[s].size(); ++i) correct_tokens += gold[s][i] == predicted[s][i] ? 1 : 0;
    m.tokens += static_cast<int64_t>(gold[s].size());
    if (!chunks) continue;
    const std::vector<Chunk> g = extract_chunks(gold[s]), p = extract_chunks(predicted[s]);
    const std::set<Chunk> gs(g.begin(), g.end());
    for (const Chunk& c : g) ++m.per_type[c.type].gold;
    for (const Chunk& c : p) {
      ChunkScore& t = m.per_type[c.type];
      ++t.predicted;
      if (gs.count(c)) ++t.correct;
    }
  }
  for (auto& [type, s] : m.per_type) {
    finish(s);
    m.overall.gold += s.gold;
    m.overall.predicted += s.predicted;
    m.overall.correct += s.correct;
  }
  finish(m.overall);
  m.accuracy = m.tokens > 0 ? static_cast<double>(correct_tokens) / static_cast<double>(m.tokens) : 0.0;
  return m;
}

}  // namespace bertrain::ner
