#!/usr/bin/python3
"""Draw loss, accuracy and learning-rate curves from a bertrain metrics.jsonl to a PNG (Debian's matplotlib).

Usage: plot_metrics.py METRICS.jsonl OUT.png
       plot_metrics.py --compare OUT.png RUN_DIR [RUN_DIR ...] [--hline Y[:LABEL]] [--title T]
Training lines give loss / mlm_loss / nsp_loss / lr per step; evaluation lines ("eval": true) give the
held-out masked-LM loss and accuracy. Phase boundaries are drawn as vertical lines.
--compare puts several runs (output directories with metrics.jsonl and recipe.json, e.g. the rows of
experiments/recipe-search/recipe_search.sh) on one figure: held-out masked-LM loss and accuracy against the training tokens seen
(each step counts train_batch_size x max_seq_length of its phase, so rows with other batches or lengths line up),
labelled by directory name; --hline draws a reference level such as the held-out unigram entropy.
"""
import argparse
import json
import lzma
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_metrics(path):
    """(training records, evaluation records) of a metrics.jsonl; PATH.xz is read when PATH is missing."""
    train, evals = [], []
    if not os.path.exists(path) and os.path.exists(path + ".xz"):
        path += ".xz"
    with (lzma.open(path, "rt") if path.endswith(".xz") else open(path)) as f:
        for line in f:
            line = line.strip()
            if line:
                j = json.loads(line)
                (evals if j.get("eval") else train).append(j)
    return train, evals


def compare(argv):
    ap = argparse.ArgumentParser(prog="plot_metrics.py --compare")
    ap.add_argument("out")
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--hline", action="append", default=[], help="Y or Y:LABEL, a horizontal reference line")
    ap.add_argument("--title", default="")
    a = ap.parse_args(argv)
    fig, ax = plt.subplots(1, 2, figsize=(14, 5))
    for run in a.runs:
        phases = json.load(open(os.path.join(run, "recipe.json")))["phases"]
        train, evals = read_metrics(os.path.join(run, "metrics.jsonl"))
        tokens, total = {}, 0
        for j in sorted({j["step"]: j for j in train}.values(), key=lambda j: j["step"]):  # a replayed step once
            p = phases[min(int(j.get("phase", 1)), len(phases)) - 1]
            total += p["train_batch_size"] * p["max_seq_length"]
            tokens[j["step"]] = total
        pts = [(tokens[e["step"]] / 1e6, e) for e in evals if e["step"] in tokens]
        if not pts:
            continue
        name = os.path.basename(os.path.normpath(run))
        ax[0].plot([x for x, _ in pts], [e["masked_lm_loss"] for _, e in pts], ".-", label=name)
        ax[1].plot([x for x, _ in pts], [e["masked_lm_accuracy"] for _, e in pts], ".-", label=name)
    for h in a.hline:
        y, _, label = h.partition(":")
        ax[0].axhline(float(y), color="k", ls="--", lw=0.8, label=label or None)
    ax[0].set_ylabel("held-out masked-LM loss (nats)")
    ax[1].set_ylabel("held-out masked-LM accuracy")
    for x in ax:
        x.set_xlabel("training tokens seen (millions)")
        x.grid(alpha=0.3)
        x.legend(fontsize=7)
    if a.title:
        fig.suptitle(a.title)
    fig.tight_layout()
    fig.savefig(a.out, dpi=100)
    print("wrote %s (%d runs)" % (a.out, len(a.runs)))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--compare":
        return compare(sys.argv[2:])
    if len(sys.argv) != 3 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr if len(sys.argv) != 2 else sys.stdout)
        sys.exit(0 if len(sys.argv) == 2 and sys.argv[1] in ("-h", "--help") else 2)
    src, out = sys.argv[1], sys.argv[2]
    train, evals = [], []
    with open(src) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            j = json.loads(line)
            (evals if j.get("eval") else train).append(j)
    if not train and not evals:
        sys.exit("%s has no metrics" % src)
    fig, ax = plt.subplots(1, 3, figsize=(16, 4.5))
    steps = [j["step"] for j in train]
    ax[0].plot(steps, [j["loss"] for j in train], label="loss", lw=0.8)
    ax[0].plot(steps, [j["mlm_loss"] for j in train], label="masked-LM loss", lw=0.8)
    ax[0].plot(steps, [j["nsp_loss"] for j in train], label="next-sentence loss", lw=0.8)
    if evals:
        ax[0].plot([j["step"] for j in evals], [j["masked_lm_loss"] for j in evals], "o-", label="held-out masked-LM loss")
    ax[0].set_xlabel("global step")
    ax[0].set_ylabel("nats")
    ax[0].legend()
    ax[0].set_title("loss")
    if evals:
        ax[1].plot([j["step"] for j in evals], [j["masked_lm_accuracy"] for j in evals], "o-", label="masked-LM accuracy")
        ax[1].plot([j["step"] for j in evals], [j["next_sentence_accuracy"] for j in evals], "s-",
                   label="next-sentence accuracy")
        ax[1].legend()
    ax[1].set_xlabel("global step")
    ax[1].set_title("held-out accuracy")
    ax[2].plot(steps, [j["lr"] for j in train], lw=0.8)
    ax[2].set_xlabel("global step")
    ax[2].set_title("learning rate")
    for j0, j1 in zip(train, train[1:]):
        if j1["phase"] != j0["phase"]:
            for a in ax:
                a.axvline(j1["step"], color="grey", ls="--", lw=0.6)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print("wrote %s (%d steps, %d evaluations)" % (out, len(train), len(evals)))


if __name__ == "__main__":
    main()
