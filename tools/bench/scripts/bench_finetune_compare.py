#!/usr/bin/python3
"""bench_finetune_compare.py: the finetuning speed table. `bertrain bench finetune` on each batch path (padded to
max_seq_length, dynamic padding, dynamic + group_by_length, the unpadded encoder, the automatic choice) and
tools/bench/scripts/bench_torch.py --mode finetune (PyTorch as a Hugging Face user runs it: DataCollatorWithPadding +
group_by_length), on two real task files:
  qnli       the training split of experiments/qnli-transfer/split_qnli.py (question + sentence pairs, GLUE QNLI layout)
  questions  the questions of the shared SQuAD v1.1 dev file as a single-sentence task (scripts/make_question_task.py;
             label: starts with "what"), the train.tsv of its split
at max_seq_length 128, batch 32, bertrain's finetuning defaults, for each model. Every measurement is its own
process; the units of one (task, model) alternate in order (reversed every other round) for --rounds rounds, and
the table gives medians over the rounds (ratios: medians of the per-round ratios).

Resumable: every finished unit is one line in OUT_DIR/results.jsonl (with its round); run the same command again
and the units already there are skipped. Logs of each unit in OUT_DIR/logs/. The table goes to stdout and to
OUT_DIR/summary.md (markdown, with machine, command, date and git revision). --summary_only prints it from
results.jsonl without running anything.

Quiet machine: pause long jobs first; the script records the share of idle CPU in the half second before each unit
and warns in the table when it was below 90%.
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

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tools", "bench", "scripts"))
from bench_compare import ENV_REPORTED, idle_fraction, machine  # noqa: E402  (same machine report and idle probe)

TASKS = {
    "qnli": dict(title="QNLI (train split of experiments/qnli-transfer/split_qnli.py: question + sentence pairs)",
                 make=["experiments/qnli-transfer/split_qnli.py"], bertrain=["--task_name", "QNLI"], torch=["--task_name", "QNLI"]),
    "questions": dict(title="single sentences (SQuAD v1.1 dev questions, scripts/make_question_task.py, train.tsv)",
                      make=["scripts/make_question_task.py"],
                      bertrain=["--task_name", "generic", "--format", "tsv", "--labels", "0,1"],
                      torch=["--task_name", "generic", "--labels", "0,1"]),
}
PATH_TITLES = {"padded": "padded to max_seq_length (--pad_to_max_length --unpad never)",
               "dynamic": "dynamic padding, padded encoder (--unpad never)",
               "dynamic+gbl": "dynamic padding + --group_by_length, padded encoder",
               "unpad": "dynamic padding, unpadded encoder (--unpad always)",
               "auto": "bertrain's defaults (dynamic padding, --unpad auto)",
               "torch": "PyTorch: pad to longest + group_by_length"}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def prepare_data(out_dir, task):
    d = os.path.join(out_dir, "data", task)
    if not os.path.isfile(os.path.join(d, "train.tsv")):
        script = os.path.join(REPO, TASKS[task]["make"][0])
        log(f"+ {script} {d}")
        subprocess.run(["/usr/bin/python3", script, d], check=True, stdout=sys.stderr)
    return d


def run_unit(cmd, log_path):
    """Runs one benchmark process writing one JSON line to a fresh file; returns that record (or exits)."""
    json_path = log_path + ".jsonl"
    if os.path.exists(json_path):
        os.remove(json_path)
    idle = idle_fraction()
    cmd = cmd + ["--json_out", json_path]
    log(f"+ [machine idle {100 * idle:.0f}%] " + " ".join(shlex.quote(c) for c in cmd))
    t0 = time.time()
    with open(log_path, "w") as out:
        rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        with open(log_path) as f:
            sys.stderr.write(f.read()[-4000:])
        raise SystemExit(f"bench_finetune_compare.py: exit code {rc}: {cmd[0]} (log {log_path}); rerun the same "
                         "command to resume")
    with open(json_path) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    if len(recs) != 1:
        raise SystemExit(f"bench_finetune_compare.py: expected one JSON line in {json_path}, got {len(recs)}")
    rec = recs[0]
    rec["machine_idle_before"] = idle
    rec["wall_seconds"] = time.time() - t0
    return rec


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summary(out_dir, header, results, units, models, tasks):
    lines = []
    mc = header["machine"]
    lines.append(f"Machine: {mc['model_name']}, {mc['cpus']} CPUs, avx512f {'yes' if mc['avx512f'] else 'no'}, "
                 f"avx512_bf16 {'yes' if mc['avx512_bf16'] else 'no'}"
                 + (f", {mc['hypervisor']} guest" if mc.get("hypervisor") else "") + ".  ")
    dates = sorted(r["finished"] for r in results)
    lines.append(f"Date: {header['date']} (first unit started) to {dates[-1] if dates else '-'} (last finished), UTC; "
                 f"git {header['git']}.  ")
    lines.append(f"Command: `{header['command']}`.  ")
    be = header.get("bertrain_environment") or {}
    lines.append("bertrain environment: " + (" ".join(f"{k}={v}" for k, v in be.items()) if be else "none of "
                                               + ", ".join(ENV_REPORTED[:4]) + " set") + ".  ")
    trs = [r for r in results if r["unit"] == "torch"]
    if trs:
        env = trs[0].get("environment") or {}
        lines.append("PyTorch " + str(trs[0].get("torch_version")) + ", its own process: "
                     + " ".join(f"{k}={v}" for k, v in env.items()) + f"; BLAS core {trs[0].get('openblas_core')}.  ")
    rounds = sorted({r["round"] for r in results})
    lines.append(f"Medians of {len(rounds)} alternating round(s); each unit: {header['warmup']} warm-up + "
                 f"{header['steps']} timed steps on batches spread over epoch 0; rates from sums over the timed steps; "
                 "MFU on real tokens only (bert_classifier_flops) over the FMA peak measured by the bertrain process.")
    for task in tasks:
        trecs = [r for r in results if r["task_key"] == task]
        if not trecs:
            continue
        r0 = trecs[0]
        lines.append("")
        lines.append(f"**{TASKS[task]['title']}**: {r0['examples']} examples, {r0['mean_real_length']:.1f} real tokens "
                     f"per example on average, max_seq_length {r0['max_seq_length']}, batch {r0['batch_size']}.")
        lines.append("")
        lines.append("| model | path | real tokens/s | seq/s | mean T | padding | MFU (real) | vs padded | vs PyTorch |")
        lines.append("|---|---|---|---|---|---|---|---|---|")
        for m in models:
            by_unit_round = {(r["unit"], r["round"]): r for r in trecs if r["model"] == m}
            for u in units:
                rs = [by_unit_round[(u, k)] for k in rounds if (u, k) in by_unit_round]
                if not rs:
                    continue

                def ratio(other):
                    v = [by_unit_round[(u, k)]["real_tokens_per_second"] / by_unit_round[(other, k)][
                        "real_tokens_per_second"] for k in rounds if (u, k) in by_unit_round and (other, k) in
                         by_unit_round]
                    return f"{med(v):.2f}x" if v and u != other else "-"

                mean_t = med([r["padded_tokens"] / (r["batch_size"] * len(r["step_seconds"])) for r in rs])
                mfu = med([r.get("mfu") for r in rs])
                lines.append(f"| {m} | {PATH_TITLES.get(u, u)} | {med([r['real_tokens_per_second'] for r in rs]):,.0f} | "
                             f"{med([r['sequences_per_second'] for r in rs]):.2f} | {mean_t:.1f} | "
                             f"{100 * med([r['padding_fraction'] for r in rs]):.1f}% | "
                             + (f"{100 * mfu:.1f}%" if mfu is not None else "n/a")
                             + f" | {ratio('padded')} | {ratio('torch')} |")
        lens = {(r["unit"], r["model"]): r["mean_real_length"] for r in trecs}
        b = [v for (u, _), v in lens.items() if u != "torch"]
        t = [v for (u, _), v in lens.items() if u == "torch"]
        if b and t and abs(b[0] - t[0]) > 1e-9:
            lines.append(f"\nNote: bertrain's tokenizer gives {b[0]:.4f} real tokens per example, the PyTorch side's "
                         f"reference tokenizer {t[0]:.4f}: the two sides do not see the same text lengths.")
    busy = [r for r in results if r["machine_idle_before"] < 0.9]
    if busy:
        lines.append("")
        lines.append(f"WARNING: {len(busy)} of {len(results)} units started with the machine less than 90% idle "
                     "(another process used the cores): " + ", ".join(
                         f"round {r['round']} {r['task_key']} {r['model']} {r['unit']} ({100 * r['machine_idle_before']:.0f}%)"
                         for r in busy[:8]) + (" ..." if len(busy) > 8 else ""))
    text = "\n".join(lines) + "\n"
    tmp = os.path.join(out_dir, "summary.md.tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, os.path.join(out_dir, "summary.md"))
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out_dir", default=os.path.join(REPO, "build", "bench_finetune"),
                    help="results, logs, data and summary.md (default build/bench_finetune); reused to resume")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tasks", default="qnli,questions")
    ap.add_argument("--models", default="mini,base")
    ap.add_argument("--paths", default="padded,dynamic,dynamic+gbl,unpad,auto",
                    help="bertrain bench finetune --paths values, one process each")
    ap.add_argument("--no_torch", action="store_true", help="bertrain only")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--max_seq_length", type=int, default=128)
    ap.add_argument("--batch_size", type=int, default=32)
    ap.add_argument("--bertrain", default=os.path.join(REPO, "build", "bertrain"))
    ap.add_argument("--vocab_file", default=os.path.join(REPO, "data", "vocab", "bert-base-uncased-vocab.txt"))
    ap.add_argument("--torch_blas_dir", default="auto", help="bench_torch.py --blas_dir")
    ap.add_argument("--allow_reference_blas", action="store_true",
                    help="run the PyTorch side even when its BLAS is not OpenBLAS (its numbers are then meaningless)")
    ap.add_argument("--summary_only", action="store_true")
    a = ap.parse_args()
    if a.rounds < 1 or a.steps < 1 or a.warmup < 0:
        ap.error("--rounds >= 1, --steps >= 1, --warmup >= 0")
    tasks = [t for t in a.tasks.split(",") if t]
    for t in tasks:
        if t not in TASKS:
            ap.error(f"--tasks: unknown task {t} (known: {', '.join(TASKS)})")
    models = [m for m in a.models.split(",") if m]
    units = [p for p in a.paths.split(",") if p] + ([] if a.no_torch else ["torch"])
    os.makedirs(os.path.join(a.out_dir, "logs"), exist_ok=True)
    results_path = os.path.join(a.out_dir, "results.jsonl")
    header_path = os.path.join(a.out_dir, "run.json")
    if os.path.exists(header_path) and os.path.exists(results_path):  # a header without results: a new run
        with open(header_path) as f:
            header = json.load(f)
    else:
        header = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  "command": " ".join(map(shlex.quote, [sys.argv[0]] + sys.argv[1:])), "machine": machine(),
                  "steps": a.steps, "warmup": a.warmup,
                  "bertrain_environment": {k: os.environ[k] for k in ENV_REPORTED if k in os.environ},
                  "git": subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"], capture_output=True,
                                        text=True).stdout.strip()}
        with open(header_path + ".tmp", "w") as f:
            json.dump(header, f)
        os.replace(header_path + ".tmp", header_path)
    results = []
    if os.path.exists(results_path):
        with open(results_path) as f:
            results = [json.loads(line) for line in f if line.strip()]
    done = {(r["round"], r["task_key"], r["model"], r["unit"]) for r in results}
    if not a.summary_only:
        if not os.access(a.bertrain, os.X_OK):
            raise SystemExit(f"bench_finetune_compare.py: no bertrain binary at {a.bertrain} (build it, or --bertrain)")
        if "torch" in units and a.torch_blas_dir == "auto" and not os.path.isdir(os.path.join(REPO, "build", "openblas")):
            log("+ tools/bench/scripts/fetch_openblas.sh (OpenBLAS for the PyTorch side only)")
            subprocess.run(["bash", os.path.join(REPO, "tools", "bench", "scripts", "fetch_openblas.sh")], check=True, stdout=sys.stderr)
        data = {t: prepare_data(a.out_dir, t) for t in tasks}
        todo = sum(1 for k in range(a.rounds) for t in tasks for m in models for u in units
                   if (k, t, m, u) not in done)
        log(f"bench_finetune_compare.py: {todo} units to run ({len(done)} already in {results_path})")
        for k in range(a.rounds):
            for t in tasks:
                for m in models:
                    order = units if k % 2 == 0 else list(reversed(units))
                    for u in order:
                        if (k, t, m, u) in done:
                            continue
                        common = ["--data_dir", data[t], "--models", m, "--max_seq_length", str(a.max_seq_length),
                                  "--steps", str(a.steps), "--warmup", str(a.warmup)]
                        if u == "torch":
                            peaks = [r["peak_gflops"] for r in results if r["unit"] != "torch" and r["round"] == k]
                            cmd = ["/usr/bin/python3", os.path.join(REPO, "tools", "bench", "scripts", "bench_torch.py"), "--mode",
                                   "finetune", *TASKS[t]["torch"], *common, "--batch_size", str(a.batch_size),
                                   "--vocab_file", a.vocab_file, "--blas_dir", a.torch_blas_dir, "--bertrain",
                                   a.bertrain]
                            if peaks:
                                cmd += ["--peak_gflops", f"{peaks[-1]:.3f}"]
                        else:
                            cmd = [a.bertrain, "bench", "finetune", *TASKS[t]["bertrain"], *common, "--train_batch_size",
                                   str(a.batch_size), "--vocab_file", a.vocab_file, "--paths", u]
                        name = f"r{k}-{t}-{m}-{u}".replace("+", "_")
                        rec = run_unit(cmd, os.path.join(a.out_dir, "logs", name + ".txt"))
                        core = str(rec.get("openblas_core"))
                        if u == "torch" and (core.startswith("not OpenBLAS") or core.startswith("no BLAS")) and \
                                not a.allow_reference_blas:
                            raise SystemExit("bench_finetune_compare.py: the PyTorch side ran on the reference BLAS "
                                             f"({rec.get('openblas_core')}): run tools/bench/scripts/fetch_openblas.sh first")
                        rec.update(round=k, task_key=t, unit=u, command=" ".join(map(shlex.quote, cmd)),
                                   finished=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
                        with open(results_path, "a") as f:
                            f.write(json.dumps(rec) + "\n")
                        results.append(rec)
                        done.add((k, t, m, u))
                        log(f"round {k + 1}/{a.rounds} {t} {m} {u}: {rec['real_tokens_per_second']:,.0f} real tokens/s, "
                            f"{rec['sequences_per_second']:.2f} seq/s, padding {100 * rec['padding_fraction']:.1f}%, "
                            f"{rec['wall_seconds']:.0f} s")
    print(summary(a.out_dir, header, results, units, models, tasks), end="")
    print(f"(results: {results_path}; summary: {os.path.join(a.out_dir, 'summary.md')})")


if __name__ == "__main__":
    main()
