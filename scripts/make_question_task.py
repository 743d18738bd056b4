#!/usr/bin/python3
"""make_question_task.py: the questions of a SQuAD v1.1/v2.0 file as a generic single-sentence classification task
(single short sentences, the opposite of QNLI's long pairs for dynamic padding), for `bertrain run-classifier --task_name generic` and
`bertrain bench finetune`.

Label rule (documented, deterministic): label "1" when the question, stripped of leading whitespace and
lower-cased, starts with the word "what" (followed by a non-letter: "what", "what's", "what?" but not "whatever"),
else "0".

Split (as experiments/qnli-transfer/split_qnli.py): the questions of the articles at 0-based positions p with p % EVERY == OFFSET in
the file's "data" list go to dev.tsv, all others to train.tsv (--every 0: every question goes to train.tsv and
dev.tsv holds only its header). Questions keep the file's order.

Output: OUT_DIR/train.tsv and OUT_DIR/dev.tsv, header `sentence\tlabel`, one question per line; tabs, carriage
returns and newlines inside a question become spaces (the generic TSV reader takes quotes literally and never
splits a row over two lines), and SOURCE.md with the attribution (SQuAD is CC BY-SA 4.0). Each file is written to
a temporary name and renamed (atomic). Read it with

    bertrain run-classifier --task_name generic --data_dir OUT_DIR --format tsv --labels 0,1 ...

Usage: /usr/bin/python3 scripts/make_question_task.py OUT_DIR [--squad PATH] [--every N] [--offset K]
Standard library only. Prints the row counts and the label balance of each file.
"""
import argparse
import collections
import hashlib
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SQUAD = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "data", "squad_v1.1", "dev-v1.1-shared.json"))
WHAT = re.compile(r"what(?![a-z])")


def label_of(question):
    """'1' when the question starts with the word 'what' (case-insensitive), else '0'."""
    return "1" if WHAT.match(question.lstrip().lower()) else "0"


def clean(question):
    return question.replace("\t", " ").replace("\r", " ").replace("\n", " ")


def write_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--squad", default=DEFAULT_SQUAD, help="SQuAD JSON file (default: the shared v1.1 dev file)")
    ap.add_argument("--every", type=int, default=5, help="articles at position %% EVERY == OFFSET go to dev (0: none)")
    ap.add_argument("--offset", type=int, default=4)
    a = ap.parse_args(argv)
    if a.every < 0 or (a.every > 0 and not 0 <= a.offset < a.every):
        ap.error("--every must be >= 0 and --offset in [0, every)")
    try:
        with open(a.squad, encoding="utf-8") as f:
            raw = f.read()
        squad = json.loads(raw)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        sys.exit(f"{a.squad}: cannot read a SQuAD JSON file: {e}")
    rows = {"train": [], "dev": []}
    data = squad.get("data") if isinstance(squad, dict) else None
    if not isinstance(data, list):
        sys.exit(f"{a.squad}: no \"data\" list at the top level")
    for p, article in enumerate(data):
        split = "dev" if a.every > 0 and p % a.every == a.offset else "train"
        for j, para in enumerate(article.get("paragraphs", [])):
            for k, qa in enumerate(para.get("qas", [])):
                q = qa.get("question")
                if not isinstance(q, str) or not q.strip():
                    sys.exit(f"{a.squad}: data[{p}].paragraphs[{j}].qas[{k}]: question: missing or empty")
                rows[split].append((clean(q), label_of(q)))
    if not rows["train"]:
        sys.exit(f"{a.squad}: no questions for train.tsv")
    os.makedirs(a.out_dir, exist_ok=True)
    for split, items in rows.items():
        text = "sentence\tlabel\n" + "".join(f"{q}\t{lab}\n" for q, lab in items)
        write_atomic(os.path.join(a.out_dir, f"{split}.tsv"), text)
        balance = collections.Counter(lab for _, lab in items)
        print(f"{split}.tsv: {len(items)} questions, label 1 (starts with 'what'): {balance['1']}, label 0: "
              f"{balance['0']}")
    sha = hashlib.sha256(raw.encode("utf-8")).hexdigest()
    write_atomic(os.path.join(a.out_dir, "SOURCE.md"),
                 "# Questions of a SQuAD file as a single-sentence classification task\n\n"
                 f"Made by bertrain's scripts/make_question_task.py from `{a.squad}` (sha256 {sha}), "
                 f"articles at position % {a.every} == {a.offset} in dev.tsv (every = 0: none).\n"
                 "Label 1: the question starts with the word \"what\"; else 0.\n\n"
                 "SQuAD (Rajpurkar et al., 2016, https://rajpurkar.github.io/SQuAD-explorer/) is distributed under "
                 "CC BY-SA 4.0; so is this derived file.\n")


if __name__ == "__main__":
    main()
