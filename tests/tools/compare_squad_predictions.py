#!/usr/bin/env python3
"""compare_squad_predictions.py: are two run-squad predictions the same answers, up to near-ties?

What it checks: `run-squad --do_predict` on the padded path (--pad_to_max_length --unpad never) and on
the dynamic-padding / unpadded paths must give identical answers in f32 except where two candidate spans score
within a tolerance (1e-5) of each other. This script reads two run-squad output directories (or two
predictions.json files with their nbest_predictions.json beside them) and checks that, question by question.

A candidate's score is start_logit + end_logit, as run_squad.py's write_predictions ranks them (the n-best
entries of nbest_predictions.json carry both logits). For a question whose answer differs (answer A in run A,
answer B in run B), the gap in run A is score_A(A) - score_A(B) and in run B score_B(B) - score_B(A), each read
from that run's own n-best list; the question is a near-tie when both gaps are <= --tolerance. An answer that
is missing from the other run's n-best list (so more than 20 candidates apart) is never a near-tie.

It also reports, over every question, the largest difference between the two runs' logits of the same n-best
text (start and end logit separately), i.e. how far the two computations are apart where they agree.

Output: one line per differing question (tab-separated: id, answer A, answer B, gap A, gap B, near-tie or not)
and a summary, on stdout; with --markdown, the same as a markdown table. Exit 0 when every difference is a
near-tie, 1 when one is not, 2 on bad input (one line naming the file and the field).

Usage: compare_squad_predictions.py [--tolerance 1e-5] [--markdown] [--ties-out FILE] RUN_A RUN_B
"""
import argparse
import json
import math
import os
import sys


def fail(msg):
    print(f"compare_squad_predictions: {msg}", file=sys.stderr)
    sys.exit(2)


def load_run(path):
    """(predictions dict, nbest dict) of a run directory or of a predictions.json file with its nbest beside."""
    if os.path.isdir(path):
        pred_file = os.path.join(path, "predictions.json")
    else:
        pred_file = path
    nbest_file = os.path.join(os.path.dirname(pred_file), "nbest_predictions.json")
    out = []
    for f in (pred_file, nbest_file):
        try:
            with open(f, encoding="utf-8") as fh:
                out.append(json.load(fh))
        except OSError as e:
            fail(f"{f}: cannot read: {e.strerror}")
        except json.JSONDecodeError as e:
            fail(f"{f}: line {e.lineno}: not JSON: {e.msg}")
        if not isinstance(out[-1], dict):
            fail(f"{f}: top level: expected an object of question ids")
    preds, nbest = out
    for qid, ans in preds.items():
        if not isinstance(ans, str):
            fail(f"{pred_file}: question '{qid}': answer is not a string")
        entries = nbest.get(qid)
        if not isinstance(entries, list) or not entries:
            fail(f"{nbest_file}: question '{qid}': no n-best list")
        for i, e in enumerate(entries):
            if not isinstance(e, dict) or not isinstance(e.get("text"), str):
                fail(f"{nbest_file}: question '{qid}' entry {i}: field 'text' missing")
            for k in ("start_logit", "end_logit"):
                if not isinstance(e.get(k), (int, float)) or isinstance(e.get(k), bool) or not math.isfinite(e[k]):
                    fail(f"{nbest_file}: question '{qid}' entry {i}: field '{k}' is not a finite number")
    return pred_file, preds, nbest


def scores(entries):
    """text -> (score, start_logit, end_logit) of its first (best) n-best entry."""
    d = {}
    for e in entries:
        if e["text"] not in d:
            d[e["text"]] = (e["start_logit"] + e["end_logit"], e["start_logit"], e["end_logit"])
    return d


def compare(run_a, run_b, tolerance):
    file_a, pa, na = load_run(run_a)
    file_b, pb, nb = load_run(run_b)
    if set(pa) != set(pb):
        only = sorted(set(pa) ^ set(pb))
        fail(f"{file_b}: question '{only[0]}': in only one of the two runs ({len(only)} such)")
    rows = []
    max_dstart = max_dend = 0.0
    for qid in pa:  # file order: the predict file's order
        sa, sb = scores(na[qid]), scores(nb[qid])
        for text in sa.keys() & sb.keys():
            max_dstart = max(max_dstart, abs(sa[text][1] - sb[text][1]))
            max_dend = max(max_dend, abs(sa[text][2] - sb[text][2]))
        a, b = pa[qid], pb[qid]
        if a == b:
            continue
        gap_a = sa[a][0] - sa[b][0] if a in sa and b in sa else math.inf
        gap_b = sb[b][0] - sb[a][0] if a in sb and b in sb else math.inf
        rows.append({"id": qid, "answer_a": a, "answer_b": b, "gap_a": gap_a, "gap_b": gap_b,
                     "near_tie": max(gap_a, gap_b) <= tolerance})
    return {"run_a": file_a, "run_b": file_b, "questions": len(pa), "differing": len(rows),
            "near_ties": sum(r["near_tie"] for r in rows), "not_near_ties": sum(not r["near_tie"] for r in rows),
            "tolerance": tolerance, "max_abs_start_logit_diff": max_dstart, "max_abs_end_logit_diff": max_dend,
            "rows": rows}


def fmt_gap(g):
    return "absent from n-best" if math.isinf(g) else f"{g:.3g}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_a")
    ap.add_argument("run_b")
    ap.add_argument("--tolerance", type=float, default=1e-5, help="largest score gap of a near-tie (logit units)")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table")
    ap.add_argument("--ties-out", help="also write the result as JSON to this file (atomically)")
    args = ap.parse_args()
    r = compare(args.run_a, args.run_b, args.tolerance)
    if args.ties_out:
        tmp = args.ties_out + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            rows = [{k: (None if isinstance(v, float) and math.isinf(v) else v) for k, v in x.items()}
                    for x in r["rows"]]
            json.dump({**r, "rows": rows}, fh, indent=1)
            fh.write("\n")
        os.replace(tmp, args.ties_out)
    summary = (f"{r['questions']} questions, {r['differing']} answers differ: {r['near_ties']} near-ties "
               f"(both score gaps <= {r['tolerance']:g}), {r['not_near_ties']} not; largest n-best logit "
               f"difference: start {r['max_abs_start_logit_diff']:.3g}, end {r['max_abs_end_logit_diff']:.3g}")
    if args.markdown:
        print(f"Runs: `{r['run_a']}` (A) and `{r['run_b']}` (B). {summary}.\n")
        if r["rows"]:
            print("| question id | answer A | answer B | gap in A | gap in B | near-tie |")
            print("| --- | --- | --- | --- | --- | --- |")
            for x in r["rows"]:
                a = x["answer_a"].replace("|", "\\|")
                b = x["answer_b"].replace("|", "\\|")
                print(f"| {x['id']} | {a} | {b} | {fmt_gap(x['gap_a'])} | {fmt_gap(x['gap_b'])} | "
                      f"{'yes' if x['near_tie'] else 'NO'} |")
    else:
        for x in r["rows"]:
            print(f"{x['id']}\t{x['answer_a']!r}\t{x['answer_b']!r}\t{fmt_gap(x['gap_a'])}\t{fmt_gap(x['gap_b'])}\t"
                  f"{'near-tie' if x['near_tie'] else 'NOT a near-tie'}")
        print(summary)
    return 0 if r["not_near_ties"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
