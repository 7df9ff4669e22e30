#!/usr/bin/env python3
"""Writes a small Gemma 2 or Gemma 3 (text) model with random weights, a
sliding window shorter than the test prompt and both kinds of layers, and
what an independent PyTorch implementation of the published architecture
computes for it.

usage: gemma_reference.py OUT_DIR gemma2|gemma3 [llama.cpp|multimodal|multimodal-new]

With llama.cpp, the model keeps to what a GGUF file of llama.cpp can say:
query_pre_attn_scalar = head_dim, and Gemma 3's six-layer pattern; and its
vocabulary has room for the 256 byte tokens llama.cpp's SentencePiece
vocabulary needs (tests/tools/gemma_to_gguf.py).

With multimodal (Gemma 3 only), the folder is laid out as
Gemma3ForConditionalGeneration checkpoints are: config.json holds the text
model's config under text_config, stating only what differs from the class's
defaults, and the tensors carry the wrapper's prefix ("language_model.model."
as first published; "model.language_model." with multimodal-new), beside
tensors of a vision tower and projector.

OUT_DIR receives config.json, model.safetensors (F32), tokenizer.json (a
byte-level BPE stand-in of the vocabulary's size: the tests feed token ids)
and reference.json:
{"input_ids": [...], "logits": [[...], ...] (every position),
 "greedy": [...], "margins": [...]} (a greedy continuation, and at each of
its steps the gap between the two largest logits).
"""
import json
import math
import os
import sys

import torch

from f32_safetensors import write_safetensors

HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, INTER, VOCAB = 64, 6, 4, 2, 32, 128, 128
WINDOW, MAX_POS, EPS = 5, 64, 1e-6
QUERY_PRE_ATTN_SCALAR = 24  # not head_dim, so that the scale is checked
PROMPT_LEN, GREEDY_TOKENS = 20, 12
# Gemma 2: small caps, so that tanh bends the scores and logits it caps.
ATTN_CAP, FINAL_CAP, GEMMA2_THETA = 2.0, 8.0, 10000.0
# Gemma 3: every third layer global (the real models: every sixth), its
# RoPE at its own base and linearly scaled; the others at the local base.
PATTERN, GLOBAL_THETA, LOCAL_THETA, LINEAR_FACTOR = 3, 1000000.0, 10000.0, 2.0


def rms_norm(x, w):
    """Gemma's RMSNorm: the weight is stored as w, applied as (1 + w)."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * (1.0 + w)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope_tables(n, theta, factor):
    inv_freq = 1.0 / (theta ** (torch.arange(0, HEAD_DIM, 2, dtype=torch.float32) / HEAD_DIM))
    inv_freq = inv_freq / factor  # linear scaling: positions divided by the factor
    angles = torch.outer(torch.arange(n, dtype=torch.float32), inv_freq)
    emb = torch.cat((angles, angles), -1)
    return emb.cos(), emb.sin()


def is_sliding(arch, layer):
    if arch == "gemma2":
        return layer % 2 == 0
    return (layer + 1) % PATTERN != 0


def softcap(x, cap):
    return cap * torch.tanh(x / cap)


def forward(arch, w, ids):
    n = len(ids)
    x = w["model.embed_tokens.weight"][torch.tensor(ids)]
    x = x * torch.tensor(math.sqrt(HIDDEN), dtype=x.dtype)
    i = torch.arange(n).unsqueeze(1)
    j = torch.arange(n).unsqueeze(0)
    causal = j <= i
    windowed = causal & (j > i - WINDOW)
    for layer in range(LAYERS):
        p = f"model.layers.{layer}."
        sliding = is_sliding(arch, layer)
        if arch == "gemma2":
            cos, sin = rope_tables(n, GEMMA2_THETA, 1.0)
        elif sliding:
            cos, sin = rope_tables(n, LOCAL_THETA, 1.0)
        else:
            cos, sin = rope_tables(n, GLOBAL_THETA, LINEAR_FACTOR)
        h = rms_norm(x, w[p + "input_layernorm.weight"])
        q = (h @ w[p + "self_attn.q_proj.weight"].T).view(n, HEADS, HEAD_DIM)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).view(n, KV_HEADS, HEAD_DIM)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).view(n, KV_HEADS, HEAD_DIM)
        if arch == "gemma3":
            q = rms_norm(q, w[p + "self_attn.q_norm.weight"])
            k = rms_norm(k, w[p + "self_attn.k_norm.weight"])
        q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(HEADS // KV_HEADS, dim=0)
        v = v.repeat_interleave(HEADS // KV_HEADS, dim=0)
        scores = (q @ k.transpose(1, 2)) * QUERY_PRE_ATTN_SCALAR ** -0.5
        if arch == "gemma2":
            scores = softcap(scores, ATTN_CAP)
        scores = scores.masked_fill(~(windowed if sliding else causal), float("-inf"))
        attn = torch.softmax(scores, dim=-1) @ v
        attn = attn.transpose(0, 1).reshape(n, HEADS * HEAD_DIM) @ w[p + "self_attn.o_proj.weight"].T
        x = x + rms_norm(attn, w[p + "post_attention_layernorm.weight"])
        h = rms_norm(x, w[p + "pre_feedforward_layernorm.weight"])
        gate = torch.nn.functional.gelu(h @ w[p + "mlp.gate_proj.weight"].T, approximate="tanh")
        mlp = (gate * (h @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
        x = x + rms_norm(mlp, w[p + "post_feedforward_layernorm.weight"])
    x = rms_norm(x, w["model.norm.weight"])
    logits = x @ w["model.embed_tokens.weight"].T  # tied
    if arch == "gemma2":
        logits = softcap(logits, FINAL_CAP)
    return logits


def config_for(arch):
    c = {
        "hidden_size": HIDDEN, "intermediate_size": INTER, "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM,
        "vocab_size": VOCAB, "max_position_embeddings": MAX_POS, "rms_norm_eps": EPS,
        "query_pre_attn_scalar": QUERY_PRE_ATTN_SCALAR, "sliding_window": WINDOW,
        "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": True,
        "attention_bias": False, "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0,
        "torch_dtype": "float32",
    }
    if arch == "gemma2":
        c.update({"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2",
                  "rope_theta": GEMMA2_THETA, "attn_logit_softcapping": ATTN_CAP,
                  "final_logit_softcapping": FINAL_CAP, "cache_implementation": "hybrid"})
    else:
        c.update({"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
                  "rope_theta": GLOBAL_THETA, "rope_local_base_freq": LOCAL_THETA,
                  "rope_scaling": {"rope_type": "linear", "factor": LINEAR_FACTOR},
                  "sliding_window_pattern": PATTERN, "attn_logit_softcapping": None,
                  "final_logit_softcapping": None})
    return c


# Gemma3TextConfig's defaults that config_for's Gemma 3 values equal: a
# multimodal checkpoint's text_config leaves them out.
TEXT_DEFAULTS = {"rms_norm_eps": 1e-6, "rope_local_base_freq": 10000.0, "hidden_activation": "gelu_pytorch_tanh",
                 "tie_word_embeddings": True, "attention_bias": False, "rope_theta": 1000000.0}


def multimodal_config(c):
    text = {k: v for k, v in c.items()
            if k not in ("architectures", "model_type", "bos_token_id", "eos_token_id", "pad_token_id",
                         "torch_dtype") and TEXT_DEFAULTS.get(k, object()) != v}
    text["model_type"] = "gemma3_text"
    return {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "text_config": text,
            "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 8},
            "bos_token_id": c["bos_token_id"], "eos_token_id": c["eos_token_id"], "torch_dtype": "float32",
            "mm_tokens_per_image": 4}


def multimodal_weights(w, new_names):
    prefix = "model.language_model." if new_names else "language_model."
    tower = "model." if new_names else ""
    out = {(prefix + k[len("model."):] if new_names else prefix + k): v for k, v in w.items()}
    out[tower + "vision_tower.vision_model.embeddings.patch_embedding.weight"] = torch.randn(8, 3, 2, 2)
    out[tower + "multi_modal_projector.mm_input_projection_weight"] = torch.randn(8, HIDDEN)
    return out


def tokenizer_json():
    tokens = ["<pad>", "<eos>", "<bos>", "\u010a", "a", "b", "ab"] + ["t%d" % i for i in range(7, VOCAB)]
    added = [{"id": i, "content": tokens[i], "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i in range(3)]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {"version": "1.0", "added_tokens": added, "normalizer": None, "pre_tokenizer": byte_level,
            "post_processor": None, "decoder": byte_level,
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "fuse_unk": False, "byte_fallback": False,
                      "vocab": {t: i for i, t in enumerate(tokens)}, "merges": ["a b"]}}


def main():
    global QUERY_PRE_ATTN_SCALAR, PATTERN, VOCAB
    out, arch = sys.argv[1], sys.argv[2]
    assert arch in ("gemma2", "gemma3"), arch
    variant = sys.argv[3] if len(sys.argv) > 3 else ""
    if variant == "llama.cpp":
        QUERY_PRE_ATTN_SCALAR, PATTERN, VOCAB = HEAD_DIM, 6, 384
    multimodal = variant.startswith("multimodal")
    assert not multimodal or arch == "gemma3", "only Gemma 3 ships as a multimodal checkpoint"
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(1234 if arch == "gemma2" else 4321)
    w = {"model.embed_tokens.weight": torch.randn(VOCAB, HIDDEN) * 0.25,
         "model.norm.weight": 0.1 * torch.randn(HIDDEN)}
    for layer in range(LAYERS):
        p = f"model.layers.{layer}."
        for norm in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                     "post_feedforward_layernorm"):
            w[p + norm + ".weight"] = (1.0 if norm.startswith("post") else 0.0) + 0.1 * torch.randn(HIDDEN)
        if arch == "gemma3":
            w[p + "self_attn.q_norm.weight"] = 0.1 * torch.randn(HEAD_DIM)
            w[p + "self_attn.k_norm.weight"] = 0.1 * torch.randn(HEAD_DIM)
        w[p + "self_attn.q_proj.weight"] = torch.randn(HEADS * HEAD_DIM, HIDDEN) * 0.15
        w[p + "self_attn.k_proj.weight"] = torch.randn(KV_HEADS * HEAD_DIM, HIDDEN) * 0.15
        w[p + "self_attn.v_proj.weight"] = torch.randn(KV_HEADS * HEAD_DIM, HIDDEN) * 0.15
        w[p + "self_attn.o_proj.weight"] = torch.randn(HIDDEN, HEADS * HEAD_DIM) * 0.1
        w[p + "mlp.gate_proj.weight"] = torch.randn(INTER, HIDDEN) * 0.15
        w[p + "mlp.up_proj.weight"] = torch.randn(INTER, HIDDEN) * 0.15
        w[p + "mlp.down_proj.weight"] = torch.randn(HIDDEN, INTER) * 0.1
    stored = multimodal_weights(w, variant == "multimodal-new") if multimodal else w
    write_safetensors(os.path.join(out, "model.safetensors"), stored)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(multimodal_config(config_for(arch)) if multimodal else config_for(arch), f, indent=2)
    with open(os.path.join(out, "tokenizer.json"), "w") as f:
        json.dump(tokenizer_json(), f)
    ids = torch.randint(3, VOCAB, (PROMPT_LEN,), generator=torch.Generator().manual_seed(99)).tolist()
    with torch.no_grad():
        logits = forward(arch, w, ids)
        seq, greedy, margins = list(ids), [], []
        for _ in range(GREEDY_TOKENS):
            last = forward(arch, w, seq)[-1]
            top = torch.topk(last, 2)
            greedy.append(int(top.indices[0]))
            margins.append(float(top.values[0] - top.values[1]))
            seq.append(greedy[-1])
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump({"input_ids": ids, "window": WINDOW, "logits": logits.tolist(), "greedy": greedy,
                   "margins": margins}, f)


if __name__ == "__main__":
    main()
