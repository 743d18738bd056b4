#!/usr/bin/python3
"""Compare two bertrain checkpoint directories tensor by tensor (model.safetensors) and, with --metrics, the
per-step losses in the metrics.jsonl beside them. Exit 1 on a difference. Standard library only.

Usage: compare_checkpoints.py DIR_A DIR_B [--exact | --rtol R --atol A [--norm]] [--metrics]
--norm compares each tensor as a whole: ||a - b|| <= atol * sqrt(n) + rtol * ||b|| (L2 norms), so elements near zero
(e.g. a bias whose gradient is zero and which holds rounding noise) do not dominate; losses stay element-wise.
"""
import argparse
import json
import math
import os
import struct
import sys


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        raw = data[b:e]
        fmt = {"F32": "f", "F64": "d", "I32": "i", "I64": "q"}[info["dtype"]]
        out[name] = (raw, struct.unpack("<%d%s" % (len(raw) // struct.calcsize(fmt), fmt), raw))
    return out


def step_losses(run_dir):
    rows = {}
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            j = json.loads(line)
            if not j.get("eval"):
                rows[j["step"]] = (j["loss"], j["mlm_loss"], j["nsp_loss"], j["lr"])
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--exact", action="store_true")
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--atol", type=float, default=1e-7)
    ap.add_argument("--metrics", action="store_true")
    ap.add_argument("--norm", action="store_true")
    args = ap.parse_args()
    ta = read_safetensors(os.path.join(args.a, "model.safetensors"))
    tb = read_safetensors(os.path.join(args.b, "model.safetensors"))
    if sorted(ta) != sorted(tb):
        sys.exit("tensor names differ")
    worst = 0.0
    for name in ta:
        ra, va = ta[name]
        rb, vb = tb[name]
        if args.exact:
            if ra != rb:
                sys.exit("tensor %s differs" % name)
            continue
        if args.norm:
            d = math.sqrt(sum((x - y) ** 2 for x, y in zip(va, vb)))
            ref = math.sqrt(sum(y * y for y in vb))
            if d > args.atol * math.sqrt(len(vb)) + args.rtol * ref:
                sys.exit("tensor %s differs: ||a - b|| = %r, ||b|| = %r" % (name, d, ref))
            worst = max(worst, d / (ref + 1e-12))
            continue
        for x, y in zip(va, vb):
            d = abs(x - y)
            if d > args.atol + args.rtol * abs(y):
                sys.exit("tensor %s differs: %r vs %r" % (name, x, y))
            worst = max(worst, d / (abs(y) + 1e-12))
    print("%d tensors match (%s; worst relative difference %.3g)" % (len(ta), "bit for bit" if args.exact else "norm-wise tolerance" if args.norm else "tolerance", worst))
    if args.metrics:
        ma = step_losses(os.path.dirname(os.path.abspath(args.a)))
        mb = step_losses(os.path.dirname(os.path.abspath(args.b)))
        if sorted(ma) != sorted(mb):
            sys.exit("metrics.jsonl steps differ: %s vs %s" % (sorted(ma), sorted(mb)))
        for s in ma:
            for x, y in zip(ma[s], mb[s]):
                ok = x == y if args.exact else abs(x - y) <= args.atol + args.rtol * abs(y)
                if not ok:
                    sys.exit("step %d: metrics differ: %r vs %r" % (s, ma[s], mb[s]))
        print("%d steps of metrics.jsonl match" % len(ma))


if __name__ == "__main__":
    main()
