#!/usr/bin/env bash
# Mutation check, run by hand (not in CI): plants small bugs, one at a time,
# in a scratch copy of the tree, builds only the test binaries that should
# catch each, runs them, and prints a table
#   mutation | file | test binary | caught by (failing tests) | verdict
# verdict: CAUGHT, MISSED, "patch does not apply" (the exact source line it is
# keyed on changed: update the mutation), "does not build" (a broken
# mutation, fix it).
#
# Usage: scripts/mutate.sh [--list | --check-keys] [NAME...]   (default: every mutation)
# --check-keys only checks that every mutation still applies to the checkout
# (seconds, no build; CTest's mutate_keys runs it, so a refactoring that moves
# a keyed line fails CI until the mutation is re-keyed). The full run is by
# hand, before a release and after changing a policy, the store, attention or
# the server engine (docs/reliability.md, "Mutation check"); it exits 1 when any
# mutation is MISSED or no longer applies.
# Env:   HQEKV_MUTATE_DIR (scratch, default /tmp/hqekv-mutate), JOBS (2).
# The working tree is copied as it is (uncommitted edits included); build
# directories and .git are not. ccache is used when installed; the first run
# builds the scratch tree once (minutes), each mutation then rebuilds one
# library and relinks its test binaries.
#
# Each mutation is a list of (file, exact old text, new text) patches; the
# old text must occur exactly once in the file. Test binaries may carry a
# gtest filter (binary:FILTER) to keep slow suites out.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${HQEKV_MUTATE_DIR:-/tmp/hqekv-mutate}
JOBS=${JOBS:-2}
export ROOT WORK JOBS
exec python3 - "$@" <<'PY'
import os, re, shutil, subprocess, sys

ROOT, WORK, JOBS = os.environ["ROOT"], os.environ["WORK"], os.environ["JOBS"]
# The build directory sits inside the copy, as build/ does in a checkout, so
# that ccache (with CCACHE_BASEDIR above both) finds the checkout's objects.
TREE = os.path.join(WORK, "tree")
BUILD = os.path.join(TREE, "build")

# Mutations that only the numeric-edge tests of issue 13 item 4 (exact tie
# rounding, softmax with scores near +-88 / 1e4) are meant to catch: a MISSED
# verdict says so until those tests are in.
NEEDS_EDGE_TESTS = {"uniform-round-half-away", "int8-round-half-away", "plain-softmax-no-max"}

# name, description, [(file, old, new)], [test binaries (name or name:filter)]
M = [
    ("hqekv-kv-scores-swapped", "K and V scores swapped in the PlanTiers call",
     [("src/policy/hqekv_events.cc",
       "return PlanTiers(ck, cv, pk, pv, counts);",
       "return PlanTiers(ck, cv, pv, pk, counts);")],
     ["test_policy"]),
    ("hqekv-first-m-queries", "the first m queries recorded instead of the last m",
     [("src/policy/hqekv_cache.cc",
       "if (event ? (i >= n - o_.m) : (r_i >= kHqekvChunk + 1 - o_.m)) cur_from = i;",
       "if (event ? (i < o_.m) : (r_i <= o_.m)) cur_from = i;")],
     ["test_policy"]),
    ("hqekv-no-carry-over", "the prompt queries of the next event's window dropped",
     [("src/policy/hqekv_cache.cc",
       "if (event && (r_i - C >= kHqekvChunk + 1 - o_.m)) next_from = i;",
       "if (false) next_from = i;")],
     ["test_policy"]),
    ("hqekv-normalise-no-count-floor",
     "HqeKV's importance normalisation divides by the raw query count (no floor)",
     [("src/policy/selection.cc",
       "a[i] = c > 0 ? sum[i] / static_cast<double>(std::max<int64_t>(c, min_count)) : 0.0;",
       "a[i] = c > 0 ? sum[i] / static_cast<double>(c) : 0.0;")],
     ["test_policy"]),
    ("hqekv-range-from-k", "Range(V) taken from K",
     [("src/policy/hqekv_events.cc",
       "rv.Row(t, false, D, vrow.data());",
       "rv.Row(t, true, D, vrow.data());")],
     ["test_policy"]),
    ("hqekv-ranking-backwards", "PlanTiers ranks chunks ascending",
     [("src/policy/hqekv_alloc.cc",
       "return score[a] > score[b];",
       "return score[a] < score[b];")],
     ["test_policy", "test_eval:PolicyQualityBand.*"]),
    ("hqekv-u4-is-2bit", "HqeKV's high quantized tier stores the low tier's codes",
     [("src/policy/hqekv_options.cc",
       "quant::Format f = is_k ? o.k_tiers[i] : o.v_tiers[i];",
       "quant::Format f = is_k ? o.k_tiers[i + 2 * (i == 0)] : o.v_tiers[i + 2 * (i == 0)];")],
     ["test_policy", "test_eval:PolicyQualityBand.*"]),
    ("hqekv-alloc-round-half-away", "AllocateChunks rounds half away from zero",
     [("src/policy/hqekv_alloc.cc",
       "double RoundHalfEven(double x) { return std::nearbyint(x); }",
       "double RoundHalfEven(double x) { return std::round(x); }")],
     ["test_policy"]),
    ("kivi4-is-2bit", "kivi:nominal_bits=4 stores 2-bit codes (and says 4)",
     [("src/policy/quant_cache.cc",
       "    kf = quant::Uniform(bits, quant::Grouping::kPerChannel);",
       "    kf = quant::Uniform(bits == 4 ? 2 : bits, quant::Grouping::kPerChannel);"),
      ("src/policy/quant_cache.cc",
       "    vf = quant::Uniform(bits, quant::Grouping::kPerToken, group);",
       "    vf = quant::Uniform(bits == 4 ? 2 : bits, quant::Grouping::kPerToken, group);")],
     ["test_policy", "test_eval:PolicyQualityBand.*"]),
    ("streaming-sink-off-by-one", "StreamingLLM keeps one sink token too few",
     [("src/policy/streaming_cache.cc",
       "const int64_t first = std::min<int64_t>(sink_, keep);",
       "const int64_t first = std::min<int64_t>(sink_ - 1, keep);")],
     ["test_policy"]),
    ("streaming-window-off-by-one", "StreamingLLM's newest window one token short",
     [("src/policy/streaming_cache.cc",
       "for (int64_t j = first; j < n - (keep - first); ++j)",
       "for (int64_t j = first; j < n - (keep - first) + 1; ++j)")],
     ["test_policy"]),
    ("h2o-heavy-recent-swapped", "H2O reads heavy= as recent and recent= as heavy",
     [("src/policy/h2o_cache.cc", 'c->heavy_ = spec.Int("heavy");', 'c->heavy_ = spec.Int("recent");'),
      ("src/policy/h2o_cache.cc", 'c->recent_ = spec.Int("recent");', 'c->recent_ = spec.Int("heavy");')],
     ["test_policy"]),
    ("h2o-ranking-backwards", "H2O keeps the lowest cumulative scores",
     [("src/policy/selection.cc",
       "return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);",
       "return scores[a] < scores[b] || (scores[a] == scores[b] && a < b);")],
     ["test_policy", "test_eval:PolicyQualityBand.*"]),
    ("snapkv-kernel-ignored", "SnapKV selects on raw votes (no max pooling)",
     [("src/policy/selection.cc",
       "const std::vector<double> pooled = MaxPool1d(votes, kernel);",
       "const std::vector<double> pooled = votes;")],
     ["test_policy"]),
    ("snapkv-ranking-backwards", "SnapKV keeps the lowest pooled votes",
     [("src/policy/selection.cc",
       "[&](int a, int b) { return pooled[a] > pooled[b]; }",
       "[&](int a, int b) { return pooled[a] < pooled[b]; }")],
     ["test_policy", "test_eval:PolicyQualityBand.*"]),
    ("pyramid-budgets-reversed", "PyramidKV budgets grow with depth",
     [("src/policy/selection.cc",
       "for (int l = 0; l < n_layers; ++l) real[l] = hi - (hi - lo) * l / (n_layers - 1);",
       "for (int l = 0; l < n_layers; ++l) real[l] = lo + (hi - lo) * l / (n_layers - 1);")],
     ["test_policy"]),
    ("store-neighbour-row", "KvStore::DequantizeKept returns the next token's V row",
     [("src/cache/kv_store.cc",
       "std::memcpy(v + row * D, &vx[static_cast<size_t>(t) * D], D * sizeof(float));",
       "std::memcpy(v + row * D, &vx[static_cast<size_t>(std::min(t + 1, cv.T - 1)) * D], D * sizeof(float));")],
     ["test_cache", "test_policy"]),
    ("uniform-round-half-away", "uniform codes round half away from zero (reference and SIMD)",
     [("src/quant/uniform_ref.cc",
       "codes[i] = static_cast<uint8_t>(std::nearbyint(std::min(std::max(v, 0.0f), top)));",
       "codes[i] = static_cast<uint8_t>(std::round(std::min(std::max(v, 0.0f), top)));"),
      ("src/quant/simd_codec-inl.h",
       "return hn::ConvertTo(di, hn::Round(hn::Min(hn::Max(v, hn::Zero(df)), top)));",
       "return hn::ConvertTo(di, hn::Floor(hn::Add(hn::Min(hn::Max(v, hn::Zero(df)), top), hn::Set(df, 0.5f))));")],
     ["test_quant"]),
    ("int8-round-half-away", "int8 reference rounds half away from zero",
     [("src/quant/int8_ref.cc",
       "static_cast<uint8_t>(static_cast<int8_t>(std::nearbyint(v)));",
       "static_cast<uint8_t>(static_cast<int8_t>(std::round(v)));")],
     ["test_quant"]),
    ("simd-softmax-no-max", "multi_query.cc SIMD softmax body without the max subtraction",
     [("src/attn/multi_query.cc",
       "hn::Exp(ds, hn::Max(hn::Sub(v, m), lo))",
       "hn::Exp(ds, hn::Max(v, lo))")],
     ["test_attn", "test_cache"]),
    ("plain-softmax-no-max", "plain_cache.cc softmax without the max subtraction",
     [("src/cache/plain_cache.cc",
       "for (int64_t j = 0; j < t; ++j) sum += (w[j] = std::exp(w[j] - mx));",
       "for (int64_t j = 0; j < t; ++j) sum += (w[j] = std::exp(w[j]));")],
     ["test_cache"]),
    # Issue 13 item 3 / issue 19: accounting from real allocations, the one
    # number parser, non-finite detection.
    ("hqekv-state-bytes-forget-queues", "HqeKV's StateBytes leaves out the window query lists",
     [("src/policy/hqekv_cache.cc",
       "b += static_cast<int64_t>(u.cur_q.capacity() + u.next_q.capacity()) * sizeof(int32_t);",
       "b += 0;")],
     ["test_policy:StateAccounting.*"]),
    ("evict-scores-uncounted", "eviction scores allocated outside the counting allocator",
     [("src/policy/evict_cache.cc",
       "scores_.emplace_back(g_.n_kv_heads, cache::CountedVector<float>(StateAlloc<float>(l)));",
       "scores_.emplace_back(g_.n_kv_heads, cache::CountedVector<float>());")],
     ["test_policy:StateAccounting.*"]),
    ("number-accepts-nan", "the checked parser lets nan/inf through where they are not allowed",
     [("src/core/number.cc",
       "if (!range.allow_nonfinite) return MakeError(",
       "if (false) return MakeError(")],
     ["test_core:Parse*"]),
    ("forward-logits-unchecked", "Forward does not check the logits for NaN/inf",
     [("src/model/llama.cc",
       "if (const size_t at = FirstNonFinite(seqs[0].logits, N * V); at < N * V) {",
       "if (const size_t at = FirstNonFinite(seqs[0].logits, N * V); at < 0) {")],
     ["test_model:NonFinite.*"]),
    ("forward-qk-unchecked", "Forward does not check Q/K/V before the cache (NaN weights absorbed)",
     [("src/model/llama.cc",
       "if (const size_t at = FirstNonFinite(buf->data(), len); at < len) {",
       "if (const size_t at = FirstNonFinite(buf->data(), len); at < 0) {")],
     ["test_model:NonFinite.*"]),
    # One behavioural test per policy key (tests/policy/policy_keys_test.cc).
    ("kivi-k-per-token", "KIVI quantizes K per token instead of per channel",
     [("src/policy/quant_cache.cc",
       "    kf = quant::Uniform(bits, quant::Grouping::kPerChannel);",
       "    kf = quant::Uniform(bits, quant::Grouping::kPerToken);")],
     ["test_policy:KiviKeys.*"]),
    ("kivi-residual-ignored", "KIVI's residual= ignored: the newest tokens sealed every 32",
     [("src/policy/quant_cache.cc", 'residual = spec.Int("residual");', "residual = 32;")],
     ["test_policy:KiviKeys.*"]),
    ("h2o-decode-scores-overwritten", "eviction scores replaced by each row instead of summed",
     [("src/policy/evict_cache.cc",
       "for (int j = 0; j < row.n_kept; ++j) s[j] += row.weights[j];",
       "for (int j = 0; j < row.n_kept; ++j) s[j] = row.weights[j];")],
     ["test_policy:H2oKeys.*"]),
    ("h2o-recent-ignored", "H2O's recent window not used in token selection",
     [("src/policy/h2o_cache.cc",
       "*out_idx = H2oEvict(std::vector<double>(s.begin(), s.end()), keep, recent);",
       "*out_idx = H2oEvict(std::vector<double>(s.begin(), s.end()), keep, 0);")],
     ["test_policy:H2oKeys.*"]),
    # Connection-level limits of the server (tests/server/connection_watch_test.cc)
    # and a weights file changed under it (model_file_change_test.cc).
    ("http-header-deadline-ignored", "a header or body past its deadline is not cut",
     [("src/server/http_limits.cc", "if (now > c.deadline) {", "if (false) {")],
     ["test_server:Connection*"]),
    ("http-client-gone-ignored", "a handler is never told its client has gone",
     [("src/server/http_limits.cc",
       "bool CurrentClientGone() { return tl_conn.fd >= 0 && PeerClosed(tl_conn.fd); }",
       "bool CurrentClientGone() { return false; }")],
     ["test_server:ConnectionClientGone.*"]),
    ("engine-model-file-change-unchecked", "requests run on a weights file rewritten in place",
     [("src/server/engine.cc",
       "if (Status st = src_.mapping->CheckUnchanged(); !st.ok()) {",
       "if (Status st = Status::Ok(); !st.ok()) {")],
     ["test_server:ModelFileChange.*"]),
    # The serving engine (tests/server/engine_test.cc): admission, slot
    # reuse, queueing, cancellation.
    ("engine-admission-ignores-own-reservation",
     "admission compares only the bytes already reserved with --kv-budget-mb",
     [("src/server/engine.cc",
       "if (m_.kv_reserved + job->reserve > o_.kv_budget_bytes) return;",
       "if (m_.kv_reserved > o_.kv_budget_bytes) return;")],
     ["test_server:Engine*"]),
    ("engine-slot-reuse-length-only",
     "a pinned slot's cache is reused for any prompt at least as long as its history",
     [("src/server/engine.cc",
       "s.history.size() <= job.prompt.size() &&\n      std::equal(s.history.begin(), s.history.end(), job.prompt.begin())) {",
       "s.history.size() <= job.prompt.size()) {")],
     ["test_server:Engine*"]),
    ("engine-pinned-blocks-queue", "a request pinned to a busy slot holds up the queue",
     [("src/server/engine.cc",
       "if (job->req.id_slot >= 0) {  // its slot is busy: the others go first",
       "if (false) {  // its slot is busy: the others go first")],
     ["test_server:Engine*"]),
    ("engine-cancel-ignored", "a cancelled request keeps its slot until it ends",
     [("src/server/engine.cc",
       "if (s.job && s.job->ch->cancelled()) Release(s, \"cancelled\");",
       "if (false) Release(s, \"cancelled\");")],
     ["test_server:Engine*"]),
    ("engine-queued-cancel-ignored", "a cancelled request still waiting in the queue is served",
     [("src/server/engine.cc",
       "    if (job->ch->cancelled()) {\n      job->ch->Finish(FinishEvent{\"cancelled\", {}, \"\"});",
       "    if (false) {\n      job->ch->Finish(FinishEvent{\"cancelled\", {}, \"\"});")],
     ["test_server:Engine*"]),
]

def sh(cmd, **kw):
    return subprocess.run(cmd, shell=True, text=True, capture_output=True, **kw)

def same(a, b):
    if not os.path.exists(b) or os.path.getsize(a) != os.path.getsize(b):
        return False
    with open(a, "rb") as x, open(b, "rb") as y:
        return x.read() == y.read()

def put(src, dst):
    """Copies src over dst with a fresh time, so that make rebuilds from it
    (a restored file must look newer than the mutant's objects)."""
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copyfile(src, dst)
    shutil.copymode(src, dst)
    os.utime(dst)

def sync():
    """Makes TREE a copy of the checkout (build directories and .git left
    out). Files already equal are left alone, so they do not rebuild."""
    os.makedirs(TREE, exist_ok=True)
    wanted = set()
    for d, dirs, files in os.walk(ROOT):
        rel = os.path.relpath(d, ROOT)
        if rel == ".":
            dirs[:] = [x for x in dirs if not x.startswith("build") and x != ".git"]
        for f in files:
            r = os.path.normpath(os.path.join(rel, f))
            if rel == "." and f == ".git":
                continue
            wanted.add(r)
            if not same(os.path.join(ROOT, r), os.path.join(TREE, r)):
                put(os.path.join(ROOT, r), os.path.join(TREE, r))
    for d, dirs, files in os.walk(TREE):
        rel = os.path.relpath(d, TREE)
        if rel == ".":
            dirs[:] = [x for x in dirs if x != "build"]
        for f in files:
            r = os.path.normpath(os.path.join(rel, f))
            if r not in wanted:
                os.remove(os.path.join(TREE, r))

def configure():
    launcher = "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache" if shutil.which("ccache") else ""
    r = sh(f"cmake -S '{TREE}' -B '{BUILD}' -DCMAKE_BUILD_TYPE=Release -DHQEKV_BUILD_BENCH=OFF {launcher}")
    if r.returncode != 0:
        sys.exit("cmake failed:\n" + r.stdout + r.stderr)

def build(binaries):
    targets = " ".join(sorted({b.split(":")[0] for b in binaries}))
    return sh(f"cmake --build '{BUILD}' -j{JOBS} --target {targets}")

def run(binary):
    name, _, filt = binary.partition(":")
    cmd = os.path.join(BUILD, "tests", name) + " --gtest_color=no"
    if filt:
        cmd += f" --gtest_filter='{filt}'"
    try:
        r = sh(cmd, timeout=900)
        out = r.stdout + r.stderr
    except subprocess.TimeoutExpired:
        return ["(timeout)"]
    failed = sorted(set(re.findall(r"^\[  FAILED  \] (\S+\.\S+?)(?:,| \(|$)", out, re.M)))
    if r.returncode != 0 and not failed:
        failed = [f"(exit {r.returncode})"]
    return failed

def apply(patches):
    """Returns None when every patch applied, else a reason."""
    new = {}
    for f, old, rep in patches:
        text = new.get(f) or open(os.path.join(TREE, f)).read()
        n = text.count(old)
        if n != 1:
            return f"{f}: keyed text found {n} times"
        new[f] = text.replace(old, rep)
    for f, text in new.items():
        open(os.path.join(TREE, f), "w").write(text)
    return None

def restore(patches):
    for f in {p[0] for p in patches}:
        put(os.path.join(ROOT, f), os.path.join(TREE, f))

def check_keys():
    """Every mutation's keyed text occurs exactly once in the checkout: a
    refactoring that moves a keyed line makes this fail (no build needed;
    CTest runs it as mutate_keys)."""
    stale = []
    for name, desc, patches, bins in M:
        texts = {}
        for f, old, rep in patches:
            path = os.path.join(ROOT, f)
            if not os.path.exists(path):
                stale.append(f"{name}: {f} does not exist")
                continue
            text = texts.get(f) or open(path).read()
            n = text.count(old)
            if n != 1:
                stale.append(f"{name}: {f}: keyed text found {n} times")
                continue
            texts[f] = text.replace(old, rep)
    for s in stale:
        print("stale mutation: " + s)
    print(f"{len(M) - len({s.split(':')[0] for s in stale})} of {len(M)} mutations apply")
    return 1 if stale else 0

def main(argv):
    if argv and argv[0] == "--list":
        for name, desc, patches, bins in M:
            print(f"{name:30} {desc}")
        return 0
    if argv and argv[0] == "--check-keys":
        return check_keys()
    chosen = [m for m in M if not argv or m[0] in argv]
    unknown = set(argv) - {m[0] for m in M}
    if unknown:
        sys.exit("unknown mutation(s): " + ", ".join(sorted(unknown)))
    sync()
    configure()
    all_bins = sorted({b for m in chosen for b in m[3]})
    print(f"building the unmutated tree in {BUILD} ...", flush=True)
    r = build(all_bins)
    if r.returncode != 0:
        sys.exit("the unmutated tree does not build:\n" + r.stdout[-3000:] + r.stderr[-3000:])
    baseline = {b: set(run(b)) for b in all_bins}
    for b, f in baseline.items():
        if f:
            print(f"warning: {b} already fails without a mutation: {', '.join(sorted(f))} (ignored)")
    rows = []
    for name, desc, patches, bins in chosen:
        files = ", ".join(sorted({p[0] for p in patches}))
        why = apply(patches)
        if why:
            rows.append((name, files, " ".join(bins), why, "patch does not apply"))
            print(f"{name}: patch does not apply ({why})", flush=True)
            continue
        try:
            r = build(bins)
            if r.returncode != 0:
                rows.append((name, files, " ".join(bins), "-", "does not build"))
                print(f"{name}: does not build\n{(r.stdout + r.stderr)[-2000:]}", flush=True)
                continue
            caught = []
            for b in bins:
                caught += [f"{b.split(':')[0]}: {t}" for t in run(b) if t not in baseline[b]]
        finally:
            restore(patches)
        verdict = "CAUGHT" if caught else "MISSED"
        if not caught and name in NEEDS_EDGE_TESTS:
            verdict = "MISSED (needs edge tests, issue 13 item 4)"
        rows.append((name, files, " ".join(b.split(":")[0] for b in bins),
                     "; ".join(caught) if caught else "-", verdict))
        print(f"{name}: {verdict} ({len(caught)} failing tests)", flush=True)
    # Rebuild the clean tree so the next run starts from it.
    build(all_bins)
    print()
    print("| mutation | file | test binary | caught by (failing tests) | verdict |")
    print("|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    missed = sum(1 for r in rows if r[4] != "CAUGHT")
    print(f"\n{len(rows) - missed} of {len(rows)} caught")
    return 1 if missed else 0

sys.exit(main(sys.argv[1:]))
PY
