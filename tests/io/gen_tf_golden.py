#!/usr/bin/python3
# gen_tf_golden.py: the independent PyTorch forward for the TF checkpoint tests. Builds the tiny google-research/bert
# pretraining checkpoint's model from the values ../shared/data/tf_checkpoints/list_bundle.py dumped
# (bert_model.ckpt.entries.json: every value, no TensorFlow and no bertrain code involved), maps the TF variables
# to Hugging Face names with its own table (written from ../shared/CASES.md C33, separately from bertrain's
# src/io/tf_bert.cpp), runs tests/reference/torch_bert.py's BertForPreTraining forward in float64 on a few sentences of the
# checkpoint's 15-token vocab, and writes the inputs and the expected masked-LM logits, next-sentence logits and
# every encoder layer's output as JSON. tests/io/tf_bert_test.cpp (TfGolden) loads the TF checkpoint into
# bertrain and compares to 1e-5 absolute.
#
# Usage (Debian's python3 with python3-torch; NOT the pyenv python3 on PATH, which lacks torch):
#     /usr/bin/python3 tests/io/gen_tf_golden.py [--entries ENTRIES_JSON] [--out tests/fixtures/tf_checkpoints/golden_tiny_bert.json]
# `--out -` writes to stdout; re-running reproduces the committed file byte for byte (ctest tf_golden_regen).
import argparse
import json
import os
import re
import sys

import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
import torch_bert as tb  # noqa: E402

DATA = os.path.join(ROOT, "tests", "fixtures", "tf_checkpoints", "keras_bert_tiny")

# C33's table as explicit patterns: (TF regex, HF name template, transpose).
RULES = [
    (r"bert/embeddings/(word|position|token_type)_embeddings", r"bert.embeddings.\1_embeddings.weight", False),
    (r"bert/embeddings/LayerNorm/gamma", "bert.embeddings.LayerNorm.weight", False),
    (r"bert/embeddings/LayerNorm/beta", "bert.embeddings.LayerNorm.bias", False),
    (r"bert/encoder/layer_(\d+)/attention/self/(query|key|value)/kernel", r"bert.encoder.layer.\1.attention.self.\2.weight", True),
    (r"bert/encoder/layer_(\d+)/attention/self/(query|key|value)/bias", r"bert.encoder.layer.\1.attention.self.\2.bias", False),
    (r"bert/encoder/layer_(\d+)/attention/output/dense/kernel", r"bert.encoder.layer.\1.attention.output.dense.weight", True),
    (r"bert/encoder/layer_(\d+)/attention/output/dense/bias", r"bert.encoder.layer.\1.attention.output.dense.bias", False),
    (r"bert/encoder/layer_(\d+)/attention/output/LayerNorm/gamma", r"bert.encoder.layer.\1.attention.output.LayerNorm.weight", False),
    (r"bert/encoder/layer_(\d+)/attention/output/LayerNorm/beta", r"bert.encoder.layer.\1.attention.output.LayerNorm.bias", False),
    (r"bert/encoder/layer_(\d+)/intermediate/dense/kernel", r"bert.encoder.layer.\1.intermediate.dense.weight", True),
    (r"bert/encoder/layer_(\d+)/intermediate/dense/bias", r"bert.encoder.layer.\1.intermediate.dense.bias", False),
    (r"bert/encoder/layer_(\d+)/output/dense/kernel", r"bert.encoder.layer.\1.output.dense.weight", True),
    (r"bert/encoder/layer_(\d+)/output/dense/bias", r"bert.encoder.layer.\1.output.dense.bias", False),
    (r"bert/encoder/layer_(\d+)/output/LayerNorm/gamma", r"bert.encoder.layer.\1.output.LayerNorm.weight", False),
    (r"bert/encoder/layer_(\d+)/output/LayerNorm/beta", r"bert.encoder.layer.\1.output.LayerNorm.bias", False),
    (r"bert/pooler/dense/kernel", "bert.pooler.dense.weight", True),
    (r"bert/pooler/dense/bias", "bert.pooler.dense.bias", False),
    (r"cls/predictions/transform/dense/kernel", "cls.predictions.transform.dense.weight", True),
    (r"cls/predictions/transform/dense/bias", "cls.predictions.transform.dense.bias", False),
    (r"cls/predictions/transform/LayerNorm/gamma", "cls.predictions.transform.LayerNorm.weight", False),
    (r"cls/predictions/transform/LayerNorm/beta", "cls.predictions.transform.LayerNorm.bias", False),
    (r"cls/predictions/output_bias", "cls.predictions.bias", False),
    (r"cls/seq_relationship/output_weights", "cls.seq_relationship.weight", False),  # already [out, in]
    (r"cls/seq_relationship/output_bias", "cls.seq_relationship.bias", False),
]
SKIP = re.compile(r"(.*/adam_[mv]|global_step)")

# Sentences of the vocab ([PAD] [UNK] [CLS] [SEP] [MASK] all work and no play makes jack a dull boy); a [MASK]ed
# position carries the original word as its label. T = 16 = max_position_embeddings; shorter rows are padded.
SENTENCES = [
    ("all work and no play", "makes jack a dull boy", 0, [2, 9]),
    ("jack a dull boy", "all work and no play makes", 1, [1, 3, 10]),
    ("no play", "boy", 1, [2]),
    ("all work and no play makes jack a dull boy", "all work", 0, [5, 7, 13]),
]
T, P = 16, 3


def load_params(entries_path):
    with open(entries_path) as f:
        doc = json.load(f)
    params, skipped = {}, 0
    for e in doc["entries"]:
        name = e["name"]
        if SKIP.fullmatch(name):
            skipped += 1
            continue
        for pat, repl, transpose in RULES:
            if re.fullmatch(pat, name):
                hf = re.sub(pat, repl, name)
                break
        else:
            raise SystemExit(f"no rule for TF variable {name}")
        assert e["dtype_name"] == "DT_FLOAT", name
        t = torch.tensor(e["values"], dtype=torch.float32).reshape(e["shape"]).double()
        params[hf] = t.t().contiguous() if transpose else t
    assert skipped == 93 and len(params) == 46, (skipped, len(params))
    return params


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", default=os.path.join(ROOT, "..", "shared", "data", "tf_checkpoints", "keras_bert_tiny",
                                                      "bert_model.ckpt.entries.json"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "tf_checkpoints", "golden_tiny_bert.json"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    with open(os.path.join(DATA, "bert_config.json")) as f:
        cfg = json.load(f)
    cfg.setdefault("layer_norm_eps", 1e-12)  # google-research/bert's fixed epsilon
    with open(os.path.join(DATA, "vocab.txt")) as f:
        vocab = {w: i for i, w in enumerate(f.read().split("\n"))}
    params = load_params(args.entries)
    ids, types, mask, positions, labels, weights, nsp = [], [], [], [], [], [], []
    for a, b, is_random, masked in SENTENCES:
        toks = ["[CLS]"] + a.split() + ["[SEP]"]
        seg = [0] * len(toks)
        toks += b.split() + ["[SEP]"]
        seg += [1] * (len(toks) - len(seg))
        assert len(toks) <= T
        row = [vocab[t] for t in toks]
        lab = [row[p] for p in masked]
        for p in masked:
            row[p] = vocab["[MASK]"]
        n = len(row)
        ids.append(row + [0] * (T - n))
        types.append(seg + [0] * (T - n))
        mask.append([1] * n + [0] * (T - n))
        positions.append(masked + [0] * (P - len(masked)))
        labels.append(lab + [0] * (P - len(masked)))
        weights.append([1.0] * len(masked) + [0.0] * (P - len(masked)))
        nsp.append(is_random)
    inputs = {"input_ids": torch.tensor(ids, dtype=torch.int32), "token_type_ids": torch.tensor(types, dtype=torch.int32),
              "attention_mask": torch.tensor(mask, dtype=torch.int32),
              "masked_lm_positions": torch.tensor(positions, dtype=torch.int32),
              "masked_lm_ids": torch.tensor(labels, dtype=torch.int32),
              "masked_lm_weights": torch.tensor(weights, dtype=torch.float32),
              "next_sentence_labels": torch.tensor(nsp, dtype=torch.int32)}
    layers = []
    with torch.no_grad():
        out = tb.forward(cfg, params, **inputs, layers_out=layers)
    doc = {
        "source": "tests/io/gen_tf_golden.py from keras_bert_tiny/bert_model.ckpt.entries.json",
        "inputs": {k: v.tolist() for k, v in inputs.items()},
        "mlm_logits": out["mlm_logits"].tolist(),
        "nsp_logits": out["nsp_logits"].tolist(),
        "all_encoder_layers": [x.tolist() for x in layers],
    }
    text = json.dumps(doc, indent=1) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        with open(args.out, "w") as f:
            f.write(text)
        print(f"wrote {args.out}: mlm_logits {tuple(out['mlm_logits'].shape)}, nsp_logits "
              f"{tuple(out['nsp_logits'].shape)}, mlm_loss {out['mlm_loss'].item():.6f}, nsp_loss {out['nsp_loss'].item():.6f}")


if __name__ == "__main__":
    main()
