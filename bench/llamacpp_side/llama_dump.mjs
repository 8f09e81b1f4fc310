// Runs llama.cpp (node-llama-cpp's prebuilt CPU build) on given token ids and
// writes the full next-token logits of every scored position.
//
//   node llama_dump.mjs --model M.gguf --tokens-from BASE.kld [--chunk 0]
//        --mode protocol|batch|decode [--prefill P] [--ctk f16] [--ctv f16]
//        [--fa on|off] [--threads 1] --out PREFIX
//   --pairs k/v,k/v,... instead of --ctk/--ctv: one run per pair in one process,
//   written to PREFIX_k_v.*
//
// Modes, on a window t[0..n) (n = the base's ctx; the last token is never fed):
//   protocol  hqekv's ppl protocol (src/lm/protocol.h): t[0..P) as ONE batch,
//             then t[P..n-1) one token per evaluation; scored positions
//             P-1 .. n-2 (n - P of them), as in the KL base file.
//   batch     t[0..n-1) as one batch, logits of every position >= P-1.
//   decode    every token its own evaluation, logits of every position >= P-1.
// Rotation of quantized K/V (llama.cpp's default Hadamard rotation, on when the
// type is quantized and head_dim % 64 == 0) is switched off by the caller with
// LLAMA_ATTN_ROT_DISABLE=1 in the environment; the KV-cache log lines saying
// which applied are kept in PREFIX.json.
// Output: PREFIX.f32 (float32 [scored][vocab], little-endian) and PREFIX.json.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {pathToFileURL} from "node:url";
import {readKldBase} from "./kld_base.mjs";

function parseArgs(argv) {
  const a = {chunk: 0, mode: "protocol", ctk: "f16", ctv: "f16", fa: "on", threads: 1};
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i].replace(/^--/, "").replace(/-/g, "_");
    if (argv[i + 1] === undefined) throw new Error(`${argv[i]} needs a value`);
    a[k] = argv[i + 1];
  }
  for (const k of ["model", "tokens_from", "out"]) if (!a[k]) throw new Error(`--${k.replace(/_/g, "-")} is required`);
  if (!["protocol", "batch", "decode"].includes(a.mode)) throw new Error(`--mode ${a.mode}: protocol, batch or decode`);
  a.chunk = +a.chunk; a.threads = +a.threads;
  return a;
}

const kTypes = {f16: "F16", f32: "F32", q8_0: "Q8_0", q5_1: "Q5_1", q5_0: "Q5_0", q4_1: "Q4_1", q4_0: "Q4_0"};

const a = parseArgs(process.argv.slice(2));
const base = readKldBase(a.tokens_from);
const n = base.info.ctx;
const P = a.prefill !== undefined ? +a.prefill : base.info.prefill;
if (!(P >= 1 && P <= n)) throw new Error(`--prefill ${P} must be in [1, ${n}]`);
const tokens = Array.from(base.chunks[a.chunk].tokens);

// node-llama-cpp lives in the scratch install (install.sh), not next to this file.
const nodeDir = process.env.HQEKV_LLAMACPP_NODE_DIR || path.join(path.dirname(new URL(import.meta.url).pathname), "node");
const nlcRoot = path.join(nodeDir, "node_modules", "node-llama-cpp");
const {getLlama, LlamaLogLevel} = await import(pathToFileURL(path.join(nlcRoot, "dist", "index.js")).href);
const logs = [];
const llama = await getLlama({gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true,
  progressLogs: false, logLevel: LlamaLogLevel.info, logger: (lvl, msg) => logs.push(msg)});
const model = await llama.loadModel({modelPath: a.model});
// One run per K/V pair: --pairs k/v,k/v,... (outputs PREFIX_k_v) or --ctk/--ctv.
const pairs = a.pairs ? a.pairs.split(",").map((p) => p.split("/")) : [[a.ctk, a.ctv]];
for (const [ctk, ctv] of pairs) {
  for (const t of [ctk, ctv]) if (!kTypes[t]) throw new Error(`KV type '${t}': one of ${Object.keys(kTypes).join(", ")}`);
  const outPrefix = a.pairs ? `${a.out}_${ctk}_${ctv}` : a.out;
  logs.length = 0;
  await runOne(ctk, ctv, outPrefix);
}
await model.dispose(); await llama.dispose();

async function runOne(ctk, ctv, outPrefix) {
  const ctx = await model.createContext({
    contextSize: n, batchSize: n, sequences: 1, threads: {ideal: a.threads, min: a.threads},
    flashAttention: a.fa === "on",
    experimentalKvCacheKeyType: kTypes[ctk], experimentalKvCacheValueType: kTypes[ctv]});
  const seq = ctx.getSequence();

  const want = (i) => [tokens[i], {generateNext: {logits: true}}];
  const rows = [];  // [position, Map<token, logit>]
  const t0 = performance.now();
  if (a.mode === "protocol") {
    const first = [];
    for (let i = 0; i < P; ++i) first.push(i === P - 1 ? want(i) : tokens[i]);
    const out = await seq.controlledEvaluate(first);
    rows.push([P - 1, out[P - 1].next.logits]);
    for (let i = P; i < n - 1; ++i) {
      const o = await seq.controlledEvaluate([want(i)]);
      rows.push([i, o[0].next.logits]);
    }
  } else if (a.mode === "batch") {
    const items = [];
    for (let i = 0; i < n - 1; ++i) items.push(i >= P - 1 ? want(i) : tokens[i]);
    const out = await seq.controlledEvaluate(items);
    for (let i = P - 1; i < n - 1; ++i) rows.push([i, out[i].next.logits]);
  } else {
    for (let i = 0; i < n - 1; ++i) {
      const o = await seq.controlledEvaluate([i >= P - 1 ? want(i) : tokens[i]]);
      if (i >= P - 1) rows.push([i, o[0].next.logits]);
    }
  }
  const seconds = (performance.now() - t0) / 1000;
  const V = rows[0][1].size;
  const data = new Float32Array(rows.length * V);
  rows.forEach(([, m], r) => { for (const [tok, lg] of m) data[r * V + tok] = lg; });
  fs.writeFileSync(outPrefix + ".f32", Buffer.from(data.buffer));

  const maps = fs.readFileSync("/proc/self/maps", "utf8");
  const cpuLib = [...new Set((maps.match(/libggml-cpu[-\w.]*\.so/g) || []))];
  const kvLines = logs.filter((l) => /attn_rot|K \(|flash_attn|rotation/.test(l)).map((l) => l.trim());
  const meta = {
    model: a.model, tokens_from: a.tokens_from, chunk: a.chunk, mode: a.mode, prefill: P, ctx: n,
    ctk, ctv, flash_attention: a.fa === "on", threads: a.threads,
    rotation_disabled_env: process.env.LLAMA_ATTN_ROT_DISABLE || "",
    positions: rows.map((r) => r[0]), vocab: V, seconds,
    llama_cpp: llama.llamaCppRelease, node_llama_cpp: JSON.parse(fs.readFileSync(
      path.join(nlcRoot, "package.json"))).version,
    cpu_backend: cpuLib, cpu: os.cpus()[0]?.model, loadavg: os.loadavg(), kv_log: kvLines};
  fs.writeFileSync(outPrefix + ".json", JSON.stringify(meta, null, 1));
  console.error(`${outPrefix}: ${rows.length} positions x ${V} in ${seconds.toFixed(1)} s (${cpuLib.join(",")})`);
  await ctx.dispose();
}
