#!/usr/bin/python3
# hf_compat.py: checks bertrain's checkpoints against Hugging Face transformers' conventions without
# transformers (not packaged in Debian). Run with Debian's /usr/bin/python3 (python3-torch).
#
#   /usr/bin/python3 tests/models/hf_compat.py write OUT
#       writes two small BertForPreTraining checkpoints with the same random weights:
#       OUT/hf_new/  config.json + model.safetensors as transformers' save_pretrained writes them (F32, metadata
#                    {"format": "pt"}, tied cls.predictions.decoder.weight/.decoder.bias left out)
#       OUT/hf_old/  bert_config.json (google-research/bert form, no layer_norm_eps) + model.safetensors in the
#                    form of the hub's converted bert-base-uncased: LayerNorm.gamma/.beta names, a
#                    bert.embeddings.position_ids I64 buffer and the tied cls.predictions.decoder.weight included
#   /usr/bin/python3 tests/models/hf_compat.py check DIR REFERENCE_DIR
#       reads a bertrain-written checkpoint DIR and checks, as transformers' from_pretrained would need:
#       config.json keys and values, header metadata {"format": "pt"}, exactly the expected Hugging Face names
#       with dtype F32 and their shapes, no tied decoder weight, contiguous offsets, an 8-byte padded header, and
#       every value bit-equal to REFERENCE_DIR's model.safetensors. Exit status 1 with a message on failure.
# The ctest `hf_compat` runs: write -> bertrain loads both (tests/hf_compat_roundtrip.cpp) and saves -> check.
import json
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import torch_bert as tb  # noqa: E402

CONFIG = {
    "vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 37,
    "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 64, "type_vocab_size": 2, "initializer_range": 0.02, "layer_norm_eps": 1e-12,
}


def fail(msg):
    print(f"hf_compat: FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def write(out):
    params = tb.init_params(CONFIG, torch.Generator().manual_seed(99), dtype=torch.float32)
    new = os.path.join(out, "hf_new")
    os.makedirs(new, exist_ok=True)
    with open(os.path.join(new, "config.json"), "w") as f:
        f.write(tb.hf_config_json(CONFIG, transformers_version="4.30.2"))
    tb.save_safetensors(os.path.join(new, "model.safetensors"), params, {"format": "pt"})

    old = os.path.join(out, "hf_old")
    os.makedirs(old, exist_ok=True)
    google = {k: v for k, v in CONFIG.items() if k != "layer_norm_eps"}
    with open(os.path.join(old, "bert_config.json"), "w") as f:
        json.dump(google, f, indent=2)
    renamed = {}
    for k, v in params.items():
        if k.endswith("LayerNorm.weight"):
            k = k[: -len("weight")] + "gamma"
        elif k.endswith("LayerNorm.bias"):
            k = k[: -len("bias")] + "beta"
        renamed[k] = v
    renamed["bert.embeddings.position_ids"] = torch.arange(CONFIG["max_position_embeddings"], dtype=torch.int64)[None, :]
    renamed["cls.predictions.decoder.weight"] = params["bert.embeddings.word_embeddings.weight"].clone()
    tb.save_safetensors(os.path.join(old, "model.safetensors"), renamed, {"format": "pt"})
    print(f"hf_compat: wrote {new} and {old}")


def check(ckpt, reference):
    cfg_path = os.path.join(ckpt, "config.json")
    if not os.path.exists(cfg_path):
        fail(f"{cfg_path} missing")
    with open(cfg_path) as f:
        cfg = json.load(f)
    for k, v in CONFIG.items():
        if k not in cfg:
            fail(f"config.json lacks {k}")
        if cfg[k] != v:
            fail(f"config.json {k} = {cfg[k]!r}, expected {v!r}")
    want_extra = {"architectures": ["BertForPreTraining"], "model_type": "bert", "pad_token_id": 0,
                  "position_embedding_type": "absolute", "torch_dtype": "float32"}
    for k, v in want_extra.items():
        if cfg.get(k) != v:
            fail(f"config.json {k} = {cfg.get(k)!r}, expected {v!r}")

    path = os.path.join(ckpt, "model.safetensors")
    header, metadata, tensors, n = tb.read_safetensors(path)
    if metadata != {"format": "pt"}:
        fail(f"metadata {metadata!r}, expected {{'format': 'pt'}} (transformers refuses other formats)")
    if n % 8:
        fail(f"header length {n} not a multiple of 8")
    expected = dict(tb.param_shapes(CONFIG))
    names = set(header)
    if "cls.predictions.decoder.weight" in names:
        fail("the tied cls.predictions.decoder.weight was written")
    if names != set(expected):
        fail(f"names differ: missing {sorted(set(expected) - names)}, unexpected {sorted(names - set(expected))}")
    for name, shape in expected.items():
        e = header[name]
        if e["dtype"] != "F32":
            fail(f"{name}: dtype {e['dtype']}, expected F32")
        if tuple(e["shape"]) != tuple(shape):
            fail(f"{name}: shape {e['shape']}, expected {list(shape)}")
    spans = sorted(tuple(e["data_offsets"]) for e in header.values())
    pos = 0
    for b, end in spans:
        if b != pos:
            fail(f"offsets not contiguous at {b} (expected {pos})")
        pos = end
    if os.path.getsize(path) != 8 + n + pos:
        fail("file size does not match the header")
    # The reference serializer's order: descending dtype alignment, then name (all F32 here: by name).
    order = [k for k in json.loads(open(path, "rb").read()[8:8 + n].decode()) if k != "__metadata__"]
    if order != sorted(order):
        fail("tensors are not in the reference serializer's order")
    _, _, ref, _ = tb.read_safetensors(os.path.join(reference, "model.safetensors"))
    for name in expected:
        if not torch.equal(tensors[name].view(torch.int32), ref[name].view(torch.int32)):
            fail(f"{name}: values differ from {reference}")
    print(f"hf_compat: {ckpt}: {len(names)} tensors with Hugging Face names, F32, metadata format=pt, "
          f"values bit-equal to {reference}: OK")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "write":
        write(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3])
    else:
        print(__doc__ or "usage: hf_compat.py write OUT | check DIR REFERENCE_DIR", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
