#!/usr/bin/env python3
"""Writes a small Mistral-architecture model with random weights and a
sliding window shorter than the test prompt, and the logits an independent
PyTorch implementation computes for that prompt.

usage: mistral_reference.py OUT_DIR

OUT_DIR receives config.json, model.safetensors (F32) and reference.json
({"input_ids": [...], "logits": [[...], ...]}, every position).
"""
import json
import math
import os
import sys

import torch

from f32_safetensors import write_safetensors

HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, INTER, VOCAB = 64, 2, 4, 2, 16, 128, 100
WINDOW, MAX_POS, THETA, EPS = 6, 64, 10000.0, 1e-5
PROMPT_LEN = 20


def rms_norm(x, w):
    return w * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def forward(w, ids):
    n = len(ids)
    x = w["model.embed_tokens.weight"][torch.tensor(ids)]
    inv_freq = 1.0 / (THETA ** (torch.arange(0, HEAD_DIM, 2, dtype=torch.float32) / HEAD_DIM))
    angles = torch.outer(torch.arange(n, dtype=torch.float32), inv_freq)
    cos = torch.cat((angles.cos(), angles.cos()), -1)
    sin = torch.cat((angles.sin(), angles.sin()), -1)
    i = torch.arange(n).unsqueeze(1)
    j = torch.arange(n).unsqueeze(0)
    allowed = (j <= i) & (j > i - WINDOW)  # the last WINDOW positions, itself included
    for layer in range(LAYERS):
        p = f"model.layers.{layer}."
        h = rms_norm(x, w[p + "input_layernorm.weight"])
        q = (h @ w[p + "self_attn.q_proj.weight"].T).view(n, HEADS, HEAD_DIM).transpose(0, 1)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).view(n, KV_HEADS, HEAD_DIM).transpose(0, 1)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).view(n, KV_HEADS, HEAD_DIM).transpose(0, 1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(HEADS // KV_HEADS, dim=0)
        v = v.repeat_interleave(HEADS // KV_HEADS, dim=0)
        scores = (q @ k.transpose(1, 2)) / math.sqrt(HEAD_DIM)
        scores = scores.masked_fill(~allowed, float("-inf"))
        attn = torch.softmax(scores, dim=-1) @ v
        attn = attn.transpose(0, 1).reshape(n, HEADS * HEAD_DIM)
        x = x + attn @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"])
        gate = h @ w[p + "mlp.gate_proj.weight"].T
        up = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, w["model.norm.weight"])
    return x @ w["lm_head.weight"].T


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(1234)
    w = {"model.embed_tokens.weight": torch.randn(VOCAB, HIDDEN) * 0.5,
         "model.norm.weight": 1 + 0.1 * torch.randn(HIDDEN),
         "lm_head.weight": torch.randn(VOCAB, HIDDEN) * 0.1}
    for layer in range(LAYERS):
        p = f"model.layers.{layer}."
        w[p + "input_layernorm.weight"] = 1 + 0.1 * torch.randn(HIDDEN)
        w[p + "post_attention_layernorm.weight"] = 1 + 0.1 * torch.randn(HIDDEN)
        w[p + "self_attn.q_proj.weight"] = torch.randn(HEADS * HEAD_DIM, HIDDEN) * 0.15
        w[p + "self_attn.k_proj.weight"] = torch.randn(KV_HEADS * HEAD_DIM, HIDDEN) * 0.15
        w[p + "self_attn.v_proj.weight"] = torch.randn(KV_HEADS * HEAD_DIM, HIDDEN) * 0.15
        w[p + "self_attn.o_proj.weight"] = torch.randn(HIDDEN, HEADS * HEAD_DIM) * 0.1
        w[p + "mlp.gate_proj.weight"] = torch.randn(INTER, HIDDEN) * 0.1
        w[p + "mlp.up_proj.weight"] = torch.randn(INTER, HIDDEN) * 0.1
        w[p + "mlp.down_proj.weight"] = torch.randn(HIDDEN, INTER) * 0.1
    write_safetensors(os.path.join(out, "model.safetensors"), w)
    config = {
        "architectures": ["MistralForCausalLM"], "model_type": "mistral",
        "hidden_size": HIDDEN, "intermediate_size": INTER, "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM,
        "vocab_size": VOCAB, "max_position_embeddings": MAX_POS, "rms_norm_eps": EPS,
        "rope_theta": THETA, "sliding_window": WINDOW, "tie_word_embeddings": False,
        "hidden_act": "silu", "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32",
    }
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    ids = torch.randint(3, VOCAB, (PROMPT_LEN,), generator=torch.Generator().manual_seed(99)).tolist()
    with torch.no_grad():
        logits = forward(w, ids)
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump({"input_ids": ids, "window": WINDOW, "logits": logits.tolist()}, f)


if __name__ == "__main__":
    main()
