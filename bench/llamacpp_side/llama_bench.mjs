// llama-bench-style throughput of llama.cpp (node-llama-cpp's CPU build):
// ppN = N prompt tokens as one batch, tgN = N tokens one per evaluation, each
// after `depth` tokens already in the cache (not timed, as llama-bench's -d;
// the fill's seconds are reported as fill_s).
//   node llama_bench.mjs --model M.gguf [--pp 512] [--tg 128] [--depth 0]
//        [--ctk f16] [--ctv f16] [--threads 1] [--fill-threads T] [--state FILE]
//                                                     -> one JSON line on stdout
// --fill-threads: the depth is filled in its own context with T threads (default
// --threads), saved with saveStateToFile and loaded into the timed context
// (threads = --threads), so a long fill may use more threads than the timed
// tests. --state FILE: the filled sequence state is kept in FILE (written after
// a fill when FILE does not exist, loaded instead of filling when it does; it
// must come from the same model, depth and K/V types: the JSON names it and
// fill_s is then null, with restore_s the load's seconds).
// cpu_ts: the same tokens per second of process CPU time (process.cpuUsage:
// user + system of every thread, llama.cpp's compute included), which on a
// time-shared machine does not count the time the process waited for a core.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {pathToFileURL} from "node:url";

const a = {pp: 512, tg: 128, depth: 0, ctk: "f16", ctv: "f16", threads: 1, "fill-threads": 0, state: ""};
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i += 2) a[argv[i].replace(/^--/, "")] = argv[i + 1];
for (const k of ["pp", "tg", "depth", "threads", "fill-threads"]) a[k] = +a[k];
if (!a["fill-threads"]) a["fill-threads"] = a.threads;
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
const makeContext = (threads) => model.createContext({contextSize: a.depth + Math.max(a.pp, a.tg) + 16,
  batchSize: Math.max(a.pp, 512), threads: {ideal: threads, min: threads}, flashAttention: true,
  experimentalKvCacheKeyType: kTypes[a.ctk], experimentalKvCacheValueType: kTypes[a.ctv]});
const out = {engine: "llama.cpp", model: a.model, depth: a.depth, ctk: a.ctk, ctv: a.ctv, threads: a.threads,
             fill_threads: a["fill-threads"], loadavg: os.loadavg(), version: llama.llamaCppRelease, fill_s: {},
             restore_s: {}, cpu_ts: {}};
// One untimed token first, in a throwaway context (as llama-bench's warm-up
// run and `hqekv bench`'s untimed run): the first evaluation touches every
// weight page of the mmap-ed file, which is not the per-token cost.
{
  const wctx = await model.createContext({contextSize: 64, batchSize: 64, threads: {ideal: a.threads, min: a.threads},
    flashAttention: true});
  await wctx.getSequence().controlledEvaluate([[tok(0), {generateNext: {logits: true}}]]);
  await wctx.dispose();
}
const cpuSeconds = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1e6; };
// The state to restore at the depth: a.state if given, else a scratch file
// (only when the fill runs in its own context, i.e. --fill-threads differs).
let statePath = a.state;
let scratchState = false;
if (a.depth && !statePath && a["fill-threads"] !== a.threads) {
  statePath = path.join(os.tmpdir(), `llama_bench_state_${process.pid}.bin`);
  scratchState = true;
}
if (statePath) out.state = statePath;
async function fillTo(seq) {
  const t0 = performance.now();
  await seq.controlledEvaluate(Array.from({length: a.depth}, (_, i) => tok(i)));
  return (performance.now() - t0) / 1000;
}
async function fresh() {
  if (a.depth && statePath && !fs.existsSync(statePath)) {  // fill once, in its own context
    const fctx = await makeContext(a["fill-threads"]);
    const fseq = fctx.getSequence();
    out.fill_first_s = await fillTo(fseq);
    await fseq.saveStateToFile(statePath + ".part");
    fs.renameSync(statePath + ".part", statePath);
    await fctx.dispose();
  }
  const ctx = await makeContext(a.threads);
  const seq = ctx.getSequence();
  if (!a.depth) return {ctx, seq, fill: 0, restore: null};
  if (statePath) {
    const t0 = performance.now();
    await seq.loadStateFromFile(statePath, {acceptRisk: true});
    if (seq.nextTokenIndex !== a.depth)
      throw new Error(`${statePath}: restored ${seq.nextTokenIndex} tokens, expected --depth ${a.depth}`);
    return {ctx, seq, fill: null, restore: (performance.now() - t0) / 1000};
  }
  return {ctx, seq, fill: await fillTo(seq), restore: null};
}
if (a.pp) {
  const {ctx, seq, fill, restore} = await fresh();
  out.fill_s[`pp${a.pp}`] = fill;
  out.restore_s[`pp${a.pp}`] = restore;
  const items = Array.from({length: a.pp}, (_, i) => tok(a.depth + i));
  items[a.pp - 1] = [items[a.pp - 1], {generateNext: {logits: true}}];
  const c0 = cpuSeconds();
  const t0 = performance.now();
  await seq.controlledEvaluate(items);
  out[`pp${a.pp}`] = a.pp / ((performance.now() - t0) / 1000);
  out.cpu_ts[`pp${a.pp}`] = a.pp / (cpuSeconds() - c0);
  await ctx.dispose();
}
if (a.tg) {
  const {ctx, seq, fill, restore} = await fresh();
  out.fill_s[`tg${a.tg}`] = fill;
  out.restore_s[`tg${a.tg}`] = restore;
  const c0 = cpuSeconds();
  const t0 = performance.now();
  for (let i = 0; i < a.tg; ++i) await seq.controlledEvaluate([[tok(a.depth + i), {generateNext: {logits: true}}]]);
  out[`tg${a.tg}`] = a.tg / ((performance.now() - t0) / 1000);
  out.cpu_ts[`tg${a.tg}`] = a.tg / (cpuSeconds() - c0);
  await ctx.dispose();
}
if (scratchState) fs.rmSync(statePath, {force: true});
console.log(JSON.stringify(out));
await model.dispose();
await llama.dispose();
