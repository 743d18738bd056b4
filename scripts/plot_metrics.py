#!/usr/bin/python3
"""Draw loss, accuracy and learning-rate curves from a bertrain metrics.jsonl to a PNG (Debian's matplotlib).

Usage: plot_metrics.py METRICS.jsonl OUT.png
Training lines give loss / mlm_loss / nsp_loss / lr per step; evaluation lines ("eval": true) give the
held-out masked-LM loss and accuracy. Phase boundaries are drawn as vertical lines.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
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
