#!/usr/bin/env python3
"""table.py OUT_DIR: the markdown tables of docs/results/cluster-projection.md from run.sh's estimate outputs
(OUT_DIR/<job>-<gbps>g.txt): for each job, the wall time, cost and scaling efficiency at every N, per network."""
import re
import sys
from pathlib import Path

out = Path(sys.argv[1])
JOBS = [("finetune", "(a) finetuning bert-base: 100,000 examples x 10 epochs, batch 32 (31,250 steps)"),
        ("lamb", "(b) the LAMB recipe: 7,038 steps at 65,536 x 128, then 1,563 at 32,768 x 512"),
        ("bert500k", "(b) 500,000 steps at batch 256 (450,000 at 128, 50,000 at 512)")]


def whole(path):
    """{ranks: (wall hours, efficiency %, cost)} from the 'whole recipe' table, and the per-phase header lines."""
    rows, phases, on = {}, [], False
    for line in path.read_text().splitlines():
        if line.startswith("phase ") and "MB per step" in line:
            phases.append(line)
        if line.startswith("whole recipe"):
            on = True
            continue
        if on:
            f = line.split()
            if len(f) == 5 and f[0].isdigit():
                rows[int(f[0])] = (float(f[2]), float(f[3].rstrip("%")), float(f[4]))
    return rows, phases


def hours(h):
    if h >= 48:
        return f"{h / 24:,.1f} d"
    if h >= 1:
        return f"{h:,.1f} h"
    return f"{h * 60:,.0f} min"


for job, title in JOBS:
    nets = sorted(int(m.group(1)) for p in out.glob(f"{job}-*g.txt") if (m := re.search(r"-(\d+)g\.txt$", p.name)))
    if not nets:
        continue
    data = {g: whole(out / f"{job}-{g}g.txt")[0] for g in nets}
    print(f"### {title}\n")
    head = "| nodes |" + "".join(f" {g} Gb/s: wall | cost | efficiency |" for g in nets)
    print(head)
    print("|---:|" + "---:|---:|---:|" * len(nets))
    for n in sorted(set().union(*[set(d) for d in data.values()])):
        cells = []
        for g in nets:
            if n in data[g]:
                w, e, c = data[g][n]
                cells += [hours(w), f"${c:,.0f}", f"{e:.0f}%"]
            else:
                cells += ["-", "-", "-"]
        print(f"| {n} | " + " | ".join(cells) + " |")
    print()
