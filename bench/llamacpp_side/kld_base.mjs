// Reader of hqekv's KL base file (`hqekv ppl --kl-divergence-base FILE`,
// layout in src/lm/kld_file.h, version 1): the chunk tokens and, per scored
// position, the base run's top-k log-probabilities. With --ref-top-k equal to
// the vocabulary the distributions are complete.
import fs from "node:fs";

export function readKldBase(path) {
  const buf = fs.readFileSync(path);
  let off = 0;
  const u32 = () => { const v = buf.readUInt32LE(off); off += 4; return v; };
  const i32 = () => { const v = buf.readInt32LE(off); off += 4; return v; };
  const f32 = () => { const v = buf.readFloatLE(off); off += 4; return v; };
  const str = () => { const n = u32(); const s = buf.toString("utf8", off, off + n); off += n; return s; };
  const magic = buf.toString("latin1", 0, 8);
  off = 8;
  if (magic !== "HQEKVKLD") throw new Error(`${path}: not an hqekv KL base file (magic ${JSON.stringify(magic)})`);
  const version = u32();
  if (version !== 1) throw new Error(`${path}: KL base version ${version}, this reader knows 1`);
  const info = {vocab: u32(), ctx: u32(), prefill: u32(), chunks: u32(), top_k: u32()};
  Object.assign(info, {model_name: str(), model_identity: str(), tokenizer_fingerprint: str(),
                       base_cache: str(), text: str()});
  const chunks = [];
  for (let c = 0; c < info.chunks; ++c) {
    const tokens = new Int32Array(info.ctx);
    for (let i = 0; i < info.ctx; ++i) tokens[i] = i32();
    const positions = [];
    for (let s = 0; s < info.ctx - info.prefill; ++s) {
      const logpTrue = f32(), argmax = i32();
      const ids = new Int32Array(info.top_k), logp = new Float32Array(info.top_k);
      for (let k = 0; k < info.top_k; ++k) ids[k] = i32();
      for (let k = 0; k < info.top_k; ++k) logp[k] = f32();
      positions.push({logpTrue, argmax, ids, logp});
    }
    chunks.push({tokens, positions});
  }
  return {info, chunks};
}

// Full log-probability vector of one stored position (top_k == vocab).
export function fullLogProbs(pos, vocab) {
  if (pos.ids.length !== vocab) throw new Error(`KL base holds top-${pos.ids.length} of ${vocab}: write it with --ref-top-k ${vocab}`);
  const out = new Float64Array(vocab);
  for (let k = 0; k < vocab; ++k) out[pos.ids[k]] = pos.logp[k];
  return out;
}
