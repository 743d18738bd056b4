#!/usr/bin/python3
# gen_optim_golden.py: golden 20-step optimizer trajectories for tests/optim_test.cpp (tests/fixtures/optim_golden.json).
#
# Regenerate (Debian's python3 with python3-torch and python3-numpy; not a pyenv python without torch):
#   /usr/bin/python3 tests/optim/gen_optim_golden.py > tests/fixtures/optim_golden.json
# The JSON records an FNV-1a 64 hash of this file; optim_test fails when the script changed but the data was not
# regenerated, and the ctest `optim_golden_regen` (label slow) reruns the script and compares its output.
#
# Bias-corrected AdamW comes from torch.optim.AdamW itself. Every other variant is a NumPy implementation written
# from its paper or reference (named in each function), all in float64. Adam-L2 and the SGD variants are also
# cross-checked here against torch.optim.Adam / torch.optim.SGD.
#
# The gradient at each step is a function of the current parameters, so errors compound along the trajectory:
#   g_t = 0.5 * (p_t - target) + noise_t          (target, noise_t stored in the JSON)
import json
import math
import os
import sys

import numpy as np
import torch

STEPS = 20
GRAD_SCALE = 0.5
DEFAULT_EXCL = ["LayerNorm", "layer_norm", "bias"]
NVIDIA_EXCL = ["bias", "gamma", "beta", "LayerNorm"]


def fnv1a64(data: bytes) -> str:
    h = 0xcbf29ce484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def make_problem():
    rng = np.random.default_rng(20240605)
    # Hugging Face names so the exclusion patterns apply. One tensor starts at zero and is decayed (pooler),
    # one starts at zero and is excluded (query.bias), one is excluded and non-zero (LayerNorm.weight).
    specs = [
        ("bert.encoder.layer.0.attention.self.query.weight", (3, 4), lambda s: rng.normal(0.0, 0.5, s)),
        ("bert.encoder.layer.0.attention.self.query.bias", (4,), lambda s: np.zeros(s)),
        ("bert.embeddings.LayerNorm.weight", (4,), lambda s: np.ones(s)),
        ("bert.pooler.dense.weight", (2, 3), lambda s: np.zeros(s)),
        ("bert.embeddings.word_embeddings.weight", (5, 3), lambda s: rng.normal(0.0, 0.02, s)),
    ]
    params = []
    for name, shape, init in specs:
        params.append({"name": name, "shape": list(shape), "init": init(shape).reshape(-1),
                       "target": rng.normal(0.0, 1.0, shape).reshape(-1)})
    noise = [[rng.normal(0.0, 0.3, int(np.prod(p["shape"]))) for p in params] for _ in range(STEPS)]
    return params, noise


def grads_of(ps, params, noise_t):
    return [GRAD_SCALE * (p - q["target"]) + n for p, q, n in zip(ps, params, noise_t)]


def excluded(name, patterns):
    return any(pat in name for pat in patterns)  # re.search with plain words == substring


# ---------------- reference implementations (float64) ----------------

def run_torch_adamw(params, noise, lrs, o):
    """torch.optim.AdamW (decoupled decay, bias correction, eps added to sqrt(v_hat))."""
    ts = [torch.tensor(q["init"], dtype=torch.float64, requires_grad=True) for q in params]
    decay = [t for t, q in zip(ts, params) if not excluded(q["name"], o["exclude_from_weight_decay"])]
    nodecay = [t for t, q in zip(ts, params) if excluded(q["name"], o["exclude_from_weight_decay"])]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": o["weight_decay"]},
                             {"params": nodecay, "weight_decay": 0.0}],
                            lr=lrs[0], betas=(o["beta1"], o["beta2"]), eps=o["eps"], foreach=False)
    traj = []
    for t in range(STEPS):
        ps = [x.detach().numpy().copy() for x in ts]
        for x, g in zip(ts, grads_of(ps, params, noise[t])):
            x.grad = torch.tensor(g, dtype=torch.float64)
        for grp in opt.param_groups:
            grp["lr"] = lrs[t]
        opt.step()
        traj.append([x.detach().numpy().copy() for x in ts])
    return traj


def run_torch_reference(kind, params, noise, lrs, o):
    """torch.optim.Adam (L2) or torch.optim.SGD, only to cross-check the NumPy versions."""
    ts = [torch.tensor(q["init"], dtype=torch.float64, requires_grad=True) for q in params]
    groups = [{"params": [x], "weight_decay": 0.0 if excluded(q["name"], o["exclude_from_weight_decay"])
               else o["weight_decay"]} for x, q in zip(ts, params)]
    if kind == "adam":
        opt = torch.optim.Adam(groups, lr=lrs[0], betas=(o["beta1"], o["beta2"]), eps=o["eps"], foreach=False)
    else:
        opt = torch.optim.SGD(groups, lr=lrs[0], momentum=o["momentum"], dampening=o["dampening"],
                              nesterov=o["nesterov"], foreach=False)
    traj = []
    for t in range(STEPS):
        ps = [x.detach().numpy().copy() for x in ts]
        for x, g in zip(ts, grads_of(ps, params, noise[t])):
            x.grad = torch.tensor(g, dtype=torch.float64)
        for grp in opt.param_groups:
            grp["lr"] = lrs[t]
        opt.step()
        traj.append([x.detach().numpy().copy() for x in ts])
    return traj


def run_adam_numpy(params, noise, lrs, o):
    """Adam (Kingma & Ba 2015, Algorithm 1) with either decoupled decay (Loshchilov & Hutter 2019, AdamW) or L2.
    bias_correction=False is google-research/bert's AdamWeightDecayOptimizer: u = m/(sqrt(v)+eps) + wd*p."""
    ps = [q["init"].copy() for q in params]
    ms = [np.zeros_like(p) for p in ps]
    vs = [np.zeros_like(p) for p in ps]
    b1, b2, eps = o["beta1"], o["beta2"], o["eps"]
    traj = []
    for t in range(STEPS):
        step = t + 1
        lr = lrs[t]
        gs = grads_of(ps, params, noise[t])
        for i, q in enumerate(params):
            wd = 0.0 if excluded(q["name"], o["exclude_from_weight_decay"]) else o["weight_decay"]
            g = gs[i]
            if o["weight_decay_mode"] == "l2":
                g = g + wd * ps[i]
            ms[i] = b1 * ms[i] + (1 - b1) * g
            vs[i] = b2 * vs[i] + (1 - b2) * g * g
            if o["bias_correction"]:
                mh = ms[i] / (1 - b1 ** step)
                vh = vs[i] / (1 - b2 ** step)
            else:
                mh, vh = ms[i], vs[i]
            u = mh / (np.sqrt(vh) + eps)
            if o["weight_decay_mode"] == "decoupled":
                u = u + wd * ps[i]
            ps[i] = ps[i] - lr * u
        traj.append([p.copy() for p in ps])
    return traj


def run_lamb_numpy(params, noise, lrs, o):
    """LAMB, You et al. 2019 Algorithm 2, with the option switches of lamb.h:
    bias_correction; adaptation all / by_pattern (tfa, ALBERT) / decayed_only (apex use_nvlamb=False);
    trust ratio ||w||/||r||, 1 where either norm is 0 (tfa lamb.py); optional clamp of the measured ratio;
    max_grad_norm > 0: g /= max(1, global_norm / max_grad_norm) (apex FusedLAMB); l2 or decoupled decay."""
    ps = [q["init"].copy() for q in params]
    ms = [np.zeros_like(p) for p in ps]
    vs = [np.zeros_like(p) for p in ps]
    b1, b2, eps = o["beta1"], o["beta2"], o["eps"]
    la_patterns = o.get("exclude_from_layer_adaptation") or o["exclude_from_weight_decay"]
    traj, ratios = [], []
    for t in range(STEPS):
        step = t + 1
        lr = lrs[t]
        gs = grads_of(ps, params, noise[t])
        if o["max_grad_norm"] > 0:
            gnorm = math.sqrt(sum(float(np.sum(g * g)) for g in gs))
            clipped = gnorm / o["max_grad_norm"] if gnorm > o["max_grad_norm"] else 1.0
            gs = [g / clipped for g in gs]
        step_ratios = []
        for i, q in enumerate(params):
            has_wd = not excluded(q["name"], o["exclude_from_weight_decay"])
            wd = o["weight_decay"] if has_wd else 0.0
            g = gs[i]
            if o["weight_decay_mode"] == "l2":
                g = g + wd * ps[i]
            ms[i] = b1 * ms[i] + (1 - b1) * g
            vs[i] = b2 * vs[i] + (1 - b2) * g * g
            if o["bias_correction"]:
                mh = ms[i] / (1 - b1 ** step)
                vh = vs[i] / (1 - b2 ** step)
            else:
                mh, vh = ms[i], vs[i]
            r = mh / (np.sqrt(vh) + eps)
            if o["weight_decay_mode"] == "decoupled":
                r = r + wd * ps[i]
            if o["adaptation"] == "all":
                adapt = True
            elif o["adaptation"] == "by_pattern":
                adapt = not excluded(q["name"], la_patterns)
            else:  # decayed_only
                adapt = wd != 0.0
            ratio = 1.0
            if adapt:
                wn = float(np.linalg.norm(ps[i]))
                rn = float(np.linalg.norm(r))
                if wn > 0 and rn > 0:
                    ratio = wn / rn
                    if o["trust_clamp"]:
                        ratio = min(max(ratio, o["trust_clamp_min"]), o["trust_clamp_max"])
            step_ratios.append(ratio)
            ps[i] = ps[i] - lr * ratio * r
        traj.append([p.copy() for p in ps])
        ratios.append(step_ratios)
    return traj, ratios


def run_lars_numpy(params, noise, lrs, o):
    """LARS, You, Gitman & Ginsburg 2017 Algorithm 1: lambda = eta*||w||/(||g|| + beta*||w|| (+eps));
    v = m*v + lr*lambda*(g + beta*w); w -= v. lambda = 1 for tensors excluded from layer adaptation and where
    ||w|| or the denominator is 0."""
    ps = [q["init"].copy() for q in params]
    vs = [np.zeros_like(p) for p in ps]
    la_patterns = o.get("exclude_from_layer_adaptation") or o["exclude_from_weight_decay"]
    traj = []
    for t in range(STEPS):
        lr = lrs[t]
        gs = grads_of(ps, params, noise[t])
        for i, q in enumerate(params):
            wd = 0.0 if excluded(q["name"], o["exclude_from_weight_decay"]) else o["weight_decay"]
            local = 1.0
            if not excluded(q["name"], la_patterns):
                wn = float(np.linalg.norm(ps[i]))
                gn = float(np.linalg.norm(gs[i]))
                den = gn + wd * wn + o["eps"]
                if wn > 0 and den > 0:
                    local = o["trust_coefficient"] * wn / den
            vs[i] = o["momentum"] * vs[i] + lr * local * (gs[i] + wd * ps[i])
            ps[i] = ps[i] - vs[i]
        traj.append([p.copy() for p in ps])
    return traj


def run_sgd_numpy(params, noise, lrs, o):
    """SGD with momentum as torch.optim.SGD documents it: d = g + wd*p; buf = d (first step) or
    mu*buf + (1-dampening)*d; d = d + mu*buf (nesterov) or buf; p -= lr*d."""
    ps = [q["init"].copy() for q in params]
    bufs = [None for _ in ps]
    mu = o["momentum"]
    traj = []
    for t in range(STEPS):
        lr = lrs[t]
        gs = grads_of(ps, params, noise[t])
        for i, q in enumerate(params):
            wd = 0.0 if excluded(q["name"], o["exclude_from_weight_decay"]) else o["weight_decay"]
            d = gs[i] + wd * ps[i]
            if mu != 0:
                bufs[i] = d.copy() if bufs[i] is None else mu * bufs[i] + (1 - o["dampening"]) * d
                d = d + mu * bufs[i] if o["nesterov"] else bufs[i]
            ps[i] = ps[i] - lr * d
        traj.append([p.copy() for p in ps])
    return traj


def max_rel_diff(a, b):
    worst = 0.0
    for sa, sb in zip(a, b):
        for x, y in zip(sa, sb):
            worst = max(worst, float(np.max(np.abs(x - y) / (np.abs(y) + 1e-12))))
    return worst


def main():
    torch.set_default_dtype(torch.float64)
    params, noise = make_problem()
    adam_base = {"beta1": 0.9, "beta2": 0.999, "eps": 1e-6, "weight_decay": 0.1,
                 "exclude_from_weight_decay": DEFAULT_EXCL}
    lamb_base = dict(adam_base, weight_decay=0.01, adaptation="by_pattern", bias_correction=True,
                     trust_clamp=False, trust_clamp_min=0.0, trust_clamp_max=10.0, max_grad_norm=0.0,
                     weight_decay_mode="decoupled")
    sgd_base = {"momentum": 0.9, "dampening": 0.0, "nesterov": False, "weight_decay": 0.01,
                "exclude_from_weight_decay": DEFAULT_EXCL}
    variants = [
        ("adamw_torch", "adamw", 0.05, dict(adam_base, bias_correction=True, weight_decay_mode="decoupled")),
        ("adamw_bert_no_bias_correction", "adamw", 0.05,
         dict(adam_base, bias_correction=False, weight_decay_mode="decoupled")),
        ("adam_l2", "adamw", 0.05, dict(adam_base, bias_correction=True, weight_decay_mode="l2")),
        ("lamb_paper", "lamb", 0.05, dict(lamb_base, adaptation="all", exclude_from_weight_decay=[])),
        ("lamb_tfa", "lamb", 0.05, dict(lamb_base)),
        ("lamb_albert", "lamb", 0.05, dict(lamb_base, bias_correction=False)),
        ("lamb_nvidia_fused", "lamb", 0.05, dict(lamb_base, adaptation="decayed_only", max_grad_norm=1.0,
                                                 exclude_from_weight_decay=NVIDIA_EXCL)),
        ("lamb_nvlamb", "lamb", 0.05, dict(lamb_base, adaptation="all", max_grad_norm=1.0,
                                           exclude_from_weight_decay=NVIDIA_EXCL)),
        ("lamb_clamp", "lamb", 0.05, dict(lamb_base, trust_clamp=True, trust_clamp_min=0.05, trust_clamp_max=0.3)),
        ("lamb_l2", "lamb", 0.05, dict(lamb_base, weight_decay_mode="l2")),
        ("lamb_layer_adaptation_patterns", "lamb", 0.05,
         dict(lamb_base, exclude_from_layer_adaptation=["word_embeddings"])),
        ("lars", "lars", 1.0, {"momentum": 0.9, "weight_decay": 0.01, "trust_coefficient": 0.02, "eps": 0.0,
                               "exclude_from_weight_decay": DEFAULT_EXCL}),
        ("sgd_momentum", "sgd", 0.05, dict(sgd_base)),
        ("sgd_nesterov", "sgd", 0.05, dict(sgd_base, nesterov=True)),
        ("sgd_dampening", "sgd", 0.05, dict(sgd_base, dampening=0.5)),
    ]
    out_variants = []
    for name, kind, base_lr, o in variants:
        lrs = [base_lr * (1.0 - t / (2.0 * STEPS)) for t in range(STEPS)]  # a decaying lr exercises step(lr)
        ratios = None
        if name == "adamw_torch":
            traj = run_torch_adamw(params, noise, lrs, o)
            check = run_adam_numpy(params, noise, lrs, o)
            assert max_rel_diff(traj, check) < 1e-10, name
        elif kind == "adamw":
            traj = run_adam_numpy(params, noise, lrs, o)
            if o["weight_decay_mode"] == "l2":
                assert max_rel_diff(traj, run_torch_reference("adam", params, noise, lrs, o)) < 1e-10, name
        elif kind == "lamb":
            traj, ratios = run_lamb_numpy(params, noise, lrs, o)
        elif kind == "lars":
            traj = run_lars_numpy(params, noise, lrs, o)
        else:
            traj = run_sgd_numpy(params, noise, lrs, o)
            assert max_rel_diff(traj, run_torch_reference("sgd", params, noise, lrs, o)) < 1e-10, name
        v = {"name": name, "optimizer": kind, "options": o, "lr": lrs,
             "trajectory": [[p.tolist() for p in step] for step in traj]}
        if ratios is not None:
            v["trust_ratios"] = ratios
        out_variants.append(v)
    with open(os.path.abspath(__file__), "rb") as f:
        script_hash = fnv1a64(f.read())
    doc = {
        "generator": "tests/optim/gen_optim_golden.py",
        "script_fnv1a64": script_hash,
        "torch_version": torch.__version__.split("+")[0],
        "steps": STEPS,
        "grad_scale": GRAD_SCALE,
        "params": [{"name": q["name"], "shape": q["shape"], "init": q["init"].tolist(),
                    "target": q["target"].tolist()} for q in params],
        "noise": [[n.tolist() for n in step] for step in noise],
        "variants": out_variants,
    }
    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
