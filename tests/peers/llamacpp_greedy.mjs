// For each job, llama.cpp (node-llama-cpp's CPU build) continues the prompt
// of an hqekv KL base file greedily and writes its run as a KL base file of
// the same model: tokens = prompt + generated, and at every generating
// position llama.cpp's whole next-token distribution. `hqekv ppl
// --kl-divergence THAT_FILE` then teacher-forces hqekv on llama.cpp's tokens:
// its KL is KL(llama.cpp || hqekv) and its "same top" share is 1 exactly when
// hqekv's greedy generation from the same prompt gives the same ids.
//   node llamacpp_greedy.mjs NODE_DIR JOB...   JOB = model.gguf:hqekv_base.kld:out.kld
import fs from "node:fs";
import path from "node:path";
import {pathToFileURL} from "node:url";

const [nodeDir, ...jobs] = process.argv.slice(2);
const here = path.dirname(new URL(import.meta.url).pathname);
const {readKldBase, writeKldBase, positionFromLogProbs} = await import(
  pathToFileURL(path.join(here, "../../bench/llamacpp_side/kld_base.mjs")).href);
const {getLlama, LlamaLogLevel} = await import(
  pathToFileURL(path.join(nodeDir, "node_modules/node-llama-cpp/dist/index.js")).href);
const llama = await getLlama({gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true,
                              progressLogs: false, logLevel: LlamaLogLevel.error});

function logSoftmax(m, vocab) {
  const x = new Float64Array(vocab).fill(-Infinity);
  let mx = -Infinity;
  for (const [t, v] of m) { x[t] = v; if (v > mx) mx = v; }
  let s = 0;
  for (const v of x) s += Math.exp(v - mx);
  const l = mx + Math.log(s);
  return x.map((v) => v - l);
}

for (const job of jobs) {
  const [modelPath, basePath, outPath] = job.split(":");
  const base = readKldBase(basePath);
  const {ctx: n, prefill: P, vocab} = base.info;
  const tokens = Array.from(base.chunks[0].tokens.slice(0, P));
  const model = await llama.loadModel({modelPath});
  const context = await model.createContext({contextSize: n, batchSize: n, threads: 1, flashAttention: true});
  const seq = context.getSequence();
  const want = {generateNext: {logits: true}};
  let out = await seq.controlledEvaluate(tokens.map((t, i) => (i === P - 1 ? [t, want] : t)));
  const lps = [];
  let lg = out[P - 1].next.logits;
  while (tokens.length < n) {
    const lp = logSoftmax(lg, vocab);
    let best = 0;
    for (let i = 1; i < vocab; ++i) if (lp[i] > lp[best]) best = i;
    lps.push(lp);
    tokens.push(best);
    if (tokens.length === n) break;
    out = await seq.controlledEvaluate([[best, want]]);
    lg = out[0].next.logits;
  }
  const positions = lps.map((lp, s) => positionFromLogProbs(lp, tokens[P + s]));
  // Random-weight files give logits spread over hundreds of nats, so the
  // distributions are nearly one-hot and a KL says little: also compare the
  // log-probabilities themselves on hqekv's own window (teacher-forced, one
  // batch): the largest error of (log p_i - log p_top) over hqekv's 16 most
  // probable tokens, relative to that spread (max 1 nat).
  await seq.clearHistory();
  const hqTokens = Array.from(base.chunks[0].tokens.slice(0, n - 1));
  const tf = await seq.controlledEvaluate(hqTokens.map((t, i) => (i >= P - 1 ? [t, want] : t)));
  let rel = 0;
  base.chunks[0].positions.forEach((pos, s) => {
    const lp = logSoftmax(tf[P - 1 + s].next.logits, vocab);
    const top = pos.ids[0];
    const spread = Math.max(1, pos.logp[0] - pos.logp[15]);
    for (let k = 1; k < 16; ++k) {
      const i = pos.ids[k];
      const err = Math.abs((lp[i] - lp[top]) - (pos.logp[k] - pos.logp[0]));
      rel = Math.max(rel, err / spread);
    }
  });
  fs.writeFileSync(outPath.replace(/\.kld$/, ".logprob.json"), JSON.stringify({rel_logprob_err: rel}));
  writeKldBase(outPath, {...base.info, chunks: 1, top_k: vocab, base_cache: "llama.cpp f16 (greedy)"},
               [{tokens: Int32Array.from(tokens), positions}]);
  await context.dispose();
  await model.dispose();
  console.error(`${path.basename(modelPath)}: ${n - P} greedy tokens -> ${outPath}`);
}
await llama.dispose();
