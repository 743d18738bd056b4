#!/usr/bin/python3
"""squad_corpus.py: a Wikipedia pretraining corpus from the SQuAD v1.1 TRAIN contexts, in the layout
create-pretraining-data reads (one sentence per line, a blank line between documents; one document per
Wikipedia article, its paragraphs in order).

Used to continue pretraining bert-mini in-domain before the QNLI experiment (experiments/qnli-transfer): QNLI's rows come from
SQuAD v1.1 *dev* articles, and SQuAD's train and dev articles are disjoint, so this corpus holds none of the
QNLI passages. The script checks that: it counts the QNLI sentences (../shared/data/glue_qnli_dev) that also
occur as a sentence of the corpus (a few do: Wikipedia articles quote each other) and drops those sentences
from the corpus, and it refuses (exit 1) if an article title is in both.

Sentence split: a rule, not a model (Debian's python3 has no sentence splitter): a break after '.', '!' or
'?' (optionally followed by a closing quote or bracket) and whitespace, when the next character is an
upper-case letter, a digit or an opening quote/bracket, and the word before the period is not a common
abbreviation (Mr, Dr, St, U.S, e.g, ...) or a single capital letter (an initial). Wrongly joined or split
sentences only change where segment boundaries fall in pretraining.

Usage: /usr/bin/python3 experiments/common/squad_corpus.py OUT_DIR [--squad PATH] [--qnli PATH] [--heldout N]
Writes OUT_DIR/train.txt (all but the last N articles) and OUT_DIR/heldout.txt (the last N, default 12).
The data are CC BY-SA 4.0 (see ../shared/data/squad_v1.1/SOURCE.md); the output is not committed.
"""
import argparse
import json
import lzma
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "data"))
DEFAULT_SQUAD = os.path.join(SHARED, "squad_v1.1", "train-v1.1-reconstructed.json.xz")
DEFAULT_QNLI = os.path.join(SHARED, "glue_qnli_dev", "dev-shared.tsv")
DEFAULT_QNLI_SQUAD = os.path.join(SHARED, "squad_v1.1", "dev-v1.1-shared.json")

ABBREVIATIONS = {"mr", "mrs", "ms", "dr", "st", "jr", "sr", "prof", "gen", "col", "lt", "sgt", "capt", "gov",
                 "rev", "vs", "etc", "e.g", "i.e", "u.s", "u.k", "u.n", "no", "vol", "ca", "c", "approx",
                 "inc", "ltd", "co", "corp", "mt", "ft", "jan", "feb", "mar", "apr", "jun", "jul", "aug",
                 "sep", "sept", "oct", "nov", "dec", "a.d", "b.c", "fig", "op", "ed", "est"}
CANDIDATE = re.compile(r"[.!?][\"'\u201d\u2019)\]]*\s+(?=[A-Z0-9\"'\u201c\u2018(\[])")


def split_sentences(text):
    """Sentences of one paragraph by the rule in the module docstring."""
    text = " ".join(text.split())
    out, start = [], 0
    for m in CANDIDATE.finditer(text):
        if text[m.start()] == ".":
            words = text[start:m.start()].split()
            last = words[-1].lower().lstrip("(\"'\u201c") if words else ""
            if last in ABBREVIATIONS or (len(last) == 1 and last.isalpha()):
                continue
        sentence = text[start:m.end()].strip()
        if sentence:
            out.append(sentence)
        start = m.end()
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--squad", default=DEFAULT_SQUAD, help="SQuAD v1.1 train JSON (.json or .json.xz)")
    ap.add_argument("--qnli", default=DEFAULT_QNLI, help="GLUE QNLI tsv whose sentences must not be in the corpus")
    ap.add_argument("--qnli_squad", default=DEFAULT_QNLI_SQUAD, help="the SQuAD dev JSON QNLI was built from")
    ap.add_argument("--heldout", type=int, default=12, help="last N articles go to heldout.txt")
    args = ap.parse_args()

    opener = lzma.open if args.squad.endswith(".xz") else open
    with opener(args.squad, "rb") as f:
        squad = json.loads(f.read().decode("utf-8"))
    articles = squad["data"]
    if args.heldout < 1 or args.heldout >= len(articles):
        sys.exit("--heldout must be in [1, %d), got %d" % (len(articles), args.heldout))

    with open(args.qnli_squad, "rb") as f:
        dev_titles = {a["title"] for a in json.loads(f.read().decode("utf-8"))["data"]}
    shared_titles = sorted(dev_titles & {a["title"] for a in articles})

    with open(args.qnli, "rb") as f:
        rows = [l.split("\t") for l in f.read().decode("utf-8").split("\n")[1:] if l]
    qnli_sentences = {" ".join(r[2].split()) for r in rows if len(r) == 4}
    docs = [[s for p in a["paragraphs"] for s in split_sentences(p["context"])] for a in articles]
    dropped = sorted({s for d in docs for s in d if s in qnli_sentences})
    docs = [[s for s in d if s not in qnli_sentences] for d in docs]
    print("QNLI sentences found in the corpus and dropped from it: %d of %d%s" % (
        len(dropped), len(qnli_sentences), (" (" + "; ".join(repr(s[:50]) for s in dropped[:5]) + ")") if dropped else ""))
    os.makedirs(args.out_dir, exist_ok=True)
    cut = len(docs) - args.heldout
    for name, part in (("train.txt", docs[:cut]), ("heldout.txt", docs[cut:])):
        with open(os.path.join(args.out_dir, name), "w", encoding="utf-8") as f:
            for doc in part:
                f.write("\n".join(doc) + "\n\n")
        n_sent = sum(len(d) for d in part)
        n_words = sum(len(s.split()) for d in part for s in d)
        print("%s: %d articles, %d sentences, %d words" % (name, len(part), n_sent, n_words))

    print("SQuAD dev article titles also in the corpus: %d" % len(shared_titles))
    if shared_titles:
        sys.exit("articles shared with SQuAD dev (QNLI's source): %s" % ", ".join(shared_titles))


if __name__ == "__main__":
    main()
