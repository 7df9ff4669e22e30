#!/usr/bin/env python3
"""Writes a gemma_reference.py model (made with its llama.cpp option) as a
GGUF file the way llama.cpp's converter does: llama.cpp's tensor names and
metadata keys, every norm weight stored as 1 + w, and a stand-in
SentencePiece vocabulary (llama.cpp loads no model without one): 4 special
tokens, the 256 byte tokens, then plain ones.

usage: gemma_to_gguf.py MODEL_DIR gemma2|gemma3   (writes MODEL_DIR/model.gguf)
"""
import json
import os
import struct
import sys

import torch

UINT32, FLOAT32, STRING, ARRAY = 4, 6, 8, 9
INT32 = 5
F32 = 0
ALIGNMENT = 32

LAYER_NAMES = {
    "input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm", "post_attention_layernorm": "post_attention_norm",
    "pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffw_norm",
    "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
}


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[begin:end]), dtype=torch.float32).reshape(info["shape"])
    return out


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_value(vtype, value):
    if vtype == STRING:
        return gguf_string(value)
    if vtype == ARRAY:
        element_type, items = value
        return struct.pack("<IQ", element_type, len(items)) + b"".join(gguf_value(element_type, v) for v in items)
    return struct.pack({UINT32: "<I", INT32: "<i", FLOAT32: "<f"}[vtype], value)


def gguf_name(name):
    if name == "model.embed_tokens.weight":
        return "token_embd.weight"
    if name == "model.norm.weight":
        return "output_norm.weight"
    parts = name.split(".")  # model.layers.N.<hf>.weight
    return "blk.%s.%s.weight" % (parts[2], LAYER_NAMES[".".join(parts[3:-1])])


def main():
    folder, arch = sys.argv[1], sys.argv[2]
    c = json.load(open(os.path.join(folder, "config.json")))
    weights = read_safetensors(os.path.join(folder, "model.safetensors"))
    vocab = c["vocab_size"]
    assert vocab >= 260, "made without gemma_reference.py's llama.cpp option"
    tokens = ["<pad>", "<eos>", "<bos>", "<unk>"] + ["<0x%02X>" % b for b in range(256)]
    tokens += ["t%d" % i for i in range(len(tokens), vocab)]
    token_types = [3, 3, 3, 2] + [6] * 256 + [1] * (vocab - 260)
    meta = [
        ("general.architecture", STRING, arch),
        ("general.name", STRING, "tiny " + arch),
        (arch + ".context_length", UINT32, c["max_position_embeddings"]),
        (arch + ".embedding_length", UINT32, c["hidden_size"]),
        (arch + ".block_count", UINT32, c["num_hidden_layers"]),
        (arch + ".feed_forward_length", UINT32, c["intermediate_size"]),
        (arch + ".attention.head_count", UINT32, c["num_attention_heads"]),
        (arch + ".attention.head_count_kv", UINT32, c["num_key_value_heads"]),
        (arch + ".attention.key_length", UINT32, c["head_dim"]),
        (arch + ".attention.value_length", UINT32, c["head_dim"]),
        (arch + ".attention.layer_norm_rms_epsilon", FLOAT32, c["rms_norm_eps"]),
        (arch + ".attention.sliding_window", UINT32, c["sliding_window"]),
        (arch + ".rope.freq_base", FLOAT32, c["rope_theta"]),
        ("tokenizer.ggml.model", STRING, "llama"),
        ("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)),
        ("tokenizer.ggml.scores", ARRAY, (FLOAT32, [0.0] * vocab)),
        ("tokenizer.ggml.token_type", ARRAY, (INT32, token_types)),
        ("tokenizer.ggml.bos_token_id", UINT32, c["bos_token_id"]),
        ("tokenizer.ggml.eos_token_id", UINT32, c["eos_token_id"]),
        ("tokenizer.ggml.unknown_token_id", UINT32, 3),
        ("tokenizer.ggml.padding_token_id", UINT32, c["pad_token_id"]),
    ]
    if arch == "gemma2":
        meta += [(arch + ".attn_logit_softcapping", FLOAT32, c["attn_logit_softcapping"]),
                 (arch + ".final_logit_softcapping", FLOAT32, c["final_logit_softcapping"])]
    elif c.get("rope_scaling"):
        meta += [(arch + ".rope.scaling.type", STRING, "linear"),
                 (arch + ".rope.scaling.factor", FLOAT32, c["rope_scaling"]["factor"])]
    infos, blobs, offset = b"", [], 0
    for name in sorted(weights):
        t = weights[name]
        if name.endswith("norm.weight"):
            t = t + 1.0  # as llama.cpp's converter stores Gemma's norms
        data = t.contiguous().numpy().astype("<f4").tobytes()
        dims = list(reversed(t.shape))
        infos += gguf_string(gguf_name(name)) + struct.pack("<I", len(dims)) + struct.pack("<%dQ" % len(dims), *dims)
        infos += struct.pack("<IQ", F32, offset)
        pad = (-len(data)) % ALIGNMENT
        blobs.append(data + b"\0" * pad)
        offset += len(data) + pad
    out = b"GGUF" + struct.pack("<IQQ", 3, len(weights), len(meta))
    for key, vtype, value in meta:
        out += gguf_string(key) + struct.pack("<I", vtype) + gguf_value(vtype, value)
    out += infos
    out += b"\0" * ((-len(out)) % ALIGNMENT)
    with open(os.path.join(folder, "model.gguf"), "wb") as f:
        f.write(out + b"".join(blobs))


if __name__ == "__main__":
    main()
