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

// Per metric: "ts" (tokens per wall second) and, where the samples carry it,
// "cpu_ts" (tokens per second of the process's CPU time: on a time-shared
// machine the wall figure is mostly the scheduler's share of a core).
function tables(metric) {
  const summary = [];
  for (const engine of ["hqekv", "llama.cpp"]) for (const kv of uniq("kv", where({engine})))
    for (const depth of uniq("depth", where({engine, kv}))) for (const threads of uniq("threads"))
      for (const test of uniq("test", where({engine, kv, depth, threads}))) {
        const s = where({engine, kv, depth, threads, test}).filter((r) => r[metric] != null);
        if (!s.length) continue;
        const ts = s.map((r) => r[metric]);
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
        if (a.length && b.length && a[0][metric] != null && b[0][metric] != null) per.push(a[0][metric] / b[0][metric]);
      }
      ratios.push({hqekv: h.kv, llamacpp: l.kv, depth: h.depth, threads: h.threads, test: h.test,
                   ratio_of_medians: h.median / l.median, round_ratios: per,
                   round_min: per.length ? Math.min(...per) : null, round_max: per.length ? Math.max(...per) : null});
    }
  }
  return {summary, ratios};
}
const wall = tables("ts");
const cpu = tables("cpu_ts");
const {summary, ratios} = wall;

const loads = rows.flatMap((r) => [r.load_before[0], r.load_after[0]]);
const version = rows.find((r) => r.version)?.version;
let md = `# pp/tg side by side: hqekv and llama.cpp\n\n`;
md += `Model: \`${model}\`. ${rows.length} samples in ${uniq("round").length} rounds; in each round hqekv and `;
md += `llama.cpp runs alternate (H L H L …), every second round in the reverse order. `;
md += `llama.cpp: ${version ? `${version.release} (${version.repo})` : "node-llama-cpp"}, CPU backend as loaded by node-llama-cpp. `;
md += `1-minute load average over the samples: ${f(Math.min(...loads), 1)}–${f(Math.max(...loads), 1)} `;
md += `(median ${f(med(loads), 1)}) on ${os.cpus().length} cores shared with other work.\n\n`;
function section(t, title, short, note) {
  if (!t.summary.length) return "";
  let m = `## ${title}\n\n${note}\n\n| engine | KV | depth | threads | test | n | median | min–max | fill s (median) |\n|---|---|---|---|---|---|---|---|---|\n`;
  for (const s of t.summary) {
    m += `| ${s.engine} | ${s.kv} | ${s.depth} | ${s.threads} | ${s.test} | ${s.n} | ${f(s.median)} | `;
    m += `${f(s.min)}–${f(s.max)} | ${f(s.fill_median_s, 0)} |\n`;
  }
  m += `\n### hqekv ÷ llama.cpp, ${short}\n\nRatio of the medians; in brackets the min–max of the same-round ratios.\n\n`;
  for (const depth of uniq("depth", t.ratios)) for (const threads of uniq("threads", t.ratios))
    for (const test of uniq("test", t.ratios.filter((r) => r.depth === depth))) {
      const rs = t.ratios.filter((r) => r.depth === depth && r.threads === threads && r.test === test);
      if (!rs.length) continue;
      const cols = uniq("llamacpp", rs);
      m += `#### ${test}, depth ${depth}, ${threads} thread${threads > 1 ? "s" : ""}\n\n| hqekv \\ llama.cpp | ${cols.join(" | ")} |\n|---|${cols.map(() => "---|").join("")}\n`;
      for (const h of uniq("hqekv", rs)) {
        m += `| ${h} | ${cols.map((c) => {
          const r = rs.find((x) => x.hqekv === h && x.llamacpp === c);
          return r ? `${f(r.ratio_of_medians)} [${f(r.round_min)}–${f(r.round_max)}]` : "–";
        }).join(" | ")} |\n`;
      }
      m += "\n";
    }
  return m;
}
md += section(wall, "Throughput (tokens per wall second)", "wall time", "Tokens per second of wall time of the timed part.");
md += section(cpu, "Throughput per CPU second (tokens per second of process CPU time)", "CPU time",
  "The same timed part over the process's CPU time (user + system, all threads): what a 1-thread " +
  "run would give with a core to itself, as far as memory and cache contention allow. Only samples " +
  "that recorded it (hqekv's `avg_cpu_ts`, llama_bench.mjs's `cpu_ts`).");
fs.writeFileSync(`${out}/speed.json`, JSON.stringify({model, llamacpp: version, summary, ratios,
  cpu_summary: cpu.summary, cpu_ratios: cpu.ratios, samples: rows}, null, 1));
fs.writeFileSync(`${out}/speed.md`, md);
console.log(md);
