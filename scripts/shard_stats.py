#!/usr/bin/python3
# shard_stats.py: statistics of pretraining shards (NVIDIA HDF5 layout) with h5py: masked fraction, NSP
# balance, the 80/10/10 [MASK]/random/original split, sequence lengths.
# Usage: /usr/bin/python3 scripts/shard_stats.py DIR_OR_FILE... [--mask_id 103] [--json]
import argparse
import glob
import json
import os
import sys

import h5py
import numpy as np


def shard_files(paths):
    files = []
    for p in paths:
        if os.path.isdir(p):
            files += sorted(f for f in glob.glob(os.path.join(p, "*")) if "training" in os.path.basename(f))
        else:
            files.append(p)
    if not files:
        sys.exit("shard_stats: no shard files (names containing 'training') in %s" % paths)
    return files


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--mask_id", type=int, default=103, help="id of [MASK] (103 in BERT's vocabs)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    a = ap.parse_args()
    n = tokens = real_tokens = masked = rnd_next = 0
    n_mask = n_keep = n_rand = 0
    full = 0
    T = P = None
    for f in shard_files(a.paths):
        with h5py.File(f, "r") as h:
            ids = h["input_ids"][:]
            mask = h["input_mask"][:]
            pos = h["masked_lm_positions"][:]
            lab = h["masked_lm_ids"][:]
            nsl = h["next_sentence_labels"][:]
        T, P = ids.shape[1], pos.shape[1]
        n += ids.shape[0]
        lens = mask.sum(axis=1)
        tokens += int(lens.sum())
        real_tokens += int((lens - 3).sum())  # without [CLS] [SEP] [SEP]
        full += int((lens == T).sum())
        real = pos != 0
        masked += int(real.sum())
        rnd_next += int(nsl.sum())
        at = np.take_along_axis(ids, pos.astype(np.int64), axis=1)
        n_mask += int((real & (at == a.mask_id)).sum())
        n_keep += int((real & (at == lab) & (at != a.mask_id)).sum())
        n_rand += int((real & (at != lab) & (at != a.mask_id)).sum())
    s = {
        "files": len(shard_files(a.paths)),
        "instances": n,
        "max_seq_length": int(T),
        "max_predictions_per_seq": int(P),
        "mean_tokens": tokens / n,
        "full_length_fraction": full / n,
        "masked_tokens": masked,
        "masked_fraction_of_tokens": masked / tokens,
        "masked_fraction_without_cls_sep": masked / real_tokens,
        "next_sentence_random_fraction": rnd_next / n,
        "mask_fraction": n_mask / masked,
        "random_fraction": n_rand / masked,
        "original_fraction": n_keep / masked,
    }
    if a.json:
        print(json.dumps(s))
    else:
        for k, v in s.items():
            print("%-34s %s" % (k, ("%.4f" % v) if isinstance(v, float) else v))


if __name__ == "__main__":
    main()
