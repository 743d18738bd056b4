#!/usr/bin/python3
# bf16_speedup.py: what --bf16 gains: `bertrain bench train` in fp32 and with --bf16, alternately (the order
# swapped every round, so a drift of the machine hits both), one process per run; prints each round's sequences/s,
# the bf16 / fp32 ratio per round and of the medians, and the verdict against --target (default 1.85).
# Usage: tools/bench/scripts/bf16_speedup.py [--bertrain build/bertrain] [--models base] [--seq_lens 128] [--batch_size 32]
#        [--rounds 3] [--steps 5] [--warmup 2] [--target 1.85] [--jsonl FILE] [--before OTHER_BINARY]
# --unpad never|auto|always is passed to --bertrain's bench train (its default: never, the padded encoder).
# --before OTHER_BINARY adds a third run per round: OTHER_BINARY with --bf16 (e.g. a build without the bf16
# fusions), reported as bf16 before / after.
# Run it on a quiet machine (pause long jobs): bert-base 128 x 32 takes about 3 minutes per round there
# (fp32 about 11.6 s and bf16 about 6.5 s per step, plus model initialisation in every run).
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))


def run(binary, a, bf16):
    with tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False) as f:
        out = f.name
    cmd = [binary, "bench", "train", "--models", a.models, "--seq_lens", a.seq_lens, "--steps", str(a.steps),
           "--warmup", str(a.warmup), "--peak_seconds", "0.1", "--json_out", out]
    if a.batch_size:
        cmd += ["--batch_size", str(a.batch_size)]
    if bf16:
        cmd.append("--bf16")
    if a.unpad and binary == a.bertrain:
        cmd += ["--unpad", a.unpad]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"bf16_speedup.py: {' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    rows = [json.loads(line) for line in open(out)]
    os.unlink(out)
    if len(rows) != 1:
        sys.exit(f"bf16_speedup.py: expected one configuration, got {len(rows)} (give one model and one length)")
    return rows[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bertrain", default=os.path.join(REPO, "build", "bertrain"))
    ap.add_argument("--before", default="", help="another bertrain binary, run with --bf16 as a third run per round")
    ap.add_argument("--models", default="base")
    ap.add_argument("--seq_lens", default="128")
    ap.add_argument("--batch_size", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--target", type=float, default=1.85)
    ap.add_argument("--jsonl", default="")
    ap.add_argument("--unpad", default="", choices=["", "never", "auto", "always"],
                    help="bench train --unpad for --bertrain (default: bench train's default, the padded encoder); "
                         "not passed to --before, whose bench train may predate the flag")
    a = ap.parse_args()
    kinds = [("fp32", a.bertrain, False), ("bf16", a.bertrain, True)]
    if a.before:
        kinds.append(("bf16_before", a.before, True))
    seqs = {k: [] for k, _, _ in kinds}
    for r in range(a.rounds):
        order = kinds if r % 2 == 0 else list(reversed(kinds))
        for kind, binary, bf16 in order:
            row = run(binary, a, bf16)
            row["round"], row["kind"] = r + 1, kind
            seqs[kind].append(row["sequences_per_second"])
            print(f"round {r + 1} {kind:12s} {row['sequences_per_second']:8.3f} seq/s  step median "
                  f"{row['step_seconds_median']:.3f} s  cpu/step {row.get('step_cpu_seconds_median', 0):.3f} s  "
                  f"alloc peak {row['allocator_peak_mib']:.0f} MiB", flush=True)
            if a.jsonl:
                with open(a.jsonl, "a") as f:
                    f.write(json.dumps(row) + "\n")
    ratios = [b / f for b, f in zip(seqs["bf16"], seqs["fp32"])]
    med = {k: statistics.median(v) for k, v in seqs.items()}
    ratio = med["bf16"] / med["fp32"]
    print("per-round bf16 / fp32: " + ", ".join(f"{x:.3f}" for x in ratios))
    print(f"medians: fp32 {med['fp32']:.3f} seq/s, bf16 {med['bf16']:.3f} seq/s, bf16 / fp32 {ratio:.3f}x")
    if a.before:
        print(f"bf16 before {med['bf16_before']:.3f} seq/s: after / before {med['bf16'] / med['bf16_before']:.3f}x")
    print(f"{'PASS' if ratio >= a.target else 'NOT MET'}: bf16 / fp32 {ratio:.3f}x "
          f"{'>=' if ratio >= a.target else '<'} {a.target}x ({a.models} {a.seq_lens} x {a.batch_size})")


if __name__ == "__main__":
    main()
