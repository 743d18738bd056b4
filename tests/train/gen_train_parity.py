#!/usr/bin/python3
# gen_train_parity.py: makes tests/fixtures/train_parity/ (a tiny BERT, its data and 50 reference training steps in
# PyTorch) for the step-by-step training parity test tests/train/train_parity_test.sh.
#
# Usage (Debian's python3 with python3-torch and python3-h5py; NOT the pyenv python3 on PATH, which lacks torch):
#     /usr/bin/python3 tests/train/gen_train_parity.py --bertrain build/bertrain [--out tests/fixtures/train_parity]
# Re-running reproduces the committed files byte for byte (fixed seeds, one thread, float64); the ctest
# `train_parity_regen` (label slow) checks that by regenerating into a temporary directory and comparing.
#
# Steps:
#  1. vocab.txt (1024 pieces): the special tokens, every character of the words of data/gutenberg/sample_small.txt
#     (as itself and as ##c, so no word becomes [UNK]), then the most frequent WordPiece pieces of that text under
#     data/vocab/bert-base-uncased-vocab.txt (tokenized by the independent tests/reference/bert_tokenizer_ref.py).
#  2. shards/part-00000-training.hdf5: `bertrain create-pretraining-data` (NVIDIA layout) on the first
#     TEXT_LINES lines of the sample with that vocab; exactly N_INSTANCES instances.
#  3. config.json (dropout 0) and model.safetensors: float32 initial weights under Hugging Face names, drawn by
#     torch_bert.init_params (see init_weights).
#  4. recipe_adamw.json, recipe_lamb.json: `bertrain pretrain` recipes, full batch (train_batch_size = all
#     instances, 5 micro-batches), constant learning rate, STEPS steps; paths relative to this directory.
#  5. expected.json: the loss (and its masked-LM / next-sentence parts, and the gradient norm before clipping)
#     before each of the STEPS updates of an independent PyTorch run in float64 from the float32 initial weights:
#     the model is tests/reference/torch_bert.py (losses as google-research/bert: MLM = sum(w CE) / (sum(w) + 1e-5), NSP =
#     mean CE, total = MLM + NSP), the optimizers are
#       adamw: torch.optim.AdamW (decoupled decay, bias correction, eps 1e-6; no decay for LayerNorm and biases)
#              after torch.nn.utils.clip_grad_norm_(1.0), the recipe's default clipping;
#       lamb:  written here from You et al. 2019 (Algorithm 2) with the choices of NVIDIA apex FusedLAMB as
#              DeepLearningExamples' BERT uses it (class Lamb); no separate clipping.
import argparse
import collections
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
import bert_tokenizer_ref as tok  # noqa: E402
import torch_bert as tb  # noqa: E402

SAMPLE = os.path.join(ROOT, "data", "gutenberg", "sample_small.txt")
FULL_VOCAB = os.path.join(ROOT, "data", "vocab", "bert-base-uncased-vocab.txt")
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
VOCAB_SIZE = 1024
T, P = 64, 10                   # max_seq_length; max_predictions_per_seq = round(0.15 T)
TEXT_LINES = 170                # the first three documents (blank line included) of the sample
N_INSTANCES = 125               # what create-pretraining-data makes of them: the global batch
MICRO_BATCH = 25                # 5 micro-batches per step, so accumulation is exercised
STEPS = 50
CONFIG = {
    "vocab_size": VOCAB_SIZE, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
    "intermediate_size": 64, "hidden_act": "gelu", "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
    "max_position_embeddings": T, "type_vocab_size": 2, "initializer_range": 0.02, "layer_norm_eps": 1e-12,
}
OPTIMIZERS = {
    "adamw": {"name": "adamw", "beta1": 0.9, "beta2": 0.999, "eps": 1e-6, "weight_decay": 0.01,
              "bias_correction": True, "clip_grad_norm": 1.0,
              "exclude_from_weight_decay": ["LayerNorm", "layer_norm", "bias"]},
    # lamb.h's NVIDIA FusedLAMB option set; FusedLAMB normalises the gradient itself, so no clipping before it.
    "lamb": {"name": "lamb", "beta1": 0.9, "beta2": 0.999, "eps": 1e-6, "weight_decay": 0.01,
             "bias_correction": True, "layer_adaptation": "decayed_only", "max_grad_norm": 1.0, "clip_grad_norm": 0.0,
             "exclude_from_weight_decay": ["bias", "gamma", "beta", "LayerNorm"]},
}
LEARNING_RATE = {"adamw": 1e-3, "lamb": 3e-3}


# ------------------------------------------------------------------------------------------------------------
# 1. vocabulary

def make_vocab():
    words = collections.Counter()
    with open(SAMPLE, encoding="utf-8") as f:
        for line in f:
            words.update(tok.basic_tokenize(line, True))
    full = tok.load_vocab(FULL_VOCAB)
    pieces = collections.Counter()
    for w, c in words.items():
        for p in tok.wordpiece(w, full):
            pieces[p] += c
    chars = set()
    for w in words:
        chars.add(w[0])
        chars.update("##" + ch for ch in w[1:])
    vocab = SPECIALS + sorted(chars)
    for p, _ in sorted(pieces.items(), key=lambda kv: (-kv[1], kv[0])):
        if len(vocab) == VOCAB_SIZE:
            break
        if p not in vocab and p not in SPECIALS:
            vocab.append(p)
    assert len(vocab) == VOCAB_SIZE, len(vocab)
    return vocab


# ------------------------------------------------------------------------------------------------------------
# 2. shards

def make_shards(bertrain, out, vocab_path, text_lines):
    with open(SAMPLE, encoding="utf-8") as f:
        lines = f.readlines()[:text_lines]
    shard_dir = os.path.join(out, "shards")
    shutil.rmtree(shard_dir, ignore_errors=True)
    with tempfile.TemporaryDirectory() as tmp:
        text = os.path.join(tmp, "text.txt")
        with open(text, "w", encoding="utf-8") as f:
            f.writelines(lines)
        subprocess.run([bertrain, "--num_threads", "1", "create-pretraining-data", "--input_file", text,
                        "--output_dir", shard_dir, "--vocab_file", vocab_path, "--do_lower_case=true",
                        "--max_seq_length", str(T), "--max_predictions_per_seq", str(P), "--masked_lm_prob", "0.15",
                        "--dupe_factor", "1", "--random_seed", "12345"], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    os.remove(os.path.join(shard_dir, "dataset_info.json"))  # holds the temporary path and a wall time
    return os.path.join(shard_dir, "part-00000-training.hdf5")


def read_shard(path):
    with h5py.File(path, "r") as f:
        d = {k: torch.from_numpy(np.asarray(f[k])) for k in f.keys()}
    return {"input_ids": d["input_ids"], "token_type_ids": d["segment_ids"], "attention_mask": d["input_mask"],
            "masked_lm_positions": d["masked_lm_positions"], "masked_lm_ids": d["masked_lm_ids"],
            # NVIDIA's loaders derive the weights: 1 where a position is set (position 0 is [CLS], never masked)
            "masked_lm_weights": (d["masked_lm_positions"] != 0).to(torch.float64),
            "next_sentence_labels": d["next_sentence_labels"]}


# ------------------------------------------------------------------------------------------------------------
# 3. initial weights

def init_weights(gen):
    """torch_bert.init_params (float32 values): larger than BERT's 0.02 so that the gradient norm stays above 1
    and both LAMB's pre-normalisation and AdamW's clipping act, with a scale that changes every step."""
    return {k: v.float() for k, v in tb.init_params(CONFIG, gen, dtype=torch.float32).items()}


# ------------------------------------------------------------------------------------------------------------
# 5. reference training

def excluded(name, patterns):
    return any(p in name for p in patterns)  # bertrain's ParamRules and NVIDIA's names: substring match


def loss_and_grads(params, batch):
    for p in params.values():
        p.grad = None
    out = tb.forward(CONFIG, params, **batch)
    out["total_loss"].backward()
    return out


def global_norm(params):
    return math.sqrt(sum(float((p.grad * p.grad).sum()) for p in params.values()))


class Lamb:
    """LAMB, You et al. 2019 Algorithm 2, as NVIDIA apex FusedLAMB (csrc/multi_tensor_lamb.cu) with
    adam_w_mode=True, grad_averaging=True, use_nvlamb=False:
      g <- g / max(1, ||g||_global / max_grad_norm)        (global norm over all parameters, before the moments)
      m <- b1 m + (1 - b1) g;  v <- b2 v + (1 - b2) g^2;  m_hat = m / (1 - b1^t);  v_hat = v / (1 - b2^t)
      r = m_hat / (sqrt(v_hat) + eps) + wd w                (wd = 0 for the excluded names)
      ratio = ||w|| / ||r|| for tensors with wd != 0, 1 for the others and where either norm is 0
      w <- w - lr ratio r"""

    def __init__(self, params, o):
        self.params, self.o, self.t = params, o, 0
        self.m = {k: torch.zeros_like(p) for k, p in params.items()}
        self.v = {k: torch.zeros_like(p) for k, p in params.items()}
        self.force_ratio_one = False  # self-check only: LAMB without trust ratio or normalisation is AdamW

    @torch.no_grad()
    def step(self, lr):
        o = self.o
        self.t += 1
        b1, b2 = o["beta1"], o["beta2"]
        scale = 1.0
        if o["max_grad_norm"] > 0 and not self.force_ratio_one:
            n = global_norm(self.params)
            scale = n / o["max_grad_norm"] if n > o["max_grad_norm"] else 1.0
        for k, w in self.params.items():
            g = w.grad / scale
            wd = 0.0 if excluded(k, o["exclude_from_weight_decay"]) else o["weight_decay"]
            self.m[k] = b1 * self.m[k] + (1 - b1) * g
            self.v[k] = b2 * self.v[k] + (1 - b2) * g * g
            m_hat = self.m[k] / (1 - b1 ** self.t)
            v_hat = self.v[k] / (1 - b2 ** self.t)
            r = m_hat / (torch.sqrt(v_hat) + o["eps"]) + wd * w
            ratio = 1.0
            if wd != 0.0 and not self.force_ratio_one:
                wn, rn = float(w.norm()), float(r.norm())
                if wn > 0 and rn > 0:
                    ratio = wn / rn
            w -= lr * ratio * r


def make_adamw(params, o):
    decay = [p for k, p in params.items() if not excluded(k, o["exclude_from_weight_decay"])]
    no_decay = [p for k, p in params.items() if excluded(k, o["exclude_from_weight_decay"])]
    return torch.optim.AdamW([{"params": decay, "weight_decay": o["weight_decay"]},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=LEARNING_RATE["adamw"], betas=(o["beta1"], o["beta2"]), eps=o["eps"])


def train(kind, init, batch, steps):
    """The STEPS losses before each update (what bertrain's metrics.jsonl logs as step 1..STEPS)."""
    params = {k: v.double().requires_grad_(True) for k, v in init.items()}
    o = OPTIMIZERS[kind]
    lr = LEARNING_RATE[kind]
    opt = make_adamw(params, o) if kind == "adamw" else Lamb(params, o)
    rec = {"loss": [], "mlm_loss": [], "nsp_loss": [], "grad_norm": []}
    for _ in range(steps):
        out = loss_and_grads(params, batch)
        rec["loss"].append(out["total_loss"].item())
        rec["mlm_loss"].append(out["mlm_loss"].item())
        rec["nsp_loss"].append(out["nsp_loss"].item())
        rec["grad_norm"].append(global_norm(params))
        if o["clip_grad_norm"] > 0:
            torch.nn.utils.clip_grad_norm_(list(params.values()), o["clip_grad_norm"])
        if kind == "adamw":
            opt.step()
        else:
            opt.step(lr)
    return rec


def self_check(init, batch):
    """Three steps of Lamb with the trust ratio and the normalisation switched off must be torch.optim.AdamW's
    (decoupled decay: w - lr (m_hat / (sqrt(v_hat) + eps) + wd w) = (1 - lr wd) w - lr m_hat / (...)), so the
    moment and bias-correction code of Lamb is checked against PyTorch's."""
    a = {k: v.double().requires_grad_(True) for k, v in init.items()}
    b = {k: v.double().requires_grad_(True) for k, v in init.items()}
    o = dict(OPTIMIZERS["lamb"], exclude_from_weight_decay=OPTIMIZERS["adamw"]["exclude_from_weight_decay"])
    lamb = Lamb(a, o)
    lamb.force_ratio_one = True
    adamw = make_adamw(b, o)
    for _ in range(3):
        loss_and_grads(a, batch)
        loss_and_grads(b, batch)
        lamb.step(LEARNING_RATE["adamw"])
        adamw.step()
    err = max(float((a[k] - b[k]).abs().max()) for k in a)
    assert err < 1e-12, f"self-check: LAMB without trust ratio differs from torch.optim.AdamW by {err}"


# ------------------------------------------------------------------------------------------------------------

def recipe(kind):
    o = dict(OPTIMIZERS[kind])
    return {
        "bert_config_file": "config.json", "vocab_file": "vocab.txt", "do_lower_case": True,
        "init_checkpoint": "model.safetensors", "output_dir": f"out_{kind}", "seed": 1, "optimizer": o,
        "save_checkpoints_steps": 0, "save_total_limit": 1, "log_every_steps": 10,
        "phases": [{"max_seq_length": T, "max_predictions_per_seq": P, "input_dir": "shards",
                    "train_batch_size": N_INSTANCES, "micro_batch_size": MICRO_BATCH,
                    "learning_rate": LEARNING_RATE[kind], "num_warmup_steps": 0, "decay": "constant",
                    "num_train_steps": STEPS}],
    }


def write_text(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bertrain", required=True, help="the bertrain binary (makes the shards)")
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "train_parity"))
    ap.add_argument("--text_lines", type=int, default=TEXT_LINES)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)  # one summation order, so re-runs are bit-identical
    torch.use_deterministic_algorithms(True)

    vocab_path = os.path.join(args.out, "vocab.txt")
    write_text(vocab_path, "".join(v + "\n" for v in make_vocab()))
    batch = read_shard(make_shards(os.path.abspath(args.bertrain), args.out, vocab_path, args.text_lines))
    n = batch["input_ids"].shape[0]
    assert n == N_INSTANCES, f"{args.text_lines} lines gave {n} instances, expected {N_INSTANCES}"
    assert tuple(batch["masked_lm_positions"].shape) == (n, P)

    write_text(os.path.join(args.out, "config.json"), tb.hf_config_json(CONFIG))
    init = init_weights(torch.Generator().manual_seed(20261201))
    tb.save_safetensors(os.path.join(args.out, "model.safetensors"), init, {"format": "pt"})
    for kind in OPTIMIZERS:
        write_text(os.path.join(args.out, f"recipe_{kind}.json"), json.dumps(recipe(kind), indent=2) + "\n")

    self_check(init, batch)
    expected = {"generator": "tests/train/gen_train_parity.py", "steps": STEPS, "instances": n}
    for kind in OPTIMIZERS:
        rec = train(kind, init, batch, STEPS)
        expected[kind] = rec
        print(f"{kind}: loss {rec['loss'][0]:.6f} -> {rec['loss'][-1]:.6f} "
              f"(mlm {rec['mlm_loss'][-1]:.6f}, nsp {rec['nsp_loss'][-1]:.6f})")
    write_text(os.path.join(args.out, "expected.json"), json.dumps(expected, indent=1) + "\n")


if __name__ == "__main__":
    main()
