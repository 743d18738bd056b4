#!/usr/bin/env python3
"""attention_neighbours.py EVAL_SHARD CHECKPOINT...: where a pretraining checkpoint's attention heads look.

For the first --sequences instances of EVAL_SHARD (an HDF5 shard of create-pretraining-data, NVIDIA's keys), and
for each CHECKPOINT (a directory with model.safetensors and config.json, or a .safetensors file whose config is
--config), prints per layer and head the mean attention entropy over real query tokens (nats; uniform attention
over n real tokens is ln n) and the mean attention mass a query puts on its two neighbours (i-1, i+1; uniform:
about 2/n), and the masked-LM loss of those instances.

Why: a BERT that leaves the unigram level stalls about 0.4 nats below it while its heads still spread attention
over the whole sequence (a bag of words); the loss falls again when heads start to attend to nearby tokens
("syntactic attention structure", Chen et al. 2023, "Sudden drops in the loss: syntax acquisition, phase
transitions, and simplicity bias in MLMs"). The neighbour mass shows whether that has begun. The forward is
tests/reference/torch_bert.py's (PyTorch, float32, eval mode). Runs with Debian's /usr/bin/python3 (python3-torch, h5py).
"""
import argparse
import json
import math
import os
import sys

import h5py
import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
import torch_bert as tb  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("eval_shard", help="HDF5 shard of bertrain create-pretraining-data (NVIDIA's keys)")
    ap.add_argument("checkpoints", nargs="+",
                    help="pretraining checkpoint directories (model.safetensors, config.json) or .safetensors files")
    ap.add_argument("--sequences", type=int, default=64, help="instances from the start of the shard (default 64)")
    ap.add_argument("--config", help="config.json for checkpoints given as .safetensors files")
    a = ap.parse_args()
    if a.sequences < 1:
        sys.exit(f"--sequences must be at least 1, got {a.sequences}")
    torch.set_num_threads(1)
    try:
        f = h5py.File(a.eval_shard, "r")
    except OSError as e:
        sys.exit(f"{a.eval_shard}: cannot be opened as HDF5: {e}")
    with f:
        for k in ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
                  "next_sentence_labels"):
            if k not in f:
                sys.exit(f"{a.eval_shard}: no dataset '{k}' (not a create-pretraining-data shard)")
        d = {k: torch.tensor(np.asarray(f[k][:a.sequences])) for k in f}
    mask = d["input_mask"]
    pos = d["masked_lm_positions"]
    weights = (pos > 0).float()  # slot 0 of an unused prediction is position 0 ([CLS]), never a masked token
    real = mask.bool()
    for ck in a.checkpoints:
        if not os.path.exists(ck):
            sys.exit(f"{ck}: no such checkpoint directory or file")
        if os.path.isdir(ck):
            weights_path, cfg_path = os.path.join(ck, "model.safetensors"), os.path.join(ck, "config.json")
        else:
            weights_path, cfg_path = ck, a.config
            if not cfg_path:
                sys.exit(f"{ck}: a .safetensors file needs --config")
        for path in (weights_path, cfg_path):
            if not os.path.isfile(path):
                sys.exit(f"{ck}: {path} does not exist")
        cfg = json.load(open(cfg_path))
        try:
            _, _, p, _ = tb.read_safetensors(weights_path)
        except (AssertionError, ValueError, KeyError) as e:
            sys.exit(f"{weights_path}: not a readable safetensors file: {e}")
        p = {k: v.float() for k, v in p.items()}
        missing = [n for n in ("bert.pooler.dense.weight", "cls.predictions.bias") if n not in p]
        if missing:
            sys.exit(f"{weights_path}: no {', '.join(missing)}: not a BertForPreTraining checkpoint")
        probs = []
        with torch.no_grad():
            out = tb.forward(cfg, p, d["input_ids"], d["segment_ids"], mask, pos, d["masked_lm_ids"], weights,
                             d["next_sentence_labels"], probs_out=probs)
        n = real.sum(1).float().mean().item()
        cells = []
        for pr in probs:
            ent = -(pr.clamp_min(1e-30).log() * pr).sum(-1)  # (B, NH, T)
            nb = torch.zeros_like(ent)
            nb[:, :, 1:] += torch.diagonal(pr[:, :, 1:, :-1], dim1=-2, dim2=-1)
            nb[:, :, :-1] += torch.diagonal(pr[:, :, :-1, 1:], dim1=-2, dim2=-1)
            m = real[:, None, :].expand_as(ent)
            cells.append(" ".join(f"{ent[:, h][m[:, h]].mean():.2f}/{nb[:, h][m[:, h]].mean():.3f}"
                                  for h in range(ent.shape[1])))
        print(f"{ck}: masked-LM loss {out['mlm_loss']:.4f} on {mask.shape[0]} instances "
              f"(mean {n:.1f} real tokens: uniform attention {math.log(n):.2f} nats, neighbour mass {2 / n:.3f})")
        for i, c in enumerate(cells):
            print(f"  layer {i} (entropy/neighbour mass per head): {c}")


if __name__ == "__main__":
    main()
