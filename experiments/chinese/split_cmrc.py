#!/usr/bin/env python3
"""split_cmrc.py DEV TRIAL OUT_DIR: a CMRC 2018 train/dev split by article for experiments/chinese (CMRC's
train file is not available here). Articles of the official dev file at position % 5 == 4 (0-based, file order)
form OUT_DIR/dev.json; the other dev articles plus every trial article form OUT_DIR/train.json. Dev and trial
share no article id; no paragraph is in both outputs. Training questions keep only their first answer (dev has
three per question; run_squad.py trains on exactly one). Writes JSON in SQuAD layout (version kept)."""
import json, sys

dev = json.load(open(sys.argv[1], encoding="utf-8"))
trial = json.load(open(sys.argv[2], encoding="utf-8"))
held = [a for i, a in enumerate(dev["data"]) if i % 5 == 4]
train = [a for i, a in enumerate(dev["data"]) if i % 5 != 4] + trial["data"]
ctx_held = {p["context"] for a in held for p in a["paragraphs"]}
train = [a for a in train if not any(p["context"] in ctx_held for p in a["paragraphs"])]
for a in train:
    for p in a["paragraphs"]:
        for q in p["qas"]:
            q["answers"] = q["answers"][:1]
for name, arts in (("train", train), ("dev", held)):
    with open(f"{sys.argv[3]}/{name}.json", "w", encoding="utf-8") as f:
        json.dump({"version": dev.get("version", "v1.0"), "data": arts}, f, ensure_ascii=False)
    q = sum(len(p["qas"]) for a in arts for p in a["paragraphs"])
    print(f"{name}: {len(arts)} articles, {q} questions", file=sys.stderr)
