# torch_bert.py: an independent PyTorch BERT-for-pretraining (written to the spec, not taken from
# transformers) plus a hand-written safetensors reader/writer; shared by gen_golden.py and hf_compat.py.
# Runs with Debian's /usr/bin/python3 (python3-torch); transformers and the safetensors package are not needed.
import json
import math
import struct

import torch

# ------------------------------------------------------------------------------------------------------------
# safetensors (huggingface/safetensors README "Format"; byte layout of the reference serializer)

# The reference's Dtype enum order: files list tensors by descending position, then by name.
ST_DTYPES = ["BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "F64",
             "I64", "U64"]
TORCH_TO_ST = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.bfloat16: "BF16",
               torch.int32: "I32", torch.int64: "I64", torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL",
               torch.int16: "I16"}
ST_TO_TORCH = {v: k for k, v in TORCH_TO_ST.items()}


def tensor_bytes(t):
    t = t.detach().contiguous().cpu()
    if t.numel() == 0:
        return b""
    return t.view(torch.uint8).numpy().tobytes() if t.dim() > 0 else t.reshape(1).view(torch.uint8).numpy().tobytes()


def safetensors_bytes(tensors, metadata=None):
    """The bytes safetensors.torch.save_file writes for a dict name -> tensor (little-endian host)."""
    items = sorted(tensors.items(), key=lambda kv: (-ST_DTYPES.index(TORCH_TO_ST[kv[1].dtype]), kv[0]))
    header = {}
    if metadata:
        header["__metadata__"] = dict(metadata)
    offset = 0
    blobs = []
    for name, t in items:
        b = tensor_bytes(t)
        header[name] = {"dtype": TORCH_TO_ST[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def save_safetensors(path, tensors, metadata=None):
    with open(path, "wb") as f:
        f.write(safetensors_bytes(tensors, metadata))


def read_safetensors(path):
    """(header dict without __metadata__, metadata dict or None, {name: tensor}, raw header length)."""
    with open(path, "rb") as f:
        data = f.read()
    assert len(data) >= 8, f"{path}: shorter than 8 bytes"
    (n,) = struct.unpack("<Q", data[:8])
    assert 8 + n <= len(data), f"{path}: header length {n} past the end"
    header = json.loads(data[8:8 + n].decode("utf-8"))
    metadata = header.pop("__metadata__", None)
    buf = data[8 + n:]
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        dt = ST_TO_TORCH[e["dtype"]]
        raw = bytearray(buf[b:end])
        t = torch.frombuffer(raw, dtype=dt) if raw else torch.empty(0, dtype=dt)
        out[name] = t.reshape(e["shape"]).clone()
    return header, metadata, out, n


# ------------------------------------------------------------------------------------------------------------
# the model

def gelu_erf(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


ACTIVATIONS = {"gelu": gelu_erf, "gelu_new": gelu_tanh, "gelu_pytorch_tanh": gelu_tanh, "relu": torch.relu,
               "tanh": torch.tanh}


def param_shapes(cfg):
    """Hugging Face BertForPreTraining parameter names and shapes, in state_dict order (decoder.weight tied)."""
    V, H, I = cfg["vocab_size"], cfg["hidden_size"], cfg["intermediate_size"]
    s = [("bert.embeddings.word_embeddings.weight", (V, H)),
         ("bert.embeddings.position_embeddings.weight", (cfg["max_position_embeddings"], H)),
         ("bert.embeddings.token_type_embeddings.weight", (cfg["type_vocab_size"], H)),
         ("bert.embeddings.LayerNorm.weight", (H,)), ("bert.embeddings.LayerNorm.bias", (H,))]
    for i in range(cfg["num_hidden_layers"]):
        p = f"bert.encoder.layer.{i}."
        for m in ("query", "key", "value"):
            s += [(p + f"attention.self.{m}.weight", (H, H)), (p + f"attention.self.{m}.bias", (H,))]
        s += [(p + "attention.output.dense.weight", (H, H)), (p + "attention.output.dense.bias", (H,)),
              (p + "attention.output.LayerNorm.weight", (H,)), (p + "attention.output.LayerNorm.bias", (H,)),
              (p + "intermediate.dense.weight", (I, H)), (p + "intermediate.dense.bias", (I,)),
              (p + "output.dense.weight", (H, I)), (p + "output.dense.bias", (H,)),
              (p + "output.LayerNorm.weight", (H,)), (p + "output.LayerNorm.bias", (H,))]
    s += [("bert.pooler.dense.weight", (H, H)), ("bert.pooler.dense.bias", (H,)),
          ("cls.predictions.bias", (V,)),
          ("cls.predictions.transform.dense.weight", (H, H)), ("cls.predictions.transform.dense.bias", (H,)),
          ("cls.predictions.transform.LayerNorm.weight", (H,)), ("cls.predictions.transform.LayerNorm.bias", (H,)),
          ("cls.seq_relationship.weight", (2, H)), ("cls.seq_relationship.bias", (2,))]
    return s


def init_params(cfg, gen, dtype=torch.float64):
    """Random parameters, rounded to float32-representable values and held in `dtype`.
    Larger than BERT's 0.02 initialisation so that every nonlinearity is exercised."""
    params = {}
    for name, shape in param_shapes(cfg):
        if name.endswith("LayerNorm.weight"):
            t = 1.0 + 0.1 * torch.randn(shape, generator=gen, dtype=torch.float64)
        elif name.endswith("bias"):
            t = 0.1 * torch.randn(shape, generator=gen, dtype=torch.float64)
        elif "embeddings" in name:
            t = 0.5 * torch.randn(shape, generator=gen, dtype=torch.float64)
        else:
            t = torch.randn(shape, generator=gen, dtype=torch.float64) / math.sqrt(shape[1])
        params[name] = t.float().to(dtype)
    return params


def layer_norm(x, w, b, eps):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * w + b


def linear(x, p, name):
    return x @ p[name + ".weight"].t() + p[name + ".bias"]


def forward(cfg, p, input_ids, token_type_ids, attention_mask, masked_lm_positions, masked_lm_ids,
            masked_lm_weights, next_sentence_labels, layers_out=None, probs_out=None):
    """BertForPreTraining forward in eval mode (no dropout). Returns a dict of outputs and losses; `layers_out`, when
    a list, receives the output of every encoder layer, first layer first; `probs_out` likewise every layer's
    attention probabilities (B, NH, T, T)."""
    act = ACTIVATIONS[cfg["hidden_act"]]
    eps = cfg["layer_norm_eps"]
    B, T = input_ids.shape
    H, NH = cfg["hidden_size"], cfg["num_attention_heads"]
    HS = H // NH
    ids = input_ids.long()
    x = (p["bert.embeddings.word_embeddings.weight"][ids]
         + p["bert.embeddings.position_embeddings.weight"][torch.arange(T)][None, :, :]
         + p["bert.embeddings.token_type_embeddings.weight"][token_type_ids.long()])
    x = layer_norm(x, p["bert.embeddings.LayerNorm.weight"], p["bert.embeddings.LayerNorm.bias"], eps)
    # google-research/bert's additive mask: (1 - mask) * -10000 on the keys.
    add_mask = (1.0 - attention_mask.to(x.dtype))[:, None, None, :] * -10000.0
    for i in range(cfg["num_hidden_layers"]):
        pre = f"bert.encoder.layer.{i}."

        def heads(t):
            return t.reshape(B, T, NH, HS).permute(0, 2, 1, 3)

        q = heads(linear(x, p, pre + "attention.self.query"))
        k = heads(linear(x, p, pre + "attention.self.key"))
        v = heads(linear(x, p, pre + "attention.self.value"))
        scores = q @ k.transpose(-1, -2) / math.sqrt(HS) + add_mask
        probs = torch.softmax(scores, dim=-1)
        if probs_out is not None:
            probs_out.append(probs)
        ctx = (probs @ v).permute(0, 2, 1, 3).reshape(B, T, H)
        a = layer_norm(linear(ctx, p, pre + "attention.output.dense") + x,
                       p[pre + "attention.output.LayerNorm.weight"], p[pre + "attention.output.LayerNorm.bias"], eps)
        inter = act(linear(a, p, pre + "intermediate.dense"))
        x = layer_norm(linear(inter, p, pre + "output.dense") + a, p[pre + "output.LayerNorm.weight"],
                       p[pre + "output.LayerNorm.bias"], eps)
        if layers_out is not None:
            layers_out.append(x)
    seq = x
    pooled = torch.tanh(linear(seq[:, 0], p, "bert.pooler.dense"))
    # Masked LM only at the masked positions: rows b*T + masked_lm_positions[b, j] of the (B*T, H) output.
    P = masked_lm_positions.shape[1]
    flat_idx = (torch.arange(B)[:, None] * T + masked_lm_positions.long()).reshape(-1)
    g = seq.reshape(B * T, H)[flat_idx]
    t = act(linear(g, p, "cls.predictions.transform.dense"))
    t = layer_norm(t, p["cls.predictions.transform.LayerNorm.weight"], p["cls.predictions.transform.LayerNorm.bias"], eps)
    mlm_logits = t @ p["bert.embeddings.word_embeddings.weight"].t() + p["cls.predictions.bias"]  # (B*P, V)
    nsp_logits = linear(pooled, p, "cls.seq_relationship")  # (B, 2)
    logp = torch.log_softmax(mlm_logits, dim=-1)
    ce = -logp.gather(1, masked_lm_ids.long().reshape(-1, 1)).reshape(-1)
    w = masked_lm_weights.to(ce.dtype).reshape(-1)
    mlm_loss = (w * ce).sum() / (w.sum() + 1e-5)
    nsp_ce = -torch.log_softmax(nsp_logits, dim=-1).gather(1, next_sentence_labels.long().reshape(-1, 1)).reshape(-1)
    nsp_loss = nsp_ce.mean()
    assert mlm_logits.shape[0] == B * P
    return {"sequence_output": seq, "pooled_output": pooled, "mlm_logits": mlm_logits, "nsp_logits": nsp_logits,
            "mlm_loss": mlm_loss, "nsp_loss": nsp_loss, "total_loss": mlm_loss + nsp_loss}


def hf_config_json(cfg, transformers_version=None):
    """config.json text in the form transformers' save_pretrained writes for BertForPreTraining (sorted keys,
    indent 2); transformers_version, when given, is written as transformers does."""
    d = dict(cfg)
    d.update({"architectures": ["BertForPreTraining"], "model_type": "bert", "pad_token_id": 0,
              "position_embedding_type": "absolute", "torch_dtype": "float32", "use_cache": True,
              "classifier_dropout": None})
    if transformers_version:
        d["transformers_version"] = transformers_version
    return json.dumps(d, indent=2, sort_keys=True) + "\n"
