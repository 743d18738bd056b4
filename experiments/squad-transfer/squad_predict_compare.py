#!/usr/bin/python3
"""squad_predict_compare.py: do the faster batch paths change SQuAD answers? `bertrain run-squad --do_predict` on the shared SQuAD v1.1 dev
file with one finetuned model, f32, on each path:
  padded   the path before dynamic padding: every window padded to max_seq_length, padded encoder
           (--pad_to_max_length --unpad never)
  auto     bertrain's defaults: each batch of length-sorted windows padded to its longest (rounded up to 8), the
           unpadded encoder where at least 10% of a batch is padding (--unpad auto)
  unpad    dynamic padding and the unpadded encoder for every batch (--unpad always)
Every run is its own process, timed from start to exit (reading the file, tokenizing, the model, writing
predictions.json): the wall time a user waits. The units alternate (order reversed every other round) for --rounds
rounds; the table gives medians (speed-ups: medians of the per-round ratios). After the timing, each run's
predictions.json is scored with `bertrain squad-evaluate` and compared with the padded run of its round by
tests/tools/compare_squad_predictions.py (answers question by question; a differing answer must be a near-tie: the
two spans score within --tolerance of each other in both runs' n-best lists).

Resumable: each finished unit is one line in OUT_DIR/results.jsonl; rerun the same command and finished units are
skipped. Predictions in OUT_DIR/round-K/UNIT/, logs beside them. The table goes to stdout and OUT_DIR/summary.md
(markdown, with machine, command, date and git revision), the near-tie list to OUT_DIR/near_ties.md.
Exit 1 when an answer differs beyond a near-tie.

Quiet machine: pause long jobs first; the idle share of the CPUs in the half second before each unit is recorded
and the table warns when it was below 90%.
"""
import argparse
import datetime
import json
import os
import shlex
import statistics
import subprocess
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tools", "bench", "scripts"))
sys.path.insert(0, os.path.join(REPO, "tests", "tools"))
from bench_compare import ENV_REPORTED, idle_fraction, machine  # noqa: E402  (same machine report and idle probe)
from compare_squad_predictions import compare, fmt_gap  # noqa: E402

UNITS = {"padded": ["--pad_to_max_length", "--unpad", "never"], "auto": [], "unpad": ["--unpad", "always"]}
TITLES = {"padded": "padded to max_seq_length, padded encoder (before dynamic padding)",
          "auto": "bertrain's defaults: dynamic padding, length-sorted, --unpad auto",
          "unpad": "dynamic padding, length-sorted, --unpad always"}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def med(xs):
    return statistics.median(xs) if xs else None


def atomic_write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def run_unit(a, unit, out):
    cmd = [a.bertrain, "run-squad", "--init_checkpoint", a.init_checkpoint, "--predict_file", a.predict_file,
           "--vocab_file", a.vocab_file, "--do_lower_case=true", "--max_seq_length", str(a.max_seq_length),
           "--doc_stride", str(a.doc_stride), "--max_query_length", "64", "--predict_batch_size", str(a.predict_batch_size),
           "--do_predict", "--output_dir", out] + UNITS[unit]
    if a.max_predict_examples:
        cmd += ["--max_predict_examples", str(a.max_predict_examples)]
    os.makedirs(os.path.dirname(out), exist_ok=True)
    idle = idle_fraction()
    log(f"+ [machine idle {100 * idle:.0f}%] " + " ".join(shlex.quote(c) for c in cmd))
    t0 = time.monotonic()
    with open(out + ".log", "w") as lf:
        rc = subprocess.run(cmd, stdout=lf, stderr=subprocess.STDOUT).returncode
    wall = time.monotonic() - t0
    if rc != 0:
        with open(out + ".log") as f:
            sys.stderr.write(f.read()[-4000:])
        raise SystemExit(f"squad_predict_compare.py: exit code {rc}: {cmd[0]} (log {out}.log); rerun to resume")
    ev = subprocess.run([a.bertrain, "squad-evaluate", "--data_file", a.predict_file, "--prediction_file",
                         os.path.join(out, "predictions.json")], capture_output=True, text=True)
    if ev.returncode != 0:
        raise SystemExit(f"squad_predict_compare.py: squad-evaluate failed on {out}: {ev.stderr.strip()}")
    return {"unit": unit, "wall_seconds": wall, "machine_idle_before": idle, "command": " ".join(map(shlex.quote, cmd)),
            "evaluate": json.loads(ev.stdout), "output_dir": out}


def summary(a, header, results):
    rounds = sorted({r["round"] for r in results})
    units = [u for u in a.units if any(r["unit"] == u for r in results)]
    by = {(r["unit"], r["round"]): r for r in results}
    mc = header["machine"]
    L = [f"Machine: {mc['model_name']}, {mc['cpus']} CPUs, avx512f {'yes' if mc['avx512f'] else 'no'}"
         + (f", {mc['hypervisor']} guest" if mc.get("hypervisor") else "") + ".  ",
         f"Date: {header['date']} (first unit started) to {max(r['finished'] for r in results)} (last finished), "
         f"UTC; git {header['git']}.  ",
         f"Command: `{header['command']}`.  ",
         "bertrain environment: " + (" ".join(f"{k}={v}" for k, v in header["environment"].items())
                                     or "none of " + ", ".join(ENV_REPORTED[:4]) + " set") + ".  ",
         f"Model: `{a.init_checkpoint}`; predict file `{a.predict_file}`"
         + (f" (its first {a.max_predict_examples} questions; EM/F1 by squad-evaluate over the whole file, "
            "questions not predicted counting 0)" if a.max_predict_examples else "") + f"; f32, max_seq_length {a.max_seq_length}, "
         f"doc_stride {a.doc_stride}, max_query_length 64, predict batch {a.predict_batch_size}. Wall time of the whole "
         f"`run-squad --do_predict` process; medians of {len(rounds)} alternating round(s).",
         "",
         "| path | flags | wall time (s), median | min - max | vs padded | EM | F1 | answers unlike padded |",
         "|---|---|---|---|---|---|---|---|"]
    for u in units:
        rs = [by[(u, k)] for k in rounds if (u, k) in by]
        walls = [r["wall_seconds"] for r in rs]
        ratios = [by[("padded", k)]["wall_seconds"] / by[(u, k)]["wall_seconds"] for k in rounds
                  if (u, k) in by and ("padded", k) in by]
        ev = rs[0]["evaluate"]
        diffs = [r.get("compare") for r in rs if r.get("compare")]
        d = (f"{max(c['differing'] for c in diffs)} ({max(c['not_near_ties'] for c in diffs)} not near-ties)"
             if diffs else "-")
        same_scores = all(abs(r["evaluate"]["exact_match"] - ev["exact_match"]) < 1e-12 for r in rs)
        L.append(f"| {TITLES[u]} | `{' '.join(UNITS[u]) or '(none)'}` | {med(walls):.1f} | {min(walls):.1f} - "
                 f"{max(walls):.1f} | {f'{med(ratios):.2f}x' if ratios and u != 'padded' else '-'} | "
                 f"{ev['exact_match']:.2f} | {ev['f1']:.2f}{'' if same_scores else ' (varies by round!)'} | {d} |")
    comps = [r["compare"] for r in results if r.get("compare")]
    if comps:
        L.append("")
        L.append(f"Answers compared question by question with the padded run of the same round "
                 f"(tests/tools/compare_squad_predictions.py, tolerance {a.tolerance:g} on start_logit + end_logit): "
                 f"{comps[0]['questions']} questions; largest n-best logit difference from the padded run: start "
                 f"{max(c['max_abs_start_logit_diff'] for c in comps):.3g}, end "
                 f"{max(c['max_abs_end_logit_diff'] for c in comps):.3g}. Differing questions: "
                 + ("none." if not any(c["rows"] for c in comps) else "see near_ties.md."))
    busy = [r for r in results if r["machine_idle_before"] < 0.9]
    if busy:
        L.append("")
        L.append(f"WARNING: {len(busy)} of {len(results)} units started with the machine less than 90% idle: "
                 + ", ".join(f"round {r['round']} {r['unit']} ({100 * r['machine_idle_before']:.0f}%)"
                             for r in busy[:8]) + (" ..." if len(busy) > 8 else ""))
    text = "\n".join(L) + "\n"
    atomic_write(os.path.join(a.out_dir, "summary.md"), text)
    ties = ["| round | path | question id | answer padded | answer path | gap padded | gap path | near-tie |",
            "|---|---|---|---|---|---|---|---|"]
    for r in results:
        for x in (r.get("compare") or {}).get("rows", []):
            ties.append(f"| {r['round']} | {r['unit']} | {x['id']} | {x['answer_a'].replace('|', '/')} | "
                        f"{x['answer_b'].replace('|', '/')} | {fmt_gap(x['gap_a'])} | {fmt_gap(x['gap_b'])} | "
                        f"{'yes' if x['near_tie'] else 'NO'} |")
    atomic_write(os.path.join(a.out_dir, "near_ties.md"),
                 "Questions whose answer differs from the padded run's (gaps: score of the run's own answer minus "
                 "the other answer's, start_logit + end_logit, in each run's n-best)\n\n" + "\n".join(ties) + "\n")
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--init_checkpoint", required=True, help="a bert-mini (or any) checkpoint finetuned on SQuAD")
    ap.add_argument("--predict_file", default=os.path.join(REPO, "..", "shared", "data", "squad_v1.1",
                                                           "dev-v1.1-shared.json"))
    ap.add_argument("--out_dir", default=os.path.join(REPO, "build", "squad_predict_compare"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--units", default="padded,auto,unpad")
    ap.add_argument("--max_seq_length", type=int, default=384)
    ap.add_argument("--doc_stride", type=int, default=128)
    ap.add_argument("--predict_batch_size", type=int, default=32)
    ap.add_argument("--max_predict_examples", type=int, default=0,
                    help="predict only the first N questions (0: all); squad-evaluate still scores the whole file "
                         "(questions not predicted count 0)")
    ap.add_argument("--tolerance", type=float, default=1e-5, help="near-tie: largest score gap (logit units)")
    ap.add_argument("--bertrain", default=os.path.join(REPO, "build", "bertrain"))
    ap.add_argument("--vocab_file", default=os.path.join(REPO, "data", "vocab", "bert-base-uncased-vocab.txt"))
    ap.add_argument("--summary_only", action="store_true")
    a = ap.parse_args()
    a.units = a.units.split(",")
    bad = [u for u in a.units if u not in UNITS]
    if bad or "padded" not in a.units or a.rounds < 1:
        raise SystemExit(f"squad_predict_compare.py: --units must include padded and be among {','.join(UNITS)}; "
                         f"--rounds >= 1 (got {','.join(a.units)}, {a.rounds})")
    os.makedirs(a.out_dir, exist_ok=True)
    results_path = os.path.join(a.out_dir, "results.jsonl")
    header_path = os.path.join(a.out_dir, "header.json")
    if os.path.exists(header_path):
        with open(header_path) as f:
            header = json.load(f)
    else:
        header = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  "machine": machine(), "command": " ".join(map(shlex.quote, sys.argv)),
                  "environment": {k: os.environ[k] for k in ENV_REPORTED if k in os.environ},
                  "git": subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"], capture_output=True,
                                        text=True).stdout.strip()}
        atomic_write(header_path, json.dumps(header) + "\n")
    results = []
    if os.path.exists(results_path):
        with open(results_path) as f:
            results = [json.loads(l) for l in f if l.strip()]
    done = {(r["round"], r["unit"]) for r in results}
    if not a.summary_only:
        for k in range(1, a.rounds + 1):
            order = a.units if k % 2 == 1 else a.units[::-1]
            for u in order:
                if (k, u) in done:
                    continue
                out = os.path.join(a.out_dir, f"round-{k}", u)
                rec = run_unit(a, u, out)
                rec.update(round=k, finished=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
                with open(results_path, "a") as f:
                    f.write(json.dumps(rec) + "\n")
                results.append(rec)
            # The answers of each path against the padded run of the same round (after the round's timing).
            pad = os.path.join(a.out_dir, f"round-{k}", "padded")
            changed = False
            for r in results:
                if r["round"] == k and r["unit"] != "padded" and "compare" not in r:
                    r["compare"] = compare(pad, r["output_dir"], a.tolerance)
                    changed = True
            if changed:
                atomic_write(results_path, "".join(json.dumps(r) + "\n" for r in results))
    if not results:
        raise SystemExit("squad_predict_compare.py: no results yet")
    print(summary(a, header, results), end="")
    print(f"(results: {results_path}; summary: {a.out_dir}/summary.md; differing questions: {a.out_dir}/near_ties.md)")
    bad = sum(r["compare"]["not_near_ties"] for r in results if r.get("compare"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
