#!/usr/bin/env python3
"""Writes small Phi-3-architecture models with random weights and the logits
and greedy continuations an independent PyTorch implementation of the
published Phi3ForCausalLM definition computes for them.

usage: phi3_reference.py OUT_DIR

Two variants, each in OUT_DIR/<variant>/:
  untied: separate lm_head, a sliding window shorter than the prompt,
          rope_scaling {"rope_type": "longrope"} with an explicit
          attention_factor;
  tied:   tied embeddings, no window, the older {"type": "su"} spelling and
          a derived attention factor.
Both rotate 0.75 of each head (partial_rotary_factor) and have short and long
factors that differ from 1 and from each other; the context the model was
trained at (original_max_position_embeddings) is 64 of 256.

Each folder receives config.json, model.safetensors (F32, fused qkv_proj and
gate_up_proj as Hugging Face writes them), tokenizer.json (the GGUF files'
vocabulary as a byte-level BPE), model-F32.gguf and model-Q8_0.gguf
(llama.cpp's "phi3" names: attn_qkv, ffn_up holding gate and up, the factors
as rope_factors_long/short tensors, rope.scaling.attn_factor, and the least
vocabulary llama.cpp loads) and reference.json:
  {"input_ids": [...], "window": W, "original_context": 64, "max_context": 256,
   "rotary_dim": R, "attention_factor": A, "vocab_size": V,
   "short": {"logits": [[...], ...] every position, "greedy": [...], "margins": [...]},
   "long": {...}}
"short" is what a context of at most 64 tokens computes, "long" a longer
one: like llama.cpp, the factors are chosen by the context the model runs
with (transformers chooses by the current sequence length instead). margins
are each greedy step's top-2 logit gap.
"""
import json
import math
import os
import struct
import sys

import torch

from f32_safetensors import write_safetensors

HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, INTER, VOCAB = 64, 2, 4, 2, 16, 128, 100
PARTIAL = 0.75
ROT = int(HEAD_DIM * PARTIAL)  # 12 rotated dims, 6 frequencies
MAX_POS, ORIGINAL, THETA, EPS = 256, 64, 10000.0, 1e-5
SHORT = [1.0, 1.05, 1.1, 1.2, 1.35, 1.5]
LONG = [1.0, 1.6, 2.5, 4.0, 6.5, 9.0]
PROMPT_LEN, NEW_TOKENS = 20, 16
Q_DIM, KV_DIM = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM


# ---- GGUF (v3) ----

GGUF_I32, GGUF_U32, GGUF_F32, GGUF_STRING, GGUF_ARRAY = 5, 4, 6, 8, 9
GGML_F32, GGML_Q8_0 = 0, 8


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def q8_0(t):
    """ggml's Q8_0 of a [rows, cols] tensor: blocks of 32 with an f16 scale."""
    blocks = t.reshape(-1, 32).double()
    amax = blocks.abs().max(dim=1).values
    d = amax / 127
    inv = torch.where(d > 0, 1 / d, torch.zeros_like(d))
    x = blocks * inv.unsqueeze(1)
    q = torch.sign(x) * torch.floor(x.abs() + 0.5)  # roundf: halves away from zero
    out = b""
    for scale, row in zip(d.float().half().tolist(), q.to(torch.int8)):
        out += struct.pack("<e", scale) + row.numpy().tobytes()
    return out


def write_gguf(path, metadata, tensors, quantized):
    """metadata: [(key, type, value)]; tensors: [(name, torch tensor)] row-major."""
    alignment = 32
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata))
    for key, vtype, value in metadata:
        out += gguf_string(key) + struct.pack("<I", vtype)
        if vtype == GGUF_ARRAY:  # (element type, items)
            element, items = value
            out += struct.pack("<IQ", element, len(items))
            out += b"".join(gguf_string(x) if element == GGUF_STRING else struct.pack("<i", x) for x in items)
        else:
            out += gguf_string(value) if vtype == GGUF_STRING else struct.pack(
                "<I" if vtype == GGUF_U32 else "<f", value)
    blobs, offset = [], 0
    for name, t in tensors:
        as_q8 = quantized and t.dim() == 2
        data = q8_0(t) if as_q8 else t.contiguous().numpy().astype("<f4").tobytes()
        dims = list(reversed(t.shape))  # ggml: innermost first
        out += gguf_string(name) + struct.pack("<I", len(dims)) + struct.pack("<%dQ" % len(dims), *dims)
        out += struct.pack("<IQ", GGML_Q8_0 if as_q8 else GGML_F32, offset)
        blobs.append(data)
        offset += (len(data) + alignment - 1) // alignment * alignment
    out += b"\0" * (-len(out) % alignment)
    for data in blobs:
        out += data + b"\0" * (-len(data) % alignment)
    with open(path, "wb") as f:
        f.write(out)


def gguf_tensors(w, tied):
    t = [("token_embd.weight", w["model.embed_tokens.weight"])]
    for layer in range(LAYERS):
        p, b = f"model.layers.{layer}.", f"blk.{layer}."
        t += [(b + "attn_norm.weight", w[p + "input_layernorm.weight"]),
              (b + "attn_qkv.weight", w[p + "self_attn.qkv_proj.weight"]),
              (b + "attn_output.weight", w[p + "self_attn.o_proj.weight"]),
              (b + "ffn_norm.weight", w[p + "post_attention_layernorm.weight"]),
              (b + "ffn_up.weight", w[p + "mlp.gate_up_proj.weight"]),
              (b + "ffn_down.weight", w[p + "mlp.down_proj.weight"])]
    t.append(("output_norm.weight", w["model.norm.weight"]))
    if not tied:
        t.append(("output.weight", w["lm_head.weight"]))
    t.append(("rope_factors_long.weight", torch.tensor(LONG)))
    t.append(("rope_factors_short.weight", torch.tensor(SHORT)))
    return t


def vocabulary():
    """The least vocabulary llama.cpp loads (byte-level BPE: it needs the
    newline's "\u010a" and one merge); the tests feed token ids."""
    return ["<|endoftext|>", "<s>", "</s>", "\u010a", "a", "b", "ab"] + ["t%d" % i for i in range(7, VOCAB)]


def tokenizer_json():
    """The same vocabulary as a Hugging Face tokenizer.json, the first three
    tokens special."""
    tokens = vocabulary()
    added = [{"id": i, "content": tokens[i], "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i in range(3)]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
            "pre_tokenizer": byte_level, "post_processor": None, "decoder": byte_level,
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                      "vocab": {t: i for i, t in enumerate(tokens)}, "merges": ["a b"]}}


def gguf_metadata(window, attn_factor):
    m = [("general.architecture", GGUF_STRING, "phi3"),
         ("phi3.context_length", GGUF_U32, MAX_POS),
         ("phi3.rope.scaling.original_context_length", GGUF_U32, ORIGINAL),
         ("phi3.embedding_length", GGUF_U32, HIDDEN),
         ("phi3.feed_forward_length", GGUF_U32, INTER),
         ("phi3.block_count", GGUF_U32, LAYERS),
         ("phi3.attention.head_count", GGUF_U32, HEADS),
         ("phi3.attention.head_count_kv", GGUF_U32, KV_HEADS),
         ("phi3.attention.layer_norm_rms_epsilon", GGUF_F32, EPS),
         ("phi3.rope.dimension_count", GGUF_U32, ROT),
         ("phi3.rope.freq_base", GGUF_F32, THETA)]
    if window:
        m.append(("phi3.attention.sliding_window", GGUF_U32, window))
    # llama.cpp's converter always writes it (llama.cpp scales by 1 without it).
    m.append(("phi3.rope.scaling.attn_factor", GGUF_F32, attn_factor))
    tokens = vocabulary()
    m += [("tokenizer.ggml.model", GGUF_STRING, "gpt2"),
          ("tokenizer.ggml.tokens", GGUF_ARRAY, (GGUF_STRING, tokens)),
          ("tokenizer.ggml.token_type", GGUF_ARRAY, (GGUF_I32, [3, 3, 3] + [1] * (VOCAB - 3))),
          ("tokenizer.ggml.merges", GGUF_ARRAY, (GGUF_STRING, ["a b"])),
          ("tokenizer.ggml.bos_token_id", GGUF_U32, 1),
          ("tokenizer.ggml.eos_token_id", GGUF_U32, 2)]
    return m


# ---- the model ----

def rms_norm(x, w):
    return w * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope(x, cos, sin):
    """Rotates the first ROT dims of each head (rotate_half), passes the rest."""
    rot, rest = x[..., :ROT], x[..., ROT:]
    return torch.cat((rot * cos + rotate_half(rot) * sin, rest), dim=-1)


def forward(w, ids, tied, window, factors, attn_factor):
    n = len(ids)
    x = w["model.embed_tokens.weight"][torch.tensor(ids)]
    ext = torch.tensor(factors, dtype=torch.float32)
    inv_freq = 1.0 / (ext * THETA ** (torch.arange(0, ROT, 2, dtype=torch.int64).float() / ROT))
    angles = torch.outer(torch.arange(n, dtype=torch.float32), inv_freq)
    emb = torch.cat((angles, angles), -1)
    cos, sin = emb.cos() * attn_factor, emb.sin() * attn_factor
    i = torch.arange(n).unsqueeze(1)
    j = torch.arange(n).unsqueeze(0)
    allowed = j <= i
    if window:
        allowed &= j > i - window  # the last `window` positions, itself included
    for layer in range(LAYERS):
        p = f"model.layers.{layer}."
        h = rms_norm(x, w[p + "input_layernorm.weight"])
        qkv = h @ w[p + "self_attn.qkv_proj.weight"].T
        q = qkv[:, :Q_DIM].view(n, HEADS, HEAD_DIM).transpose(0, 1)
        k = qkv[:, Q_DIM:Q_DIM + KV_DIM].view(n, KV_HEADS, HEAD_DIM).transpose(0, 1)
        v = qkv[:, Q_DIM + KV_DIM:].view(n, KV_HEADS, HEAD_DIM).transpose(0, 1)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        k = k.repeat_interleave(HEADS // KV_HEADS, dim=0)
        v = v.repeat_interleave(HEADS // KV_HEADS, dim=0)
        scores = (q @ k.transpose(1, 2)) / math.sqrt(HEAD_DIM)
        scores = scores.masked_fill(~allowed, float("-inf"))
        attn = torch.softmax(scores, dim=-1) @ v
        attn = attn.transpose(0, 1).reshape(n, Q_DIM)
        x = x + attn @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"])
        gate_up = h @ w[p + "mlp.gate_up_proj.weight"].T
        gate, up = gate_up[:, :INTER], gate_up[:, INTER:]  # gate rows first
        x = x + (up * torch.nn.functional.silu(gate)) @ w[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, w["model.norm.weight"])
    head = w["model.embed_tokens.weight"] if tied else w["lm_head.weight"]
    return x @ head.T


def weights(tied, seed):
    torch.manual_seed(seed)
    # Scales that give peaked next-token distributions (logits spread over
    # several units), as a trained model's are.
    w = {"model.embed_tokens.weight": torch.randn(VOCAB, HIDDEN) * 0.5,
         "model.norm.weight": 1 + 0.1 * torch.randn(HIDDEN)}
    if not tied:
        w["lm_head.weight"] = torch.randn(VOCAB, HIDDEN) * 0.5
    for layer in range(LAYERS):
        p = f"model.layers.{layer}."
        w[p + "input_layernorm.weight"] = 1 + 0.1 * torch.randn(HIDDEN)
        w[p + "post_attention_layernorm.weight"] = 1 + 0.1 * torch.randn(HIDDEN)
        w[p + "self_attn.qkv_proj.weight"] = torch.randn(Q_DIM + 2 * KV_DIM, HIDDEN) * 0.2
        w[p + "self_attn.o_proj.weight"] = torch.randn(HIDDEN, Q_DIM) * 0.1
        w[p + "mlp.gate_up_proj.weight"] = torch.randn(2 * INTER, HIDDEN) * 0.1
        w[p + "mlp.down_proj.weight"] = torch.randn(HIDDEN, INTER) * 0.1
    return w


def greedy(w, ids, tied, window, factors, attn_factor):
    ids, new, margins = list(ids), [], []
    for _ in range(NEW_TOKENS):
        last = forward(w, ids, tied, window, factors, attn_factor)[-1]
        top = torch.topk(last, 2)
        margins.append(float(top.values[0] - top.values[1]))
        new.append(int(top.indices[0]))
        ids.append(new[-1])
    return new, margins


def write_variant(out, tied, seed):
    os.makedirs(out, exist_ok=True)
    window = 0 if tied else 6
    given_attn_factor = None if tied else 1.2
    # transformers: sqrt(1 + ln(factor) / ln(original)) for factor = max / original.
    attn_factor = given_attn_factor or math.sqrt(1 + math.log(MAX_POS / ORIGINAL) / math.log(ORIGINAL))
    w = weights(tied, seed)
    write_safetensors(os.path.join(out, "model.safetensors"), w)
    scaling = {"short_factor": SHORT, "long_factor": LONG}
    if tied:
        scaling["type"] = "su"
    else:
        scaling["rope_type"] = "longrope"
        scaling["attention_factor"] = given_attn_factor
    config = {
        "architectures": ["Phi3ForCausalLM"], "model_type": "phi3",
        "hidden_size": HIDDEN, "intermediate_size": INTER, "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS,
        "vocab_size": VOCAB, "max_position_embeddings": MAX_POS,
        "original_max_position_embeddings": ORIGINAL, "partial_rotary_factor": PARTIAL,
        "rms_norm_eps": EPS, "rope_theta": THETA, "rope_scaling": scaling,
        "sliding_window": window or None, "tie_word_embeddings": tied,
        "hidden_act": "silu", "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32",
    }
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(out, "tokenizer.json"), "w") as f:
        json.dump(tokenizer_json(), f)
    tensors = gguf_tensors(w, tied)
    metadata = gguf_metadata(window, attn_factor)
    write_gguf(os.path.join(out, "model-F32.gguf"), metadata, tensors, quantized=False)
    write_gguf(os.path.join(out, "model-Q8_0.gguf"), metadata, tensors, quantized=True)

    ids = torch.randint(3, VOCAB, (PROMPT_LEN,), generator=torch.Generator().manual_seed(seed + 7)).tolist()
    ref = {"input_ids": ids, "window": window, "original_context": ORIGINAL, "max_context": MAX_POS,
           "rotary_dim": ROT, "attention_factor": attn_factor, "vocab_size": VOCAB}
    with torch.no_grad():
        for name, factors in (("short", SHORT), ("long", LONG)):
            logits = forward(w, ids, tied, window, factors, attn_factor)
            new, margins = greedy(w, ids, tied, window, factors, attn_factor)
            ref[name] = {"logits": logits.tolist(), "greedy": new, "margins": margins}
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(ref, f)


def main():
    out = sys.argv[1]
    write_variant(os.path.join(out, "untied"), tied=False, seed=2024)
    write_variant(os.path.join(out, "tied"), tied=True, seed=2025)


if __name__ == "__main__":
    main()
