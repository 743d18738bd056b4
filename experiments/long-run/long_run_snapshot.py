#!/usr/bin/python3
"""long_run_snapshot.py: carries the long pretraining run (experiments/long-run/pretrain_long_run.sh) across a lost machine.

A run of many hours may lose its output directory (OUT, outside the clone) with the machine it ran on. An exact
checkpoint of bert-mini is 135 MB (f32 weights and both AdamW moments), so this keeps a near-exact one of 45 MB
elsewhere (SNAPSHOT in pretrain_long_run.sh), from which the run continues:

  save OUT DIR CONFIG     the newest checkpoint of OUT/run (one saved by SIGTERM in the middle of a step is
                   rewound to the step's start: its partial gradient sum is dropped) -> DIR: the weights and AdamW's second moment
                   (exp_avg_sq) rounded to bf16 (round to nearest even), trainer_state.json, config.json, the run's
                   metrics.jsonl up to that step, and the long run's own files (stop_rule.log, estimate.txt, the stop
                   rule's decisions). The first moment (exp_avg) is not kept.
  restore DIR OUT CONFIG  (only into an OUT without a checkpoint) -> OUT/run/checkpoint-N, from which
                   `pretrain_long_run.sh` continues with --resume at step N (the shards it makes again from the same
                   seeds are identical, and trainer_state.json holds the data cursor). The weights and exp_avg_sq
                   come back as f32 (the bf16 values), exp_avg as zeros.

What the restore changes, against an exact resume: every weight moves by at most 2^-8 of itself (bf16 rounding;
the bf16 recipe's products see the same bf16 values), and for about 20 steps AdamW's update is smaller than
it would be (exp_avg restarts from 0 while the bias correction stays at step N: the first update is 0.1 of
the usual size, after k steps 1 - 0.9^k), a self-warming restart. The snapshot says that it is one (SNAPSHOT.json).

CONFIG is the run's recipe (pretrain_long_run.sh's CONFIG): a snapshot is saved over, and restored into, only the run
of the same CONFIG, and a save never replaces a snapshot that is further on.

Usage: long_run_snapshot.py save OUT DIR CONFIG | restore DIR OUT CONFIG      (Debian's python3 and numpy)
Exit codes: 0 done, 1 nothing to do (no checkpoint to save; the snapshot is further on; OUT already has a
checkpoint), 2 bad input (another run's snapshot, unreadable files).
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


def newest_checkpoint(run):
    """The newest complete checkpoint-N of run (as the trainer's --resume chooses it), or None."""
    steps = []
    for d in os.listdir(run) if os.path.isdir(run) else []:
        m = re.fullmatch(r"checkpoint-(\d+)", d)
        if m and os.path.isfile(os.path.join(run, d, "trainer_state.json")):
            steps.append(int(m.group(1)))
    return os.path.join(run, "checkpoint-%d" % max(steps)) if steps else None


def rewind_to_step_start(state):
    """A checkpoint saved by SIGTERM in the middle of a gradient-accumulation step holds the weights and moments
    after the last complete step, plus the partial gradient sum of the unfinished one (partial_gradients.safetensors,
    not kept here). Dropping that sum and rewinding the step's micro-batch index and data cursor to 0 makes it a
    checkpoint of the step's start, from which --resume runs the whole step again on the same micro-batches (as the
    trainer does when a phase ends mid-step). Returns the number of micro-batches dropped."""
    k = int(state.get("micro_batch_index", 0))
    if k:
        state["micro_batch_index"] = 0
        state["partial_losses"] = []
        cursor = state.get("data_cursor", {})
        if "micro" in cursor:
            cursor["micro"] = 0
    return k


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


def snapshot_info(path):
    """SNAPSHOT.json of the snapshot at path (or at path.old, left by a save killed half-way), or None."""
    for d in (path, path.rstrip("/") + ".old"):
        if os.path.isfile(os.path.join(d, "SNAPSHOT.json")):
            return dict(json.load(open(os.path.join(d, "SNAPSHOT.json"))), dir=d)
    return None


def save(out, dst, config):
    ck = newest_checkpoint(os.path.join(out, "run"))
    if ck is None:
        print("long_run_snapshot.py: no checkpoint in %s/run: nothing saved" % out, file=sys.stderr)
        return 1
    state = json.load(open(os.path.join(ck, "trainer_state.json")))
    step = state["global_step"]
    if state["recipe"]["optimizer"]["name"] != "adamw":
        fail("%s: optimizer %s; the snapshot keeps AdamW's exp_avg_sq only" % (ck, state["recipe"]["optimizer"]["name"]))
    old = snapshot_info(dst)
    if old is not None:
        if old.get("config") != config:
            fail("%s holds a snapshot of the run with CONFIG %s, not %s: not replaced (another SNAPSHOT= for this run)"
                 % (dst, old.get("config"), config))
        if old["global_step"] > step:
            print("long_run_snapshot.py: %s is at global step %d, ahead of %s: not replaced" % (dst, old["global_step"], ck),
                  file=sys.stderr)
            return 1
    dropped = rewind_to_step_start(state)
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
    for f in CKPT_FILES[1:]:
        shutil.copy(os.path.join(ck, f), tmp)
    with open(os.path.join(tmp, "trainer_state.json"), "w") as f:
        json.dump(state, f, indent=2)
        f.write("\n")
    with lzma.open(os.path.join(tmp, "metrics.jsonl.xz"), "wt") as f:
        f.write(metrics_upto(os.path.join(out, "run", "metrics.jsonl"), step))
    for f in RUN_FILES:
        if os.path.exists(os.path.join(out, f)):
            shutil.copy(os.path.join(out, f), tmp)
    info = {"global_step": step, "phase": state["phase"], "phase_step": state["phase_step"], "config": config,
            "micro_batches_dropped": dropped,
            "from": os.path.abspath(ck), "saved": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "exact": False, "what": "weights and exp_avg_sq in bf16, exp_avg not kept (experiments/long-run/long_run_snapshot.py)"}
    with open(os.path.join(tmp, "SNAPSHOT.json"), "w") as f:
        json.dump(info, f, indent=2)
        f.write("\n")
    # Replace dst without a moment where no complete snapshot exists: dst -> dst.old, tmp -> dst, remove dst.old
    # (a kill in between leaves dst.old, which restore falls back to).
    shutil.rmtree(dst + ".old", ignore_errors=True)
    if os.path.exists(dst):
        os.replace(dst, dst + ".old")
    os.replace(tmp, dst)
    shutil.rmtree(dst + ".old", ignore_errors=True)
    print("saved %s (global step %d, phase %d step %d) to %s" % (ck, step, state["phase"], state["phase_step"], dst))
    return 0


def restore(src, out, config):
    run = os.path.join(out, "run")
    if newest_checkpoint(run) is not None:
        print("long_run_snapshot.py: %s already has a checkpoint: not restored" % run, file=sys.stderr)
        return 1
    info = snapshot_info(src)
    if info is None:
        fail("%s: no SNAPSHOT.json" % src)
    if info.get("config") != config:
        fail("%s is a snapshot of the run with CONFIG %s, not %s: not restored" % (src, info.get("config"), config))
    src = info["dir"]
    info_path = os.path.join(src, "SNAPSHOT.json")
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
    if len(sys.argv) != 5 or sys.argv[1] not in ("save", "restore"):
        print(__doc__.strip().split("\n\n")[-2], file=sys.stderr)
        return 2
    try:
        if sys.argv[1] == "save":
            return save(sys.argv[2], sys.argv[3], sys.argv[4])
        return restore(sys.argv[2], sys.argv[3], sys.argv[4])
    except (OSError, ValueError, KeyError) as e:  # unreadable input: 2, never the "nothing to do" of 1
        fail("%s: %s" % (type(e).__name__, e))


if __name__ == "__main__":
    sys.exit(main())
