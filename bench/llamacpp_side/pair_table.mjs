// KL of every llama.cpp K/V pair against llama.cpp's f16 run, from the dumps
// `llama_dump.mjs --pairs ... --out DIR/PREFIX` wrote (DIR/PREFIX_k_v.*),
// sorted by KL: the sensitivity table of src/policy/llama_cache.cc.
//   node pair_table.mjs DIR PREFIX REF_DUMP   -> DIR/PREFIX_table.json + C++ rows on stdout
import fs from "node:fs";
import path from "node:path";

const [dir, prefix, refName] = process.argv.slice(2);
function load(name) {
  const meta = JSON.parse(fs.readFileSync(path.join(dir, name + ".json"), "utf8"));
  const raw = fs.readFileSync(path.join(dir, name + ".f32"));
  const f = new Float32Array(raw.buffer, raw.byteOffset, raw.byteLength / 4);
  const rows = [];
  for (let r = 0; r < meta.positions.length; ++r) {
    const x = f.subarray(r * meta.vocab, (r + 1) * meta.vocab);
    let m = -Infinity;
    for (const v of x) if (v > m) m = v;
    let s = 0;
    for (const v of x) s += Math.exp(v - m);
    const l = m + Math.log(s);
    rows.push(Float64Array.from(x, (v) => v - l));
  }
  return {meta, rows};
}
const ref = load(refName);
const out = [];
for (const f of fs.readdirSync(dir)) {
  const m = f.match(new RegExp(`^${prefix}_(\\w+?_\\d|f16)_(\\w+?_\\d|f16)\\.json$`));
  if (!m) continue;
  const d = load(f.slice(0, -5));
  let kl = 0;
  d.rows.forEach((lq, r) => {
    const lp = ref.rows[r];
    let s = 0;
    for (let i = 0; i < lp.length; ++i) s += Math.exp(lp[i]) * (lp[i] - lq[i]);
    kl += Math.max(s, 0);
  });
  out.push({ctk: m[1], ctv: m[2], kl: kl / d.rows.length, rot_log: d.meta.kv_log.filter((l) => /attn_rot/.test(l))});
}
out.sort((a, b) => a.kl - b.kl);
fs.writeFileSync(path.join(dir, prefix + "_table.json"), JSON.stringify(out, null, 1));
for (const r of out) console.log(`    {"${r.ctk}", "${r.ctv}", ${r.kl.toExponential(3)}},`);
