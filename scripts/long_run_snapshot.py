#!/usr/bin/python3
"""long_run_snapshot.py: carries issue 16's long pretraining run (scripts/pretrain_long_run.sh) across a lost machine.

A session's processes end when it stops, and the machine may come back without ../runs (it did on 2026-12-02, twice).
An exact checkpoint of bert-mini is 135 MB (f32 weights and both AdamW moments), too much to commit at every stop,
so this keeps a near-exact one of 45 MB in the repository:

  save OUT DIR     the newest complete checkpoint of OUT/run saved between two steps (the trainer's periodic ones,
                   not the mid-step one a SIGTERM writes) -> DIR: the weights and AdamW's second moment
                   (exp_avg_sq) rounded to bf16 (round to nearest even), trainer_state.json, config.json, the run's
                   metrics.jsonl up to that step, and the long run's own files (stop_rule.log, estimate.txt, the stop
                   rule's decisions). The first moment (exp_avg) is not kept.
  restore DIR OUT  (only into an OUT without a checkpoint) -> OUT/run/checkpoint-N, from which
                   `pretrain_long_run.sh` continues with --resume at step N (the shards it makes again from the same
                   seeds are identical, and trainer_state.json holds the data cursor). The weights and exp_avg_sq
                   come back as f32 (the bf16 values), exp_avg as zeros.

What the restore changes, against an exact resume: every weight moves by at most 2^-8 of itself (bf16 rounding;
the bf16 recipe's products see the same bf16 values), and for about 20 steps AdamW's update is smaller than
it would be (exp_avg restarts from 0 while the bias correction stays at step N: the first update is 0.1 of
the usual size, after k steps 1 - 0.9^k), a self-warming restart. The snapshot says that it is one (SNAPSHOT.json).

Usage: long_run_snapshot.py save OUT DIR | restore DIR OUT      (Debian's python3 and numpy)
Exit codes: 0 done, 1 nothing to do (no checkpoint to save; OUT already has one), 2 bad input.
"""
import json
import lzma
import os
import re
import shutil
import struct
import sys
import time

import numpy as np

RUN_FILES = ["stop_rule.log", "estimate.txt", "wall.log", "phase1_cut", "fired-phase1", "fired-phase2"]
CKPT_FILES = ["trainer_state.json", "config.json", "recipe.json", "vocab.txt", "special_tokens_map.json",
              "tokenizer_config.json"]


def fail(msg):
    print("long_run_snapshot.py: " + msg, file=sys.stderr)
    sys.exit(2)


def read_st(path):
    """(metadata, {name: (dtype, shape, bytes)}) of a safetensors file, in header order."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        fail("%s: shorter than 8 bytes" % path)
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        fail("%s: header length %d past the end of the file" % (path, n))
    header = json.loads(data[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", None)
    body = data[8 + n:]
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        out[name] = (e["dtype"], e["shape"], body[b:end])
    return meta, out


def write_st(path, tensors, meta):
    """tensors: {name: (dtype, shape, bytes)}, written in that order; atomically (path.tmp, then rename)."""
    header, off = {}, 0
    if meta:
        header["__metadata__"] = meta
    for name, (dt, shape, raw) in tensors.items():
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, _, raw in tensors.values():
            f.write(raw)
    os.replace(path + ".tmp", path)


def f32_to_bf16(raw, where):
    u = np.frombuffer(raw, dtype=np.uint32)
    if not np.isfinite(u.view(np.float32)).all():
        fail("%s: not finite, nothing to snapshot" % where)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16).tobytes()  # round to nearest even


def bf16_to_f32(raw):
    return (np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16).tobytes()


def newest_checkpoint(run, step_boundary=False):
    """The newest complete checkpoint-N of run, or None. step_boundary: only one saved between two optimizer steps
    (a SIGTERM mid-step saves the partial gradient sum too, 45 MB more, which the snapshot does not keep)."""
    steps = []
    for d in os.listdir(run) if os.path.isdir(run) else []:
        m = re.fullmatch(r"checkpoint-(\d+)", d)
        state = os.path.join(run, d, "trainer_state.json")
        if not m or not os.path.isfile(state):
            continue
        if step_boundary and (json.load(open(state)).get("micro_batch_index", 0) != 0
                              or os.path.exists(os.path.join(run, d, "partial_gradients.safetensors"))):
            continue
        steps.append(int(m.group(1)))
    return os.path.join(run, "checkpoint-%d" % max(steps)) if steps else None


def metrics_upto(path, step):
    """The lines of metrics.jsonl whose step is at most `step` (a resumed trainer writes the later ones again)."""
    keep = []
    with open(path) as f:
        for line in f:
            try:
                if json.loads(line).get("step", 0) <= step:
                    keep.append(line)
            except ValueError:
                pass
    return "".join(keep)


def save(out, dst):
    ck = newest_checkpoint(os.path.join(out, "run"), step_boundary=True)
    if ck is None:
        print("long_run_snapshot.py: no checkpoint between two steps in %s/run: nothing saved" % out, file=sys.stderr)
        return 1
    state = json.load(open(os.path.join(ck, "trainer_state.json")))
    step = state["global_step"]
    if state["recipe"]["optimizer"]["name"] != "adamw":
        fail("%s: optimizer %s; the snapshot keeps AdamW's exp_avg_sq only" % (ck, state["recipe"]["optimizer"]["name"]))
    tmp = dst.rstrip("/") + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    meta, model = read_st(os.path.join(ck, "model.safetensors"))
    write_st(os.path.join(tmp, "model.bf16.safetensors"),
             {k: ("BF16", s, f32_to_bf16(r, ck + ": " + k)) for k, (dt, s, r) in model.items()}, meta)
    ometa, opt = read_st(os.path.join(ck, "optimizer.safetensors"))
    v = {k: ("BF16", s, f32_to_bf16(r, ck + ": " + k)) for k, (dt, s, r) in opt.items() if k.startswith("exp_avg_sq.")}
    if len(v) != len(model) or any(dt != "F32" for dt, _, _ in opt.values()):
        fail("%s/optimizer.safetensors: expected F32 exp_avg and exp_avg_sq for each of %d tensors" % (ck, len(model)))
    write_st(os.path.join(tmp, "exp_avg_sq.bf16.safetensors"), v, ometa)
    for f in CKPT_FILES:
        shutil.copy(os.path.join(ck, f), tmp)
    with lzma.open(os.path.join(tmp, "metrics.jsonl.xz"), "wt") as f:
        f.write(metrics_upto(os.path.join(out, "run", "metrics.jsonl"), step))
    for f in RUN_FILES:
        if os.path.exists(os.path.join(out, f)):
            shutil.copy(os.path.join(out, f), tmp)
    info = {"global_step": step, "phase": state["phase"], "phase_step": state["phase_step"],
            "from": os.path.abspath(ck), "saved": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "exact": False, "what": "weights and exp_avg_sq in bf16, exp_avg not kept (scripts/long_run_snapshot.py)"}
    with open(os.path.join(tmp, "SNAPSHOT.json"), "w") as f:
        json.dump(info, f, indent=2)
        f.write("\n")
    shutil.rmtree(dst, ignore_errors=True)
    os.replace(tmp, dst)
    print("saved %s (global step %d, phase %d step %d) to %s" % (ck, step, state["phase"], state["phase_step"], dst))
    return 0


def restore(src, out):
    run = os.path.join(out, "run")
    if newest_checkpoint(run) is not None:
        print("long_run_snapshot.py: %s already has a checkpoint: not restored" % run, file=sys.stderr)
        return 1
    info_path = os.path.join(src, "SNAPSHOT.json")
    if not os.path.isfile(info_path):
        fail("%s: no SNAPSHOT.json" % src)
    step = json.load(open(info_path))["global_step"]
    ck = os.path.join(run, "checkpoint-%d" % step)
    tmp = ck + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    meta, model = read_st(os.path.join(src, "model.bf16.safetensors"))
    write_st(os.path.join(tmp, "model.safetensors"), {k: ("F32", s, bf16_to_f32(r)) for k, (_, s, r) in model.items()}, meta)
    ometa, v = read_st(os.path.join(src, "exp_avg_sq.bf16.safetensors"))
    opt = {}
    for k, (_, s, r) in model.items():  # the trainer's order: every exp_avg, then every exp_avg_sq
        opt["exp_avg." + k] = ("F32", s, bytes(2 * len(r)))
    for k in model:
        if "exp_avg_sq." + k not in v:
            fail("%s: exp_avg_sq.%s missing" % (src, k))
        _, s, r = v["exp_avg_sq." + k]
        opt["exp_avg_sq." + k] = ("F32", s, bf16_to_f32(r))
    write_st(os.path.join(tmp, "optimizer.safetensors"), opt, ometa)
    for f in CKPT_FILES:
        shutil.copy(os.path.join(src, f), tmp)
    shutil.copy(os.path.join(src, "recipe.json"), os.path.join(run, "recipe.json"))
    with lzma.open(os.path.join(src, "metrics.jsonl.xz"), "rt") as f:
        text = f.read()
    with open(os.path.join(run, "metrics.jsonl"), "w") as f:
        f.write(text)
    for f in RUN_FILES:
        if os.path.exists(os.path.join(src, f)):
            shutil.copy(os.path.join(src, f), out)
    os.replace(tmp, ck)
    with open(os.path.join(out, "stop_rule.log"), "a") as f:
        f.write("[%s] restored from the snapshot %s at global step %d (bf16 weights and exp_avg_sq, exp_avg zero)\n"
                % (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), src, step))
    print("restored %s to %s" % (src, ck))
    return 0


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("save", "restore"):
        print(__doc__.strip().split("\n\n")[-2], file=sys.stderr)
        return 2
    return save(sys.argv[2], sys.argv[3]) if sys.argv[1] == "save" else restore(sys.argv[2], sys.argv[3])


if __name__ == "__main__":
    sys.exit(main())
