#!/usr/bin/python3
# bench_compare.py: `bertrain bench train` and tools/bench/scripts/bench_torch.py run alternately, one configuration per process,
# for --repeats rounds; prints the bertrain/PyTorch throughput ratio of each configuration as the median over the
# rounds, as JSON lines (--jsonl) and as a table. bertrain runs with the environment as the user has it (reported);
# bench_torch.py sets its own thread variables for its own process only (see its header).
import argparse
import datetime
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
ENV_REPORTED = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "OMP_PROC_BIND", "OMP_PLACES", "GOMP_SPINCOUNT",
                "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "MKL_NUM_THREADS", "DNNL_MAX_CPU_ISA",
                "ONEDNN_MAX_CPU_ISA", "LD_PRELOAD")


def machine():
    info = {}
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        k, _, v = line.partition(":")
        info[k.strip()] = v.strip()
    flags = set(info.get("Flags", "").split())
    return {"model_name": info.get("Model name", "?"), "cpus": int(info.get("CPU(s)", "0") or 0),
            "cores_per_socket": info.get("Core(s) per socket", "?"), "avx512f": "avx512f" in flags,
            "avx512_bf16": "avx512_bf16" in flags, "amx_bf16": "amx_bf16" in flags,
            "hypervisor": info.get("Hypervisor vendor", "")}


def idle_fraction(seconds=0.5):
    """Share of CPU time idle over `seconds` while none of our benchmarks runs: below ~0.9 another process competes
    for the cores and the numbers of the next run are suspect."""
    def snap():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return v[3] + v[4], sum(v)  # idle + iowait, total
    i0, t0 = snap()
    time.sleep(seconds)
    i1, t1 = snap()
    return (i1 - i0) / max(1, t1 - t0)


def run_one(cmd, env, jsonl):
    """Runs one benchmark process that appends one JSON line to `jsonl`; returns that record."""
    before = 0
    if os.path.exists(jsonl):
        with open(jsonl) as f:
            before = sum(1 for _ in f)
    idle = idle_fraction()
    print(f"+ [machine idle {100 * idle:.0f}%] " + " ".join(shlex.quote(c) for c in cmd), file=sys.stderr, flush=True)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.stderr.write(p.stdout + p.stderr)
        raise SystemExit(f"bench_compare.py: {cmd[0]} failed with exit code {p.returncode}")
    with open(jsonl) as f:
        lines = f.readlines()
    if len(lines) != before + 1:
        raise SystemExit(f"bench_compare.py: expected one new JSON line from {cmd[0]}, got {len(lines) - before}")
    rec = json.loads(lines[-1])
    rec["stdout_head"] = p.stdout.splitlines()[:4]
    rec["machine_idle_before"] = idle
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--models", default="tiny,mini,small,base")
    ap.add_argument("--seq_lens", default="128,512")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--bertrain", default=os.path.join(REPO, "build", "bertrain"))
    ap.add_argument("--torch_blas_dir", default="auto", help="passed to bench_torch.py --blas_dir")
    ap.add_argument("--bf16", action="store_true",
                    help="also run `bertrain bench train --bf16` in every round and print its ratios to bertrain fp32 "
                         "and to PyTorch (fp32)")
    ap.add_argument("--jsonl", default="", help="JSON lines output (default build/bench_compare-<time>.jsonl)")
    a = ap.parse_args()
    if a.repeats < 1:
        ap.error("--repeats must be >= 1")
    models = [m for m in a.models.split(",") if m]
    lens = [int(t) for t in a.seq_lens.split(",") if t]
    now = datetime.datetime.now(datetime.timezone.utc)
    jsonl = a.jsonl or os.path.join(REPO, "build", f"bench_compare-{now.strftime('%Y%m%dT%H%M%SZ')}.jsonl")
    os.makedirs(os.path.dirname(os.path.abspath(jsonl)), exist_ok=True)
    user_env = dict(os.environ)
    header = {"kind": "run", "date": now.isoformat(timespec="seconds"), "command": " ".join(map(shlex.quote, sys.argv)),
              "machine": machine(), "repeats": a.repeats, "steps": a.steps, "warmup": a.warmup,
              "bertrain_environment": {k: user_env[k] for k in ENV_REPORTED if k in user_env},
              "git": subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"], capture_output=True,
                                    text=True).stdout.strip()}
    with open(jsonl, "a") as out:
        out.write(json.dumps(header) + "\n")

    raw = {}  # (model, T) -> {"bertrain": [...], "torch": [...]}
    with tempfile.TemporaryDirectory() as tmp:
        runs = os.path.join(tmp, "runs.jsonl")
        for r in range(a.repeats):
            for m in models:
                for t in lens:
                    common = ["--models", m, "--seq_lens", str(t), "--steps", str(a.steps), "--warmup", str(a.warmup),
                              "--json_out", runs]
                    b_cmd = [a.bertrain, "bench", "train"] + common
                    order = ["bertrain", "torch"] + (["bertrain_bf16"] if a.bf16 else [])
                    if r % 2 == 1:
                        order.reverse()
                    recs = {}
                    for fw in order:
                        if fw == "bertrain":
                            recs[fw] = run_one(b_cmd, user_env, runs)
                        elif fw == "bertrain_bf16":
                            recs[fw] = run_one(b_cmd + ["--bf16"], user_env, runs)
                        else:
                            # the peak of the nearest bertrain run; in odd rounds torch goes first, so take the
                            # previous round's (FMA peaks agree within ~1% between runs)
                            prev = raw.get((m, t), {}).get("bertrain", [])
                            peak = recs["bertrain"]["peak_gflops"] if "bertrain" in recs else (
                                prev[-1]["peak_gflops"] if prev else 0.0)
                            t_cmd = ["/usr/bin/python3", os.path.join(REPO, "tools", "bench", "scripts", "bench_torch.py"), *common,
                                     "--blas_dir", a.torch_blas_dir, "--bertrain", a.bertrain]
                            if peak:
                                t_cmd += ["--peak_gflops", f"{peak:.3f}"]
                            recs[fw] = run_one(t_cmd, user_env, runs)
                    for fw, rec in recs.items():
                        rec.update(kind="result", repeat=r)
                        raw.setdefault((m, t), {}).setdefault(fw, []).append(rec)
                        with open(jsonl, "a") as out:
                            out.write(json.dumps(rec) + "\n")
                    ratio = recs["bertrain"]["sequences_per_second"] / recs["torch"]["sequences_per_second"]
                    print(f"round {r + 1}/{a.repeats} {m} T={t}: bertrain {recs['bertrain']['sequences_per_second']:.2f}"
                          f" seq/s, torch {recs['torch']['sequences_per_second']:.2f} seq/s, ratio {ratio:.2f}",
                          file=sys.stderr, flush=True)

    def med(xs):
        xs = [x for x in xs if x is not None]
        return statistics.median(xs) if xs else None

    rows = []
    for (m, t), fws in raw.items():
        b, p = fws["bertrain"], fws["torch"]
        ratios = [x["sequences_per_second"] / y["sequences_per_second"] for x, y in zip(b, p)]
        row = {"kind": "summary", "model": m, "seq_len": t, "batch_size": b[0]["batch_size"],
               "max_predictions_per_seq": b[0]["max_predictions_per_seq"], "repeats": len(ratios),
               "bertrain_seq_s": med([x["sequences_per_second"] for x in b]),
               "torch_seq_s": med([x["sequences_per_second"] for x in p]),
               "ratio": med(ratios), "ratios": ratios,
               "bertrain_tokens_s": med([x["tokens_per_second"] for x in b]),
               "torch_tokens_s": med([x["tokens_per_second"] for x in p]),
               "bertrain_mfu": med([x["mfu"] for x in b]), "torch_mfu": med([x.get("mfu") for x in p]),
               "bertrain_gflops": med([x["gflops"] for x in b]), "torch_gflops": med([x["gflops"] for x in p]),
               "peak_gflops": med([x["peak_gflops"] for x in b]),
               "bertrain_rss_mib": max(x["max_rss_mib"] for x in b), "torch_rss_mib": max(x["max_rss_mib"] for x in p),
               "bertrain_allocator_peak_mib": max(x["allocator_peak_mib"] for x in b),
               "bertrain_step_parts_ms": {k: 1e3 * med([x[k + "_seconds_median"] for x in b])
                                          for k in ("forward", "backward", "optimizer")},
               "torch_step_parts_ms": {k: 1e3 * med([x[k + "_seconds_median"] for x in p])
                                       for k in ("forward", "backward", "optimizer")},
               "min_machine_idle_before": min(x["machine_idle_before"] for x in b + p),
               "torch_openblas_core": p[0].get("openblas_core"), "torch_environment": p[0].get("environment")}
        if "bertrain_bf16" in fws:
            h = fws["bertrain_bf16"]
            row.update(bf16_seq_s=med([x["sequences_per_second"] for x in h]),
                       bf16_over_fp32=med([x["sequences_per_second"] / y["sequences_per_second"] for x, y in zip(h, b)]),
                       bf16_over_torch=med([x["sequences_per_second"] / y["sequences_per_second"] for x, y in zip(h, p)]),
                       bf16_mfu_bf16_peak=med([x["mfu"] for x in h]), bf16_rss_mib=max(x["max_rss_mib"] for x in h))
            row["min_machine_idle_before"] = min(row["min_machine_idle_before"],
                                                 min(x["machine_idle_before"] for x in h))
        rows.append(row)
    with open(jsonl, "a") as out:
        for row in rows:
            out.write(json.dumps(row) + "\n")

    mc = header["machine"]
    print(f"machine: {mc['model_name']}, {mc['cpus']} CPUs, avx512f {'yes' if mc['avx512f'] else 'no'}, "
          f"avx512_bf16 {'yes' if mc['avx512_bf16'] else 'no'}, amx_bf16 {'yes' if mc['amx_bf16'] else 'no'}"
          + (f", {mc['hypervisor']} guest" if mc["hypervisor"] else ""))
    print(f"date: {header['date']}   git: {header['git']}")
    print(f"command: {header['command']}")
    be = header["bertrain_environment"]
    print("bertrain environment (the user's, unchanged): " + (" ".join(f"{k}={v}" for k, v in be.items()) if be else
                                                              "none of " + ", ".join(ENV_REPORTED[:4]) + ", ... set"))
    if rows:
        r0 = rows[0]
        print("torch environment (its own process): " + " ".join(f"{k}={v}" for k, v in
                                                                   (r0["torch_environment"] or {}).items())
              + f"; OpenBLAS core {r0['torch_openblas_core']}")
        print(f"peak (bertrain's FMA loop, median): {med([r['peak_gflops'] for r in rows]):.1f} GFLOP/s; "
              f"{a.warmup} warm-up + {a.steps} timed steps; medians of {a.repeats} alternating rounds")
    print(f"{'model':6} {'T':>4} {'B':>3} {'bertrain seq/s':>14} {'torch seq/s':>11} {'ratio':>6} {'bt MFU':>7} "
          f"{'pt MFU':>7} {'bt RSS MiB':>10} {'pt RSS MiB':>10}")
    for r in rows:
        pt_mfu = f"{100 * r['torch_mfu']:6.1f}%" if r["torch_mfu"] is not None else "    n/a"
        print(f"{r['model']:6} {r['seq_len']:4d} {r['batch_size']:3d} {r['bertrain_seq_s']:14.2f} {r['torch_seq_s']:11.2f}"
              f" {r['ratio']:5.2f}x {100 * r['bertrain_mfu']:6.1f}% {pt_mfu} {r['bertrain_rss_mib']:10.0f}"
              f" {r['torch_rss_mib']:10.0f}")
    if any("bf16_seq_s" in r for r in rows):
        print("bf16 (`bench train --bf16`, same rounds; its MFU is relative to the measured bf16 dot-product peak):")
        print(f"{'model':6} {'T':>4} {'bf16 seq/s':>10} {'bf16/fp32':>9} {'bf16/torch':>10} {'bf16 MFU':>8} {'RSS MiB':>8}")
        for r in rows:
            if "bf16_seq_s" in r:
                print(f"{r['model']:6} {r['seq_len']:4d} {r['bf16_seq_s']:10.2f} {r['bf16_over_fp32']:8.2f}x"
                      f" {r['bf16_over_torch']:9.2f}x {100 * r['bf16_mfu_bf16_peak']:7.1f}% {r['bf16_rss_mib']:8.0f}")
    print("step parts, median ms (forward / backward / clip + optimizer + zero_grad; bertrain LAMB, torch AdamW):")
    for r in rows:
        bp, tp = r["bertrain_step_parts_ms"], r["torch_step_parts_ms"]
        print(f"  {r['model']:6} {r['seq_len']:4d}  bertrain {bp['forward']:8.1f} / {bp['backward']:8.1f} / "
              f"{bp['optimizer']:7.1f}   torch {tp['forward']:8.1f} / {tp['backward']:8.1f} / {tp['optimizer']:7.1f}")
    busy = [r for r in rows if r["min_machine_idle_before"] < 0.9]
    if busy:
        print("WARNING: another process used the cores before some runs (idle < 90%): "
              + ", ".join(f"{r['model']} {r['seq_len']} ({100 * r['min_machine_idle_before']:.0f}% idle)" for r in busy))
    print(f"JSON lines: {jsonl}")


if __name__ == "__main__":
    main()
