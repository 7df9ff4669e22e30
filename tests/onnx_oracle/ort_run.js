#!/usr/bin/env node
'use strict';
// Runs ONNX models on onnxruntime's CPU execution provider (onnxruntime-node),
// the independent reference kiln's outputs are compared with.
//
//   node ort_run.js --model M.onnx --input NAME=FILE.npy ... --output-dir DIR
//                   [--threads 2] [--all-intermediates]
//       Writes every graph output as DIR/<output name>.npy, the name sanitized:
//       each character outside [A-Za-z0-9._-] becomes '_' (kiln run uses the
//       same rule). With --all-intermediates the model is first rewritten by
//       expose_intermediates.py so that every node output is a graph output.
//
//   node ort_run.js --jobs JOBS.json [--threads 2]
//       Many runs in one process: JOBS.json is a list of
//       {"model": "m.onnx", "inputs": {"x": "x.npy"}, "output_dir": "out",
//        "all_intermediates": false}; relative paths are relative to
//       JOBS.json's folder. Prints one JSON line per job ({"job", "model",
//       "ok", "ms" or "error"}) and exits 1 if any job failed.
//
//   node ort_run.js --model M.onnx [--input NAME=FILE.npy ...]
//                   [--input-shape NAME:1,3,224,224] --bench N [--warmup W]
//       Latency of N runs after W warm-up runs, printed as JSON on stdout
//       (p50/p90/p99/mean/min in ms). Inputs not given are filled with
//       seeded random values of the model's (or --input-shape's) shape.
//
// Sessions use onnxruntime's defaults: graphOptimizationLevel 'all',
// sequential execution; intraOpNumThreads is --threads (2 unless given).
// --optimization disabled|basic|extended|all changes the graph optimization
// level (with 'disabled' a QDQ model runs as written: Quantize/Dequantize as
// separate float steps instead of fused int8 kernels).

const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync } = require('child_process');
const npy = require('./npy');

function loadOrt() {
  try {
    return require('onnxruntime-node');
  } catch (e) {
    const local = path.join(__dirname, 'node_modules', 'onnxruntime-node');
    if (fs.existsSync(local)) return require(local);
    throw new Error('onnxruntime-node is not installed (scripts/setup.sh installs it into tests/onnx_oracle/node_modules)');
  }
}
const ort = loadOrt();

function usage(message) {
  if (message) process.stderr.write(`ort_run: ${message}\n`);
  process.stderr.write('usage: node ort_run.js --model M.onnx --input NAME=FILE.npy ... --output-dir DIR [--all-intermediates]\n' +
                       '       node ort_run.js --jobs JOBS.json\n' +
                       '       node ort_run.js --model M.onnx [--input NAME=FILE.npy ...] [--input-shape NAME:D0,D1,..] --bench N [--warmup W]\n' +
                       '  all: [--threads N (2)] [--optimization disabled|basic|extended|all (all)]\n');
  process.exit(2);
}

function parseArgs(argv) {
  const a = { inputs: {}, inputShapes: {}, threads: 2, optimization: 'all', warmup: 5, allIntermediates: false };
  for (let i = 0; i < argv.length; ++i) {
    const flag = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) usage(`${flag} needs a value`);
      return argv[++i];
    };
    const count = (v) => {
      if (!/^\d+$/.test(v)) usage(`${flag} needs a whole number, got '${v}'`);
      return Number(v);
    };
    switch (flag) {
      case '--model': a.model = value(); break;
      case '--output-dir': a.outputDir = value(); break;
      case '--jobs': a.jobs = value(); break;
      case '--threads': a.threads = count(value()); break;
      case '--optimization': {
        a.optimization = value();
        if (!['disabled', 'basic', 'extended', 'all'].includes(a.optimization)) {
          usage(`--optimization is one of disabled, basic, extended, all; got '${a.optimization}'`);
        }
        break;
      }
      case '--bench': a.bench = count(value()); break;
      case '--warmup': a.warmup = count(value()); break;
      case '--all-intermediates': a.allIntermediates = true; break;
      case '--input': {
        const v = value();
        const eq = v.indexOf('=');
        if (eq <= 0) usage(`--input wants NAME=FILE.npy, got '${v}'`);
        a.inputs[v.slice(0, eq)] = v.slice(eq + 1);
        break;
      }
      case '--input-shape': {
        const v = value();
        const colon = v.lastIndexOf(':');
        if (colon <= 0) usage(`--input-shape wants NAME:D0,D1,..., got '${v}'`);
        const dims = v.slice(colon + 1).split(',').map((d) => {
          if (!/^\d+$/.test(d.trim())) usage(`bad dimension '${d}' in --input-shape ${v}`);
          return Number(d);
        });
        a.inputShapes[v.slice(0, colon)] = dims;
        break;
      }
      case '-h': case '--help': usage(); break;
      default: usage(`unknown argument '${flag}'`);
    }
  }
  if (a.threads < 1) usage('--threads must be at least 1');
  return a;
}

// The file name an output is written under, less '.npy' (kiln run follows the
// same rule): characters outside [A-Za-z0-9._-] become '_'; an empty name,
// '.' and '..' get a '_' in front.
function sanitizeName(name) {
  const s = name.replace(/[^A-Za-z0-9._-]/g, '_');
  return s === '' || s === '.' || s === '..' ? '_' + s : s;
}

// opts: { threads, optimization }
async function createSession(modelPath, opts) {
  return ort.InferenceSession.create(modelPath, {
    executionProviders: ['cpu'],
    intraOpNumThreads: opts.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: opts.optimization,
    logSeverityLevel: 3,  // errors only: old-opset notices would drown the job log
  });
}

// Rewrites the model with every node output exposed (expose_intermediates.py)
// into a temporary folder; returns the new path and a cleanup function.
function exposeIntermediates(modelPath) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ort-run-'));
  const out = path.join(dir, 'all_outputs.onnx');
  const python = process.env.KILN_PYTHON || '/usr/bin/python3';
  execFileSync(python, [path.join(__dirname, 'expose_intermediates.py'), modelPath, out],
               { stdio: ['ignore', 'ignore', 'inherit'] });
  return { path: out, cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

function feedsFromFiles(session, inputs, modelPath) {
  const feeds = {};
  for (const [name, file] of Object.entries(inputs)) {
    if (!session.inputNames.includes(name)) {
      throw new Error(`${modelPath} has no input '${name}' (its inputs: ${session.inputNames.join(', ')})`);
    }
    const t = npy.readNpy(file);
    feeds[name] = new ort.Tensor(t.type, t.data, t.dims);
  }
  return feeds;
}

function requireAllInputs(session, feeds, modelPath) {
  const missing = session.inputNames.filter((n) => !(n in feeds));
  if (missing.length > 0) throw new Error(`${modelPath}: no value given for input(s) ${missing.join(', ')}`);
}

// Writes each output; two names that sanitize to the same file are an error
// rather than one silently overwriting the other.
function writeOutputs(results, outputDir) {
  fs.mkdirSync(outputDir, { recursive: true });
  const written = new Map();
  for (const [name, tensor] of Object.entries(results)) {
    const file = sanitizeName(name) + '.npy';
    if (written.has(file)) throw new Error(`outputs '${written.get(file)}' and '${name}' both map to ${file}`);
    written.set(file, name);
    npy.writeNpy(path.join(outputDir, file), tensor.type, tensor.dims, tensor.data);
  }
  return written.size;
}

async function runOnce(job, opts) {
  let modelPath = job.model;
  let exposed = null;
  if (job.allIntermediates) {
    exposed = exposeIntermediates(modelPath);
    modelPath = exposed.path;
  }
  let session = null;
  try {
    session = await createSession(modelPath, opts);
    const feeds = feedsFromFiles(session, job.inputs, job.model);
    requireAllInputs(session, feeds, job.model);
    return writeOutputs(await session.run(feeds), job.outputDir);
  } finally {
    // A batch goes on after a failed job: its session must not stay alive.
    if (session) await session.release();
    if (exposed) exposed.cleanup();
  }
}

async function runJobs(jobsFile, opts) {
  const base = path.dirname(path.resolve(jobsFile));
  const jobs = JSON.parse(fs.readFileSync(jobsFile, 'utf8'));
  if (!Array.isArray(jobs)) throw new Error(`${jobsFile}: expected a JSON list of jobs`);
  const abs = (p) => path.resolve(base, p);
  let failed = 0;
  for (let i = 0; i < jobs.length; ++i) {
    const j = jobs[i];
    const t0 = process.hrtime.bigint();
    try {
      if (typeof j.model !== 'string' || typeof j.output_dir !== 'string') {
        throw new Error('a job needs "model" and "output_dir"');
      }
      const inputs = {};
      for (const [name, file] of Object.entries(j.inputs || {})) inputs[name] = abs(file);
      await runOnce({ model: abs(j.model), inputs, outputDir: abs(j.output_dir),
                      allIntermediates: !!j.all_intermediates }, opts);
      const ms = Number(process.hrtime.bigint() - t0) / 1e6;
      process.stdout.write(JSON.stringify({ job: i, model: j.model, ok: true, ms: +ms.toFixed(3) }) + '\n');
    } catch (e) {
      ++failed;
      process.stdout.write(JSON.stringify({ job: i, model: j.model, ok: false, error: String(e.message || e) }) + '\n');
    }
  }
  return failed;
}

// A small seeded generator (mulberry32) so that bench inputs are repeatable.
function seededRandom(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randomInput(meta, dims) {
  const count = dims.reduce((a, b) => a * b, 1);
  const rand = seededRandom(1234);
  switch (meta.type) {
    case 'float32': return new ort.Tensor('float32', Float32Array.from({ length: count }, () => rand() * 2 - 1), dims);
    case 'int64': return new ort.Tensor('int64', BigInt64Array.from({ length: count }, () => BigInt(Math.floor(rand() * 16))), dims);
    case 'int32': return new ort.Tensor('int32', Int32Array.from({ length: count }, () => Math.floor(rand() * 16)), dims);
    case 'uint8': return new ort.Tensor('uint8', Uint8Array.from({ length: count }, () => Math.floor(rand() * 256)), dims);
    case 'bool': return new ort.Tensor('bool', Uint8Array.from({ length: count }, () => (rand() < 0.5 ? 1 : 0)), dims);
    default: throw new Error(`cannot make a random '${meta.type}' input for '${meta.name}': give it with --input`);
  }
}

function percentile(sorted, p) {
  // Nearest rank on the sorted latencies.
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank];
}

async function bench(a) {
  const session = await createSession(a.model, a);
  const feeds = feedsFromFiles(session, a.inputs, a.model);
  for (const meta of session.inputMetadata) {
    if (meta.name in feeds) continue;
    let dims = a.inputShapes[meta.name];
    if (!dims) {
      if (!meta.shape || meta.shape.some((d) => typeof d !== 'number' || d < 0)) {
        throw new Error(`input '${meta.name}' has a dynamic shape [${meta.shape}]: give --input-shape ${meta.name}:D0,D1,...`);
      }
      dims = meta.shape;
    }
    feeds[meta.name] = randomInput(meta, dims);
  }
  for (let i = 0; i < a.warmup; ++i) await session.run(feeds);
  const ms = [];
  for (let i = 0; i < a.bench; ++i) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  const sorted = ms.slice().sort((x, y) => x - y);
  const r3 = (x) => +x.toFixed(3);
  const report = {
    runtime: 'onnxruntime-node',
    version: ort.env.versions.node,
    model: a.model,
    threads: a.threads,
    graph_optimization_level: a.optimization,
    warmup: a.warmup,
    runs: a.bench,
    p50_ms: r3(percentile(sorted, 50)),
    p90_ms: r3(percentile(sorted, 90)),
    p99_ms: r3(percentile(sorted, 99)),
    mean_ms: r3(ms.reduce((s, x) => s + x, 0) / ms.length),
    min_ms: r3(sorted[0]),
  };
  process.stdout.write(JSON.stringify(report) + '\n');
  await session.release();
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  if (a.jobs) {
    if (a.model || a.bench !== undefined) usage('--jobs runs alone (no --model or --bench)');
    return (await runJobs(a.jobs, a)) === 0 ? 0 : 1;
  }
  if (!a.model) usage('--model or --jobs is required');
  if (a.bench !== undefined) {
    if (a.bench < 1) usage('--bench needs at least 1 run');
    await bench(a);
    return 0;
  }
  if (!a.outputDir) usage('--output-dir is required');
  const n = await runOnce({ model: a.model, inputs: a.inputs, outputDir: a.outputDir,
                            allIntermediates: a.allIntermediates }, a);
  process.stderr.write(`ort_run: wrote ${n} output(s) to ${a.outputDir}\n`);
  return 0;
}

main().then((code) => { process.exitCode = code; }, (e) => {
  process.stderr.write(`ort_run: ${e.message || e}\n`);
  process.exitCode = 1;
});
