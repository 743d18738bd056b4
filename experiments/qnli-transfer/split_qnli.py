#!/usr/bin/python3
"""split_qnli.py: splits the shared GLUE QNLI dev file into train.tsv and dev.tsv BY SQuAD ARTICLE, so that no question, passage or article is in both halves.

Rule (documented, deterministic): every QNLI question is a SQuAD v1.1 dev question; the article of a row is the
0-based position, in the SQuAD dev JSON's "data" list, of the article holding that question. Rows of articles at
positions 4, 9, 14, ... (position % 5 == 4) go to dev.tsv, all other rows to train.tsv. Rows keep their original
order and the GLUE QNLI layout (header `index\tquestion\tsentence\tlabel`, the original index column), so
`bertrain run-classifier --task_name QNLI --data_dir OUT` reads them as they are.

The data are CC BY-SA 4.0 (QNLI is derived from SQuAD v1.1; see ../shared/data/glue_qnli_dev/SOURCE.md); the
script writes a SOURCE.md with the attribution next to the split. The default split is committed as data/qnli (for
the slow test qnli_committed_model; its SOURCE.md adds the attribution); regenerate it with

    /usr/bin/python3 experiments/qnli-transfer/split_qnli.py OUT_DIR [--qnli PATH] [--squad PATH] [--every N] [--offset K]

Standard library only (Debian's /usr/bin/python3). Prints row counts and the label balance of each split.
"""
import argparse
import collections
import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "data"))
DEFAULT_QNLI = os.path.join(SHARED, "glue_qnli_dev", "dev-shared.tsv")
DEFAULT_SQUAD = os.path.join(SHARED, "squad_v1.1", "dev-v1.1-shared.json")
HEADER = ["index", "question", "sentence", "label"]
LABELS = ("entailment", "not_entailment")


def read_qnli(path):
    """Rows of a GLUE QNLI tsv as _read_tsv(quotechar=None) reads them: split on '\\n' and '\\t', quotes literal."""
    with open(path, "rb") as f:
        data = f.read().decode("utf-8")  # strict: a bad byte is an error
    lines = data.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    rows = [line[:-1].split("\t") if line.endswith("\r") else line.split("\t") for line in lines]
    if not rows or rows[0] != HEADER:
        sys.exit("%s:1: expected the QNLI header %r, got %r" % (path, "\t".join(HEADER), rows[0] if rows else None))
    for n, row in enumerate(rows[1:], start=2):
        if len(row) != 4:
            sys.exit("%s:%d: expected 4 tab-separated columns, got %d" % (path, n, len(row)))
        if row[3] not in LABELS:
            sys.exit("%s:%d: unknown QNLI label %r" % (path, n, row[3]))
    return rows[0], rows[1:]


def question_articles(squad_path):
    """Maps each SQuAD question text to the set of article positions holding it, plus the titles."""
    with open(squad_path, "rb") as f:
        squad = json.loads(f.read().decode("utf-8"))
    where = collections.defaultdict(set)
    titles = []
    for pos, article in enumerate(squad["data"]):
        titles.append(article["title"])
        for para in article["paragraphs"]:
            for qa in para["qas"]:
                where[qa["question"]].add(pos)
                where[qa["question"].strip()].add(pos)
    return where, titles


def write_tsv(path, header, rows):
    text = "".join("\t".join(r) + "\n" for r in [header] + rows).encode("utf-8")
    with open(path + ".tmp", "wb") as f:
        f.write(text)
    os.replace(path + ".tmp", path)
    return hashlib.sha256(text).hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir", help="directory to write train.tsv, dev.tsv and SOURCE.md into (created)")
    ap.add_argument("--qnli", default=DEFAULT_QNLI, help="QNLI tsv to split (default: %(default)s)")
    ap.add_argument("--squad", default=DEFAULT_SQUAD, help="SQuAD v1.1 dev JSON (default: %(default)s)")
    ap.add_argument("--every", type=int, default=5, help="every N-th article goes to dev (default: %(default)s)")
    ap.add_argument("--offset", type=int, default=4, help="dev articles: position %% every == offset (default 4)")
    args = ap.parse_args()
    if args.every < 2 or not 0 <= args.offset < args.every:
        sys.exit("--every must be >= 2 and 0 <= --offset < --every")

    header, rows = read_qnli(args.qnli)
    where, titles = question_articles(args.squad)
    split = {"train": [], "dev": []}
    articles = {"train": set(), "dev": set()}
    for n, row in enumerate(rows, start=2):
        found = where.get(row[1]) or where.get(row[1].strip())
        if not found:
            sys.exit("%s:%d: question %r is not a question of %s" % (args.qnli, n, row[1], args.squad))
        if len(found) != 1:
            sys.exit("%s:%d: question %r appears in several articles %s" % (args.qnli, n, row[1], sorted(found)))
        pos = next(iter(found))
        part = "dev" if pos % args.every == args.offset else "train"
        split[part].append(row)
        articles[part].add(pos)

    # No article, question or sentence (passage text) may be in both halves.
    assert not articles["train"] & articles["dev"]
    for col, what in ((1, "question"), (2, "sentence")):
        both = {r[col] for r in split["train"]} & {r[col] for r in split["dev"]}
        if both:
            sys.exit("a %s is in both halves: %r" % (what, sorted(both)[0]))

    os.makedirs(args.out_dir, exist_ok=True)
    digests = {}
    for part in ("train", "dev"):
        digests[part] = write_tsv(os.path.join(args.out_dir, part + ".tsv"), header, split[part])
    with open(os.path.join(args.out_dir, "SOURCE.md"), "w", encoding="utf-8") as f:
        f.write(
            "# QNLI split by SQuAD article (generated by bertrain experiments/qnli-transfer/split_qnli.py)\n\n"
            "License: CC BY-SA 4.0. Derived from the GLUE QNLI (v2) dev set (Wang et al. 2019), itself built from\n"
            "SQuAD v1.1 (Rajpurkar et al. 2016, CC BY-SA 4.0); source file %s.\n\n"
            "Rule: a row's article is the position of its question's article in %s; articles at positions\n"
            "with position %% %d == %d are dev, the rest train. No article, question or sentence is in both.\n\n"
            "| file | rows | entailment | not_entailment | articles | sha256 |\n|---|---|---|---|---|---|\n"
            % (os.path.basename(args.qnli), os.path.basename(args.squad), args.every, args.offset))
        for part in ("train", "dev"):
            c = collections.Counter(r[3] for r in split[part])
            f.write("| %s.tsv | %d | %d | %d | %d | %s |\n" % (part, len(split[part]), c["entailment"],
                                                             c["not_entailment"], len(articles[part]), digests[part]))

    print("input: %s (%d rows), %d SQuAD articles" % (args.qnli, len(rows), len(titles)))
    print("rule: article position %% %d == %d -> dev, else train" % (args.every, args.offset))
    for part in ("train", "dev"):
        c = collections.Counter(r[3] for r in split[part])
        n = len(split[part])
        print("%-5s %5d rows  entailment %5d (%.1f%%)  not_entailment %5d (%.1f%%)  %2d articles  sha256 %s" % (
            part, n, c["entailment"], 100.0 * c["entailment"] / n, c["not_entailment"],
            100.0 * c["not_entailment"] / n, len(articles[part]), digests[part]))
    print("dev articles: " + ", ".join(titles[p] for p in sorted(articles["dev"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
