#!/usr/bin/python3
"""long_run_model_card.py: exports the long run's final model for the repository.

Copies OUT/final/{model.safetensors,config.json,vocab.txt} (f32 safetensors, Hugging Face names) to MODEL_DIR and
writes MODEL_DIR/SOURCE.md: the recipe (phases as run, with a phase cut by the stop rule), the corpus, the steps,
the hours of training (the steps' own times, as experiments/long-run/stop_rule.py counts them) and the wall time of the trainer
segments (OUT/wall.log), the stop rule's decisions, and the held-out numbers per corpus (OUT/final_eval) against
their unigram entropies (OUT/data/*.unigram.txt).

Usage: long_run_model_card.py OUT MODEL_DIR CONFIG   (Debian's python3; run by experiments/long-run/pretrain_long_run.sh at the end;
CONFIG: the recipe the run was started with, whose planned steps a phase cut by the stop rule does not change)
Exit code 2 when OUT lacks the final model or its evaluations.
"""
import json
import os
import re
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stop_rule import load, training_hours  # noqa: E402

LIMIT_BYTES = 50 * 1000 * 1000  # a committed model stays small: at most 50 MB


def fail(msg):
    print("long_run_model_card.py: " + msg, file=sys.stderr)
    sys.exit(2)


def wall_hours(path):
    """(hours, open segments): the sum of wall.log's start/end pairs; a start without an end is not counted."""
    total, start, unmatched = 0, None, 0
    if not os.path.exists(path):
        return None, 0
    for line in open(path):
        parts = line.split()
        if len(parts) < 2:
            continue
        if parts[0] == "start":
            unmatched += start is not None
            start = int(parts[1])
        elif parts[0] == "end" and start is not None:
            total += int(parts[1]) - start
            start = None
    return total / 3600, unmatched


def unigram(path):
    m = re.search(r"unigram entropy ([0-9.]+) nats", open(path).read())
    if not m:
        fail("%s: no unigram entropy line" % path)
    return float(m.group(1))


def main():
    if len(sys.argv) != 4:
        print(__doc__.strip().split("\n\n")[-1], file=sys.stderr)
        return 2
    out, dst, config = sys.argv[1:]
    planned = [ph["num_train_steps"] for ph in json.load(open(config))["phases"]]
    final = os.path.join(out, "final")
    for f in ("model.safetensors", "config.json", "vocab.txt", "trainer_state.json"):
        if not os.path.isfile(os.path.join(final, f)):
            fail("%s/%s missing: the run has not finished" % (final, f))
    size = os.path.getsize(os.path.join(final, "model.safetensors"))
    if size > LIMIT_BYTES:
        fail("%s/model.safetensors is %d bytes, over the 50 MB the repository takes" % (final, size))
    state = json.load(open(os.path.join(final, "trainer_state.json")))
    recipe = state["recipe"]
    evals = {}
    for corpus in ("gutenberg", "wiki"):
        p = os.path.join(out, "final_eval", corpus + ".json")
        if not os.path.isfile(p):
            fail("%s missing: the final evaluation has not run" % p)
        evals[corpus] = (json.load(open(p)), unigram(os.path.join(out, "data", "eval_%s128.unigram.txt" % corpus)))
    pooled = unigram(os.path.join(out, "data", "eval128.unigram.txt"))
    phases, steps, ev = load(os.path.join(out, "run"))
    hours = training_hours(phases, steps)
    per_phase = {}
    for s, m in steps.items():
        per_phase[int(m.get("phase", 1))] = max(per_phase.get(int(m.get("phase", 1)), 0), int(m.get("phase_step", 0)))
    wall, unmatched = wall_hours(os.path.join(out, "wall.log"))
    cut = open(os.path.join(out, "phase1_cut")).read().strip() if os.path.exists(os.path.join(out, "phase1_cut")) else None
    decisions = [l.rstrip("\n") for l in open(os.path.join(out, "stop_rule.log"))
                 if re.search(r"fires|stop and report|phase 1 ends|run ends|both phases finished|continuing from", l)] \
        if os.path.exists(os.path.join(out, "stop_rule.log")) else []

    tmp = dst.rstrip("/") + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    for f in ("model.safetensors", "config.json", "vocab.txt"):
        shutil.copy(os.path.join(final, f), tmp)
    L = []
    L.append("# bert-mini-en: bertrain's long pretraining run\n")
    L.append("A BERT-mini (4 layers, hidden 256, 4 heads, intermediate 1024; Hugging Face `config.json` and parameter names,")
    L.append("f32 safetensors) with its masked-LM and next-sentence heads, pretrained from scratch by")
    L.append("`experiments/long-run/pretrain_long_run.sh` on two cores of this project's machine; exported %s. The training text is"
             % time.strftime("%Y-%m-%d", time.gmtime()))
    L.append("Wikipedia text (CC BY-SA 4.0, through SQuAD v1.1) and Project Gutenberg books (public domain in the USA).\n")
    L.append("## Corpus")
    L.append("- The Gutenberg training books of `../shared/data/gutenberg_en` (`experiments/common/split_corpus.py`; held-out books apart)")
    L.append("  and the SQuAD v1.1 *train* contexts (`experiments/common/squad_corpus.py`; the last 12 articles held out). No article of")
    L.append("  the SQuAD dev files, from which QNLI comes. 12.4 M WordPiece tokens (bert-base-uncased vocabulary, lower-cased).")
    L.append("- Shards: `create-pretraining-data`, dupe_factor 5, at length 128 (20 predictions) and 512 (80 predictions).\n")
    L.append("## Recipe (as run)")
    L.append("- Optimizer: %s (beta1 %s, beta2 %s, eps %s, weight decay %s, gradient clipping %s); bf16: %s; unpad: %s;"
             % (recipe["optimizer"]["name"], recipe["optimizer"]["beta1"], recipe["optimizer"]["beta2"],
                recipe["optimizer"]["eps"], recipe["optimizer"]["weight_decay"], recipe["optimizer"]["clip_grad_norm"],
                recipe.get("bf16"), recipe.get("unpad", "auto")))
    init = recipe.get("init_checkpoint") or ""
    L.append("  next-sentence prediction: %s; seed %s; start: %s." % (recipe.get("next_sentence"), recipe.get("seed"),
             "the unigram bias (`INIT=unigram`, scripts/unigram_bias_init.py)" if init.endswith("init-unigram")
             else ("`%s`" % init if init else "random initialisation")))
    for i, ph in enumerate(phases, 1):
        L.append("- Phase %d: length %d, global batch %d (micro-batch %d), peak lr %g, warmup %s, %s decay, %d steps planned,"
                 " %d run%s." % (i, ph["max_seq_length"], ph["train_batch_size"], ph.get("micro_batch_size", 0),
                                 ph["learning_rate"], ph.get("warmup_proportion"), ph.get("decay", "poly"),
                                 planned[i - 1] if i <= len(planned) else ph["num_train_steps"], per_phase.get(i, 0),
                                 " (cut by the stop rule at step %s)" % cut if i == 1 and cut not in (None, "none") else ""))
    L.append("- Global steps: %d. Hours of training (the steps' own times): %.2f. Wall time of the trainer segments"
             " (evaluations and checkpoints included, pauses not): %s%s.\n"
             % (state["global_step"], max(hours.values()) if hours else 0.0,
                "%.2f h" % wall if wall is not None else "not recorded",
                " (%d segment(s) ended by a lost machine are not counted)" % unmatched if unmatched else ""))
    L.append("## Held-out numbers (final checkpoint)")
    L.append("| held-out text | masked-LM loss | unigram entropy | difference | masked-LM accuracy | next-sentence accuracy |")
    L.append("|---|---|---|---|---|---|")
    names = {"gutenberg": "Gutenberg books", "wiki": "Wikipedia articles"}
    for corpus, (r, h) in evals.items():
        L.append("| %s | %.4f | %.4f | %+.3f | %.4f | %.4f |" % (names[corpus], r["masked_lm_loss"], h,
                 r["masked_lm_loss"] - h, r["masked_lm_accuracy"], r["next_sentence_accuracy"]))
    if ev:
        last = ev[max(ev)]
        L.append("\nPooled held-out set (both, as the trainer evaluated it every %d steps): masked-LM loss %.4f (unigram"
                 " entropy %.4f), accuracy %.4f, next-sentence accuracy %.4f at step %d."
                 % (recipe.get("eval_every_steps", 0), last["masked_lm_loss"], pooled, last["masked_lm_accuracy"],
                    last["next_sentence_accuracy"], max(ev)))
    if decisions:
        L.append("\n## The stop rule and the run's log (OUT/stop_rule.log)")
        L.extend("    " + d for d in decisions[-12:])
    L.append("\nRegenerate: `INIT=unigram CONFIG=%s experiments/long-run/pretrain_long_run.sh` (experiments/long-run/README.md; "
             "it needs `../shared/data/gutenberg_en` and the SQuAD v1.1 train file beside the clone, and at the end "
             "writes its model over this directory); this file: "
             "`experiments/long-run/long_run_model_card.py OUT %s %s`." % (config, dst, config))
    with open(os.path.join(tmp, "SOURCE.md"), "w") as f:
        f.write("\n".join(L) + "\n")
    shutil.rmtree(dst, ignore_errors=True)
    os.replace(tmp, dst)
    print("wrote %s (%d bytes of weights, global step %d)" % (dst, size, state["global_step"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
