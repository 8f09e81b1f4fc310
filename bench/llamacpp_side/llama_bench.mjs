// llama-bench-style throughput of llama.cpp (node-llama-cpp's CPU build):
// ppN = N prompt tokens as one batch, tgN = N tokens one per evaluation, each
// after `depth` tokens already in the cache (not timed, as llama-bench's -d;
// the fill's seconds are reported as fill_s).
//   node llama_bench.mjs --model M.gguf [--pp 512] [--tg 128] [--depth 0]
//        [--ctk f16] [--ctv f16] [--threads 1]      -> one JSON line on stdout
import os from "node:os";
import path from "node:path";
import {pathToFileURL} from "node:url";

const a = {pp: 512, tg: 128, depth: 0, ctk: "f16", ctv: "f16", threads: 1};
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i += 2) a[argv[i].replace(/^--/, "")] = argv[i + 1];
for (const k of ["pp", "tg", "depth", "threads"]) a[k] = +a[k];
if (!a.model) throw new Error("--model is required");
const kTypes = {f16: "F16", q8_0: "Q8_0", q5_1: "Q5_1", q5_0: "Q5_0", q4_1: "Q4_1", q4_0: "Q4_0"};
const nodeDir = process.env.HQEKV_LLAMACPP_NODE_DIR || path.join(path.dirname(new URL(import.meta.url).pathname), "node");
const {getLlama, LlamaLogLevel} = await import(
  pathToFileURL(path.join(nodeDir, "node_modules/node-llama-cpp/dist/index.js")).href);
const llama = await getLlama({gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true,
                              progressLogs: false, logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath: a.model});
const vocab = 1000;  // ids 3..1002: inside every vocabulary this is run on
const tok = (i) => 3 + ((i * 7919) % vocab);  // fixed ids, no special tokens
async function fresh() {
  const ctx = await model.createContext({contextSize: a.depth + Math.max(a.pp, a.tg) + 16, batchSize: Math.max(a.pp, 512),
    threads: {ideal: a.threads, min: a.threads}, flashAttention: true,
    experimentalKvCacheKeyType: kTypes[a.ctk], experimentalKvCacheValueType: kTypes[a.ctv]});
  const seq = ctx.getSequence();
  const t0 = performance.now();
  if (a.depth) await seq.controlledEvaluate(Array.from({length: a.depth}, (_, i) => tok(i)));
  return {ctx, seq, fill: (performance.now() - t0) / 1000};
}
const out = {engine: "llama.cpp", model: a.model, depth: a.depth, ctk: a.ctk, ctv: a.ctv, threads: a.threads,
             loadavg: os.loadavg(), version: llama.llamaCppRelease, fill_s: {}};
if (a.pp) {
  const {ctx, seq, fill} = await fresh();
  out.fill_s[`pp${a.pp}`] = fill;
  const items = Array.from({length: a.pp}, (_, i) => tok(a.depth + i));
  items[a.pp - 1] = [items[a.pp - 1], {generateNext: {logits: true}}];
  const t0 = performance.now();
  await seq.controlledEvaluate(items);
  out[`pp${a.pp}`] = a.pp / ((performance.now() - t0) / 1000);
  await ctx.dispose();
}
if (a.tg) {
  const {ctx, seq, fill} = await fresh();
  out.fill_s[`tg${a.tg}`] = fill;
  const t0 = performance.now();
  for (let i = 0; i < a.tg; ++i) await seq.controlledEvaluate([[tok(a.depth + i), {generateNext: {logits: true}}]]);
  out[`tg${a.tg}`] = a.tg / ((performance.now() - t0) / 1000);
  await ctx.dispose();
}
console.log(JSON.stringify(out));
await model.dispose();
await llama.dispose();
