"""Writes tensors as an F32 safetensors file: what the reference scripts
give kiln as a Hugging Face model's weights."""
import json
import struct


def write_safetensors(path, tensors):
    """tensors: name -> torch tensor; written in name order, F32, 8-byte aligned header."""
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        data = tensors[name].contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
