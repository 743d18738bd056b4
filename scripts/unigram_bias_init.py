#!/usr/bin/python3
"""unigram_bias_init.py: a copy of a checkpoint whose masked-LM output bias is the log unigram distribution of the
training shards' masked tokens, so that the model predicts token frequencies from step 0 instead of spending its
first few hundred steps learning them (the recipe search's row "bias-unigram", experiments/recipe-search). Karpathy's "init well" advice
("A Recipe for Training Neural Networks", 2019): set the final layer's bias so that the initial loss is what the
output distribution alone would give.

The bias of token v becomes log q(v) - mean_v log q(v), where q is the add-one smoothed frequency of v among the
masked tokens of TRAIN_SHARD_DIR (masked_lm_ids at real positions of every *training*.hdf5 file, masked_counts
below; experiments/common/unigram_baseline.py reports the loss these counts alone give); centring changes no probability. Every other tensor, config.json and vocab.txt are
copied unchanged. The safetensors file is rewritten with the same header, so only the bias bytes differ.

Usage: unigram_bias_init.py CHECKPOINT_DIR TRAIN_SHARD_DIR OUT_DIR   (Debian's python3-h5py and numpy)
"""
import glob
import json
import os
import shutil
import struct
import sys

import h5py
import numpy as np

BIAS = "cls.predictions.bias"


def masked_counts(shard_dir):
    """Counts of each token id among the masked positions (masked_lm_ids where masked_lm_positions != 0) of every
    *training*.hdf5 file in shard_dir: an int64 array indexed by token id."""
    counts = np.zeros(0, dtype=np.int64)
    for path in sorted(glob.glob(os.path.join(shard_dir, "*training*.hdf5"))):
        with h5py.File(path, "r") as f:
            pos = f["masked_lm_positions"][:]
            ids = f["masked_lm_ids"][:]
        real = ids[pos != 0]
        c = np.bincount(real)
        if len(c) > len(counts):
            counts = np.pad(counts, (0, len(c) - len(counts)))
        counts[: len(c)] += c
    return counts


def main():
    if len(sys.argv) != 4:
        print(__doc__.strip().split("\n\n")[-1], file=sys.stderr)
        return 2
    src, shards, out = sys.argv[1:]
    path = os.path.join(src, "model.safetensors")
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    if BIAS not in header:
        print("unigram_bias_init.py: %s has no tensor '%s'" % (path, BIAS), file=sys.stderr)
        return 2
    t = header[BIAS]
    if t["dtype"] != "F32" or len(t["shape"]) != 1:
        print("unigram_bias_init.py: %s: '%s' must be a 1-D F32 tensor, got %s %s" % (path, BIAS, t["dtype"], t["shape"]),
              file=sys.stderr)
        return 2
    vocab = t["shape"][0]
    counts = masked_counts(shards)
    if counts.sum() == 0:
        print("unigram_bias_init.py: no masked tokens in the *training*.hdf5 files of %s" % shards, file=sys.stderr)
        return 2
    if len(counts) > vocab:
        print("unigram_bias_init.py: %s holds token id %d, beyond the bias's %d entries" % (shards, len(counts) - 1, vocab),
              file=sys.stderr)
        return 2
    q = (np.pad(counts, (0, vocab - len(counts))).astype(np.float64) + 1.0)
    q /= q.sum()
    bias = np.log(q)
    bias -= bias.mean()
    begin, end = t["data_offsets"]
    body = bytearray(raw[8 + n :])
    assert end - begin == 4 * vocab
    body[begin:end] = bias.astype("<f4").tobytes()
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(src):
        p = os.path.join(src, name)
        if name != "model.safetensors" and os.path.isfile(p) and name.endswith((".json", ".txt")) and name not in ("trainer_state.json", "recipe.json"):
            shutil.copy(p, os.path.join(out, name))
    tmp = os.path.join(out, "model.safetensors.tmp")
    with open(tmp, "wb") as f:
        f.write(raw[: 8 + n])
        f.write(body)
    os.replace(tmp, os.path.join(out, "model.safetensors"))
    p = np.exp(bias) / np.exp(bias).sum()
    print("unigram_bias_init.py: %s -> %s: %s from %d masked tokens (entropy of the initial output distribution "
          "%.4f nats)" % (src, out, BIAS, int(counts.sum()), float(-(p * np.log(p)).sum())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
