// reader.cpp: CoNLL / UNER .iob2 / CoNLL-U readers with file-and-line errors.
#include "bertrain/tasks/ner/reader.h"

#include <fstream>
#include <sstream>

#include "bertrain/core/error.h"
#include "bertrain/text/utf8.h"

namespace bertrain::ner {

using ::bertrain::detail::str_cat;

NerFormat parse_ner_format(std::string_view name, const std::string& path) {
  auto ends_with = [&](std::string_view suffix) {
    return path.size() >= suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (name == "auto") return ends_with(".conllu") ? NerFormat::conllu : ends_with(".iob2") ? NerFormat::iob2 : NerFormat::conll;
  if (name == "conll") return NerFormat::conll;
  if (name == "iob2") return NerFormat::iob2;
  if (name == "conllu") return NerFormat::conllu;
  BERTRAIN_CHECK(false, "unknown data format '", name, "' (expected auto, conll, iob2 or conllu)");
}

namespace {

bool is_blank(std::string_view s) { return s.find_first_not_of(" \t\r\v\f") == std::string_view::npos; }

std::vector<std::string_view> split_tabs(std::string_view s) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (true) {
    const size_t t = s.find('\t', pos);
    out.push_back(s.substr(pos, t == std::string_view::npos ? std::string_view::npos : t - pos));
    if (t == std::string_view::npos) break;
    pos = t + 1;
  }
  return out;
}

std::vector<std::string_view> split_spaces(std::string_view s) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (pos < s.size()) {
    while (pos < s.size() && s[pos] == ' ') ++pos;
    if (pos >= s.size()) break;
    const size_t e = s.find(' ', pos);
    out.push_back(s.substr(pos, e == std::string_view::npos ? std::string_view::npos : e - pos));
    pos = e == std::string_view::npos ? s.size() : e;
  }
  return out;
}

}  // namespace

NerFile parse_ner_text(std::string_view text, const NerReadOptions& o, const std::string& source) {
  BERTRAIN_CHECK(o.format != NerFormat::conllu || o.label_column.empty() || o.label_column == "upos" ||
                     o.label_column == "xpos",
                 "--label_column must be upos or xpos for CoNLL-U, got '", o.label_column, "'");
  BERTRAIN_CHECK(o.format == NerFormat::conllu || o.label_column.empty(), source, ": --label_column '", o.label_column,
                 "' applies to CoNLL-U files only; the label of a ",
                 o.format == NerFormat::iob2 ? "UNER .iob2 line is its third column" : "CoNLL line is its last column");
  NerFile f;
  f.path = source;
  NerSentence cur;
  std::vector<std::string> pending_preamble;
  size_t conll_columns = 0;
  int64_t conll_columns_line = 0;
  auto flush = [&] {
    if (!cur.words.empty()) {
      cur.preamble = std::move(pending_preamble);
      pending_preamble.clear();
      f.words += static_cast<int64_t>(cur.words.size());
      f.sentences.push_back(std::move(cur));
    }
    cur = NerSentence{};
  };
  int64_t lineno = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    // A UTF-8 byte-order mark (Notepad, Excel) is no part of the first token (Python's utf-8-sig).
    if (lineno == 1 && line.substr(0, 3) == "\xEF\xBB\xBF") line.remove_prefix(3);
    BERTRAIN_CHECK(text::utf8_is_valid(line), source, ":", lineno, ": not valid UTF-8");
    if (is_blank(line)) {
      flush();
      continue;
    }
    std::string_view token, label;
    if (o.format == NerFormat::conll) {
      const bool tabs = line.find('\t') != std::string_view::npos;
      std::vector<std::string_view> cols = tabs ? split_tabs(line) : split_spaces(line);
      // A line of one column starting with -DOCSTART- (CoNLL-2003 writes "-DOCSTART- -X- -X- O").
      if (!cols.empty() && cols[0] == "-DOCSTART-") {
        flush();
        pending_preamble.emplace_back(line);
        continue;
      }
      BERTRAIN_CHECK(cols.size() >= 2, source, ":", lineno, ": expected a token and a label (", tabs ? "TAB" : "space",
                     "-separated), got ", cols.size(), " column: '", line, "'");
      if (conll_columns == 0) {
        conll_columns = cols.size();
        conll_columns_line = lineno;
      }
      BERTRAIN_CHECK(cols.size() == conll_columns, source, ":", lineno, ": ", cols.size(),
                     " columns, but the file's first token line (", conll_columns_line, ") has ", conll_columns);
      token = cols.front();
      label = cols.back();
    } else {
      if (line[0] == '#') {  // comments exist only in .iob2 and CoNLL-U
        pending_preamble.emplace_back(line);
        continue;
      }
      std::vector<std::string_view> cols = split_tabs(line);
      if (o.format == NerFormat::iob2) {
        BERTRAIN_CHECK(cols.size() >= 3, source, ":", lineno, ": a UNER .iob2 line needs INDEX, TOKEN and LABEL ",
                       "columns separated by TABs, got ", cols.size(), " column(s)");
        token = cols[1];
        label = cols[2];
      } else {
        BERTRAIN_CHECK(cols.size() == 10, source, ":", lineno, ": a CoNLL-U line has 10 TAB-separated columns, got ",
                       cols.size());
        if (cols[0].find_first_of("-.") != std::string_view::npos) {  // multiword token or empty node: no word
          cur.interludes.emplace_back(cur.words.size(), std::string(line));
          continue;
        }
        token = cols[1];
        label = cols[o.label_column == "xpos" ? 4 : 3];
      }
    }
    // Whitespace after a TAB-separated label (an editor's trailing spaces) is no part of it: Hugging Face's
    // readers rstrip the label, and "PER " would otherwise be a second entity type.
    while (!label.empty() && (label.back() == ' ' || label.back() == '\v' || label.back() == '\f'))
      label.remove_suffix(1);
    if (token.empty()) {
      if (f.skipped_empty_tokens++ == 0)
        f.warnings.push_back(str_cat(source, ":", lineno, ": empty token, line skipped (further such lines in this ",
                                     "file are only counted)"));
      continue;
    }
    BERTRAIN_CHECK(!label.empty(), source, ":", lineno, ": empty label for token '", token, "'");
    const std::string problem = tag_problem(label, o.scheme);
    BERTRAIN_CHECK(problem.empty(), source, ":", lineno, ": ", problem, " (--tag_scheme ", tag_scheme_name(o.scheme),
                   ")");
    cur.words.emplace_back(token);
    cur.labels.emplace_back(label);
    cur.lines.emplace_back(line);
    cur.line_numbers.push_back(lineno);
  }
  flush();
  BERTRAIN_CHECK(!f.sentences.empty(), source, ": no sentences (", lineno, " lines)");
  return f;
}

NerFile read_ner_file(const std::string& path, const NerReadOptions& options) {
  std::ifstream in(path, std::ios::binary);
  BERTRAIN_CHECK(in.good(), "cannot open '", path, "' (missing or unreadable)");
  std::ostringstream ss;
  ss << in.rdbuf();
  BERTRAIN_CHECK(!in.bad(), "error while reading '", path, "'");
  return parse_ner_text(ss.str(), options, path);
}

}  // namespace bertrain::ner
