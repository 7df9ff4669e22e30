#!/usr/bin/env python3
"""Writes small mixture-of-experts models with random weights and what an
independent PyTorch implementation of their published definitions
(MixtralForCausalLM, Qwen2MoeForCausalLM, Qwen3MoeForCausalLM) computes for
them.

usage: moe_reference.py OUT_DIR

One folder per architecture in OUT_DIR:
  qwen3_moe: Qwen3 attention (per-head q/k RMSNorm), 8 experts, top 4,
             the chosen probabilities renormalized (norm_topk_prob);
  mixtral:   Llama attention, 8 experts, top 2, renormalized;
  qwen2_moe: Qwen2 attention (q/k/v biases), 8 experts, top 2, NOT
             renormalized, a shared expert scaled by sigmoid(shared_expert_gate),
             and a dense MLP on layer 1 (mlp_only_layers);
  qwen2_moe_sparse: the same with experts on every layer, as llama.cpp's
             qwen2moe has them.

Each folder receives config.json, model.safetensors (F32, Hugging Face's
names), tokenizer.json (the GGUF files' vocabulary), model-F32.gguf and model-Q8_0.gguf (llama.cpp's names: arch llama
with expert_count for Mixtral, with its q/k rows permuted as llama.cpp's
converter does; qwen2moe / qwen3moe; stacked 3-D ffn_{gate,up,down}_exps;
the router and vectors kept in F32 as llama.cpp's quantize keeps them);
mixtral also model-F32-per-expert.gguf, the older Mixtral layout with one
blk.N.ffn_{gate,up,down}.E tensor per expert; and reference.json:
  {"input_ids": [...], "logits": [[...], ...] every position,
   "greedy": [...], "margins": [...], "vocab_size": V, "experts": E,
   "top_k": K, "normalized": bool, "shared_width": S, "dense_layers": [...]}
margins are each greedy step's top-2 logit gap.
"""
import json
import math
import os
import struct
import sys

import torch

from f32_safetensors import write_safetensors
from phi3_reference import (GGUF_ARRAY, GGUF_F32, GGUF_I32, GGUF_STRING, GGUF_U32, gguf_string, q8_0,
                            tokenizer_json, vocabulary)

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, VOCAB = 64, 4, 2, 16, 100
MAX_POS, THETA, EPS = 256, 10000.0, 1e-6
PROMPT_LEN, NEW_TOKENS = 20, 16
assert len(vocabulary()) == VOCAB, "the tokenizer shared with phi3_reference.py has another size"
Q_DIM, KV_DIM = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM

VARIANTS = {
    "qwen3_moe": dict(hf="Qwen3MoeForCausalLM", gguf="qwen3moe", layers=2, experts=8, top_k=4, width=32,
                      dense_width=96, normalize=True, shared=0, dense_layers=[], qk_norm=True, bias=False),
    "mixtral": dict(hf="MixtralForCausalLM", gguf="llama", layers=2, experts=8, top_k=2, width=64,
                    dense_width=64, normalize=True, shared=0, dense_layers=[], qk_norm=False, bias=False),
    "qwen2_moe": dict(hf="Qwen2MoeForCausalLM", gguf="qwen2moe", layers=3, experts=8, top_k=2, width=32,
                      dense_width=96, normalize=False, shared=64, dense_layers=[1], qk_norm=False, bias=True),
    # llama.cpp's qwen2moe has no dense layers: this one is for comparing with it.
    "qwen2_moe_sparse": dict(hf="Qwen2MoeForCausalLM", gguf="qwen2moe", layers=3, experts=8, top_k=2, width=32,
                             dense_width=96, normalize=False, shared=64, dense_layers=[], qk_norm=False,
                             bias=True),
}


def write_gguf(path, metadata, tensors, quantized):
    """metadata: [(key, type, value)]; tensors: [(name, torch tensor)] row-major,
    the outermost dimension first. Quantized: matrices of 2 or 3 dimensions
    but the router, Q8_0 per row."""
    alignment = 32
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata))
    for key, vtype, value in metadata:
        out += gguf_string(key) + struct.pack("<I", vtype)
        if vtype == GGUF_ARRAY:
            element, items = value
            out += struct.pack("<IQ", element, len(items))
            out += b"".join(gguf_string(x) if element == GGUF_STRING else struct.pack("<i", x) for x in items)
        else:
            out += gguf_string(value) if vtype == GGUF_STRING else struct.pack(
                "<I" if vtype == GGUF_U32 else "<f", value)
    blobs, offset = [], 0
    for name, t in tensors:
        as_q8 = quantized and t.dim() >= 2 and "ffn_gate_inp" not in name
        data = q8_0(t) if as_q8 else t.contiguous().numpy().astype("<f4").tobytes()
        dims = list(reversed(t.shape))  # ggml: innermost first
        out += gguf_string(name) + struct.pack("<I", len(dims)) + struct.pack("<%dQ" % len(dims), *dims)
        out += struct.pack("<IQ", 8 if as_q8 else 0, offset)
        blobs.append(data)
        offset += (len(data) + alignment - 1) // alignment * alignment
    out += b"\0" * (-len(out) % alignment)
    for data in blobs:
        out += data + b"\0" * (-len(data) % alignment)
    with open(path, "wb") as f:
        f.write(out)


# ---- the model ----

def rms_norm(x, w):
    return w * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def swiglu(x, gate, up, down):
    return (torch.nn.functional.silu(x @ gate.T) * (x @ up.T)) @ down.T


def sparse_moe(v, w, p, x):
    """The published block: softmax over all experts in fp32, top-k, the k
    probabilities renormalized or not, the experts' outputs summed weighted;
    Qwen2-MoE adds sigmoid(shared_expert_gate(x)) * shared_expert(x)."""
    if v["hf"] == "MixtralForCausalLM":
        router, expert = p + "block_sparse_moe.gate.weight", p + "block_sparse_moe.experts.{}."
        names = ("w1", "w3", "w2")
    else:
        router, expert = p + "mlp.gate.weight", p + "mlp.experts.{}."
        names = ("gate_proj", "up_proj", "down_proj")
    probs = torch.softmax(x @ w[router].T, dim=-1, dtype=torch.float32)
    top, chosen = torch.topk(probs, v["top_k"], dim=-1)
    if v["normalize"]:
        top = top / top.sum(dim=-1, keepdim=True)
    out = torch.zeros_like(x)
    for e in range(v["experts"]):
        rows, rank = torch.where(chosen == e)
        if len(rows) == 0:
            continue
        pre = expert.format(e)
        y = swiglu(x[rows], *(w[pre + n + ".weight"] for n in names))
        out.index_add_(0, rows, y * top[rows, rank, None])
    if v["shared"]:
        s = p + "mlp.shared_expert."
        shared = swiglu(x, w[s + "gate_proj.weight"], w[s + "up_proj.weight"], w[s + "down_proj.weight"])
        out = out + torch.sigmoid(x @ w[p + "mlp.shared_expert_gate.weight"].T) * shared
    return out


def forward(v, w, ids):
    n = len(ids)
    x = w["model.embed_tokens.weight"][torch.tensor(ids)]
    inv_freq = 1.0 / (THETA ** (torch.arange(0, HEAD_DIM, 2, dtype=torch.int64).float() / HEAD_DIM))
    angles = torch.outer(torch.arange(n, dtype=torch.float32), inv_freq)
    emb = torch.cat((angles, angles), -1)
    cos, sin = emb.cos(), emb.sin()
    allowed = torch.arange(n).unsqueeze(0) <= torch.arange(n).unsqueeze(1)
    for layer in range(v["layers"]):
        p = f"model.layers.{layer}."
        h = rms_norm(x, w[p + "input_layernorm.weight"])

        def proj(name):
            y = h @ w[p + f"self_attn.{name}.weight"].T
            return y + w[p + f"self_attn.{name}.bias"] if v["bias"] else y

        q = proj("q_proj").view(n, HEADS, HEAD_DIM).transpose(0, 1)
        k = proj("k_proj").view(n, KV_HEADS, HEAD_DIM).transpose(0, 1)
        vv = proj("v_proj").view(n, KV_HEADS, HEAD_DIM).transpose(0, 1)
        if v["qk_norm"]:
            q = rms_norm(q, w[p + "self_attn.q_norm.weight"])
            k = rms_norm(k, w[p + "self_attn.k_norm.weight"])
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(HEADS // KV_HEADS, dim=0)
        vv = vv.repeat_interleave(HEADS // KV_HEADS, dim=0)
        scores = (q @ k.transpose(1, 2)) / math.sqrt(HEAD_DIM)
        attn = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1) @ vv
        x = x + attn.transpose(0, 1).reshape(n, Q_DIM) @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"])
        if layer in v["dense_layers"]:
            x = x + swiglu(h, w[p + "mlp.gate_proj.weight"], w[p + "mlp.up_proj.weight"], w[p + "mlp.down_proj.weight"])
        else:
            x = x + sparse_moe(v, w, p, h)
    x = rms_norm(x, w["model.norm.weight"])
    return x @ w["lm_head.weight"].T


def weights(v, seed):
    torch.manual_seed(seed)
    # Scales that give peaked next-token distributions and routers whose
    # choices are clear (logits a few units apart), as a trained model's are.
    w = {"model.embed_tokens.weight": torch.randn(VOCAB, HIDDEN) * 0.5,
         "model.norm.weight": 1 + 0.1 * torch.randn(HIDDEN),
         "lm_head.weight": torch.randn(VOCAB, HIDDEN) * 0.5}
    mixtral = v["hf"] == "MixtralForCausalLM"
    for layer in range(v["layers"]):
        p = f"model.layers.{layer}."
        w[p + "input_layernorm.weight"] = 1 + 0.1 * torch.randn(HIDDEN)
        w[p + "post_attention_layernorm.weight"] = 1 + 0.1 * torch.randn(HIDDEN)
        for name, rows in (("q_proj", Q_DIM), ("k_proj", KV_DIM), ("v_proj", KV_DIM)):
            w[p + f"self_attn.{name}.weight"] = torch.randn(rows, HIDDEN) * 0.2
            if v["bias"]:
                w[p + f"self_attn.{name}.bias"] = torch.randn(rows) * 0.1
        w[p + "self_attn.o_proj.weight"] = torch.randn(HIDDEN, Q_DIM) * 0.1
        if v["qk_norm"]:
            w[p + "self_attn.q_norm.weight"] = 1 + 0.1 * torch.randn(HEAD_DIM)
            w[p + "self_attn.k_norm.weight"] = 1 + 0.1 * torch.randn(HEAD_DIM)
        if layer in v["dense_layers"]:
            f = v["dense_width"]
            w[p + "mlp.gate_proj.weight"] = torch.randn(f, HIDDEN) * 0.1
            w[p + "mlp.up_proj.weight"] = torch.randn(f, HIDDEN) * 0.1
            w[p + "mlp.down_proj.weight"] = torch.randn(HIDDEN, f) * 0.1
            continue
        f = v["width"]
        block = p + ("block_sparse_moe." if mixtral else "mlp.")
        w[block + "gate.weight"] = torch.randn(v["experts"], HIDDEN) * 0.4
        for e in range(v["experts"]):
            names = ("w1", "w3", "w2") if mixtral else ("gate_proj", "up_proj", "down_proj")
            pre = block + f"experts.{e}."
            w[pre + names[0] + ".weight"] = torch.randn(f, HIDDEN) * 0.15
            w[pre + names[1] + ".weight"] = torch.randn(f, HIDDEN) * 0.15
            w[pre + names[2] + ".weight"] = torch.randn(HIDDEN, f) * 0.15
        if v["shared"]:
            s = v["shared"]
            w[p + "mlp.shared_expert.gate_proj.weight"] = torch.randn(s, HIDDEN) * 0.1
            w[p + "mlp.shared_expert.up_proj.weight"] = torch.randn(s, HIDDEN) * 0.1
            w[p + "mlp.shared_expert.down_proj.weight"] = torch.randn(HIDDEN, s) * 0.1
            w[p + "mlp.shared_expert_gate.weight"] = torch.randn(1, HIDDEN) * 0.3
    return w


# ---- GGUF in llama.cpp's layout ----

def permute(t, heads):
    """llama.cpp's converter for arch llama: q/k rows reordered so that
    adjacent elements form RoPE's pairs."""
    return t.reshape(heads, 2, t.shape[0] // heads // 2, *t.shape[1:]).swapaxes(1, 2).reshape(t.shape)


def gguf_tensors(v, w, stacked=True):
    """stacked=False: older Mixtral files' per-expert blk.N.ffn_{gate,up,down}.E."""
    mixtral = v["hf"] == "MixtralForCausalLM"
    t = [("token_embd.weight", w["model.embed_tokens.weight"])]
    for layer in range(v["layers"]):
        p, b = f"model.layers.{layer}.", f"blk.{layer}."
        q, k = w[p + "self_attn.q_proj.weight"], w[p + "self_attn.k_proj.weight"]
        if mixtral:
            q, k = permute(q, HEADS), permute(k, KV_HEADS)
        t += [(b + "attn_norm.weight", w[p + "input_layernorm.weight"]),
              (b + "attn_q.weight", q), (b + "attn_k.weight", k),
              (b + "attn_v.weight", w[p + "self_attn.v_proj.weight"]),
              (b + "attn_output.weight", w[p + "self_attn.o_proj.weight"]),
              (b + "ffn_norm.weight", w[p + "post_attention_layernorm.weight"])]
        if v["bias"]:
            t += [(b + f"attn_{x}.bias", w[p + f"self_attn.{x}_proj.bias"]) for x in "qkv"]
        if v["qk_norm"]:
            t += [(b + "attn_q_norm.weight", w[p + "self_attn.q_norm.weight"]),
                  (b + "attn_k_norm.weight", w[p + "self_attn.k_norm.weight"])]
        if layer in v["dense_layers"]:
            t += [(b + f"ffn_{x}.weight", w[p + f"mlp.{x}_proj.weight"]) for x in ("gate", "up", "down")]
            continue
        block = p + ("block_sparse_moe." if mixtral else "mlp.")
        names = ("w1", "w3", "w2") if mixtral else ("gate_proj", "up_proj", "down_proj")
        t.append((b + "ffn_gate_inp.weight", w[block + "gate.weight"]))
        for gguf, hf in zip(("gate", "up", "down"), names):
            experts = [w[block + f"experts.{e}.{hf}.weight"] for e in range(v["experts"])]
            if stacked:
                t.append((b + f"ffn_{gguf}_exps.weight", torch.stack(experts)))
            else:
                t += [(b + f"ffn_{gguf}.{e}.weight", x) for e, x in enumerate(experts)]
        if v["shared"]:
            t += [(b + f"ffn_{x}_shexp.weight", w[p + f"mlp.shared_expert.{x}_proj.weight"])
                  for x in ("gate", "up", "down")]
            t.append((b + "ffn_gate_inp_shexp.weight", w[p + "mlp.shared_expert_gate.weight"].reshape(HIDDEN)))
    t.append(("output_norm.weight", w["model.norm.weight"]))
    t.append(("output.weight", w["lm_head.weight"]))
    return t


def gguf_metadata(v):
    a = v["gguf"]
    m = [("general.architecture", GGUF_STRING, a),
         (f"{a}.context_length", GGUF_U32, MAX_POS),
         (f"{a}.embedding_length", GGUF_U32, HIDDEN),
         (f"{a}.feed_forward_length", GGUF_U32, v["dense_width"]),
         (f"{a}.block_count", GGUF_U32, v["layers"]),
         (f"{a}.attention.head_count", GGUF_U32, HEADS),
         (f"{a}.attention.head_count_kv", GGUF_U32, KV_HEADS),
         (f"{a}.attention.key_length", GGUF_U32, HEAD_DIM),
         (f"{a}.attention.value_length", GGUF_U32, HEAD_DIM),
         (f"{a}.attention.layer_norm_rms_epsilon", GGUF_F32, EPS),
         (f"{a}.rope.dimension_count", GGUF_U32, HEAD_DIM),
         (f"{a}.rope.freq_base", GGUF_F32, THETA),
         (f"{a}.expert_count", GGUF_U32, v["experts"]),
         (f"{a}.expert_used_count", GGUF_U32, v["top_k"])]
    if a != "llama":
        m.append((f"{a}.expert_feed_forward_length", GGUF_U32, v["width"]))
    if v["shared"]:
        m.append((f"{a}.expert_shared_feed_forward_length", GGUF_U32, v["shared"]))
    # The least vocabulary llama.cpp loads (byte-level BPE: it needs the
    # newline's "\u010a" and one merge); the tests feed token ids.
    tokens = vocabulary()
    m += [("tokenizer.ggml.model", GGUF_STRING, "gpt2"),
          ("tokenizer.ggml.tokens", GGUF_ARRAY, (GGUF_STRING, tokens)),
          ("tokenizer.ggml.token_type", GGUF_ARRAY, (GGUF_I32, [3, 3, 3] + [1] * (VOCAB - 3))),
          ("tokenizer.ggml.merges", GGUF_ARRAY, (GGUF_STRING, ["a b"])),
          ("tokenizer.ggml.bos_token_id", GGUF_U32, 1),
          ("tokenizer.ggml.eos_token_id", GGUF_U32, 2)]
    return m


def config_json(v):
    c = {"architectures": [v["hf"]], "hidden_size": HIDDEN, "num_hidden_layers": v["layers"],
         "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM,
         "vocab_size": VOCAB, "max_position_embeddings": MAX_POS, "rms_norm_eps": EPS, "rope_theta": THETA,
         "tie_word_embeddings": False, "hidden_act": "silu", "bos_token_id": 1, "eos_token_id": 2,
         "torch_dtype": "float32", "num_experts_per_tok": v["top_k"]}
    if v["hf"] == "MixtralForCausalLM":
        c.update(model_type="mixtral", intermediate_size=v["width"], num_local_experts=v["experts"],
                 sliding_window=None)
    else:
        c.update(model_type="qwen2_moe" if v["shared"] else "qwen3_moe", intermediate_size=v["dense_width"],
                 moe_intermediate_size=v["width"], num_experts=v["experts"], norm_topk_prob=v["normalize"],
                 decoder_sparse_step=1, mlp_only_layers=v["dense_layers"], use_sliding_window=False,
                 sliding_window=32)
        if v["shared"]:
            c["shared_expert_intermediate_size"] = v["shared"]
        if v["bias"] is False and v["qk_norm"]:
            c["attention_bias"] = False
    return c


def greedy(v, w, ids):
    ids, new, margins = list(ids), [], []
    for _ in range(NEW_TOKENS):
        last = forward(v, w, ids)[-1]
        top = torch.topk(last, 2)
        margins.append(float(top.values[0] - top.values[1]))
        new.append(int(top.indices[0]))
        ids.append(new[-1])
    return new, margins


def write_variant(out, name, seed):
    v = VARIANTS[name]
    os.makedirs(out, exist_ok=True)
    w = weights(v, seed)
    write_safetensors(os.path.join(out, "model.safetensors"), w)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config_json(v), f, indent=2)
    with open(os.path.join(out, "tokenizer.json"), "w") as f:
        json.dump(tokenizer_json(), f)
    tensors, metadata = gguf_tensors(v, w), gguf_metadata(v)
    write_gguf(os.path.join(out, "model-F32.gguf"), metadata, tensors, quantized=False)
    write_gguf(os.path.join(out, "model-Q8_0.gguf"), metadata, tensors, quantized=True)
    if name == "mixtral":
        write_gguf(os.path.join(out, "model-F32-per-expert.gguf"), metadata, gguf_tensors(v, w, stacked=False),
                   quantized=False)
    ids = torch.randint(3, VOCAB, (PROMPT_LEN,), generator=torch.Generator().manual_seed(seed + 7)).tolist()
    with torch.no_grad():
        logits = forward(v, w, ids)
        new, margins = greedy(v, w, ids)
    ref = {"input_ids": ids, "logits": logits.tolist(), "greedy": new, "margins": margins, "vocab_size": VOCAB,
           "experts": v["experts"], "top_k": v["top_k"], "normalized": v["normalize"],
           "shared_width": v["shared"], "dense_layers": v["dense_layers"]}
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(ref, f)


def main():
    out = sys.argv[1]
    for seed, name in enumerate(VARIANTS):
        write_variant(os.path.join(out, name), name, 3060 + seed)


if __name__ == "__main__":
    main()
