#!/usr/bin/env bash
# compare_squad_predictions_test.sh BUILD_DIR SOURCE_DIR: tests/tools/compare_squad_predictions.py.
#   1. Hand-made runs: identical runs exit 0 with nothing listed; an answer that differs where both runs score
#      the two spans 4e-6 apart is listed as a near-tie (exit 0, gaps printed); one 0.5 apart, or whose answer
#      is missing from the other run's n-best, is listed as not a near-tie (exit 1); a missing field, exit 2 with
#      one line naming the file, the question and the field.
#   2. Through the binary: bert-tiny finetuned 2 steps on the SQuAD fixture, then `run-squad --do_predict` padded
#      to max_seq_length on the padded encoder, dynamically padded (length-sorted) on the unpadded encoder, and the
#      defaults: the script finds the same answers (exit 0) and n-best logits within 1e-5 of each other.
#   3. experiments/squad-transfer/squad_predict_compare.py, one round on the same model and fixture: the three rows of its table, no
#      differing question, the same EM/F1 on every path, and a rerun resumes without running anything.
set -euo pipefail
build=$1 src=$2
cmp_py=("/usr/bin/python3" "$src/tests/tools/compare_squad_predictions.py")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
die() { echo "FAIL: $*" >&2; exit 1; }

# --- 1. hand-made runs -------------------------------------------------------------------------------------
mkrun() {  # DIR PRED_FOR_q2 JSON_NBEST_FOR_q2
  mkdir -p "$1"
  printf '{"q1": "Denver Broncos", "q2": "%s"}\n' "$2" > "$1/predictions.json"
  printf '{"q1": [{"text": "Denver Broncos", "probability": 0.9, "start_logit": 3.0, "end_logit": 2.5}],
           "q2": %s}\n' "$3" > "$1/nbest_predictions.json"
}
mkrun "$tmp/a" "1990" '[{"text": "1990", "probability": 0.5, "start_logit": 1.000004, "end_logit": 1.0},
                        {"text": "in 1990", "probability": 0.5, "start_logit": 1.0, "end_logit": 1.0}]'
mkrun "$tmp/same" "1990" '[{"text": "1990", "probability": 0.5, "start_logit": 1.000004, "end_logit": 1.0},
                           {"text": "in 1990", "probability": 0.5, "start_logit": 1.0, "end_logit": 1.0}]'
mkrun "$tmp/tie" "in 1990" '[{"text": "in 1990", "probability": 0.5, "start_logit": 1.000003, "end_logit": 1.0},
                             {"text": "1990", "probability": 0.5, "start_logit": 0.999999, "end_logit": 1.0}]'
mkrun "$tmp/far" "in 1990" '[{"text": "in 1990", "probability": 0.6, "start_logit": 1.5, "end_logit": 1.0},
                             {"text": "1990", "probability": 0.4, "start_logit": 1.0, "end_logit": 1.0}]'
mkrun "$tmp/absent" "in 1990" '[{"text": "in 1990", "probability": 1.0, "start_logit": 1.0, "end_logit": 1.0}]'
mkrun "$tmp/bad" "1990" '[{"text": "1990", "probability": 1.0, "start_logit": 1.0}]'

out=$("${cmp_py[@]}" "$tmp/a" "$tmp/same") || die "identical runs: exit $?"
[ "$out" = "2 questions, 0 answers differ: 0 near-ties (both score gaps <= 1e-05), 0 not; largest n-best logit difference: start 0, end 0" ] \
  || die "identical runs: $out"

out=$("${cmp_py[@]}" "$tmp/a" "$tmp/tie") || die "near-tie: exit $?"
# gap in A: (1.000004 + 1) - (1 + 1) = 4e-6; in B: (1.000003 + 1) - (0.999999 + 1) = 4e-6
printf '%s\n' "$out" | grep -qxF "q2	'1990'	'in 1990'	4e-06	4e-06	near-tie" || die "near-tie row: $out"
printf '%s\n' "$out" | grep -qF "1 answers differ: 1 near-ties" || die "near-tie summary: $out"
# The logits of the same text differ by 5e-6 at most ("1990" start 1.000004 vs 0.999999).
printf '%s\n' "$out" | grep -qF "start 5e-06, end 0" || die "logit difference: $out"
"${cmp_py[@]}" --tolerance 1e-6 "$tmp/a" "$tmp/tie" > /dev/null && die "a 4e-6 gap passed at tolerance 1e-6"

set +e
out=$("${cmp_py[@]}" "$tmp/a" "$tmp/far"); rc=$?
set -e
[ $rc -eq 1 ] || die "0.5 apart: exit $rc, expected 1"
printf '%s\n' "$out" | grep -qxF "q2	'1990'	'in 1990'	4e-06	0.5	NOT a near-tie" || die "0.5 apart row: $out"

set +e
out=$("${cmp_py[@]}" --markdown "$tmp/a" "$tmp/absent"); rc=$?
set -e
[ $rc -eq 1 ] || die "absent from n-best: exit $rc, expected 1"
printf '%s\n' "$out" | grep -qF "| q2 | 1990 | in 1990 | 4e-06 | absent from n-best | NO |" || die "absent row: $out"

set +e
err=$("${cmp_py[@]}" "$tmp/a" "$tmp/bad" 2>&1 >/dev/null); rc=$?
set -e
[ $rc -eq 2 ] || die "bad n-best: exit $rc, expected 2"
[ "$err" = "compare_squad_predictions: $tmp/bad/nbest_predictions.json: question 'q2' entry 0: field 'end_logit' is not a finite number" ] \
  || die "bad n-best message: $err"

# --- 2. through the binary ---------------------------------------------------------------------------------
bin=$build/bertrain
squad=$src/tests/fixtures/squad/sample-v1.1.json
common=(run-squad --vocab_file "$src/data/vocab/bert-base-uncased-vocab.txt" --do_lower_case=true
        --max_seq_length 96 --doc_stride 32 --max_query_length 32 --predict_batch_size 3)
# Training wants one answer per question: the fixture's first.
/usr/bin/python3 - "$squad" "$tmp/train.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for a in d["data"]:
    for p in a["paragraphs"]:
        for q in p["qas"]:
            q["answers"] = q["answers"][:1]
json.dump(d, open(sys.argv[2], "w"))
PY
OMP_NUM_THREADS=1 "$bin" "${common[@]}" --bert_config_file "$src/configs/model/bert-tiny.json" \
  --train_file "$tmp/train.json" --do_train --max_steps 2 --train_batch_size 4 --output_dir "$tmp/model" 2> "$tmp/train.log" \
  || { cat "$tmp/train.log" >&2; die "finetuning"; }
predict() {  # DIR FLAGS...
  local dir=$1; shift
  OMP_NUM_THREADS=1 "$bin" "${common[@]}" --init_checkpoint "$tmp/model/checkpoint-2" --predict_file "$squad" --do_predict \
    --output_dir "$dir" "$@" 2> "$dir.log" || { cat "$dir.log" >&2; die "predict $*"; }
}
predict "$tmp/padded" --pad_to_max_length --unpad never
predict "$tmp/unpadded" --unpad always
predict "$tmp/defaults"
[ "$(wc -l < "$tmp/padded/predictions.json")" -gt 3 ] || die "few predictions"
for run in unpadded defaults; do
  out=$("${cmp_py[@]}" --tolerance 1e-5 "$tmp/padded" "$tmp/$run") || die "padded vs $run: $out"
  echo "padded vs $run: $out"
  /usr/bin/python3 - "$out" <<'PY' || die "padded vs $run: $out"
import re, sys
m = re.search(r"(\d+) answers differ.*start ([0-9.e+-]+), end ([0-9.e+-]+)$", sys.argv[1])
assert m, sys.argv[1]
# The fixture has no near-ties at 1e-5, so the answers are identical; logits agree to 1e-5 (f32).
assert int(m.group(1)) == 0 and float(m.group(2)) <= 1e-5 and float(m.group(3)) <= 1e-5, sys.argv[1]
PY
done

# --- 3. experiments/squad-transfer/squad_predict_compare.py, one round on the fixture: three paths, same answers, the table -------
/usr/bin/python3 "$src/experiments/squad-transfer/squad_predict_compare.py" --init_checkpoint "$tmp/model/checkpoint-2" \
  --predict_file "$squad" --rounds 1 --out_dir "$tmp/cmp" --max_seq_length 96 --doc_stride 32 \
  --bertrain "$bin" --vocab_file "$src/data/vocab/bert-base-uncased-vocab.txt" > "$tmp/cmp.md" 2> "$tmp/cmp.log" \
  || { cat "$tmp/cmp.log" "$tmp/cmp.md" >&2; die "squad_predict_compare.py"; }
for row in "| padded to max_seq_length, padded encoder (before dynamic padding) | \`--pad_to_max_length --unpad never\` |" \
           "| bertrain's defaults: dynamic padding, length-sorted, --unpad auto | \`(none)\` |" \
           "| dynamic padding, length-sorted, --unpad always | \`--unpad always\` |" \
           "5 questions; largest n-best logit difference" "Differing questions: none."; do
  grep -qF -- "$row" "$tmp/cmp.md" || { cat "$tmp/cmp.md" >&2; die "table lacks: $row"; }
done
[ "$(wc -l < "$tmp/cmp/results.jsonl")" -eq 3 ] || die "results.jsonl: expected 3 units"
# EM/F1 of every path are squad-evaluate's of the padded run (same answers).
/usr/bin/python3 - "$tmp/cmp/results.jsonl" <<'PY' || die "EM/F1 differ between paths"
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
assert len({(r["evaluate"]["exact_match"], r["evaluate"]["f1"]) for r in rs}) == 1, rs
assert all(r["wall_seconds"] > 0 and r["compare"]["not_near_ties"] == 0 for r in rs if r["unit"] != "padded"), rs
PY
# A second run resumes: nothing is run again.
/usr/bin/python3 "$src/experiments/squad-transfer/squad_predict_compare.py" --init_checkpoint "$tmp/model/checkpoint-2" \
  --predict_file "$squad" --rounds 1 --out_dir "$tmp/cmp" --max_seq_length 96 --doc_stride 32 \
  --bertrain "$bin" --vocab_file "$src/data/vocab/bert-base-uncased-vocab.txt" 2> "$tmp/cmp2.log" > /dev/null
! grep -q "^+" "$tmp/cmp2.log" || die "resume ran units again"
echo "compare_squad_predictions: all checks passed"
