// speed.md / speed.json from speed.sh's rounds.jsonl: per (engine, KV, depth,
// threads, test) the median, min and max over rounds; and hqekv ÷ llama.cpp
// for every hqekv spec against every llama.cpp KV type at the same depth,
// threads and test: the ratio of the medians, and the min–max of the ratios
// of the same round (both engines ran back to back in a round, so the
// per-round ratio cancels most of the machine's load swings).
//   node speed_report.mjs OUT_DIR MODEL
import fs from "node:fs";
import os from "node:os";

const [out, model] = process.argv.slice(2);
const rows = fs.readFileSync(`${out}/rounds.jsonl`, "utf8").split("\n").filter(Boolean).map(JSON.parse);
if (!rows.length) throw new Error(`${out}/rounds.jsonl: no samples`);
const med = (a) => {
  const s = [...a].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const f = (x, d = 2) => (x == null ? "–" : x.toFixed(d));
const where = (c) => rows.filter((r) => Object.entries(c).every(([k, v]) => r[k] === v));
const uniq = (k, rs = rows) => [...new Set(rs.map((r) => r[k]))];

const summary = [];
for (const engine of ["hqekv", "llama.cpp"]) for (const kv of uniq("kv", where({engine})))
  for (const depth of uniq("depth", where({engine, kv}))) for (const threads of uniq("threads"))
    for (const test of uniq("test", where({engine, kv, depth, threads}))) {
      const s = where({engine, kv, depth, threads, test});
      if (!s.length) continue;
      const ts = s.map((r) => r.ts);
      const fills = s.map((r) => r.fill_s).filter((x) => x != null && depth > 0);
      summary.push({engine, kv, depth, threads, test, n: ts.length, median: med(ts), min: Math.min(...ts),
                    max: Math.max(...ts), fill_median_s: fills.length ? med(fills) : null});
    }

const ratios = [];
for (const h of summary.filter((s) => s.engine === "hqekv")) {
  for (const l of summary.filter((s) => s.engine === "llama.cpp" && s.depth === h.depth &&
                                       s.threads === h.threads && s.test === h.test)) {
    const per = [];
    for (const r of uniq("round")) {
      const a = where({engine: "hqekv", kv: h.kv, depth: h.depth, threads: h.threads, test: h.test, round: r});
      const b = where({engine: "llama.cpp", kv: l.kv, depth: h.depth, threads: h.threads, test: h.test, round: r});
      if (a.length && b.length) per.push(a[0].ts / b[0].ts);
    }
    ratios.push({hqekv: h.kv, llamacpp: l.kv, depth: h.depth, threads: h.threads, test: h.test,
                 ratio_of_medians: h.median / l.median, round_ratios: per,
                 round_min: per.length ? Math.min(...per) : null, round_max: per.length ? Math.max(...per) : null});
  }
}

const loads = rows.flatMap((r) => [r.load_before[0], r.load_after[0]]);
const version = rows.find((r) => r.version)?.version;
let md = `# pp/tg side by side: hqekv and llama.cpp\n\n`;
md += `Model: \`${model}\`. ${rows.length} samples in ${uniq("round").length} rounds; in each round hqekv and `;
md += `llama.cpp runs alternate (H L H L …), every second round in the reverse order. `;
md += `llama.cpp: ${version ? `${version.release} (${version.repo})` : "node-llama-cpp"}, CPU backend as loaded by node-llama-cpp. `;
md += `1-minute load average over the samples: ${f(Math.min(...loads), 1)}–${f(Math.max(...loads), 1)} `;
md += `(median ${f(med(loads), 1)}) on ${os.cpus().length} cores shared with other work.\n\n`;
md += `## Throughput (tokens/s)\n\n| engine | KV | depth | threads | test | n | median | min–max | fill s (median) |\n|---|---|---|---|---|---|---|---|---|\n`;
for (const s of summary) {
  md += `| ${s.engine} | ${s.kv} | ${s.depth} | ${s.threads} | ${s.test} | ${s.n} | ${f(s.median)} | `;
  md += `${f(s.min)}–${f(s.max)} | ${f(s.fill_median_s, 0)} |\n`;
}
md += `\n## hqekv ÷ llama.cpp\n\nRatio of the medians; in brackets the min–max of the same-round ratios.\n\n`;
for (const depth of uniq("depth", ratios)) for (const threads of uniq("threads", ratios))
  for (const test of uniq("test", ratios.filter((r) => r.depth === depth))) {
    const rs = ratios.filter((r) => r.depth === depth && r.threads === threads && r.test === test);
    if (!rs.length) continue;
    const cols = uniq("llamacpp", rs);
    md += `### ${test}, depth ${depth}, ${threads} thread${threads > 1 ? "s" : ""}\n\n| hqekv \\ llama.cpp | ${cols.join(" | ")} |\n|---|${cols.map(() => "---|").join("")}\n`;
    for (const h of uniq("hqekv", rs)) {
      md += `| ${h} | ${cols.map((c) => {
        const r = rs.find((x) => x.hqekv === h && x.llamacpp === c);
        return r ? `${f(r.ratio_of_medians)} [${f(r.round_min)}–${f(r.round_max)}]` : "–";
      }).join(" | ")} |\n`;
    }
    md += "\n";
  }
fs.writeFileSync(`${out}/speed.json`, JSON.stringify({model, llamacpp: version, summary, ratios, samples: rows}, null, 1));
fs.writeFileSync(`${out}/speed.md`, md);
console.log(md);
