#!/usr/bin/env python3
"""Writes the small seed inputs of the format fuzz targets (tests/fuzz/seeds/).

The seeds are committed; rerun this only to change them (with KILN_BINARY
naming a kiln executable, the compiled-artifact seeds too). Each is a complete,
valid file a few hundred bytes long, covering the features the readers
handle: every GGUF value type, nested arrays, a custom alignment, block
types, llama/qwen metadata; every safetensors dtype, metadata, scalars.
"""
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# GGUF value type ids.
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
SCALAR_FORMATS = {U8: "B", I8: "b", U16: "H", I16: "h", U32: "I", I32: "i", F32: "f", BOOL: "?",
                  U64: "Q", I64: "q", F64: "d"}


def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def gguf_value(vtype, value):
    if vtype == STRING:
        return gguf_string(value)
    if vtype == ARRAY:
        element_type, items = value
        out = struct.pack("<IQ", element_type, len(items))
        return out + b"".join(gguf_value(element_type, item) for item in items)
    return struct.pack("<" + SCALAR_FORMATS[vtype], value)


def gguf(metadata, tensors, version=3, alignment=32):
    """metadata: [(key, type, value)]; tensors: [(name, dims innermost first, ggml type, data bytes)]."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(metadata))
    for key, vtype, value in metadata:
        out += gguf_string(key) + struct.pack("<I", vtype) + gguf_value(vtype, value)
    offset = 0
    offsets = []
    for name, dims, ggml_type, data in tensors:
        offsets.append(offset)
        out += gguf_string(name) + struct.pack("<I", len(dims)) + struct.pack("<%dQ" % len(dims), *dims)
        out += struct.pack("<IQ", ggml_type, offset)
        offset += (len(data) + alignment - 1) // alignment * alignment
    out += b"\0" * (-len(out) % alignment)
    for (name, dims, ggml_type, data), start in zip(tensors, offsets):
        out += data + b"\0" * (-len(data) % alignment)
    return out


def f32(*values):
    return struct.pack("<%df" % len(values), *values)


def write(target, name, data):
    folder = os.path.join(HERE, "seeds", target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def gguf_seeds():
    every_type = [
        ("t.u8", U8, 7), ("t.i8", I8, -7), ("t.u16", U16, 700), ("t.i16", I16, -700),
        ("t.u32", U32, 70000), ("t.i32", I32, -70000), ("t.f32", F32, 0.5), ("t.bool", BOOL, True),
        ("t.string", STRING, "héllo"), ("t.u64", U64, 2**40), ("t.i64", I64, -2**40), ("t.f64", F64, 0.25),
        ("t.strings", ARRAY, (STRING, ["a b", "", "Ġx"])),
        ("t.nested", ARRAY, (ARRAY, [(I32, [1, 2]), (I32, [])])),
        ("general.file_type", U32, 2),
    ]
    q4_0 = struct.pack("<H", 0x3800) + bytes(range(16))  # one block, d = 0.5
    q6_k = bytes(range(128)) + bytes(64) + bytes(range(16)) + struct.pack("<H", 0x3C00)
    tensors = [("a", [4], 0, f32(1, 2, 3, 4)), ("q", [32], 2, q4_0), ("k", [256], 14, q6_k)]
    write("gguf_fuzz", "every_type.gguf", gguf(every_type, tensors))
    write("gguf_fuzz", "v2_aligned64.gguf",
          gguf([("general.alignment", U32, 64), ("x", ARRAY, (F32, [1.0, 2.0]))],
               [("b", [2, 2], 1, struct.pack("<4H", 0x3C00, 0, 0xC000, 1))], version=2, alignment=64))

    # A two-layer model each architecture's config reader accepts.
    def model(arch, hidden=8, ff=16, vocab=8, tied=True):
        md = [("general.architecture", STRING, arch),
              (arch + ".context_length", U32, 64), (arch + ".embedding_length", U32, hidden),
              (arch + ".block_count", U32, 1), (arch + ".feed_forward_length", U32, ff),
              (arch + ".attention.head_count", U32, 2), (arch + ".attention.head_count_kv", U32, 1),
              (arch + ".attention.layer_norm_rms_epsilon", F32, 1e-6), (arch + ".rope.freq_base", F32, 1e4),
              (arch + ".rope.scaling.type", STRING, "linear"), (arch + ".rope.scaling.factor", F32, 2.0),
              ("tokenizer.ggml.tokens", ARRAY, (STRING, ["<s>", "</s>", "a", "b", "c", "d", "e", "f"])),
              ("tokenizer.ggml.bos_token_id", U32, 0), ("tokenizer.ggml.eos_token_id", U32, 1)]
        head = hidden // 2
        def mat(rows, cols):  # f16, element i = 0.01 * 2^(i % 5): 0x211F is 0.01, each 0x400 an exponent step
            return struct.pack("<%dH" % (rows * cols), *[0x211F + 0x400 * (i % 5) for i in range(rows * cols)])
        t = [("token_embd.weight", [hidden, vocab], 1, mat(vocab, hidden)),
             ("blk.0.attn_norm.weight", [hidden], 0, f32(*([1.0] * hidden))),
             ("blk.0.attn_q.weight", [hidden, hidden], 1, mat(hidden, hidden)),
             ("blk.0.attn_k.weight", [hidden, head], 1, mat(head, hidden)),
             ("blk.0.attn_v.weight", [hidden, head], 1, mat(head, hidden)),
             ("blk.0.attn_output.weight", [hidden, hidden], 1, mat(hidden, hidden)),
             ("blk.0.ffn_norm.weight", [hidden], 0, f32(*([1.0] * hidden))),
             ("blk.0.ffn_gate.weight", [hidden, ff], 1, mat(ff, hidden)),
             ("blk.0.ffn_up.weight", [hidden, ff], 1, mat(ff, hidden)),
             ("blk.0.ffn_down.weight", [ff, hidden], 1, mat(hidden, ff)),
             ("output_norm.weight", [hidden], 0, f32(*([1.0] * hidden)))]
        if arch == "qwen3":
            t += [("blk.0.attn_q_norm.weight", [head], 0, f32(*([1.0] * head))),
                  ("blk.0.attn_k_norm.weight", [head], 0, f32(*([1.0] * head)))]
        if not tied:
            t.append(("output.weight", [hidden, vocab], 1, mat(vocab, hidden)))
        return gguf(md, t)
    write("gguf_fuzz", "llama.gguf", model("llama", tied=False))
    write("gguf_fuzz", "qwen3.gguf", model("qwen3"))


def safetensors(tensors, metadata=None):
    """tensors: [(name, dtype, shape, data bytes)], laid out back to back."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    offset = 0
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(t[3] for t in tensors)


def safetensors_seeds():
    sizes = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I64": 8, "I32": 4,
             "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
    every = [("t." + d, d, [2, 2], bytes(range(4 * n))) for d, n in sizes.items()]
    write("safetensors_fuzz", "every_dtype.safetensors", safetensors(every, {"format": "pt"}))
    write("safetensors_fuzz", "scalar_and_empty.safetensors",
          safetensors([("s", "F32", [], f32(2.5)), ("e", "BF16", [0, 3], b"")]))
    write("safetensors_fuzz", "model.safetensors",
          safetensors([("model.embed_tokens.weight", "BF16", [4, 8], bytes(64)),
                       ("model.layers.0.input_layernorm.weight", "F32", [8], f32(*([1.0] * 8)))],
                      {"format": "pt"}))


def onnx_seeds():
    """A few of the ONNX reader tests' models (written by onnx.helper and
    torch.onnx.export through tests/unit/onnx/make_onnx_models.py)."""
    import subprocess
    import tempfile

    script = os.path.join(HERE, "..", "unit", "onnx", "make_onnx_models.py")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, script, tmp], check=True)
        for name in ["basic", "if_subgraph", "nested3", "torch_tiny", "external", "cycle"]:
            with open(os.path.join(tmp, name + ".onnx"), "rb") as f:
                write("onnx_fuzz", name + ".onnx", f.read())


def kv_transfer_seeds():
    """One of each message the decode side of a prefill/decode split reads:
    a handshake, a whole KV block of four tokens (layers [0, 2)), one
    layer's slice of it, a block without data bytes, a transfer end."""
    version = 2
    model_hash = b"0123456789abcdef"
    write("kv_transfer_fuzz", "handshake.bin",
          struct.pack("<III", 0x4b564948, version, len(model_hash)) + model_hash +
          struct.pack("<iiqqq", 16, 0, 2, 4, 8))
    tokens = [1, 2, 3, 4]

    def block(layer_begin, layer_end, data):
        return (struct.pack("<IIQiQQiiI", 0x4b56424b, version, 7, 0, 0, 0x1234, layer_begin, layer_end,
                            len(tokens)) +
                struct.pack("<%di" % len(tokens), *tokens) + struct.pack("<Q", len(data)) + data)

    data = f32(*[0.5 * i for i in range(16)])
    write("kv_transfer_fuzz", "block.bin", block(0, 2, data))
    write("kv_transfer_fuzz", "layer_slice.bin", block(1, 2, data[:len(data) // 2]))
    write("kv_transfer_fuzz", "block_without_data.bin", block(0, 1, b""))
    write("kv_transfer_fuzz", "end.bin", struct.pack("<IIQi", 0x4b56454e, version, 7, 1))


def artifact_section(data, name):
    """The bytes of section `name` of an artifact (format/artifact_file.h:
    the table's offset and size at header bytes 16 and 24; 64-byte entries
    of a 32-byte name, then offset and size)."""
    table_offset, table_bytes = struct.unpack_from("<QQ", data, 16)
    for e in range(table_offset, table_offset + table_bytes, 64):
        entry_name = data[e:e + 32].rstrip(b"\0").decode()
        offset, size = struct.unpack_from("<QQ", data, e + 32)
        if entry_name == name:
            return data[offset:offset + size]
    raise KeyError(name)


def artifact_seeds(kiln):
    """A compiled artifact of generated weights of a one-layer model of
    hidden size 32, and one of a tiny ONNX graph, written by `kiln compile`
    (the kiln binary given)."""
    import subprocess
    import tempfile

    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 32,
              "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
              "num_key_value_heads": 1, "vocab_size": 32, "max_position_embeddings": 64,
              "rms_norm_eps": 1e-6, "tie_word_embeddings": True}
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump(config, f)
        for dtype in ["f32", "q8_0"]:
            out = os.path.join(tmp, dtype + ".kiln")
            subprocess.run([kiln, "compile", "--load-format", "dummy", "-m", tmp, "--dtype", dtype,
                            "-o", out], check=True, stdout=subprocess.DEVNULL)
            with open(out, "rb") as f:
                data = f.read()
            write("artifact_fuzz", "tiny-" + dtype + ".kiln", data)
            write("compilation_fuzz", "tiny-" + dtype + ".kcmp", artifact_section(data, "compiled"))
        # An ONNX graph's artifact: its graph, plan and convolution weights
        # in their kernel's layout as sections.
        script = os.path.join(HERE, "..", "unit", "onnx", "make_onnx_models.py")
        subprocess.run([sys.executable, script, tmp], check=True)
        out = os.path.join(tmp, "torch_tiny.kiln")
        subprocess.run([kiln, "compile", os.path.join(tmp, "torch_tiny.onnx"), "--input-shape", "image:1,3,8,8",
                        "-o", out], check=True, stdout=subprocess.DEVNULL)
        with open(out, "rb") as f:
            data = f.read()
        write("artifact_fuzz", "torch_tiny_onnx.kiln", data)
        write("compilation_fuzz", "torch_tiny_onnx.kcmp", artifact_section(data, "compiled"))


def tokenizer_spec(flavor, pieces, kinds, scores, merges, normalizer, pre_tokenizer, added, chat_template):
    """A compiled tokenizer (src/tokenizer/tokenizer_spec_codec.cc's layout)."""
    def string(s):
        b = s.encode("utf-8") if isinstance(s, str) else s
        return struct.pack("<I", len(b)) + b
    out = struct.pack("<IIB", 0x4B4F544B, 1, flavor)
    out += struct.pack("<I", len(pieces)) + b"".join(string(p) for p in pieces)
    out += struct.pack("<I", len(kinds)) + bytes(kinds)
    out += struct.pack("<I", len(scores)) + b"".join(struct.pack("<f", x) for x in scores)
    out += struct.pack("<I", len(merges)) + b"".join(string(a) + string(b) for a, b in merges)
    out += struct.pack("<BBBi", 0, 0, 0, -1)  # byte_fallback, fuse_unk, ignore_merges, unk_id
    out += struct.pack("<I", len(normalizer)) + b"".join(normalizer)
    out += struct.pack("<I", len(pre_tokenizer)) + b"".join(pre_tokenizer)
    out += struct.pack("<B", 0)  # strip_leading_space
    out += struct.pack("<I", len(added))
    for token_id, content, special in added:
        out += struct.pack("<i", token_id) + string(content) + struct.pack("<BBBBB", special, 0, 0, 0, 0)
    out += struct.pack("<B", 1)  # normalize_added_token_patterns
    out += struct.pack("<iiBB", 0, 1, 0, 0)  # bos, eos, add_bos, add_eos
    out += struct.pack("<I", 1) + struct.pack("<i", 1)  # end-of-generation ids
    return out + string(chat_template)


def tokenizer_spec_seeds():
    """A byte-level BPE (NFC, a split pattern, the byte-level prefix) and a
    SentencePiece-style one (scores, Prepend and Replace, Metaspace)."""
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    pieces = ["<s>", "</s>", "\u0120"] + letters + ["ab", "abc", "\u0120a"]
    kinds = [2, 2] + [0] * (len(pieces) - 2)
    merges = [("a", "b"), ("ab", "c"), ("\u0120", "a")]
    nfc = struct.pack("<BB", 0, 0)
    pattern = " ?\\p{L}+".encode()
    split = struct.pack("<BBI", 0, 0, len(pattern)) + pattern + struct.pack("<BB", 1, 0)
    prefix = struct.pack("<B", 1)
    write("tokenizer_spec_fuzz", "byte_level.bin",
          tokenizer_spec(0, pieces, kinds, [], merges, [nfc], [prefix, split], [(0, "<s>", 1), (1, "</s>", 1)],
                         "{% for m in messages %}{{ m.content }}{% endfor %}"))
    sp_pieces = ["<unk>", "<s>", "</s>", "\u2581", "\u2581a", "a", "b"]
    sp_kinds = [3, 2, 2, 0, 0, 0, 0]
    prepend = struct.pack("<B", 1) + struct.pack("<I", 1) + b" "
    replace = struct.pack("<B", 2) + struct.pack("<I", 1) + b" " + struct.pack("<I", 3) + "\u2581".encode()
    metaspace = struct.pack("<B", 2) + struct.pack("<I", 3) + "\u2581".encode() + struct.pack("<BB", 1, 0)
    write("tokenizer_spec_fuzz", "sentencepiece.bin",
          tokenizer_spec(2, sp_pieces, sp_kinds, [0.0, 0.0, 0.0, -1.0, -2.0, -3.0, -4.0], [],
                         [prepend, replace], [metaspace], [(1, "<s>", 1), (2, "</s>", 1)], ""))


if __name__ == "__main__":
    gguf_seeds()
    safetensors_seeds()
    onnx_seeds()
    kv_transfer_seeds()
    tokenizer_spec_seeds()
    if os.environ.get("KILN_BINARY"):
        artifact_seeds(os.environ["KILN_BINARY"])
