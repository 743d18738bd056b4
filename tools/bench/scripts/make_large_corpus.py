#!/usr/bin/python3
"""Make a large synthetic pretraining corpus on disk (for the large-corpus measurements; not committed data).

The shared Gutenberg corpus (one sentence per line, a blank line between documents) is read once; its documents
are shuffled with seed S, S+1, S+2, ... and written one shuffled copy after another until the corpus holds SIZE
bytes, as files of at most --file_mb MB (cut between documents) named corpus-00000.txt, corpus-00001.txt, ...
The same arguments give the same files. Standard library only.

Usage: make_large_corpus.py SIZE OUT_DIR [--source pretrain_corpus.txt.xz] [--seed S] [--file_mb 100]
       SIZE: bytes, or with a suffix K, M, G (powers of 1000): 250M, 1G, 2G.
"""
import argparse
import lzma
import os
import random
import sys


def parse_size(s):
    mult = {"K": 10**3, "M": 10**6, "G": 10**9}
    return int(float(s[:-1]) * mult[s[-1].upper()]) if s[-1].upper() in mult else int(s)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("size")
    ap.add_argument("out_dir")
    ap.add_argument("--source", default=os.path.join(here, "..", "..", "..", "..", "shared", "data", "gutenberg_en",
                                                      "pretrain_corpus.txt.xz"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--file_mb", type=float, default=100)
    a = ap.parse_args()
    target, file_cap = parse_size(a.size), int(a.file_mb * 10**6)
    opener = lzma.open if a.source.endswith(".xz") else open
    with opener(a.source, "rb") as f:
        text = f.read()
    docs = [d.strip(b"\n") + b"\n\n" for d in text.split(b"\n\n") if d.strip()]
    if not docs:
        sys.exit(f"{a.source}: no documents")
    if max(len(d) for d in docs) > file_cap:
        sys.exit(f"a document is longer than --file_mb {a.file_mb}")
    os.makedirs(a.out_dir, exist_ok=True)
    written, n_file, out, out_bytes, copy = 0, 0, None, 0, 0
    while written < target:
        order = list(range(len(docs)))
        random.Random(a.seed + copy).shuffle(order)
        copy += 1
        for i in order:
            d = docs[i]
            if written + len(d) > target and written > 0:
                written = target
                break
            if out is None or out_bytes + len(d) > file_cap:
                if out:
                    out.close()
                out = open(os.path.join(a.out_dir, f"corpus-{n_file:05d}.txt"), "wb")
                n_file, out_bytes = n_file + 1, 0
            out.write(d)
            out_bytes += len(d)
            written += len(d)
    if out:
        out.close()
    total = sum(os.path.getsize(os.path.join(a.out_dir, f)) for f in os.listdir(a.out_dir) if f.startswith("corpus-"))
    print(f"{a.out_dir}: {n_file} files, {total} bytes ({total / 1e9:.3f} GB), {copy} shuffled copies of "
          f"{len(docs)} documents")


if __name__ == "__main__":
    main()
