#!/usr/bin/python3
"""Split ../shared/data/gutenberg_en/pretrain_corpus.txt into a training corpus and held-out books.

The corpus lists the books in the order of its SOURCE.md table, each as that table's number of documents
(blank-line separated). BOOKS below copies (PG number, documents) from the table; the script checks the total
against the file and the held-out books' last lines. Held out for evaluation: PG 120 "Treasure Island" and
PG 1232 "The Prince" (fiction and non-fiction).

Usage: split_corpus.py CORPUS.txt OUT_DIR   -> OUT_DIR/train.txt, OUT_DIR/heldout.txt
"""
import os
import sys

BOOKS = [(11, 15), (36, 28), (43, 11), (45, 38), (74, 40), (76, 45), (84, 28), (98, 55), (103, 39), (105, 24),
         (113, 27), (120, 34), (121, 31), (135, 416), (141, 48), (158, 57), (161, 54), (164, 48), (174, 21),
         (205, 26), (219, 3), (345, 162), (514, 66), (580, 60), (599, 71), (730, 57), (766, 69), (768, 38),
         (815, 43), (1023, 71), (1228, 52), (1232, 28), (1260, 40), (1342, 79), (1400, 61), (1404, 101),
         (1497, 13), (1661, 16), (2554, 49), (2591, 64), (2600, 370), (2701, 141), (3207, 59), (7370, 22),
         (20203, 33), (28054, 100)]
HELD_OUT = {120: "Pieces of eight!\u201d", 1232: "but in Macedonia or Rome."}


def main():
    corpus, out = sys.argv[1], sys.argv[2]
    docs, cur = [], []
    with open(corpus, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line:
                cur.append(line)
            elif cur:
                docs.append(cur)
                cur = []
    if cur:
        docs.append(cur)
    total = sum(n for _, n in BOOKS)
    if len(docs) != total:
        sys.exit("%s has %d documents, the table %d: not the corpus this script knows" % (corpus, len(docs), total))
    os.makedirs(out, exist_ok=True)
    i = 0
    counts = {"train": [0, 0], "heldout": [0, 0]}
    with open(os.path.join(out, "train.txt"), "w", encoding="utf-8") as tr, \
            open(os.path.join(out, "heldout.txt"), "w", encoding="utf-8") as ho:
        for pg, n in BOOKS:
            book = docs[i:i + n]
            i += n
            if pg in HELD_OUT and not book[-1][-1].endswith(HELD_OUT[pg]):
                sys.exit("PG %d does not end as expected: %r" % (pg, book[-1][-1][-60:]))
            which = "heldout" if pg in HELD_OUT else "train"
            f = ho if pg in HELD_OUT else tr
            for d in book:
                f.write("\n".join(d) + "\n\n")
                counts[which][0] += 1
                counts[which][1] += len(d)
    for k, (nd, ns) in counts.items():
        print("%s: %d documents, %d sentences" % (k, nd, ns))


if __name__ == "__main__":
    main()
