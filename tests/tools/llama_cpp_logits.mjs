// The logits llama.cpp computes, through the npm package node-llama-cpp, for
// the prompt of a reference.json (tests/tools/gemma_reference.py) and a GGUF
// file (tests/tools/gemma_to_gguf.py), at every position, on the CPU; then
// its greedy continuation. Writes {"logits": [[...], ...], "greedy": [...]}.
//
// usage: NODE_PATH=DIR/node_modules node llama_cpp_logits.mjs MODEL.gguf reference.json OUT.json
// (DIR: where `npm install node-llama-cpp` ran)
import { createRequire } from "node:module";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

const [modelPath, referencePath, outPath] = process.argv.slice(2);
const require = createRequire(path.join(process.env.NODE_PATH ?? process.cwd(), "x.js"));
const { getLlama } = await import(require.resolve("node-llama-cpp"));

const reference = JSON.parse(readFileSync(referencePath, "utf8"));
const ids = reference.input_ids;
const llama = await getLlama({ gpu: false, build: "never" });
const model = await llama.loadModel({ modelPath });
const vocab = reference.logits[0].length;

async function logitsOf(tokens) {
  const context = await model.createContext({ contextSize: 64, batchSize: 64, threads: 1 });
  const sequence = context.getSequence();
  const input = tokens.map((t) => [t, { generateNext: { logits: true } }]);
  const out = await sequence.controlledEvaluate(input);
  const rows = out.map((o) => {
    const row = new Array(Number(vocab)).fill(0);
    for (const [token, logit] of o.next.logits) row[token] = logit;
    return row;
  });
  await context.dispose();
  return rows;
}

const logits = await logitsOf(ids);
const greedy = [];
const seq = [...ids];
for (let i = 0; i < reference.greedy.length; ++i) {
  const last = (await logitsOf(seq)).at(-1);
  let best = 0;
  for (let t = 1; t < last.length; ++t) if (last[t] > last[best]) best = t;
  greedy.push(best);
  seq.push(best);
}
writeFileSync(outPath, JSON.stringify({ logits, greedy }));
await model.dispose();
