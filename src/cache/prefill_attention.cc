#include "cache/prefill_attention.h"

#include <algorithm>
#include <cmath>

#include "core/parallel.h"

namespace hqekv::cache {

bool UsePrefillAttention(const KvGeometry& g, int n) {
  const int group = g.n_q_heads / g.n_kv_heads;
  return n > 1 && static_cast<int64_t>(n) * group >= 16;
}

void PrefillAttention(const KvGeometry& g, const std::vector<attn::KvTiles>& kv,
                      const int32_t* positions, const float* q, const int32_t* q_pos, int n,
                      float* out) {
  PrefillAttentionHeads(g, 0, kv, std::vector<const int32_t*>(kv.size(), positions), q, q_pos, n,
                        out);
}

void PrefillAttentionHeads(const KvGeometry& g, int h0, const std::vector<attn::KvTiles>& kv,
                           const std::vector<const int32_t*>& positions, const float* q,
                           const int32_t* q_pos, int n, float* out, const HeadColumnSums* cols) {
  const int HQ = g.n_q_heads, D = g.head_dim, group = HQ / g.n_kv_heads;
  const int H = static_cast<int>(kv.size());
  int64_t tokens = 0;  // the most any head holds (for the work estimate)
  for (const attn::KvTiles& t : kv) tokens = std::max(tokens, t.tokens);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  // visible[h * n + i]: the held tokens of head h0 + h query i sees (a
  // prefix: positions increase).
  std::vector<int64_t> visible(static_cast<size_t>(n) * H);
  for (int h = 0; h < H; ++h) {
    const int32_t* p = positions[h];
    for (int i = 0; i < n; ++i) {
      visible[static_cast<size_t>(h) * n + i] = std::upper_bound(p, p + kv[h].tokens, q_pos[i]) - p;
    }
  }
  // Rows of KV head h: r = i * group + j for query i, query head h * group + j.
  const int64_t rows = static_cast<int64_t>(n) * group;
  const int64_t block = attn::AttendRowsBlock();
  const int64_t blocks = (rows + block - 1) / block;
  // Task k -> (KV head, block). Blocks of one head alternate from both ends
  // (0, last, 1, last - 1, ...): causal blocks grow in cost with their
  // queries, and ParallelFor hands out contiguous task ranges, so each range
  // gets a balanced mix.
  // Column sums: each task sums its block's rows (r >= first_query * group)
  // into its own buffer (the block's largest visible count long); buffers are
  // added to the head's sums in task order, so the result does not depend on
  // the thread count. Tasks run in waves whose buffers stay under
  // cols->max_buffer_floats.
  const int64_t first_row =
      cols ? static_cast<int64_t>(std::clamp(cols->first_query, 0, n)) * group : rows;
  const int64_t tasks = static_cast<int64_t>(H) * blocks;
  auto block_of = [&](int64_t task, int* hk, int64_t* r0, int64_t* nr) {
    *hk = static_cast<int>(task / blocks);
    const int64_t k = task % blocks;
    const int64_t blk = (k % 2 == 0) ? k / 2 : blocks - 1 - k / 2;
    *r0 = blk * block;
    *nr = std::min(block, rows - *r0);
  };
  // Floats of task t's buffer (0: no summed row).
  auto partial_len = [&](int64_t task) -> int64_t {
    int hk;
    int64_t r0, nr;
    block_of(task, &hk, &r0, &nr);
    if (!cols || r0 + nr <= first_row) return 0;
    int64_t m = 0;
    for (int64_t r = r0; r < r0 + nr; ++r) {  // the kernel sums up to the block's max
      m = std::max(m, visible[static_cast<size_t>(hk) * n + r / group]);
    }
    return m;
  };
  std::vector<std::vector<float>> partial;
  int64_t wave0 = 0;  // first task of the running wave
  auto run = [&](int64_t b, int64_t e) {
    thread_local std::vector<float> qs, os;
    thread_local std::vector<int64_t> vis;
    for (int64_t task = b; task < e; ++task) {
      int hk;
      int64_t r0, nr;
      block_of(task, &hk, &r0, &nr);
      const int h = h0 + hk;
      qs.resize(static_cast<size_t>(nr) * D);
      os.resize(qs.size());
      vis.resize(static_cast<size_t>(nr));
      for (int64_t r = 0; r < nr; ++r) {
        const int64_t i = (r0 + r) / group, j = (r0 + r) % group;
        const float* src = q + (i * HQ + static_cast<int64_t>(h) * group + j) * D;
        for (int d = 0; d < D; ++d) qs[r * D + d] = src[d] * scale;
        vis[r] = visible[static_cast<size_t>(hk) * n + i];
      }
      attn::ColumnSums cs;
      if (cols) {
        std::vector<float>& p = partial[static_cast<size_t>(task - wave0)];
        p.assign(static_cast<size_t>(partial_len(task)), 0.0f);
        if (!p.empty()) {
          cs.sums = p.data();
          cs.first_row = static_cast<int>(std::max<int64_t>(first_row - r0, 0));
        }
      }
      attn::AttendRows(kv[hk], qs.data(), D, static_cast<int>(nr), vis.data(), os.data(), D, cs);
      for (int64_t r = 0; r < nr; ++r) {
        const int64_t i = (r0 + r) / group, j = (r0 + r) % group;
        std::copy(os.data() + r * D, os.data() + (r + 1) * D,
                  out + (i * HQ + static_cast<int64_t>(h) * group + j) * D);
      }
    }
  };
  // Small batches over short contexts run on the caller: waking the pool
  // would cost more than the work.
  const bool serial = rows * H * tokens * D < (int64_t{1} << 15);
  auto run_range = [&](int64_t b, int64_t e) {
    if (serial) {
      run(b, e);
    } else {
      ParallelFor(e - b, [&](int64_t x, int64_t y) { run(b + x, b + y); });
    }
  };
  if (!cols) {
    run_range(0, tasks);
    return;
  }
  while (wave0 < tasks) {
    int64_t wave1 = wave0, floats = 0;
    while (wave1 < tasks &&
           (wave1 == wave0 || floats + partial_len(wave1) <= cols->max_buffer_floats)) {
      floats += partial_len(wave1++);
    }
    partial.assign(static_cast<size_t>(wave1 - wave0), {});
    run_range(wave0, wave1);
    for (int64_t task = wave0; task < wave1; ++task) {
      const std::vector<float>& p = partial[static_cast<size_t>(task - wave0)];
      float* sums = cols->sums[task / blocks];
      for (size_t j = 0; j < p.size(); ++j) sums[j] += p[j];
    }
    wave0 = wave1;
  }
}

}  // namespace hqekv::cache
