#!/usr/bin/python3
"""recipe_table.py: the table of experiments/recipe-search/recipe_search.sh's rows (their curves: plot_metrics.py --compare).

For each row directory OUT/<row> with a metrics.jsonl: the recipe (optimizer, lr, global batch, steps), the
held-out masked-LM loss and accuracy and next-sentence accuracy at every evaluation and at the end, the sequences
seen until the held-out masked-LM loss first falls below the held-out unigram entropy minus MARGIN nats ("leaves
the unigram level"; the entropy comes from OUT/data/eval128.unigram.txt, written by experiments/common/unigram_baseline.py),
the wall time `bertrain estimate` projected for the row (OUT/<row>/estimate.txt) and the wall time measured
(OUT/<row>/wall.log: the sum of its run segments).

Usage: recipe_table.py OUT [--margin 0.25] [--rows a,b,c]   (Debian's python3)
"""
import argparse
import json
import lzma
import os
import re


def metrics_path(row_dir):
    """ROW/metrics.jsonl, or ROW/metrics.jsonl.xz (the archived rows keep their metrics compressed); None if neither."""
    for name in ("metrics.jsonl", "metrics.jsonl.xz"):
        if os.path.exists(os.path.join(row_dir, name)):
            return os.path.join(row_dir, name)
    return None


def read_jsonl(path):
    out = []
    with (lzma.open(path, "rt") if path.endswith(".xz") else open(path)) as f:
        for line in f:
            line = line.strip()
            if line:
                out.append(json.loads(line))
    return out


def unigram_entropy(out_dir):
    with open(os.path.join(out_dir, "data", "eval128.unigram.txt")) as f:
        m = re.search(r"unigram entropy ([0-9.]+) nats", f.read())
    return float(m.group(1))


def estimate_hours(row_dir):
    try:
        with open(os.path.join(row_dir, "estimate.txt")) as f:
            m = re.search(r"whole recipe on this machine: ([0-9.]+) hours", f.read())
        return float(m.group(1)) if m else None
    except OSError:
        return None


def measured_hours(row_dir):
    """(hours, interrupted): the sum of wall.log's start/end segments; a segment that was started and never ended
    before the next start (a killed run, resumed later) cannot be timed, so such a row is marked interrupted. An open
    last segment (still running) counts nothing."""
    try:
        lines = open(os.path.join(row_dir, "wall.log")).read().split("\n")
    except OSError:
        return None, False
    total, start, interrupted = 0.0, None, False
    for line in lines:
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "start":
            interrupted |= start is not None
            start = int(parts[1])
        elif parts[0] == "end" and start is not None:
            total += int(parts[1]) - start
            start = None
    return (total / 3600 if total > 0 else None), interrupted


def row_summary(out_dir, name, level):
    d = os.path.join(out_dir, name)
    rec = json.load(open(os.path.join(d, "recipe.json")))
    ph = rec["phases"][0]
    batch, seq = ph["train_batch_size"], ph["max_seq_length"]
    metrics = read_jsonl(metrics_path(d))
    evals = [m for m in metrics if m.get("eval")]
    train = [m for m in metrics if not m.get("eval")]
    left = None
    for e in evals:
        if e["masked_lm_loss"] < level:
            left = e["step"] * batch
            break
    last = evals[-1] if evals else None
    meas, interrupted = measured_hours(d)
    return {
        "name": name, "optimizer": rec["optimizer"]["name"], "lr": ph["learning_rate"], "batch": batch, "seq": seq,
        "steps": ph["num_train_steps"], "done": os.path.exists(os.path.join(d, "DONE")),
        "mlm": last["masked_lm_loss"] if last else None, "acc": last["masked_lm_accuracy"] if last else None,
        "nsp": last["next_sentence_accuracy"] if last else None, "best": min((e["masked_lm_loss"] for e in evals), default=None),
        "left": left, "trained_steps": len(train), "est": estimate_hours(d), "meas": meas, "interrupted": interrupted,
    }


def fmt(v, f="%.3f"):
    return "-" if v is None else f % v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--margin", type=float, default=0.25)
    ap.add_argument("--rows")
    a = ap.parse_args()
    h = unigram_entropy(a.out)
    level = h - a.margin
    names = a.rows.split(",") if a.rows else sorted(
        n for n in os.listdir(a.out) if metrics_path(os.path.join(a.out, n)))
    rows = [row_summary(a.out, n, level) for n in names]
    print("held-out unigram entropy %.3f nats; 'leaves the unigram level' = held-out MLM loss below %.3f" % (h, level))
    print()
    print("| row | optimizer | lr | batch x len | steps | held-out MLM loss | MLM acc | NSP acc | sequences until < %.2f |"
          " estimated h | measured h |" % level)
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        status = "" if r["done"] else " (running: %d/%d steps)" % (r["trained_steps"], r["steps"])
        err = ""
        if r["interrupted"]:
            err = " (interrupted: a killed segment is not counted)"
        elif r["est"] and r["meas"]:
            err = " (%+.0f%%)" % (100 * (r["meas"] - r["est"]) / r["est"])
        print("| %s%s | %s | %g | %d x %d | %d | %s | %s | %s | %s | %s | %s%s |" % (
            r["name"], status, r["optimizer"], r["lr"], r["batch"], r["seq"], r["steps"], fmt(r["mlm"]),
            fmt(r["acc"]), fmt(r["nsp"]), "not reached" if r["left"] is None else "{:,}".format(r["left"]),
            fmt(r["est"], "%.2f"), fmt(r["meas"], "%.2f"), err))


if __name__ == "__main__":
    main()
