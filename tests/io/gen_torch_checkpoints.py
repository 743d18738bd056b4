#!/usr/bin/python3
"""gen_torch_checkpoints.py OUT_DIR SOURCE_DIR [--bertrain BIN] [--bert_mini DIR]: PyTorch checkpoints written by
torch.save (Debian's python3-torch) and the files bertrain must make of them, for tests/io/torch_checkpoint_test.cpp
and tests/io/torch_checkpoint_cli_test.sh. Nothing is committed: everything is written into OUT_DIR (the build
directory) at test time. Needs neither transformers nor the safetensors package (tests/reference/torch_bert.py writes
safetensors bytes from the format's specification).

OUT_DIR/
  golden/         pytorch_model.bin: the golden tiny BERT (tests/fixtures/golden/model_gelu.safetensors) as
                  BertForPreTraining.state_dict() holds it: the decoder weight sharing the word embeddings' storage,
                  the decoder bias sharing cls.predictions.bias's, an expanded position_ids buffer and the
                  state dict's _metadata; config.json; expected.safetensors: what `bertrain convert` must write
  golden_f16/     the same in float16; expected_f16.safetensors holds the same F16 values (the safetensors path
                  bertrain already reads); expected.safetensors: convert's output (F16 widened to F32)
  golden_bf16/    the same in bfloat16; expected.safetensors keeps BF16
  golden_views/   every float tensor a view into one flat storage at its own offset, 2-D weights stored transposed
                  (non-contiguous views): expected.safetensors equals golden's
  bert_mini/      (with --bert_mini) bert-mini-en as pytorch_model.bin, config.json, vocab.txt; expected.safetensors
                  is the original model.safetensors' tensors as safetensors lays them out
  classifier/     (with --bert_mini and --bertrain) BertForSequenceClassification from bert-mini-en, finetuned in
                  PyTorch (18 Adam steps on 24 bundled QNLI training pairs), saved by torch.save; data/test.tsv: 8 of those pairs; expected_labels.tsv: PyTorch's labels
                  and probabilities (tests/reference/torch_bert.py's independent BERT)
  hostile/        pickles that call os.system, builtins.eval, subprocess.Popen (each creates hostile/MARKER_*
                  when unpickled by Python, which this script checks on copies that name another marker), forged
                  sizes, a truncated zip and zip bombs
"""
import argparse
import collections
import io
import json
import os
import pickle
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile
import zlib

import torch

SRC = None  # the repository root, set in main()


def torch_bert():
    sys.path.insert(0, os.path.join(SRC, "tests", "reference"))
    import torch_bert as tb
    return tb


def state_dict_of(params):
    """BertForPreTraining.state_dict() of these parameters: tied decoder weight/bias sharing storage, position_ids
    buffer (an expanded view, as transformers registers it), _metadata."""
    sd = collections.OrderedDict()
    for k, v in params.items():
        sd[k] = v
    sd["bert.embeddings.position_ids"] = torch.arange(64).expand((1, -1))
    if "cls.predictions.bias" in params:
        sd["cls.predictions.decoder.weight"] = params["bert.embeddings.word_embeddings.weight"]
        sd["cls.predictions.decoder.bias"] = params["cls.predictions.bias"]
    sd._metadata = collections.OrderedDict([("", {"version": 1}), ("bert", {"version": 1})])
    return sd


def expected_convert(tb, params, path):
    """What `bertrain convert --output_format safetensors` writes: the tensors (not the tied decoder), contiguous,
    F16 widened to F32, sorted as the safetensors serializer sorts, metadata format=pt."""
    out = {}
    for k, v in params.items():
        v = v.contiguous()
        out[k] = v.float() if v.dtype == torch.float16 else v
    tb.save_safetensors(path, out, {"format": "pt"})


def write_golden(tb, out):
    _, _, params, _ = tb.read_safetensors(os.path.join(SRC, "tests/fixtures/golden/model_gelu.safetensors"))
    cfg = os.path.join(SRC, "tests/fixtures/golden/config_gelu.json")
    params = collections.OrderedDict(sorted(params.items()))
    variants = {
        "golden": lambda t: t,
        "golden_f16": lambda t: t.half(),
        "golden_bf16": lambda t: t.bfloat16(),
    }
    for name, cast in variants.items():
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        p = collections.OrderedDict((k, cast(v.clone())) for k, v in params.items())
        sd = state_dict_of(p)
        torch.save(sd, os.path.join(d, "pytorch_model.bin"))
        shutil.copy(cfg, os.path.join(d, "config.json"))
        sd_all = collections.OrderedDict((k, v) for k, v in sd.items()
                                         if not k.startswith("cls.predictions.decoder."))
        expected_convert(tb, sd_all, os.path.join(d, "expected.safetensors"))
        if name == "golden":  # after a round trip through TF, which has no position_ids variable
            del sd_all["bert.embeddings.position_ids"]
            expected_convert(tb, sd_all, os.path.join(d, "expected_without_buffers.safetensors"))
        if name == "golden_f16":
            tb.save_safetensors(os.path.join(d, "expected_f16.safetensors"), p)
    # Views: one flat float32 storage; 2-D weights stored transposed and read back through .t().
    d = os.path.join(out, "golden_views")
    os.makedirs(d, exist_ok=True)
    pieces, layout, off = [], [], 0
    for k, v in params.items():
        stored = v.t().contiguous() if v.dim() == 2 else v
        pieces.append(stored.reshape(-1))
        layout.append((k, off, stored.shape, v.dim() == 2))
        off += stored.numel()
    pieces.append(torch.zeros(3))  # slack at the end: the last view does not end the storage
    flat = torch.cat(pieces)
    views = collections.OrderedDict()
    for k, o, shape, transposed in layout:
        n = 1
        for s in shape:
            n *= s
        v = flat[o:o + n].view(shape)
        views[k] = v.t() if transposed else v
        assert torch.equal(views[k], params[k])
        if transposed:
            assert not views[k].is_contiguous()
    sd = state_dict_of(views)
    torch.save(sd, os.path.join(d, "pytorch_model.bin"))
    shutil.copy(cfg, os.path.join(d, "config.json"))
    shutil.copy(os.path.join(out, "golden", "expected.safetensors"), os.path.join(d, "expected.safetensors"))


def write_bert_mini(tb, out, src_dir):
    _, _, params, _ = tb.read_safetensors(os.path.join(src_dir, "model.safetensors"))
    d = os.path.join(out, "bert_mini")
    os.makedirs(d, exist_ok=True)
    sd = state_dict_of(collections.OrderedDict(params.items()))
    del sd["bert.embeddings.position_ids"]  # bert-mini-en's file has none: convert must give the original back
    torch.save(sd, os.path.join(d, "pytorch_model.bin"))
    for f in ["config.json", "vocab.txt"]:
        shutil.copy(os.path.join(src_dir, f), os.path.join(d, f))
    expected_convert(tb, params, os.path.join(d, "expected.safetensors"))
    return params


def write_classifier(tb, out, src_dir, params, bertrain):
    """BertForSequenceClassification(num_labels=2) from bert-mini-en, finetuned in PyTorch, and PyTorch's labels."""
    d = os.path.join(out, "classifier")
    os.makedirs(os.path.join(d, "data"), exist_ok=True)
    cfg = json.load(open(os.path.join(src_dir, "config.json")))
    H = cfg["hidden_size"]
    vocab = [l.rstrip("\n") for l in open(os.path.join(src_dir, "vocab.txt"), encoding="utf-8")]
    cls_id, sep_id = vocab.index("[CLS]"), vocab.index("[SEP]")

    def ids(texts):
        p = subprocess.run([bertrain, "tokenize", "--vocab_file", os.path.join(src_dir, "vocab.txt"), "--ids"],
                           input="\n".join(texts) + "\n", capture_output=True, text=True, check=True)
        return [[int(x) for x in line.split()] for line in p.stdout.splitlines()]

    # Pairs of the bundled QNLI training split that fit in 64 tokens (bertrain would truncate longer ones; the test
    # uses 64). The model is finetuned on 24 of them; the test predicts the first 8, which the finetuned model tells
    # apart (a model answering one label for everything would not tell a wrong load from a right one).
    train = [l.rstrip("\n").split("\t") for l in open(os.path.join(SRC, "data/qnli/train.tsv"), encoding="utf-8")][1:80]
    tq, ts = ids([r[1] for r in train]), ids([r[2] for r in train])
    tpicked = [(r, q, s) for r, q, s in zip(train, tq, ts) if len(q) + len(s) + 3 <= 64][:24]
    picked = tpicked[:8]

    def pair(q, s):
        tokens = [cls_id] + q + [sep_id] + s + [sep_id]
        types = [0] * (len(q) + 2) + [1] * (len(s) + 1)
        return torch.tensor([tokens]), torch.tensor([types])

    def pooled_of(p, q, s):
        tokens, types = pair(q, s)
        T = tokens.shape[1]
        o = tb.forward(cfg, p, tokens, types, torch.ones(1, T), torch.zeros(1, 1, dtype=torch.long),
                       torch.zeros(1, 1, dtype=torch.long), torch.zeros(1, 1), torch.zeros(1, dtype=torch.long))
        return o["pooled_output"][0]

    # A seeded head, centred on the pretrained model's outputs for these inputs so that both labels are likely.
    p64 = {k: v.double() for k, v in params.items()}
    pooled = torch.stack([pooled_of(p64, q, s) for _, q, s in picked])
    g = torch.Generator().manual_seed(20261205)
    head_w = (torch.randn(2, H, generator=g) * 0.5).float()
    diff = (pooled @ head_w.double().t())
    diff = diff[:, 1] - diff[:, 0]
    head_b = torch.tensor([float(diff.median()) / 2 + 1e-3, -float(diff.median()) / 2 - 1e-3]).float()
    # Then finetuned in PyTorch, the whole model (f32, Adam, cross-entropy, no dropout, 3 epochs of batches of 4):
    # the file is what a PyTorch user's finetuning saves.
    p32 = {k: v.float().clone().requires_grad_(k.startswith("bert.")) for k, v in params.items()}
    hw, hb = head_w.clone().requires_grad_(True), head_b.clone().requires_grad_(True)
    opt = torch.optim.Adam([v for v in p32.values() if v.requires_grad] + [hw, hb], lr=1e-4)
    for step in range(18):
        opt.zero_grad()
        batch = tpicked[4 * (step % 6):4 * (step % 6) + 4]
        loss = sum(torch.nn.functional.cross_entropy((pooled_of(p32, q, s) @ hw.t() + hb)[None, :],
                                                     torch.tensor([0 if r[3] == "entailment" else 1]))
                   for r, q, s in batch) / len(batch)
        loss.backward()
        opt.step()
    params = {k: v.detach() for k, v in p32.items()}
    head_w, head_b = hw.detach(), hb.detach()
    p64 = {k: v.double() for k, v in params.items()}
    pooled = torch.stack([pooled_of(p64, q, s) for _, q, s in picked])
    logits = pooled @ head_w.double().t() + head_b.double()
    margin = (logits[:, 1] - logits[:, 0]).abs().min().item()
    assert margin > 1e-3, f"a pair lies {margin} from the decision boundary: pick another seed"
    labels = torch.argmax(logits, dim=-1).tolist()
    assert 0 < sum(labels) < len(labels), labels
    sd = collections.OrderedDict((k, v) for k, v in params.items() if k.startswith("bert."))
    sd["classifier.weight"] = head_w
    sd["classifier.bias"] = head_b
    torch.save(sd, os.path.join(d, "pytorch_model.bin"))
    cfg["architectures"] = ["BertForSequenceClassification"]
    cfg["id2label"] = {"0": "entailment", "1": "not_entailment"}
    cfg["label2id"] = {"entailment": 0, "not_entailment": 1}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
    shutil.copy(os.path.join(src_dir, "vocab.txt"), os.path.join(d, "vocab.txt"))
    with open(os.path.join(d, "data", "test.tsv"), "w", encoding="utf-8") as f:
        f.write("index\tquestion\tsentence\n")
        for r, _, _ in picked:
            f.write(f"{r[0]}\t{r[1]}\t{r[2]}\n")
    probs = torch.softmax(logits, dim=-1)
    with open(os.path.join(d, "expected_labels.tsv"), "w") as f:
        for (r, _, _), lab, pr in zip(picked, labels, probs):
            f.write(f"{r[0]}\t{['entailment', 'not_entailment'][lab]}\t{pr[0].item():.9f}\t{pr[1].item():.9f}\n")
# ---------------------------------------------------------------------------------------------------------------
# Hostile and broken files

class Call:
    """Pickles as a call of fn(*args): what a malicious pickle does with REDUCE."""

    def __init__(self, fn, args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return (self.fn, self.args)


class ForgedTensor:
    """Pickles as torch.save pickles a tensor, with size/stride/offset chosen here (torch would refuse them)."""

    def __init__(self, offset, size, stride, numel):
        self.offset, self.size, self.stride, self.numel = offset, size, stride, numel

    def __reduce__(self):
        return (torch._utils._rebuild_tensor_v2,
                (StorageRef(self.numel), self.offset, self.size, self.stride, False, collections.OrderedDict()))


class StorageRef:
    def __init__(self, numel):
        self.numel = numel


class TorchLikePickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, StorageRef):
            return ("storage", torch.FloatStorage, "0", "cpu", obj.numel)
        return None


def torch_zip(path, obj, record=b"\0" * 16):
    """A zip laid out as torch.save lays it out, holding the pickle of `obj` and one 16-byte storage. Protocol 2
    without Python 2 name mapping: globals appear under their Python 3 names (builtins.eval, not __builtin__)."""
    buf = io.BytesIO()
    TorchLikePickler(buf, protocol=2, fix_imports=False).dump(obj)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", buf.getvalue())
        z.writestr("archive/data/0", record)
        z.writestr("archive/version", "3\n")
    return buf.getvalue()


def patch_sizes(path, entry, new_size):
    """Rewrites `entry`'s uncompressed size in its local header and central directory record (a lying zip)."""
    data = bytearray(open(path, "rb").read())
    name = entry.encode()
    for sig, size_at, name_len_at, name_at in [(b"PK\x03\x04", 22, 26, 30), (b"PK\x01\x02", 24, 28, 46)]:
        i = 0
        while True:
            i = data.find(sig, i)
            if i < 0:
                break
            (n,) = struct.unpack_from("<H", data, i + name_len_at)
            if data[i + name_at:i + name_at + n] == name:
                struct.pack_into("<I", data, i + size_at, new_size)
            i += 4
    open(path, "wb").write(bytes(data))


def hostile_calls(marker):
    return {
        "os_system": Call(os.system, (f"touch '{marker}'",)),
        "builtins_eval": Call(eval, (f"open({marker!r}, 'w').close()",)),
        "subprocess_popen": Call(subprocess.Popen, (["touch", marker],)),
    }


# Unpickles argv[1] with Python's own unpickler and waits up to 2 s for the marker argv[2] (Popen runs touch
# asynchronously).
PROBE = """import os, pickle, sys, time
pickle.loads(open(sys.argv[1], 'rb').read())
for _ in range(100):
    if os.path.exists(sys.argv[2]):
        break
    time.sleep(0.02)
"""


def write_hostile(out):
    d = os.path.join(out, "hostile")
    os.makedirs(d, exist_ok=True)
    # The pickles are real attacks: Python's unpickler runs each of them (checked here on a copy naming a probe).
    with tempfile.TemporaryDirectory() as tmp:
        probe = os.path.join(tmp, "probe")
        for name, call in hostile_calls(probe).items():
            buf = io.BytesIO()
            TorchLikePickler(buf, protocol=2, fix_imports=False).dump(collections.OrderedDict([("w", call)]))
            pkl = os.path.join(tmp, name + ".pkl")
            with open(pkl, "wb") as f:
                f.write(buf.getvalue())
            subprocess.run([sys.executable, "-c", PROBE, pkl, probe], check=True)
            assert os.path.exists(probe), f"{name}: Python's unpickler did not run the call"
            os.remove(probe)
    for name, call in hostile_calls(os.path.join(d, "MARKER_" + name)).items():
        torch_zip(os.path.join(d, name + ".bin"), collections.OrderedDict([("w", call)]))
    ok = collections.OrderedDict([("w", ForgedTensor(0, (2, 2), (2, 1), 4))])
    torch_zip(os.path.join(d, "valid_forged_pickler.bin"), ok)  # the same pickler, honest sizes: accepted
    torch_zip(os.path.join(d, "forged_size.bin"), collections.OrderedDict([("w", ForgedTensor(0, (400,), (1,), 4))]))
    torch_zip(os.path.join(d, "forged_stride.bin"), collections.OrderedDict([("w", ForgedTensor(0, (2, 2), (3, 1), 4))]))
    torch_zip(os.path.join(d, "forged_offset.bin"), collections.OrderedDict([("w", ForgedTensor(3, (2,), (1,), 4))]))
    torch_zip(os.path.join(d, "forged_numel.bin"), collections.OrderedDict([("w", ForgedTensor(0, (4,), (1,), 1000))]))
    golden = open(os.path.join(out, "golden", "pytorch_model.bin"), "rb").read()
    open(os.path.join(d, "truncated.bin"), "wb").write(golden[:len(golden) // 2])
    # Bombs. (1) data/0 deflated from 16 MiB of zeros (16 KiB) but declaring 4 GiB: more than deflate can produce.
    sd = collections.OrderedDict([("w", ForgedTensor(0, (4,), (1,), 4))])
    buf = io.BytesIO()
    TorchLikePickler(buf, protocol=2).dump(sd)
    bomb1 = os.path.join(d, "bomb_declared.bin")
    with zipfile.ZipFile(bomb1, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", buf.getvalue())
        z.writestr("archive/version", "3\n")
        z.writestr("archive/data/0", b"\0" * (16 << 20), compress_type=zipfile.ZIP_DEFLATED)
    patch_sizes(bomb1, "archive/data/0", 0xFFFFFFF0)
    # (2) data.pkl declares its pickle's length, but its deflate stream goes on for 16 MiB of zeros.
    bomb2 = os.path.join(d, "bomb_inflates.bin")
    with zipfile.ZipFile(bomb2, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", buf.getvalue() + b"\0" * (16 << 20), compress_type=zipfile.ZIP_DEFLATED)
        z.writestr("archive/version", "3\n")
        z.writestr("archive/data/0", b"\0" * 16)
    patch_sizes(bomb2, "archive/data.pkl", len(buf.getvalue()))
    # A whole model pickled (torch.save(model)): refused by its class, not run.
    torch.save(torch.nn.Linear(2, 2), os.path.join(d, "whole_module.bin"))


def main():
    global SRC
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("source")
    ap.add_argument("--bertrain")
    ap.add_argument("--bert_mini")
    a = ap.parse_args()
    SRC = os.path.abspath(a.source)
    tb = torch_bert()
    os.makedirs(a.out, exist_ok=True)
    write_golden(tb, a.out)
    write_hostile(a.out)
    if a.bert_mini:
        params = write_bert_mini(tb, a.out, a.bert_mini)
        if a.bertrain:
            write_classifier(tb, a.out, a.bert_mini, params, a.bertrain)
    print(f"gen_torch_checkpoints.py: wrote {a.out}")


if __name__ == "__main__":
    main()
