'use strict';
// Reads and writes NumPy .npy files (format versions 1.0, 2.0 and 3.0 on read,
// 1.0 on write), little-endian, C order, for the element types ONNX models
// exchange with onnxruntime: float32, float16, float64, int64, int32, int16,
// int8, uint8, uint16, uint32, uint64 and bool. A float16 array is held as raw Uint16 bits,
// as onnxruntime-node takes it.

const MAGIC = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]);  // \x93NUMPY

// npy 'descr' (without the byte-order character) <-> onnxruntime's type name
// and the typed array that holds the elements.
const DTYPES = [
  { descr: 'f4', ort: 'float32', array: Float32Array },
  { descr: 'f2', ort: 'float16', array: Uint16Array },
  { descr: 'f8', ort: 'float64', array: Float64Array },
  { descr: 'i8', ort: 'int64', array: BigInt64Array },
  { descr: 'i4', ort: 'int32', array: Int32Array },
  { descr: 'i2', ort: 'int16', array: Int16Array },
  { descr: 'i1', ort: 'int8', array: Int8Array },
  { descr: 'u1', ort: 'uint8', array: Uint8Array },
  { descr: 'u2', ort: 'uint16', array: Uint16Array },
  { descr: 'u4', ort: 'uint32', array: Uint32Array },
  { descr: 'u8', ort: 'uint64', array: BigUint64Array },
  { descr: 'b1', ort: 'bool', array: Uint8Array },
];

function dtypeByDescr(descr) {
  // '<f4', '|u1', '|b1', '=f4' (native is little-endian on every machine kiln runs on).
  const order = descr[0];
  const code = descr.slice(1);
  if (order === '>' && code !== 'i1' && code !== 'u1' && code !== 'b1') {
    throw new Error(`big-endian .npy arrays are not supported (descr '${descr}')`);
  }
  const d = DTYPES.find((t) => t.descr === code);
  if (!d) throw new Error(`unsupported .npy element type '${descr}'`);
  return d;
}

function dtypeByOrtType(ortType) {
  const d = DTYPES.find((t) => t.ort === ortType);
  if (!d) throw new Error(`element type '${ortType}' cannot be written as .npy`);
  return d;
}

// Parses the header dictionary, e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (1, 3), }
function parseHeader(text, file) {
  const descr = /'descr'\s*:\s*'([^']+)'/.exec(text);
  const fortran = /'fortran_order'\s*:\s*(True|False)/.exec(text);
  const shape = /'shape'\s*:\s*\(([^)]*)\)/.exec(text);
  if (!descr || !fortran || !shape) throw new Error(`${file}: malformed .npy header: ${text.trim()}`);
  if (fortran[1] === 'True') throw new Error(`${file}: Fortran-order .npy arrays are not supported`);
  const dims = shape[1].split(',').map((s) => s.trim()).filter((s) => s.length > 0).map((s) => {
    if (!/^\d+$/.test(s)) throw new Error(`${file}: bad dimension '${s}' in .npy shape`);
    return Number(s);
  });
  return { descr: descr[1], dims };
}

// Returns { type (onnxruntime name), dims, data (typed array over a copy of the bytes) }.
function parseNpy(buf, file = '<buffer>') {
  if (buf.length < 10 || !buf.subarray(0, 6).equals(MAGIC)) throw new Error(`${file}: not a .npy file`);
  const major = buf[6];
  let headerLen;
  let headerStart;
  if (major === 1) {
    headerLen = buf.readUInt16LE(8);
    headerStart = 10;
  } else if (major === 2 || major === 3) {
    if (buf.length < 12) throw new Error(`${file}: truncated .npy header`);
    headerLen = buf.readUInt32LE(8);
    headerStart = 12;
  } else {
    throw new Error(`${file}: unsupported .npy format version ${major}`);
  }
  if (headerStart + headerLen > buf.length) throw new Error(`${file}: truncated .npy header`);
  const header = parseHeader(buf.toString(major === 3 ? 'utf8' : 'latin1', headerStart, headerStart + headerLen), file);
  const dtype = dtypeByDescr(header.descr);
  const count = header.dims.reduce((a, b) => a * b, 1);
  const bytes = count * dtype.array.BYTES_PER_ELEMENT;
  const dataStart = headerStart + headerLen;
  if (buf.length - dataStart !== bytes) {
    throw new Error(`${file}: ${buf.length - dataStart} data bytes where shape [${header.dims}] of '${header.descr}' needs ${bytes}`);
  }
  // Copy into a fresh, aligned buffer: typed arrays need an aligned offset.
  const ab = new ArrayBuffer(bytes);
  new Uint8Array(ab).set(buf.subarray(dataStart, dataStart + bytes));
  return { type: dtype.ort, dims: header.dims, data: new dtype.array(ab) };
}

function readNpy(file) {
  return parseNpy(require('fs').readFileSync(file), file);
}

// Encodes a typed array of the given onnxruntime type and dims as .npy 1.0.
function encodeNpy(ortType, dims, data) {
  const dtype = dtypeByOrtType(ortType);
  const order = dtype.array.BYTES_PER_ELEMENT === 1 ? '|' : '<';
  const shape = dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(', ')})`;
  let header = `{'descr': '${order}${dtype.descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  // Magic (6) + version (2) + length (2) + header + '\n', padded to 64 bytes.
  const unpadded = 10 + header.length + 1;
  header += ' '.repeat((64 - (unpadded % 64)) % 64) + '\n';
  const head = Buffer.alloc(10);
  MAGIC.copy(head, 0);
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  let body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  if (ortType === 'bool') body = Buffer.from(body.map((b) => (b ? 1 : 0)));
  return Buffer.concat([head, Buffer.from(header, 'latin1'), body]);
}

function writeNpy(file, ortType, dims, data) {
  require('fs').writeFileSync(file, encodeNpy(ortType, dims, data));
}

module.exports = { parseNpy, readNpy, encodeNpy, writeNpy, DTYPES };
