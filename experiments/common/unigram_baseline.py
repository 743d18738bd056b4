#!/usr/bin/python3
"""Unigram baseline for masked-LM loss: the entropy (nats) of the masked tokens' frequency distribution, the loss
a model that learned only token frequencies would reach. Also the cross-entropy of the held-out masked tokens
under the training shards' masked-token frequencies (add-one smoothed), the fairer comparison.

Usage: unigram_baseline.py EVAL_SHARD_DIR [TRAIN_SHARD_DIR]   (Debian's python3-h5py and numpy)
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from unigram_bias_init import masked_counts  # noqa: E402  (the same counts as the bias-unigram start)


def main():
    ev = masked_counts(sys.argv[1])
    p = ev[ev > 0] / ev.sum()
    print("held-out masked tokens: %d; unigram entropy %.4f nats" % (ev.sum(), float(-(p * np.log(p)).sum())))
    if len(sys.argv) > 2:
        tr = masked_counts(sys.argv[2])
        v = max(len(tr), len(ev), 30522)
        tr = np.pad(tr, (0, v - len(tr))).astype(np.float64) + 1.0
        q = tr / tr.sum()
        evp = np.pad(ev, (0, v - len(ev)))
        ce = float(-(evp * np.log(q)).sum() / evp.sum())
        acc = float(evp[np.argmax(q)] / evp.sum())
        print("cross-entropy of held-out masked tokens under the training frequencies: %.4f nats; "
              "accuracy of always predicting the most frequent token: %.4f" % (ce, acc))


if __name__ == "__main__":
    main()
