#!/usr/bin/env python3
"""Writes a Hugging Face folder of a real model's exact shapes with random
BF16 weights, for measuring what depends on real files (start-up from GGUF
after `kiln quantize`, loading, side by sides with llama.cpp on one file):
config.json, model.safetensors and the tokenizer files of another folder.
Shapes: Qwen2.5-0.5B (the default), or qwen3-moe-small, Qwen3-30B-A3B's
widths, 128 experts and top-8 routing in 6 of its 48 layers (7.3 GB).

    /usr/bin/python3 bench/shaped_model.py OUT_DIR --tokenizer-from ../shared/models/tiny-qwen2
    kiln quantize OUT_DIR qwen2.5-0.5b-shaped-q8_0.gguf --type q8_0
"""
import argparse
import json
import os
import shutil
import struct

import numpy as np

CONFIG = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_act": "silu",
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "vocab_size": 151936,
    "bos_token_id": 151643,
    "eos_token_id": 151643,
}
# kiln's preset of the same name (src/format/presets.cc).
QWEN3_MOE_SMALL = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "model_type": "qwen3_moe",
    "hidden_act": "silu",
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "moe_intermediate_size": 768,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "norm_topk_prob": True,
    "decoder_sparse_step": 1,
    "mlp_only_layers": [],
    "num_hidden_layers": 6,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "max_position_embeddings": 40960,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 151936,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
}
SHAPES = {"qwen2.5-0.5b": CONFIG, "qwen3-moe-small": QWEN3_MOE_SMALL}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt",
                   "special_tokens_map.json", "generation_config.json")


def shapes(c):
    h, i, kv = c["hidden_size"], c["intermediate_size"], c["num_key_value_heads"]
    d = c.get("head_dim", h // c["num_attention_heads"])
    q_dim, kv_dim = c["num_attention_heads"] * d, kv * d
    moe = c["model_type"] == "qwen3_moe"
    out = [("model.embed_tokens.weight", (c["vocab_size"], h))]
    for layer in range(c["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        out += [(p + "input_layernorm.weight", (h,)), (p + "post_attention_layernorm.weight", (h,))]
        for name, rows in (("q", q_dim), ("k", kv_dim), ("v", kv_dim)):
            out.append((p + f"self_attn.{name}_proj.weight", (rows, h)))
            if not moe:
                out.append((p + f"self_attn.{name}_proj.bias", (rows,)))
        out.append((p + "self_attn.o_proj.weight", (h, q_dim)))
        if moe:
            # Qwen3's per-head q/k norms, the router and the experts.
            out += [(p + "self_attn.q_norm.weight", (d,)), (p + "self_attn.k_norm.weight", (d,)),
                    (p + "mlp.gate.weight", (c["num_experts"], h))]
            e_i = c["moe_intermediate_size"]
            for e in range(c["num_experts"]):
                out += [(p + f"mlp.experts.{e}.gate_proj.weight", (e_i, h)),
                        (p + f"mlp.experts.{e}.up_proj.weight", (e_i, h)),
                        (p + f"mlp.experts.{e}.down_proj.weight", (h, e_i))]
        else:
            out += [(p + "mlp.gate_proj.weight", (i, h)), (p + "mlp.up_proj.weight", (i, h)),
                    (p + "mlp.down_proj.weight", (h, i))]
    out.append(("model.norm.weight", (h,)))
    if not c["tie_word_embeddings"]:
        out.append(("lm_head.weight", (c["vocab_size"], h)))
    return out


def bf16(values):
    """Round-to-nearest-even float32 -> bfloat16 bits."""
    bits = values.astype(np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--tokenizer-from", required=True, help="a folder whose tokenizer files are copied")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="qwen2.5-0.5b")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    config = SHAPES[args.shape]
    os.makedirs(args.out_dir, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    tensors = shapes(config)
    header, offset = {}, 0
    for name, shape in tensors:
        size = 2 * int(np.prod(shape))
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    with open(os.path.join(args.out_dir, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for name, shape in tensors:
            if name.endswith("norm.weight"):
                values = np.ones(shape, np.float32)
            else:
                values = rng.standard_normal(shape, dtype=np.float32) * 0.02
            f.write(bf16(values).tobytes())
    with open(os.path.join(args.out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    for name in TOKENIZER_FILES:
        src = os.path.join(args.tokenizer_from, name)
        if os.path.exists(src):
            shutil.copy(src, args.out_dir)


if __name__ == "__main__":
    main()
