// llama.cpp's CPU speed on a GGUF file, through the npm package
// node-llama-cpp (its prebuilt llama.cpp), measured as `kiln bench latency`
// measures kiln: a prompt of text tokens prefilled, then output-len
// tokens decoded one forward pass at a time, each run in a fresh context; batched decode runs N sequences at
// once (node-llama-cpp puts their tokens in one batch). Prints JSON:
// {"prefill_tokens_per_s": [...], "decode_tokens_per_s": [...]}, one entry per run,
// and "cpu_library": the ggml CPU variant this process loaded.
//
// usage: NODE_PATH=tests/llamacpp_oracle/node_modules node bench/llamacpp/llamacpp_speed.mjs MODEL.gguf
//        [--threads 2] [--input-len 512] [--output-len 128] [--batch-size 1] [--runs 3]
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const args = process.argv.slice(2);
if (args.length < 1 || args[0].startsWith("--")) {
  console.error("usage: llamacpp_speed.mjs MODEL.gguf [--threads N] [--input-len N] [--output-len N] [--batch-size N] [--runs N]");
  process.exit(2);
}
const modelPath = args[0];
const option = (name, fallback) => {
  const i = args.indexOf(name);
  if (i < 0) return fallback;
  const v = Number(args[i + 1]);
  if (!Number.isInteger(v) || v < 1) {
    console.error(`${name} ${args[i + 1]}: expected a positive integer`);
    process.exit(2);
  }
  return v;
};
const threads = option("--threads", 2);
const inputLen = option("--input-len", 512);
const outputLen = option("--output-len", 128);
const batch = option("--batch-size", 1);
const runs = option("--runs", 3);

const require = createRequire(path.join(path.resolve(process.env.NODE_PATH ?? process.cwd()), "x.js"));
const { getLlama } = await import(require.resolve("node-llama-cpp"));
const llama = await getLlama({ gpu: false, build: "never", maxThreads: threads, logLevel: "error" });
const model = await llama.loadModel({ modelPath });

// Ordinary tokens: a passage of text tokenized by the model's own
// tokenizer, repeated to the length wanted (any vocabulary size).
const passage = model.tokenize(
  "The history of the river towns is written in their bridges, each one built where the water ran narrow " +
  "and the merchants could agree on a toll. ");
let next = 0;
const prompt = (n) => Array.from({ length: n }, () => passage[next++ % passage.length]);

// One token at a time, each evaluated as the next position (as llama.cpp's
// llama-bench measures generation: the forward passes, not its sampler).
async function decodeOne(sequence, tokens) {
  for (const token of tokens) await sequence.evaluateWithoutGeneratingNewTokens([token]);
  return tokens.length;
}

const prefill = [], decode = [];
for (let r = 0; r < runs; ++r) {
  const context = await model.createContext({
    contextSize: inputLen + outputLen + 16,
    batchSize: Math.max(inputLen, batch),
    sequences: batch,
    threads: { ideal: threads, min: threads },
  });
  const sequences = Array.from({ length: batch }, (_, i) => context.getSequence());
  const prompts = sequences.map(() => prompt(inputLen));
  let start = performance.now();
  await Promise.all(sequences.map((s, i) => s.evaluateWithoutGeneratingNewTokens(prompts[i].slice(0, -1))));
  const prefillSeconds = (performance.now() - start) / 1000;
  start = performance.now();
  const produced = await Promise.all(sequences.map((s, i) => decodeOne(s, [prompts[i].at(-1), ...prompt(outputLen - 1)])));
  const decodeSeconds = (performance.now() - start) / 1000;
  prefill.push((batch * (inputLen - 1)) / prefillSeconds);
  decode.push(produced.reduce((a, b) => a + b, 0) / decodeSeconds);
  await context.dispose();
}
// ggml picks the best CPU variant its directory holds at load; which one it
// mapped is the fact a side by side at one ISA level rests on.
const cpuLibrary = fs.readFileSync("/proc/self/maps", "utf8").split("\n")
  .map((line) => line.split(/\s+/).at(-1)).find((file) => /libggml-cpu-[^/]*\.so$/.test(file ?? ""));
console.log(JSON.stringify({ threads, input_len: inputLen, output_len: outputLen, batch_size: batch,
                             cpu_library: cpuLibrary ? path.basename(cpuLibrary) : null,
                             prefill_tokens_per_s: prefill, decode_tokens_per_s: decode }));
await model.dispose();
