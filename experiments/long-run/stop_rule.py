#!/usr/bin/python3
"""stop_rule.py: the stop rule for a long pretraining run, read from its output directory.

The rule: stop when the held-out masked-LM loss improves by less than MIN_RATE nats per hour of training (default
0.02), measured over the last WINDOW hours of training (default 1). Hours of training are the sum of the steps'
own times (train_batch_size of the step's phase / its sequences_per_second in metrics.jsonl; evaluation and
checkpoint time are not training), so pauses, evaluations and a slower machine do not make the run look stalled.
A step logged twice (the steps after a checkpoint, replayed by --resume) counts once, with its last record.

Usage: stop_rule.py OUTPUT_DIR [--min_rate 0.02] [--window 1.0] [--phase N]
With --phase N only the evaluations after steps of phase N count (hours still count from the run's start): a later
phase warms the learning rate up again from zero, and its first evaluations are no measure of the earlier phase's.
Prints one line: the training hours so far, the held-out loss now and WINDOW hours earlier, the rate, the verdict.
Exit code: 0 keep training (or too early to tell), 1 the rule fires (stop and report), 2 unreadable input.
A watcher can run it after each evaluation and send SIGTERM to the trainer when it exits 1 (the trainer saves a
checkpoint and exits; --resume continues if the decision is reversed).
"""
import argparse
import json
import os
import sys


def load(out_dir):
    recipe_path = os.path.join(out_dir, "recipe.json")
    metrics_path = os.path.join(out_dir, "metrics.jsonl")
    with open(recipe_path) as f:
        phases = json.load(f)["phases"]
    steps, evals = {}, {}
    with open(metrics_path) as f:
        lines = f.read().split("\n")
    # The last piece has no newline: either empty, or a record the trainer is writing now (read it next time).
    for n, line in enumerate(lines[:-1], 1):
        line = line.strip()
        if not line:
            continue
        try:
            m = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError("%s:%d: not JSON (%s)" % (metrics_path, n, e))
        if m.get("eval"):
            evals[m["step"]] = m
        elif "sequences_per_second" in m:
            steps[m["step"]] = m
    return phases, steps, evals


def training_hours(phases, steps):
    """step -> hours of training up to and including that step."""
    out, total = {}, 0.0
    for s in sorted(steps):
        m = steps[s]
        ph = phases[min(int(m.get("phase", 1)), len(phases)) - 1]
        if m["sequences_per_second"] > 0:
            total += ph["train_batch_size"] / m["sequences_per_second"] / 3600
        out[s] = total
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--min_rate", type=float, default=0.02, help="nats per hour of training (default 0.02)")
    ap.add_argument("--window", type=float, default=1.0, help="hours of training the rate is measured over")
    ap.add_argument("--key", default="masked_lm_loss")
    ap.add_argument("--phase", type=int, default=0, help="only the evaluations of this phase (1-based; 0: all)")
    a = ap.parse_args()
    if not a.window > 0 or a.min_rate != a.min_rate:
        ap.error("--window must be > 0 and --min_rate a number")
    try:
        return decide(a)
    except Exception as e:  # noqa: BLE001 - any failure is "unreadable input" (2), never "the rule fires" (1)
        print("stop_rule.py: %s: %s: %s" % (a.out_dir, type(e).__name__, e), file=sys.stderr)
        return 2


def decide(a):
    phases, steps, evals = load(a.out_dir)
    hours = training_hours(phases, steps)
    points = [(hours[s], evals[s][a.key], s) for s in sorted(evals)
              if s in hours and (a.phase == 0 or int(steps[s].get("phase", 1)) == a.phase)]
    if not points:
        print("stop_rule.py: %s: no evaluation%s yet: keep training" % (a.out_dir, " of phase %d" % a.phase if a.phase else ""))
        return 0
    t, loss, step = points[-1]
    earlier = [p for p in points if p[0] <= t - a.window + 1e-6]  # 1e-6 h: sums of step times round
    if not earlier:
        print("stop_rule.py: %s: %.2f h of training, %s %.4f at step %d: less than %.2f h of evaluations, too early: "
              "keep training" % (a.out_dir, t, a.key, loss, step, a.window))
        return 0
    t0, loss0, step0 = earlier[-1]
    rate = (loss0 - loss) / (t - t0)
    fires = rate < a.min_rate
    print("stop_rule.py: %s: %.2f h of training; %s %.4f at step %d, %.4f at step %d (%.2f h earlier): %+.4f nats "
          "per hour: %s" % (a.out_dir, t, a.key, loss, step, loss0, step0, t - t0, rate,
                            "below %.3f, stop and report" % a.min_rate if fires else "keep training"))
    return 1 if fires else 0


if __name__ == "__main__":
    sys.exit(main())
