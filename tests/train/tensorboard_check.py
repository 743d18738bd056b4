#!/usr/bin/python3
"""tensorboard_check.py: an independent reader of bertrain's TensorBoard event files.

Reads every events.out.tfevents.* file of a directory with its own TFRecord reader (CRC-32C below, masked as
TensorFlow's record_writer.cc does) and protoc-generated Python classes of tensorflow.Event / Summary (compiled at
run time from tensorboard_event.proto and tensorboard_summary.proto beside this script), and checks:
  - every record is whole with both CRCs right (with --live, an incomplete last record is allowed: the run is
    still writing);
  - each file starts with file_version "brain.Event:2", every other record holds a Summary of simple_values;
  - over all files each (step, tag) appears once;
  - every scalar equals the matching value of metrics.jsonl at the same step (as float32), by the tag table of
    docs/guides/tensorboard.md; without --live also that every such value of metrics.jsonl is in the files.
Usage: tensorboard_check.py EVENT_DIR METRICS_JSONL [--live] [--min_steps N] [--expect_files N]
Prints one summary line; exits 1 with the reason on the first failure.
"""
import argparse
import glob
import importlib
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

# metrics.jsonl key -> TensorBoard tag of a training record (records with "eval": true give eval/<key>).
TRAIN_TAGS = {
    "loss": "train/loss",
    "lr": "train/learning_rate",
    "grad_norm": "train/grad_norm",
    "epoch": "train/epoch",
    "mlm_loss": "train/mlm_loss",
    "nsp_loss": "train/nsp_loss",
    "sequences_per_second": "train/sequences_per_second",
    "real_tokens_per_second": "train/tokens_per_second",
    "data_wait_fraction": "train/data_wait",
    "skipped_steps": "train/skipped_steps",
    "phase": "train/phase",
}


def fail(msg):
    print("tensorboard_check: FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def _crc_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def load_protos():
    here = os.path.dirname(os.path.abspath(__file__))
    out = tempfile.mkdtemp(prefix="tb_proto_")
    subprocess.run(["protoc", "-I", here, "--python_out=" + out, os.path.join(here, "tensorboard_event.proto"),
                    os.path.join(here, "tensorboard_summary.proto")], check=True)
    sys.path.insert(0, out)
    return importlib.import_module("tensorboard_event_pb2")


def read_records(path, live):
    data = open(path, "rb").read()
    pos, records = 0, []
    while pos < len(data):
        if len(data) - pos < 12:
            if live:
                break
            fail(f"{path}: {len(data) - pos} bytes after the last record (an incomplete header)")
        (n,) = struct.unpack_from("<Q", data, pos)
        (len_crc,) = struct.unpack_from("<I", data, pos + 8)
        if masked(crc32c(data[pos:pos + 8])) != len_crc:
            fail(f"{path}: length CRC mismatch at byte {pos}")
        if len(data) - pos - 12 < n + 4:
            if live:
                break
            fail(f"{path}: record at byte {pos} is incomplete ({n} bytes announced)")
        body = data[pos + 12:pos + 12 + n]
        (body_crc,) = struct.unpack_from("<I", data, pos + 12 + n)
        if masked(crc32c(body)) != body_crc:
            fail(f"{path}: data CRC mismatch at byte {pos}")
        records.append(body)
        pos += 12 + n + 4
    return records


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def expected_from_metrics(path):
    want = {}
    for i, line in enumerate(open(path), 1):
        if not line.strip():
            continue
        r = json.loads(line)
        if "step" not in r:
            continue
        step = r["step"]
        for k, v in r.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            if r.get("eval") is True:
                if k in ("step", "global_step"):
                    continue
                tag = "eval/" + k
            elif k in TRAIN_TAGS:
                tag = TRAIN_TAGS[k]
            else:
                continue
            key = (step, tag)
            if key in want:
                fail(f"{path}:{i}: step {step} tag {tag} a second time in metrics.jsonl")
            want[key] = f32(float(v))
    return want


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("event_dir")
    ap.add_argument("metrics")
    ap.add_argument("--live", action="store_true", help="the run is still writing: allow an incomplete last record")
    ap.add_argument("--min_steps", type=int, default=1, help="at least this many steps must have scalars")
    ap.add_argument("--expect_files", type=int, default=0, help="exactly this many event files (0: any)")
    a = ap.parse_args()

    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value (RFC 3720 / iSCSI)
    event_pb2 = load_protos()
    files = sorted(glob.glob(os.path.join(a.event_dir, "events.out.tfevents.*")))
    if not files:
        fail(f"no event file in {a.event_dir}")
    if a.expect_files and len(files) != a.expect_files:
        fail(f"{len(files)} event files in {a.event_dir}, expected {a.expect_files}: {files}")
    # Read the events before metrics.jsonl: bertrain appends a metrics line before the record of its scalars, so
    # everything read here has its line by then.
    seen = {}
    for path in files:
        records = read_records(path, a.live)
        if not records:
            if a.live:
                continue
            fail(f"{path}: no record")
        last_time = 0.0
        for i, body in enumerate(records):
            ev = event_pb2.Event()
            ev.ParseFromString(body)
            if ev.SerializeToString() != body:  # bertrain serialises as protobuf's runtime does
                fail(f"{path}: record {i} is not in protobuf's canonical encoding")
            if not (1.5e9 < ev.wall_time < 5e9) or ev.wall_time < last_time:
                fail(f"{path}: record {i}: wall_time {ev.wall_time} (previous {last_time})")
            last_time = ev.wall_time
            what = ev.WhichOneof("what")
            if i == 0:
                if what != "file_version" or ev.file_version != "brain.Event:2":
                    fail(f"{path}: the first record is not file_version brain.Event:2 ({ev})")
                continue
            if what != "summary" or not ev.summary.value:
                fail(f"{path}: record {i} holds no summary ({what})")
            for v in ev.summary.value:
                if v.WhichOneof("value") != "simple_value":
                    fail(f"{path}: record {i} tag {v.tag}: not a simple_value")
                key = (ev.step, v.tag)
                if key in seen:
                    fail(f"step {ev.step} tag {v.tag} twice: in {seen[key][0]} and {path}")
                seen[key] = (path, v.simple_value)
    want = expected_from_metrics(a.metrics)
    for (step, tag), (path, value) in sorted(seen.items()):
        if (step, tag) not in want:
            fail(f"{path}: step {step} tag {tag} has no value in {a.metrics}")
        w = want[(step, tag)]
        if not (value == w or (math.isnan(value) and math.isnan(w))):
            fail(f"{path}: step {step} tag {tag}: {value!r} in the event file, {w!r} in metrics.jsonl")
    if not a.live:
        missing = sorted(set(want) - set(seen))
        if missing:
            fail(f"{len(missing)} metrics.jsonl values not in the event files, e.g. {missing[:5]}")
    steps = sorted({s for s, _ in seen})
    if len(steps) < a.min_steps:
        fail(f"{len(steps)} steps with scalars, expected at least {a.min_steps}")
    tags = sorted({t for _, t in seen})
    print(f"tensorboard_check: {len(files)} file(s), {len(seen)} scalars over {len(steps)} steps "
          f"({steps[0]}..{steps[-1]}), each step once and equal to metrics.jsonl; tags: {' '.join(tags)}")


if __name__ == "__main__":
    main()
