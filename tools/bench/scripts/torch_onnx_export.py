#!/usr/bin/python3
"""torch_onnx_export.py CHECKPOINT_DIR OUT.onnx [--opset 17]: PyTorch's own ONNX export of a bertrain (Hugging Face
layout) checkpoint, the contender `bertrain bench predict --torch_export` times in ONNX Runtime beside
`bertrain export-onnx`'s model: what a Hugging Face user gets from torch.onnx.export of BertModel.

The model is written with the torch.nn.functional calls Hugging Face's BertModel makes (F.linear, F.layer_norm,
exact GELU through erf or the tanh form as config.json's hidden_act says, softmax attention with the mask added as
(1 - mask) x finfo.min, a tanh pooler), with the checkpoint's weights read by tests/reference/torch_bert.py's
safetensors reader (no transformers needed). Inputs input_ids, attention_mask, token_type_ids (int64, dynamic
batch and sequence axes); outputs last_hidden_state (B, T, H) and pooler_output (B, H), plus logits (B, num_labels)
when the checkpoint has a sequence classifier. Runs with Debian's python3-torch; exits 1 with one line on a
missing file or weight.
"""
import argparse
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tests", "reference"))
import torch_bert  # noqa: E402  (the safetensors reader)


class Bert(torch.nn.Module):
    def __init__(self, cfg, p):
        super().__init__()
        self.cfg = cfg
        self.names = sorted(p)
        for i, n in enumerate(self.names):
            self.register_buffer(f"w{i}", p[n].float().contiguous())
        self.index = {n: i for i, n in enumerate(self.names)}
        self.classifier = "classifier.weight" in p

    def w(self, name):
        return getattr(self, f"w{self.index[name]}")

    def lin(self, x, name):
        return F.linear(x, self.w(name + ".weight"), self.w(name + ".bias"))

    def ln(self, x, name):
        return F.layer_norm(x, (self.cfg["hidden_size"],), self.w(name + ".weight"), self.w(name + ".bias"),
                            self.cfg["layer_norm_eps"])

    def act(self, x):
        if self.cfg["hidden_act"] == "gelu":
            return F.gelu(x)
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))

    def forward(self, input_ids, attention_mask, token_type_ids):
        H, NH = self.cfg["hidden_size"], self.cfg["num_attention_heads"]
        HS = H // NH
        B, T = input_ids.shape
        positions = torch.arange(T, dtype=torch.long).unsqueeze(0)
        x = (F.embedding(input_ids, self.w("bert.embeddings.word_embeddings.weight"))
             + F.embedding(positions, self.w("bert.embeddings.position_embeddings.weight"))
             + F.embedding(token_type_ids, self.w("bert.embeddings.token_type_embeddings.weight")))
        x = self.ln(x, "bert.embeddings.LayerNorm")
        mask = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * torch.finfo(torch.float32).min
        for i in range(self.cfg["num_hidden_layers"]):
            pre = f"bert.encoder.layer.{i}."

            def heads(t):
                return t.view(B, T, NH, HS).permute(0, 2, 1, 3)

            q = heads(self.lin(x, pre + "attention.self.query"))
            k = heads(self.lin(x, pre + "attention.self.key"))
            v = heads(self.lin(x, pre + "attention.self.value"))
            probs = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(HS) + mask, dim=-1)
            ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).reshape(B, T, H)
            a = self.ln(self.lin(ctx, pre + "attention.output.dense") + x, pre + "attention.output.LayerNorm")
            x = self.ln(self.lin(self.act(self.lin(a, pre + "intermediate.dense")), pre + "output.dense") + a,
                        pre + "output.LayerNorm")
        pooled = torch.tanh(self.lin(x[:, 0], "bert.pooler.dense"))
        if self.classifier:
            return x, pooled, self.lin(pooled, "classifier")
        return x, pooled


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint")
    ap.add_argument("output")
    ap.add_argument("--opset", type=int, default=17)
    a = ap.parse_args()
    cfg_path = os.path.join(a.checkpoint, "config.json")
    st_path = os.path.join(a.checkpoint, "model.safetensors")
    for f in (cfg_path, st_path):
        if not os.path.exists(f):
            sys.exit(f"torch_onnx_export.py: {f} does not exist (a bertrain or Hugging Face checkpoint directory)")
    cfg = json.load(open(cfg_path))
    cfg.setdefault("layer_norm_eps", 1e-12)
    cfg.setdefault("hidden_act", "gelu")
    if cfg["hidden_act"] not in ("gelu", "gelu_new", "gelu_pytorch_tanh"):
        sys.exit(f"torch_onnx_export.py: {cfg_path}: hidden_act '{cfg['hidden_act']}' is not gelu or a tanh GELU")
    p = torch_bert.read_safetensors(st_path)[2]
    # Checkpoints of BertModel (no "bert." prefix) are read as BertForPreTraining's.
    p = {(n if n.startswith(("bert.", "cls.", "classifier.")) else "bert." + n): t for n, t in p.items()}
    for n, _ in torch_bert.param_shapes(cfg):
        if n.startswith("bert.") and n not in p:
            sys.exit(f"torch_onnx_export.py: {st_path}: no weight {n}")
    model = Bert(cfg, {n: t for n, t in p.items() if n.startswith(("bert.", "classifier."))}).eval()
    ids = torch.ones(2, 8, dtype=torch.long)
    outputs = ["last_hidden_state", "pooler_output"] + (["logits"] if model.classifier else [])
    axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"},
            "token_type_ids": {0: "batch", 1: "sequence"}, "last_hidden_state": {0: "batch", 1: "sequence"},
            "pooler_output": {0: "batch"}, "logits": {0: "batch"}}
    tmp = a.output + ".tmp"
    with torch.no_grad():
        torch.onnx.export(model, (ids, torch.ones_like(ids), torch.zeros_like(ids)), tmp,
                          input_names=["input_ids", "attention_mask", "token_type_ids"], output_names=outputs,
                          dynamic_axes={k: v for k, v in axes.items() if k in outputs or k.endswith(("ids", "mask"))},
                          opset_version=a.opset, do_constant_folding=True)
    os.replace(tmp, a.output)
    print(f"torch_onnx_export.py: {a.output}: torch {torch.__version__}, opset {a.opset}, outputs {', '.join(outputs)}")


if __name__ == "__main__":
    main()
