#!/usr/bin/env python3
"""chinese_ref.py: a Chinese whole-word-masking reference file for `bertrain create-pretraining-data
--chinese_ref_file`, in Hugging Face's run_chinese_ref.py format (examples/research_projects/mlm_wwm), written
from that script's rules with jieba (Debian's python3-jieba) as the segmenter instead of LTP.

For each input line (blank lines give "[]", so the file has one line per input line): the line's BERT tokens
come from `bertrain tokenize` (the same tokenizer create-pretraining-data uses), the words of length > 1 made
only of CJK characters from jieba; as run_chinese_ref.py's add_sub_symbol, going left to right, the longest such
word (up to the longest word's length) that the next tokens spell marks its non-initial tokens; the line's entry
is the positions ([CLS] = 0) of the marked tokens that are single CJK characters.

usage: chinese_ref.py --input corpus.txt --vocab_file vocab.txt --bertrain build/bertrain --output ref.txt
"""
import argparse
import json
import subprocess
import sys

import jieba


def is_cjk(cp):
    # BasicTokenizer._is_chinese_char's ranges.
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF or 0x2A700 <= cp <= 0x2B73F
            or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def is_chinese_word(w):
    return len(w) > 0 and all(is_cjk(ord(c)) for c in w)


def ref_positions(tokens, words):
    words = {w for w in words if len(w) > 1 and is_chinese_word(w)}
    marked = [False] * len(tokens)
    if words:
        longest = max(len(w) for w in words)
        start, end = 0, len(tokens)
        while start < end:
            step = 1
            if is_chinese_word(tokens[start]):
                for n in range(min(end - start, longest), 1, -1):
                    if "".join(tokens[start:start + n]) in words:
                        for j in range(start + 1, start + n):
                            marked[j] = True
                        step = n
                        break
            start += step
    # +1: position 0 is [CLS].
    return [i + 1 for i, t in enumerate(tokens) if marked[i] and len(t) == 1 and is_cjk(ord(t))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--input", required=True)
    ap.add_argument("--vocab_file", required=True)
    ap.add_argument("--bertrain", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--do_lower_case", default="true")
    a = ap.parse_args()
    jieba.setLogLevel(60)
    with open(a.input, encoding="utf-8", newline="\n") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    out = subprocess.run([a.bertrain, "tokenize", "--vocab_file", a.vocab_file, "--do_lower_case", a.do_lower_case],
                         input="\n".join(l.strip() for l in lines) + "\n", capture_output=True, text=True, check=True)
    tok_lines = out.stdout.split("\n")[:len(lines)]
    if len(tok_lines) != len(lines):
        sys.exit(f"chinese_ref.py: bertrain tokenize gave {len(tok_lines)} lines for {len(lines)}")
    marks = 0
    with open(a.output, "w", encoding="utf-8") as f:
        for line, toks in zip(lines, tok_lines):
            line = line.strip()
            refs = ref_positions(toks.split(" ") if toks else [], jieba.lcut(line)) if line else []
            marks += len(refs)
            f.write(json.dumps(refs) + "\n")
    print(f"chinese_ref.py: {len(lines)} lines, {marks} characters continue a word -> {a.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
