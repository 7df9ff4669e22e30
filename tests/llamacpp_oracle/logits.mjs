// llama.cpp's logits for every position of a prompt, through node-llama-cpp
// (its CPU build): the independent reference for kiln's GGUF runs.
//
// usage: node logits.mjs MODEL.gguf IDS.json CONTEXT_SIZE > OUT.json
// IDS.json holds {"input_ids": [...], "vocab_size": V}; OUT.json gets {"n_ctx": N, "logits":
// [[...vocab floats], ...]}, one row per prompt token, with the context size
// llama.cpp actually allocated (it rounds up), which decides its RoPE factors.
import fs from "node:fs";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const [modelPath, idsPath, contextSize] = process.argv.slice(2);
const {input_ids: ids, vocab_size: vocab} = JSON.parse(fs.readFileSync(idsPath, "utf8"));
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
// An f32 KV cache (llama.cpp keeps f16 by default), so the comparison is of fp32 math.
const context = await model.createContext({
  contextSize: Number(contextSize), threads: 1, flashAttention: false,
  experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32"});
const outputs = await context.getSequence().controlledEvaluate(ids.map(t => [t, {generateNext: {logits: true}}]));
const logits = outputs.map(o => {
  const row = new Array(vocab).fill(0);
  for (const [token, value] of o.next.logits) row[token] = value;
  return row;
});
process.stdout.write(JSON.stringify({n_ctx: context.contextSize, logits}));
await llama.dispose();
