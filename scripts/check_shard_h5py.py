#!/usr/bin/python3
# check_shard_h5py.py: opens shards with h5py and checks NVIDIA DeepLearningExamples' keys, dtypes, shapes
# and padding conventions. Exit status 0 when all hold. Usage: check_shard_h5py.py DIR T P
import glob
import os
import sys

import h5py
import numpy as np

KEYS = {"input_ids": np.int32, "input_mask": np.int8, "segment_ids": np.int8,
        "masked_lm_positions": np.int32, "masked_lm_ids": np.int32, "next_sentence_labels": np.int8}


def fail(msg):
    print("check_shard_h5py: FAIL: " + msg)
    sys.exit(1)


def main():
    d, T, P = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    files = sorted(f for f in glob.glob(os.path.join(d, "*")) if "training" in os.path.basename(f))
    if not files:
        fail("no shard in " + d)
    if not os.path.exists(os.path.join(d, "dataset_info.json")):
        fail("no dataset_info.json")
    total = 0
    for f in files:
        with h5py.File(f, "r") as h:
            if set(h.keys()) != set(KEYS):
                fail("%s: keys %s" % (f, sorted(h.keys())))
            N = h["input_ids"].shape[0]
            for k, dt in KEYS.items():
                ds = h[k]
                if ds.dtype != dt:
                    fail("%s: %s has dtype %s, expected %s" % (f, k, ds.dtype, np.dtype(dt)))
                want = (N,) if k == "next_sentence_labels" else (N, P if k.startswith("masked") else T)
                if ds.shape != want:
                    fail("%s: %s has shape %s, expected %s" % (f, k, ds.shape, want))
                if ds.compression != "gzip":
                    fail("%s: %s is not gzip-compressed" % (f, k))
            ids, mask, seg = h["input_ids"][:], h["input_mask"][:], h["segment_ids"][:]
            pos, lab, nsl = h["masked_lm_positions"][:], h["masked_lm_ids"][:], h["next_sentence_labels"][:]
        lens = mask.sum(axis=1)
        if not (mask == (np.arange(T)[None, :] < lens[:, None])).all():
            fail(f + ": input_mask is not a prefix of ones")
        if (ids[mask == 0] != 0).any() or (seg[mask == 0] != 0).any():
            fail(f + ": padding is not 0")
        if (ids[:, 0] != 101).any():
            fail(f + ": input_ids do not start with [CLS]=101")
        if ((ids == 102).sum(axis=1) < 2).any():
            fail(f + ": an instance has fewer than two [SEP]")
        real = pos != 0
        if (lab[~real] != 0).any():
            fail(f + ": padded prediction slots with a non-zero id")
        for r in range(N):
            p = pos[r][real[r]]
            if (np.diff(p) <= 0).any() or (p >= lens[r]).any():
                fail("%s: row %d positions %s not increasing or beyond the sequence" % (f, r, p))
            if real[r][len(p):].any():
                fail("%s: row %d has real slots after padding" % (f, r))
        if not set(np.unique(nsl)) <= {0, 1}:
            fail(f + ": next_sentence_labels outside {0, 1}")
        total += N
    print("check_shard_h5py: OK: %d files, %d instances, T=%d, P=%d" % (len(files), total, T, P))


if __name__ == "__main__":
    main()
