#!/usr/bin/env python3
"""Writes a tiny Llama GGUF whose linear matrices are i-quant blocks of random bytes.

usage: iquant_model_gguf.py SOURCE.gguf TYPE OUT.gguf [SEED]

Any bytes are valid IQ2/IQ3 blocks, so a model of random blocks (with each
block's fp16 scale d set small enough that the weights have a sane size) is
a model llama.cpp and kiln must compute alike. SOURCE is a Llama GGUF whose
tokenizer metadata is kept; the shapes are chosen here so that every
matrix row is whole blocks of 256: hidden 256, FFN 512, 2 layers, 4 heads of
64 (2 KV heads). TYPE is iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s or iq4_xs.
Embeddings, norms and the output matrix stay F32.
"""
import struct
import sys

import numpy as np

# ggml type id, block bytes, the fp16 d that gives weights of about 0.06
# (1 / sqrt(256)): d times the mean step factor times the mean magnitude,
# and llama.cpp's general.file_type for a model of that type.
TYPES = {
    "iq2_xxs": (16, 66, 0.0015, 19),
    "iq2_xs": (17, 74, 0.0015, 20),
    "iq2_s": (22, 82, 0.0015, 28),
    "iq3_xxs": (18, 98, 0.0005, 23),
    "iq3_s": (21, 110, 0.0005, 26),
    "iq4_xs": (23, 136, 0.000075, 30),  # a vector-kernel type to compare with
}
HIDDEN, FFN, LAYERS, HEADS, KV_HEADS, HEAD_DIM = 256, 512, 2, 4, 2, 64
UINT32, FLOAT32, STRING, ARRAY = 4, 6, 8, 9
SCALAR_BYTES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
ALIGN = 32


class Reader:
    def __init__(self, data):
        self.data, self.at = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return v[0] if len(v) == 1 else v

    def string(self):
        n = self.take("<Q")
        s = self.data[self.at:self.at + n].decode()
        self.at += n
        return s

    def skip_value(self, vtype):
        if vtype == STRING:
            self.string()
        elif vtype == ARRAY:
            element, count = self.take("<IQ")
            for _ in range(count):
                self.skip_value(element)
        else:
            self.at += SCALAR_BYTES[vtype]


def read_metadata(path):
    """The source's key-value pairs as (key, type, raw value bytes)."""
    r = Reader(open(path, "rb").read())
    if r.take("<4s") != b"GGUF":
        sys.exit("%s: not a GGUF file" % path)
    r.take("<I")
    _, kv_count = r.take("<QQ")
    out = []
    for _ in range(kv_count):
        key = r.string()
        vtype = r.take("<I")
        begin = r.at
        r.skip_value(vtype)
        out.append((key, vtype, r.data[begin:r.at]))
    return out


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def random_blocks(rng, ggml_type, block_bytes, d, rows, cols):
    blocks = rows * cols // 256
    raw = rng.integers(0, 256, size=(blocks, block_bytes), dtype=np.uint8)
    # d first in every block: positive or negative, 0.5x to 1.5x the target.
    scale = (d * rng.uniform(0.5, 1.5, blocks) * rng.choice([-1.0, 1.0], blocks)).astype(np.float16)
    raw[:, 0:2] = scale.view(np.uint8).reshape(blocks, 2)
    return raw.tobytes()


def main():
    if len(sys.argv) < 4 or sys.argv[2] not in TYPES:
        sys.exit(__doc__)
    source, type_name, out_path = sys.argv[1:4]
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    ggml_type, block_bytes, d, file_type = TYPES[type_name]
    rng = np.random.default_rng(seed)

    shape_keys = {
        "llama.embedding_length": HIDDEN, "llama.feed_forward_length": FFN, "llama.block_count": LAYERS,
        "llama.attention.head_count": HEADS, "llama.attention.head_count_kv": KV_HEADS,
        "llama.attention.key_length": HEAD_DIM, "llama.attention.value_length": HEAD_DIM,
        "llama.rope.dimension_count": HEAD_DIM,
    }
    metadata = []
    vocab = None
    for key, vtype, raw in read_metadata(source):
        if key in shape_keys:
            raw = struct.pack("<I", shape_keys[key])
        if key == "llama.vocab_size":
            vocab = struct.unpack("<I", raw)[0]
        if key == "general.file_type":
            raw = struct.pack("<I", file_type)
        metadata.append((key, vtype, raw))
    if vocab is None:
        sys.exit("%s: no llama.vocab_size" % source)

    # (name, [ne0, ne1], ggml type, bytes): ne0 is the row (input) length.
    tensors = []

    def f32(name, shape, values):
        tensors.append((name, shape, 0, values.astype(np.float32).tobytes()))

    def quant(name, rows, cols):
        tensors.append((name, [cols, rows], ggml_type, random_blocks(rng, ggml_type, block_bytes, d, rows, cols)))

    f32("token_embd.weight", [HIDDEN, vocab], rng.normal(0, 1, (vocab, HIDDEN)))
    for i in range(LAYERS):
        p = "blk.%d." % i
        f32(p + "attn_norm.weight", [HIDDEN], rng.uniform(0.8, 1.2, HIDDEN))
        quant(p + "attn_q.weight", HEADS * HEAD_DIM, HIDDEN)
        quant(p + "attn_k.weight", KV_HEADS * HEAD_DIM, HIDDEN)
        quant(p + "attn_v.weight", KV_HEADS * HEAD_DIM, HIDDEN)
        quant(p + "attn_output.weight", HIDDEN, HEADS * HEAD_DIM)
        f32(p + "ffn_norm.weight", [HIDDEN], rng.uniform(0.8, 1.2, HIDDEN))
        quant(p + "ffn_gate.weight", FFN, HIDDEN)
        quant(p + "ffn_up.weight", FFN, HIDDEN)
        quant(p + "ffn_down.weight", HIDDEN, FFN)
    f32("output_norm.weight", [HIDDEN], rng.uniform(0.8, 1.2, HIDDEN))
    f32("output.weight", [HIDDEN, vocab], rng.normal(0, 1.0 / 16, (vocab, HIDDEN)))

    header = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata))
    for key, vtype, raw in metadata:
        header += gguf_string(key) + struct.pack("<I", vtype) + raw
    offset = 0
    for name, shape, t, data in tensors:
        header += gguf_string(name) + struct.pack("<I", len(shape)) + b"".join(struct.pack("<Q", n) for n in shape)
        header += struct.pack("<IQ", t, offset)
        offset += (len(data) + ALIGN - 1) // ALIGN * ALIGN
    with open(out_path, "wb") as out:
        out.write(header + b"\0" * (-len(header) % ALIGN))
        for _, _, _, data in tensors:
            out.write(data + b"\0" * (-len(data) % ALIGN))


if __name__ == "__main__":
    main()
