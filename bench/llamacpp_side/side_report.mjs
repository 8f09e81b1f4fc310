// Side-by-side report of one run directory written by run.sh: forward parity
// (llama.cpp f16 KV vs hqekv's fp16 run, from the full distributions) and the
// KV-type KL table (llama.cpp's KL against its own f16 run next to hqekv's
// `llama:` rows from `hqekv ppl --json`). Writes report.md and report.json.
//   node side_report.mjs OUT_DIR
import fs from "node:fs";
import path from "node:path";
import {readKldBase, fullLogProbs} from "./kld_base.mjs";

const dir = process.argv[2];
if (!dir) throw new Error("usage: side_report.mjs OUT_DIR");
const manifest = JSON.parse(fs.readFileSync(path.join(dir, "manifest.json"), "utf8"));

function logSoftmax(row) {
  let m = -Infinity;
  for (const x of row) if (x > m) m = x;
  let s = 0;
  for (const x of row) s += Math.exp(x - m);
  const l = m + Math.log(s), out = new Float64Array(row.length);
  for (let i = 0; i < row.length; ++i) out[i] = row[i] - l;
  return out;
}
const argmax = (v) => { let b = 0; for (let i = 1; i < v.length; ++i) if (v[i] > v[b]) b = i; return b; };
// KL(p || q) of two log-probability vectors, in nats.
function kl(lp, lq) { let s = 0; for (let i = 0; i < lp.length; ++i) { const p = Math.exp(lp[i]); if (p > 0) s += p * (lp[i] - lq[i]); } return Math.max(s, 0); }

// Log-probabilities of a llama.cpp dump, keyed by position.
function loadDump(prefix) {
  const meta = JSON.parse(fs.readFileSync(path.join(dir, prefix + ".json"), "utf8"));
  const raw = fs.readFileSync(path.join(dir, prefix + ".f32"));
  const f = new Float32Array(raw.buffer, raw.byteOffset, raw.byteLength / 4);
  const rows = new Map();
  meta.positions.forEach((p, r) => rows.set(p, logSoftmax(f.subarray(r * meta.vocab, (r + 1) * meta.vocab))));
  return {meta, rows};
}

// Statistics of test against ref over the positions both hold.
function compare(ref, test, tokens) {
  let n = 0, klSum = 0, klMax = 0, same = 0, maxDiff = 0, nllRef = 0, nllTest = 0;
  for (const [p, lr] of ref) {
    const lt = test.get(p);
    if (!lt) continue;
    const k = kl(lr, lt);
    klSum += k; klMax = Math.max(klMax, k); ++n;
    if (argmax(lr) === argmax(lt)) ++same;
    for (let i = 0; i < lr.length; ++i) maxDiff = Math.max(maxDiff, Math.abs(lr[i] - lt[i]));
    nllRef -= lr[tokens[p + 1]]; nllTest -= lt[tokens[p + 1]];
  }
  return {positions: n, kl_mean: klSum / n, kl_max: klMax, top1_agree: same / n,
          max_abs_logprob_diff: maxDiff, ppl_ref: Math.exp(nllRef / n), ppl_test: Math.exp(nllTest / n)};
}

const report = {manifest, parity: [], kv_table: []};
for (const m of manifest.models) {
  const base = readKldBase(path.join(dir, m.hqekv_base));
  const tokens = base.chunks[0].tokens;
  const hq = new Map();
  base.chunks[0].positions.forEach((pos, s) => hq.set(base.info.prefill - 1 + s, fullLogProbs(pos, base.info.vocab)));
  const dumps = Object.fromEntries(m.llama_runs.map((r) => [r, loadDump(r)]));
  for (const r of m.parity_runs) {
    const d = dumps[r];
    report.parity.push({model: m.name, run: r, mode: d.meta.mode, flash_attention: d.meta.flash_attention,
                        ...compare(d.rows, hq, tokens), seconds: d.meta.seconds});
  }
  if (m.kv_ref) {
    const ref = dumps[m.kv_ref].rows;
    for (const row of m.kv_rows) {
      const out = {model: m.name, ctk: row.ctk, ctv: row.ctv, rot: row.rot};
      if (row.llama) {
        const d = dumps[row.llama];
        Object.assign(out, {llama_kl: compare(ref, d.rows, tokens).kl_mean,
                            llama_top1: compare(ref, d.rows, tokens).top1_agree,
                            llama_kv_log: d.meta.kv_log.filter((l) => /attn_rot/.test(l))});
      }
      for (const [key, file] of Object.entries(row.hqekv || {})) {
        const j = JSON.parse(fs.readFileSync(path.join(dir, file), "utf8"));
        out[key + "_kl"] = j.statistics.kld.value;
        out[key + "_bits"] = j.kv_end.bits_per_original_element;
        out[key + "_spec"] = j.test_cache;
      }
      report.kv_table.push(out);
    }
  }
}
fs.writeFileSync(path.join(dir, "report.json"), JSON.stringify(report, null, 1));

const fmt = (x, d = 3) => x === undefined || x === null ? "–" : (Math.abs(x) < 1e-3 && x !== 0 ? x.toExponential(2) : x.toFixed(d));
let md = `# llama.cpp side by side: ${manifest.title}\n\n`;
md += `llama.cpp: ${manifest.llama_cpp} (node-llama-cpp ${manifest.node_llama_cpp}), CPU backend ${manifest.cpu_backend}, ${manifest.cpu}; hqekv ${manifest.hqekv_commit}.\n`;
md += `Load averages (1/5/15 min) at start ${manifest.loadavg_start.map((x) => x.toFixed(2)).join(" / ")}, at end ${manifest.loadavg_end.map((x) => x.toFixed(2)).join(" / ")}.\n\n`;
md += `## Forward parity (llama.cpp f16 KV against hqekv's fp16 run)\n\nKL(llama.cpp ‖ hqekv) in nats per position; hqekv ran the \`ppl\` protocol (prefill batch, then one token per step); "max |Δ log p|" is over every token of every position.\n\n`;
md += `| model | llama.cpp run | positions | mean KL | max KL | top-1 agree | max \\|Δ log p\\| | ppl llama.cpp | ppl hqekv |\n|---|---|---|---|---|---|---|---|---|\n`;
for (const p of report.parity) md += `| ${p.model} | ${p.mode}, FA ${p.flash_attention ? "on" : "off"} | ${p.positions} | ${fmt(p.kl_mean)} | ${fmt(p.kl_max)} | ${(100 * p.top1_agree).toFixed(2)}% | ${fmt(p.max_abs_logprob_diff, 4)} | ${p.ppl_ref.toFixed(3)} | ${p.ppl_test.toFixed(3)} |\n`;
if (report.kv_table.length) {
  const keys = [...new Set(report.kv_table.flatMap((r) => Object.keys(r).filter((k) => k.endsWith("_kl") && k !== "llama_kl")))];
  md += `\n## KV-type KL (each engine against its own f16 / fp16 run)\n\n`;
  md += `| ctk | ctv | rotation | llama.cpp KL | llama.cpp top-1 | ${keys.map((k) => `${k.slice(0, -3)} KL | ÷ llama.cpp`).join(" | ")} |\n|---|---|---|---|---|${keys.map(() => "---|---").join("|")}|\n`;
  for (const r of report.kv_table) {
    md += `| ${r.ctk} | ${r.ctv} | ${r.rot} | ${fmt(r.llama_kl, 5)} | ${r.llama_top1 !== undefined ? (100 * r.llama_top1).toFixed(1) + "%" : "–"} | `;
    md += keys.map((k) => `${fmt(r[k], 5)} | ${r[k] != null && r.llama_kl ? (r[k] / r.llama_kl).toFixed(2) : "–"}`).join(" | ") + " |\n";
  }
}
md += `\n## Commands\n\n\`\`\`sh\n${manifest.commands.join("\n")}\n\`\`\`\n`;
fs.writeFileSync(path.join(dir, "report.md"), md);
console.log(md);
