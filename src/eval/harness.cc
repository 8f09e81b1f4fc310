#include "eval/harness.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "core/hash.h"
#include "core/parallel.h"
#include "eval/corpus.h"
#include "eval/rng.h"
#include "eval/runner.h"
#include "eval/scoring.h"
#include "lm/logprob.h"

namespace hqekv::eval {
namespace fs = std::filesystem;
namespace {

constexpr const char* kHarnessVersion = "hqekv-eval v1";
constexpr int kSpeedRepeats = 3;  // speed cells: best of 3 runs

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int64_t PeakRssKb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;  // kilobytes on Linux
}

class Progress {
 public:
  Progress(bool on, int total) : on_(on), total_(total) {}
  void Step(const std::string& what) {
    ++done_;
    if (!on_) return;
    const int width = 30;
    const int fill = total_ ? done_ * width / total_ : width;
    std::fprintf(stderr, "\r[%s%s] %d/%d %-48.48s", std::string(fill, '#').c_str(),
                 std::string(width - fill, '.').c_str(), done_, total_, what.c_str());
    std::fflush(stderr);
  }
  void Finish() {
    if (on_) std::fprintf(stderr, "\n");
  }

 private:
  bool on_;
  int total_;
  int done_ = 0;
};

std::optional<CellResult> LoadCachedCell(const std::string& dir, const std::string& hash) {
  if (dir.empty()) return std::nullopt;
  std::ifstream f(dir + "/cells/" + hash + ".json");
  if (!f) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  auto c = CellFromJson(j);
  if (!c.ok() || c->hash != hash) return std::nullopt;
  return std::move(c).value();
}

Status SaveCell(const std::string& dir, const CellResult& c) {
  if (dir.empty()) return Status::Ok();
  std::error_code ec;
  fs::create_directories(dir + "/cells", ec);
  if (ec) return MakeError("cannot create '" + dir + "/cells': " + ec.message());
  const std::string path = dir + "/cells/" + c.hash + ".json";
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    if (!f) return MakeError("cannot write '" + tmp + "'");
    f << ToJson(c).dump(1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    if (!f) return MakeError("error writing '" + tmp + "'");
  }
  fs::rename(tmp, path, ec);
  if (ec) return MakeError("cannot rename '" + tmp + "': " + ec.message());
  return Status::Ok();
}

// Memory statistics of a finished run, accumulated over instances.
struct MemAcc {
  double true_bits = 0, bpo = 0, bytes = 0, kept = 0;
  int n = 0;
  void Add(const KvStats& s) {
    true_bits += s.true_bits();
    bpo += s.bits_per_original();
    bytes += static_cast<double>(s.bytes.total());
    kept += s.original_elements ? double(s.kept_elements) / s.original_elements : 0;
    ++n;
  }
  void Into(CellResult* c) const {
    if (!n) return;
    c->true_bits = true_bits / n;
    c->bits_per_original = bpo / n;
    c->kv_bytes = bytes / n;
    c->kept_fraction = kept / n;
  }
};

std::string UtcNow() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
  return buf;
}

}  // namespace

std::string CellHash(const std::string& canonical) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx",
                static_cast<unsigned long long>(Fnv1a64(canonical)));
  return buf;
}

std::string MachineDescription() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  std::string model = "unknown CPU";
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t c = line.find(':');
      if (c != std::string::npos) model = line.substr(c + 2);
      break;
    }
  }
  return std::to_string(n) + " cores, " + model;
}

Result<EvalRun> RunEval(EvalModel& model, const Suite& suite, const EvalOptions& opt,
                        const CacheFactory& make_cache) {
  const auto t_start = std::chrono::steady_clock::now();
  EvalRun run;
  run.suite = suite.name;
  run.model = model.Name();
  run.model_identity = model.Identity();
  run.max_ctx = opt.max_ctx > 0 ? std::min(opt.max_ctx, model.TrainedContext()) : model.TrainedContext();
  run.machine = MachineDescription();
  run.threads = NumThreads();
  run.started_utc = UtcNow();

  // Fail fast when every spec of a policy family is refused (a typo in a name
  // or key); a single refused budget (e.g. hqekv:bits=4 without built-in
  // ratios) only marks its cells as failed.
  {
    std::map<std::string, std::pair<int, std::string>> refused;  // family -> (count, first error)
    std::map<std::string, int> total;
    for (const PolicyPoint& p : suite.policies) {
      ++total[p.family];
      auto c = make_cache(p.spec, model.Geometry(run.max_ctx));
      if (!c.ok() && refused[p.family].first++ == 0) refused[p.family].second = "--kv " + p.spec + ": " + c.message();
    }
    for (const auto& [family, r] : refused)
      if (r.first == total[family]) return MakeError(r.second);
  }

  std::map<std::string, Corpus> corpora;
  auto corpus = [&](const std::string& name) -> Result<const Corpus*> {
    auto it = corpora.find(name);
    if (it != corpora.end()) return &it->second;
    auto path = BundledTextPath(opt.text_root, name);
    if (!path.ok()) return path.error();
    auto c = LoadCorpus(name, *path);
    if (!c.ok()) return c.error();
    return &corpora.emplace(name, std::move(c).value()).first->second;
  };
  const TokenCounter count = [&model](const std::string& s) {
    return static_cast<int>(model.Encode(s, false).size());
  };

  const int n_cells = static_cast<int>((suite.tasks.size() + suite.speed.contexts.size()) * suite.policies.size());
  Progress progress(opt.progress, n_cells);

  // ---- Quality cells.
  for (const QualityTask& qt : suite.tasks) {
    if (qt.spec.context_tokens > run.max_ctx)
      return MakeError("task " + qt.spec.Key() + " exceeds the context cap " + std::to_string(run.max_ctx));
    std::vector<PreparedInstance> insts;  // built on first need
    bool ref_done = false, task_tried = false;
    Status task_status;
    int max_req = 0;
    auto prepare = [&]() -> Status {
      if (!insts.empty()) return Status::Ok();
      auto c = corpus(qt.corpus);
      if (!c.ok()) return c.error();
      for (int i = 0; i < qt.seeds; ++i) {
        auto t = MakeTask(qt.spec, **c, MixSeed(suite.base_seed, static_cast<uint64_t>(i)), count);
        if (!t.ok()) return t.error();
        insts.push_back(Prepare(model, *t));
        max_req = std::max(max_req, RequiredContext(insts.back()));
      }
      return Status::Ok();
    };
    auto reference = [&]() -> Status {
      if (ref_done) return Status::Ok();
      auto cache = make_cache("fp16", model.Geometry(max_req));
      if (!cache.ok()) return cache.error();
      for (auto& in : insts) {
        auto r = RunInstance(model, **cache, &in, /*record_ref=*/true);
        if (!r.ok()) return r.error();
      }
      ref_done = true;
      return Status::Ok();
    };

    for (const PolicyPoint& p : suite.policies) {
      std::ostringstream canon;
      canon << kHarnessVersion << "|" << run.model_identity << "|quality|" << qt.spec.Key() << "|"
            << qt.corpus << "|seeds=" << qt.seeds << "|base=" << suite.base_seed << "|" << p.spec;
      const std::string hash = CellHash(canon.str());
      progress.Step(p.spec + " " + qt.spec.Key());
      if (!opt.fresh) {
        if (auto c = LoadCachedCell(opt.out_dir, hash)) {
          run.cells.push_back(*c);
          ++run.reused;
          continue;
        }
      }
      const auto t0 = std::chrono::steady_clock::now();
      // Task generation or the fp16 reference can fail (e.g. a context too
      // short for the prompt): the task's cells record the error (not cached,
      // so they are retried) and the run goes on.
      if (!task_tried) {
        task_status = prepare();
        if (task_status.ok()) task_status = reference();
        task_tried = true;
      }
      CellResult cell;
      cell.hash = hash;
      cell.kind = "quality";
      cell.model = run.model;
      cell.task = TaskName(qt.spec.kind);
      cell.task_key = qt.spec.Key();
      cell.corpus = qt.corpus;
      cell.context = qt.spec.context_tokens;
      cell.depth = qt.spec.kind == TaskKind::kLm ? -1 : qt.spec.depth;
      cell.seeds = qt.seeds;
      cell.policy = p.spec;
      cell.family = p.family;
      cell.budget = p.budget;
      cell.threads = NumThreads();
      cell.chance = insts.empty() ? 0 : insts[0].task.chance;
      if (!task_status.ok()) {
        cell.error = "task: " + task_status.message();
        cell.seconds = Since(t0);
        run.cells.push_back(std::move(cell));
        ++run.computed;
        continue;
      }
      auto cache = make_cache(p.spec, model.Geometry(max_req));
      if (!cache.ok()) {
        cell.error = cache.message();
      } else {
        cell.describe = (*cache)->Describe();
        MemAcc mem;
        TeacherForcedStats tf;
        int correct = 0, agree = 0;
        double first_kl = 0;
        for (auto& in : insts) {
          auto r = RunInstance(model, **cache, &in, /*record_ref=*/false);
          if (!r.ok()) {
            cell.error = r.message();
            break;
          }
          mem.Add(r->stats);
          tf += r->tf;
          correct += r->correct;
          agree += r->first_agree;
          first_kl += std::max(0.0, r->first_kl);
          if (in.task.scoring == Scoring::kExactMatch && cell.examples.size() < 3)
            cell.examples.push_back(r->generated);
        }
        const int n = static_cast<int>(insts.size());
        cell.n = n;
        mem.Into(&cell);
        if (!insts.empty() && insts[0].task.scoring == Scoring::kTeacherForced) {
          cell.accuracy = tf.accuracy();
          cell.kl = tf.mean_kl();
          cell.agreement = tf.agreement();
          cell.ppl = tf.ppl();
          cell.steps = tf.steps;
        } else if (n > 0) {
          cell.accuracy = double(correct) / n;
          cell.kl = first_kl / n;
          cell.agreement = double(agree) / n;
        }
      }
      cell.seconds = Since(t0);
      cell.peak_rss_kb = PeakRssKb();
      HQEKV_RETURN_IF_ERROR(SaveCell(opt.out_dir, cell));
      run.cells.push_back(std::move(cell));
      ++run.computed;
    }
  }

  // ---- Speed and memory cells: prefill a window of held-out text, then
  // decode greedily; bytes and tokens/s at each context length.
  if (!suite.speed.contexts.empty()) {
    auto c = corpus(suite.speed.corpus);
    if (!c.ok()) return c.error();
    std::string text;
    for (const auto& s : (*c)->sentences) {
      text += (text.empty() ? "" : " ") + s;
      if (text.size() > 16u * static_cast<size_t>(run.max_ctx)) break;
    }
    std::vector<int32_t> all = model.Encode(text, true);
    for (int L : suite.speed.contexts) {
      const int D = suite.speed.decode_tokens;
      if (L + D > run.max_ctx) L = run.max_ctx - D;
      if (L < 8 || static_cast<int>(all.size()) < L) continue;
      for (const PolicyPoint& p : suite.policies) {
        std::ostringstream canon;
        canon << kHarnessVersion << "|" << run.model_identity << "|speed|ctx=" << L << "|decode=" << D
              << "|rep=" << kSpeedRepeats << "|" << suite.speed.corpus << "|threads=" << NumThreads() << "|"
              << p.spec;
        const std::string hash = CellHash(canon.str());
        progress.Step(p.spec + " speed ctx=" + std::to_string(L));
        if (!opt.fresh) {
          if (auto cc = LoadCachedCell(opt.out_dir, hash)) {
            run.cells.push_back(*cc);
            ++run.reused;
            continue;
          }
        }
        const auto t0 = std::chrono::steady_clock::now();
        CellResult cell;
        cell.hash = hash;
        cell.kind = "speed";
        cell.model = run.model;
        cell.task = "speed";
        cell.corpus = suite.speed.corpus;
        cell.context = L;
        cell.policy = p.spec;
        cell.family = p.family;
        cell.budget = p.budget;
        cell.threads = NumThreads();
        auto cache = make_cache(p.spec, model.Geometry(L + D));
        if (!cache.ok()) {
          cell.error = cache.message();
        } else {
          cell.describe = (*cache)->Describe();
          // Best of kSpeedRepeats runs (the machine is shared: the fastest
          // run is the least disturbed one); the cache is reset between runs.
          std::vector<float> logits;
          Status st;
          double prefill_s = 0, decode_s = 0;
          for (int rep = 0; rep < kSpeedRepeats && st.ok(); ++rep) {
            (*cache)->Reset();
            auto tp = std::chrono::steady_clock::now();
            st = model.Forward(**cache, all.data(), L, 0, true, &logits);
            const double p_s = Since(tp);
            if (!st.ok()) break;
            auto td = std::chrono::steady_clock::now();
            for (int i = 0; i < D && st.ok(); ++i) {
              const int32_t tok = lm::Argmax(logits.data(), model.VocabSize());
              st = model.Forward(**cache, &tok, 1, L + i, false, &logits);
            }
            const double d_s = Since(td);
            prefill_s = rep == 0 ? p_s : std::min(prefill_s, p_s);
            decode_s = rep == 0 ? d_s : std::min(decode_s, d_s);
          }
          if (!st.ok()) {
            cell.error = st.message();
          } else {
            MemAcc mem;
            mem.Add((*cache)->Stats());
            mem.Into(&cell);
            cell.n = 1;
            cell.prefill_tok_s = prefill_s > 0 ? L / prefill_s : 0;
            cell.decode_tok_s = decode_s > 0 ? D / decode_s : 0;
          }
        }
        cell.seconds = Since(t0);
        cell.peak_rss_kb = PeakRssKb();
        HQEKV_RETURN_IF_ERROR(SaveCell(opt.out_dir, cell));
        run.cells.push_back(std::move(cell));
        ++run.computed;
      }
    }
  }
  progress.Finish();
  run.seconds = Since(t_start);
  return run;
}

}  // namespace hqekv::eval
