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

// FNV-1a 64 of buf, continuing from h (src/core/hash.h).
function fnv1a64(buf, h = 0xcbf29ce484222325n) {
  // Two 32-bit halves: h * prime with prime = 2^40 + 0x1b3.
  let hi = Number(h >> 32n) >>> 0, lo = Number(h & 0xffffffffn) >>> 0;
  for (let i = 0; i < buf.length; ++i) {
    lo = (lo ^ buf[i]) >>> 0;
    // (hi:lo) * 0x1b3 + (lo << 40)
    const a = lo * 0x1b3;
    const carry = Math.floor(a / 0x100000000);
    const nlo = a >>> 0;
    const nhi = (Math.imul(hi, 0x1b3) + carry + ((lo << 8) >>> 0)) >>> 0;
    hi = nhi; lo = nlo;
  }
  return (BigInt(hi) << 32n) | BigInt(lo);
}

// Writes an hqekv KL base file (version 1) from `info` (the fields of
// readKldBase's info) and chunks [{tokens: Int32Array(ctx), positions:
// [{logpTrue, argmax, ids: Int32Array(top_k), logp: Float32Array(top_k)}]}],
// so that `hqekv ppl --kl-divergence FILE` scores hqekv against another
// engine's run on exactly these tokens.
export function writeKldBase(path, info, chunks) {
  const parts = [];
  const u32 = (v) => { const b = Buffer.alloc(4); b.writeUInt32LE(v); parts.push(b); };
  const str = (s) => { const b = Buffer.from(s, "utf8"); u32(b.length); parts.push(b); };
  parts.push(Buffer.from("HQEKVKLD", "latin1"));
  u32(1);
  for (const k of ["vocab", "ctx", "prefill", "chunks", "top_k"]) u32(info[k]);
  for (const k of ["model_name", "model_identity", "tokenizer_fingerprint", "base_cache", "text"]) str(info[k]);
  for (const c of chunks) {
    parts.push(Buffer.from(Int32Array.from(c.tokens).buffer));
    for (const p of c.positions) {
      const b = Buffer.alloc(8 + 8 * info.top_k);
      b.writeFloatLE(p.logpTrue, 0);
      b.writeInt32LE(p.argmax, 4);
      for (let k = 0; k < info.top_k; ++k) b.writeInt32LE(p.ids[k], 8 + 4 * k);
      for (let k = 0; k < info.top_k; ++k) b.writeFloatLE(p.logp[k], 8 + 4 * info.top_k + 4 * k);
      parts.push(b);
    }
  }
  const body = Buffer.concat(parts);
  const sum = Buffer.alloc(8);
  sum.writeBigUInt64LE(fnv1a64(body));
  const tmp = path + ".tmp";
  fs.writeFileSync(tmp, Buffer.concat([body, sum]));
  fs.renameSync(tmp, path);
}

// One position record from a full log-probability vector (top_k == vocab):
// ids by decreasing probability.
export function positionFromLogProbs(lp, nextToken) {
  const ids = Int32Array.from(lp.keys()).sort((a, b) => lp[b] - lp[a]);
  const logp = Float32Array.from(ids, (i) => lp[i]);
  return {logpTrue: lp[nextToken], argmax: ids[0], ids, logp};
}
