#!/usr/bin/python3
# gen_golden.py: writes the golden reference for bertrain's BERT parity test under tests/fixtures/golden/.
#
# Usage (Debian's python3 with python3-torch; NOT the pyenv python3 on PATH, which lacks torch):
#     /usr/bin/python3 tests/models/gen_golden.py [--out tests/fixtures/golden]
# Re-running reproduces the committed files byte for byte (fixed seeds, one thread, float64); the ctest
# `golden_reproducible` checks that by regenerating into a temporary directory and comparing with cmp.
#
# The model is tests/reference/torch_bert.py: our own PyTorch BertForPreTraining written to the spec (post-LN encoder,
# additive (1 - mask) * -10000 attention mask, pooler tanh on token 0, MLM head evaluated only at the masked
# positions with the decoder tied to the word embeddings plus cls.predictions.bias, NSP head; losses as
# google-research/bert: MLM = sum(w * CE) / (sum(w) + 1e-5), NSP = mean CE, total = MLM + NSP), in eval mode
# (dropout off), computing in float64 from float32-representable weights.
#
# Files (tiny config: vocab 99, hidden 32, 2 layers, 4 heads, intermediate 37, max_position 64, type_vocab 2):
#   config_gelu.json, config_gelu_new.json      transformers-style config.json, hidden_act "gelu" (erf) / "gelu_new" (tanh)
#   model_gelu.safetensors, model_gelu_new.safetensors
#                                               F32 weights under Hugging Face names (no tied decoder weight),
#                                               metadata {"format": "pt"}; the same values for both activations
#   inputs.safetensors                          B=3, T=12, P=5: input_ids, token_type_ids, attention_mask,
#                                               masked_lm_positions, masked_lm_ids, next_sentence_labels (I32),
#                                               masked_lm_weights (F32; padded slots have position 0, id 0, weight 0)
#   expected_gelu.safetensors, expected_gelu_new.safetensors   (F64)
#                                               sequence_output (B, T, H), pooled_output (B, H),
#                                               mlm_logits (B*P, V) (rows b*P + j = slot j of sequence b, padded
#                                               slots included), nsp_logits (B, 2), mlm_loss, nsp_loss, total_loss
#                                               (shape ()), and grad.<name> = d total_loss / d <name> for every
#                                               parameter (the word embeddings' gradient includes the decoder's)
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import torch_bert as tb  # noqa: E402

CONFIG = {
    "vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 37,
    "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 64, "type_vocab_size": 2, "initializer_range": 0.02, "layer_norm_eps": 1e-12,
}
B, T, P = 3, 12, 5


def make_inputs(gen):
    V = CONFIG["vocab_size"]
    lengths = [12, 9, 7]  # rows 1 and 2 are padded at the tail
    input_ids = torch.zeros(B, T, dtype=torch.int32)
    token_type_ids = torch.zeros(B, T, dtype=torch.int32)
    attention_mask = torch.zeros(B, T, dtype=torch.int32)
    positions = torch.zeros(B, P, dtype=torch.int32)
    ids = torch.zeros(B, P, dtype=torch.int32)
    weights = torch.zeros(B, P, dtype=torch.float32)
    n_masked = [5, 3, 2]  # rows 1 and 2 have padded prediction slots
    for b in range(B):
        n = lengths[b]
        input_ids[b, :n] = torch.randint(5, V, (n,), generator=gen, dtype=torch.int64).int()
        input_ids[b, 0] = 2  # [CLS]-like
        sep = n // 2
        token_type_ids[b, sep:n] = 1
        attention_mask[b, :n] = 1
        pos = torch.randperm(n - 1, generator=gen)[:n_masked[b]] + 1  # never position 0
        pos, _ = torch.sort(pos)
        positions[b, :n_masked[b]] = pos.int()
        ids[b, :n_masked[b]] = torch.randint(5, V, (n_masked[b],), generator=gen, dtype=torch.int64).int()
        weights[b, :n_masked[b]] = 1.0
    next_sentence_labels = torch.tensor([0, 1, 1], dtype=torch.int32)
    return {"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": attention_mask,
            "masked_lm_positions": positions, "masked_lm_ids": ids, "masked_lm_weights": weights,
            "next_sentence_labels": next_sentence_labels}


def self_check(cfg, params32, inputs, out):
    """Recomputes the forward with torch.nn.functional's layer_norm, gelu and cross_entropy in place of our own
    formulas: both must agree to rounding, so a slip in torch_bert.py cannot silently become the reference."""
    import torch.nn.functional as F
    saved = tb.layer_norm, dict(tb.ACTIVATIONS)
    try:
        tb.layer_norm = lambda x, w, b, eps: F.layer_norm(x, x.shape[-1:], w, b, eps)
        tb.ACTIVATIONS["gelu"] = lambda x: F.gelu(x)
        tb.ACTIVATIONS["gelu_new"] = lambda x: F.gelu(x, approximate="tanh")
        p = {k: v.double() for k, v in params32.items()}
        alt = tb.forward(cfg, p, **inputs)
    finally:
        tb.layer_norm, acts = saved
        tb.ACTIVATIONS.clear()
        tb.ACTIVATIONS.update(acts)
    for k in ("sequence_output", "pooled_output", "mlm_logits", "nsp_logits"):
        err = (alt[k] - out[k].detach()).abs().max().item()
        assert err < 1e-9, f"self-check {k}: {err}"
    w = inputs["masked_lm_weights"].double().reshape(-1)
    ce = F.cross_entropy(out["mlm_logits"].detach(), inputs["masked_lm_ids"].long().reshape(-1), reduction="none")
    mlm = (w * ce).sum() / (w.sum() + 1e-5)
    nsp = F.cross_entropy(out["nsp_logits"].detach(), inputs["next_sentence_labels"].long())
    assert abs(mlm.item() - out["mlm_loss"].item()) < 1e-12 and abs(nsp.item() - out["nsp_loss"].item()) < 1e-12


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "golden"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)  # one summation order, so re-runs are bit-identical
    torch.use_deterministic_algorithms(True)

    gen = torch.Generator().manual_seed(20240603)
    params32 = tb.init_params(CONFIG, gen, dtype=torch.float32)
    inputs = make_inputs(torch.Generator().manual_seed(7))
    tb.save_safetensors(os.path.join(args.out, "inputs.safetensors"), inputs, {"format": "pt"})

    for act in ("gelu", "gelu_new"):
        cfg = dict(CONFIG, hidden_act=act)
        with open(os.path.join(args.out, f"config_{act}.json"), "w") as f:
            f.write(tb.hf_config_json(cfg))
        tb.save_safetensors(os.path.join(args.out, f"model_{act}.safetensors"), params32, {"format": "pt"})
        # The reference computes from exactly the float32 values, upcast to float64.
        p = {k: v.double().requires_grad_(True) for k, v in params32.items()}
        out = tb.forward(cfg, p, **inputs)
        self_check(cfg, params32, inputs, out)
        out["total_loss"].backward()
        expected = {k: v.detach().clone() for k, v in out.items()}
        for k, v in p.items():
            expected["grad." + k] = v.grad.detach().clone()
        tb.save_safetensors(os.path.join(args.out, f"expected_{act}.safetensors"), expected, {"format": "pt"})
        print(f"{act}: mlm_loss {out['mlm_loss'].item():.6f} nsp_loss {out['nsp_loss'].item():.6f} "
              f"total {out['total_loss'].item():.6f}")


if __name__ == "__main__":
    main()
