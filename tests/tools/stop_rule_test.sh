#!/usr/bin/env bash
# stop_rule_test.sh SOURCE_DIR: experiments/long-run/stop_rule.py (the stop rule) on hand-made output directories:
# it keeps training while the held-out loss falls fast enough or there is less than a window of evaluations,
# fires (exit 1) when it falls by less than the rate, counts a step replayed by --resume once, and refuses an
# unreadable directory with exit 2.
set -euo pipefail
rule="$1/experiments/long-run/stop_rule.py"
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
# make DIR DROP_PER_HOUR [REPLAY]: 72 steps of batch 100 at 0.5 seq/s (200 s each: 18 steps per hour), an
# evaluation every 18 steps whose loss falls by DROP_PER_HOUR; REPLAY logs steps 37-54 twice, as after a resume.
make() {
  mkdir -p "$1"
  /usr/bin/python3 - "$1" "$2" "${3:-}" <<'PY'
import json, os, sys
d, drop, replay = sys.argv[1], float(sys.argv[2]), sys.argv[3] == "replay"
json.dump({"phases": [{"train_batch_size": 100}]}, open(os.path.join(d, "recipe.json"), "w"))
with open(os.path.join(d, "metrics.jsonl"), "w") as f:
    for s in range(1, 73):
        f.write(json.dumps({"step": s, "phase": 1, "sequences_per_second": 0.5}) + "\n")
        if s % 18 == 0:
            f.write(json.dumps({"eval": True, "step": s, "masked_lm_loss": 6.0 - drop * s / 18}) + "\n")
        if replay and s == 54:
            for r in range(37, 55):
                f.write(json.dumps({"step": r, "phase": 1, "sequences_per_second": 0.5}) + "\n")
PY
}
expect() {  # expect CODE PATTERN ARGS...: exit code and a pattern of the one output line
  local code=$1 pat=$2 rc=0 out
  shift 2
  out=$("$rule" "$@" 2>&1) || rc=$?
  echo "$out"
  [ "$rc" -eq "$code" ] || { echo "FAIL: exit $rc, expected $code: $*" >&2; exit 1; }
  grep -q -- "$pat" <<<"$out" || { echo "FAIL: no '$pat' in: $out" >&2; exit 1; }
}
make "$t/slow" 0.01
expect 1 "4.00 h of training; masked_lm_loss 5.9600 at step 72, 5.9700 at step 54 (1.00 h earlier): +0.0100 nats per hour: below 0.020, stop" "$t/slow"
expect 0 "keep training" "$t/slow" --min_rate 0.005
make "$t/fast" 0.5
expect 0 "+0.5000 nats per hour: keep training" "$t/fast"
make "$t/replayed" 0.01 replay
expect 1 "4.00 h of training" "$t/replayed"
expect 0 "too early" "$t/slow" --window 5
expect 2 "No such file" "$t/missing"
# Two phases: phase 1 falls by 0.5 nats per hour; phase 2's first evaluation (step 90) is 0.1 above phase 1's
# last one (the re-warm-up). Over all evaluations the rule fires on that jump; --phase 1 sees phase 1 alone;
# --phase 2 has a single evaluation, too early to tell.
mkdir -p "$t/two"
/usr/bin/python3 - "$t/two" <<'PY'
import json, os, sys
d = sys.argv[1]
json.dump({"phases": [{"train_batch_size": 100}, {"train_batch_size": 100}]}, open(os.path.join(d, "recipe.json"), "w"))
with open(os.path.join(d, "metrics.jsonl"), "w") as f:
    for s in range(1, 91):
        ph = 1 if s <= 72 else 2
        f.write(json.dumps({"step": s, "phase": ph, "sequences_per_second": 0.5}) + "\n")
        if s % 18 == 0:
            loss = 6.0 - 0.5 * s / 18 if ph == 1 else 4.1
            f.write(json.dumps({"eval": True, "step": s, "masked_lm_loss": loss}) + "\n")
PY
expect 1 "5.00 h of training; masked_lm_loss 4.1000 at step 90, 4.0000 at step 72 (1.00 h earlier): -0.1000" "$t/two"
expect 0 "masked_lm_loss 4.0000 at step 72, 4.5000 at step 54 (1.00 h earlier): +0.5000 nats per hour: keep" "$t/two" --phase 1
expect 0 "too early" "$t/two" --phase 2
expect 0 "no evaluation of phase 3 yet" "$t/two" --phase 3
# A record the trainer is still writing (no newline yet) is read next time; a crash is 2, never "fires" (1).
cp -r "$t/slow" "$t/partial"
printf '{"eval": true, "step": 90, "masked_lm_lo' >> "$t/partial/metrics.jsonl"
expect 1 "masked_lm_loss 5.9600 at step 72" "$t/partial"
expect 2 "KeyError" "$t/slow" --key no_such_key
expect 2 "window must be > 0" "$t/slow" --window 0
echo "stop_rule_test: ok"
