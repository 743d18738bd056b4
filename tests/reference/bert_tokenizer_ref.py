#!/usr/bin/env python3
"""bert_tokenizer_ref.py: an independent Python reference for bertrain's BERT tokenizer tests.

Re-implements the behaviour of google-research/bert tokenization.py (BasicTokenizer + WordpieceTokenizer,
commit eedf571) on top of Python's own `unicodedata` and `str.lower()`, so the C++ tokenizer (utf8proc
based) can be compared with a second, independent Unicode implementation.

Usage (run with Debian's /usr/bin/python3):
  bert_tokenizer_ref.py tokenize --do_lower_case=true [--vocab_file F] < in.txt > out.txt
      one output line per input line: BasicTokenizer tokens (or, with --vocab_file, word pieces) joined by
      single spaces.
  bert_tokenizer_ref.py unicode-stress > stress.txt
      writes lines exercising every assigned code point (sampled inside the large CJK/Hangul blocks) in the
      contexts the tokenizer cares about (cleaning, whitespace, CJK, casing with Final_Sigma, accents, punct).
  bert_tokenizer_ref.py albert-preprocess --lower=true < in.txt > out.txt
      google-research/albert `preprocess_text` of each line, with the "``"/"''" -> '"' step of XLNet and
      Hugging Face's AlbertTokenizer.
  bert_tokenizer_ref.py regenerate
      rewrites the golden files under tests/fixtures/tokenizer/ that tests/tokenizer_test.cpp compares against
      (the unicode-stress comparison is run live by the test instead: its text is too large to commit).
"""
import os
import sys
import unicodedata


def is_whitespace(ch):
    if ch in (" ", "\t", "\n", "\r"):
        return True
    return unicodedata.category(ch) == "Zs"


def is_control(ch):
    if ch in ("\t", "\n", "\r"):
        return False
    return unicodedata.category(ch) in ("Cc", "Cf")


def is_punctuation(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


CJK_RANGES = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
              (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]


def is_chinese(cp):
    return any(lo <= cp <= hi for lo, hi in CJK_RANGES)


def basic_tokenize(text, do_lower_case):
    cleaned = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD or is_control(ch):
            continue
        cleaned.append(" " if is_whitespace(ch) else ch)
    spaced = []
    for ch in cleaned:
        if is_chinese(ord(ch)):
            spaced += [" ", ch, " "]
        else:
            spaced.append(ch)
    out = []
    for tok in "".join(spaced).split():
        if do_lower_case:
            tok = tok.lower()
            tok = "".join(c for c in unicodedata.normalize("NFD", tok) if unicodedata.category(c) != "Mn")
        cur = []
        for ch in tok:
            if is_punctuation(ch):
                if cur:
                    out.append("".join(cur))
                    cur = []
                out.append(ch)
            else:
                cur.append(ch)
        if cur:
            out.append("".join(cur))
    return " ".join(out).split()


def load_vocab(path):
    vocab = {}
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            vocab[line.strip()] = i
    return vocab


def wordpiece(word, vocab, unk="[UNK]", max_chars=200):
    if len(word) > max_chars:
        return [unk]
    pieces, start = [], 0
    while start < len(word):
        end, found = len(word), None
        while start < end:
            sub = word[start:end]
            if start > 0:
                sub = "##" + sub
            if sub in vocab:
                found = sub
                break
            end -= 1
        if found is None:
            return [unk]
        pieces.append(found)
        start = end
    return pieces


def tokenize_lines(lines, do_lower_case, vocab=None):
    for line in lines:
        toks = basic_tokenize(line, do_lower_case)
        if vocab is not None:
            toks = [p for t in toks for p in wordpiece(t, vocab)]
        yield " ".join(toks)


def albert_preprocess(text, lower):
    out = " ".join(text.strip().split())
    out = out.replace("``", '"').replace("''", '"')
    out = unicodedata.normalize("NFKD", out)
    out = "".join(c for c in out if not unicodedata.combining(c))
    return out.lower() if lower else out


def unicode_stress_lines():
    cps = []
    for cp in range(0x80, 0x30000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        ch = chr(cp)
        cat = unicodedata.category(ch)
        if cat in ("Cn", "Co", "Cs"):
            continue
        big = is_chinese(cp) or 0xAC00 <= cp <= 0xD7A3 or 0x17000 <= cp <= 0x18CFF or 0x1B000 <= cp <= 0x1B2FF
        if big and cp % 97 != 0:
            continue
        cps.append(ch)
    # Contexts: the characters glued together (cleaning, punctuation splits, NFD and ordering across
    # neighbours), each one between letters, and each next to a capital sigma on either side.
    for i in range(0, len(cps), 8):
        group = cps[i:i + 8]
        yield ("A" + "".join(group) + "b " + " ".join("x" + c + "Y" for c in group) + " " +
               " ".join("ΑΣ" + c for c in group) + " " + " ".join("Σ" + c + "Α" for c in group) + " " +
               " ".join("Α" + c + "Σ" for c in group))


def regenerate():
    root = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    dst = os.path.join(root, "tests", "data", "tokenizer")
    sample = os.path.join(root, "data", "gutenberg", "sample_small.txt")
    vocab_uncased = load_vocab(os.path.join(root, "data", "vocab", "bert-base-uncased-vocab.txt"))
    vocab_cased = load_vocab(os.path.join(root, "data", "vocab", "bert-base-cased-vocab.txt"))
    with open(sample, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()

    def write(name, out_lines):
        with open(os.path.join(dst, name), "w", encoding="utf-8", newline="\n") as f:
            for l in out_lines:
                f.write(l + "\n")

    write("sample_small.uncased.wordpiece", tokenize_lines(lines, True, vocab_uncased))
    write("sample_small.cased.wordpiece", tokenize_lines(lines[: len(lines) // 4], False, vocab_cased))


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__)
        return 2
    cmd, opts = args[0], dict(a.lstrip("-").split("=", 1) for a in args[1:])
    if cmd == "tokenize":
        lower = opts.get("do_lower_case", "true").lower() in ("true", "1", "yes")
        vocab = load_vocab(opts["vocab_file"]) if "vocab_file" in opts else None
        data = sys.stdin.buffer.read().decode("utf-8").split("\n")
        if data and data[-1] == "":
            data.pop()
        for l in tokenize_lines(data, lower, vocab):
            sys.stdout.write(l + "\n")
    elif cmd == "albert-preprocess":
        lower = opts.get("lower", "true").lower() in ("true", "1", "yes")
        data = sys.stdin.buffer.read().decode("utf-8").split("\n")
        if data and data[-1] == "":
            data.pop()
        for l in data:
            sys.stdout.write(albert_preprocess(l, lower) + "\n")
    elif cmd == "unicode-stress":
        for l in unicode_stress_lines():
            sys.stdout.write(l + "\n")
    elif cmd == "regenerate":
        regenerate()
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
