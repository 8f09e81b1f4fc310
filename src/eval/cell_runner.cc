#include "eval/cell_runner.h"

#include <sys/resource.h>

#include <cstdio>
#include <sstream>

#include "core/parallel.h"

namespace hqekv::eval {
namespace {

constexpr const char* kHarnessVersion = "hqekv-eval v1";

int64_t PeakRssKb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;  // kilobytes on Linux
}

}  // namespace

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void MemAcc::Add(const KvStats& s) {
  true_bits += s.true_bits();
  bpo += s.bits_per_original();
  bytes += static_cast<double>(s.bytes.total());
  kept += s.original_elements ? double(s.kept_elements) / s.original_elements : 0;
  ++n;
}

void MemAcc::Into(CellResult* c) const {
  if (!n) return;
  c->true_bits = true_bits / n;
  c->bits_per_original = bpo / n;
  c->kv_bytes = bytes / n;
  c->kept_fraction = kept / n;
}

CellRunner::CellRunner(const EvalOptions& opt, EvalRun* run, int n_cells)
    : run_(run),
      store_(opt.out_dir),
      fresh_(opt.fresh),
      text_root_(opt.text_root),
      progress_(opt.progress),
      total_(n_cells) {}

Status CellRunner::Run(const std::string& kind, const std::string& config,
                       const PolicyPoint& policy, const std::string& label,
                       const Compute& compute) {
  std::ostringstream canon;
  canon << kHarnessVersion << "|" << run_->model_identity << "|" << kind << "|" << config << "|"
        << policy.spec;
  const std::string hash = CellHash(canon.str());
  Step(label);
  if (!fresh_) {
    if (auto c = store_.Load(hash)) {
      run_->cells.push_back(*c);
      ++run_->reused;
      return Status::Ok();
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  CellResult cell;
  cell.hash = hash;
  cell.kind = kind;
  cell.model = run_->model;
  cell.policy = policy.spec;
  cell.family = policy.family;
  cell.budget = policy.budget;
  cell.threads = NumThreads();
  const bool cacheable = compute(&cell);
  cell.seconds = Since(t0);
  if (cacheable) {
    cell.peak_rss_kb = PeakRssKb();
    HQEKV_RETURN_IF_ERROR(store_.Save(cell));
  }
  run_->cells.push_back(std::move(cell));
  ++run_->computed;
  return Status::Ok();
}

Result<const Corpus*> CellRunner::GetCorpus(const std::string& name) {
  auto it = corpora_.find(name);
  if (it != corpora_.end()) return &it->second;
  HQEKV_ASSIGN_OR_RETURN(auto path, BundledTextPath(text_root_, name));
  HQEKV_ASSIGN_OR_RETURN(auto c, LoadCorpus(name, path));
  return &corpora_.emplace(name, std::move(c)).first->second;
}

void CellRunner::Step(const std::string& label) {
  ++done_;
  if (!progress_) return;
  const int width = 30;
  const int fill = total_ ? done_ * width / total_ : width;
  std::fprintf(stderr, "\r[%s%s] %d/%d %-48.48s", std::string(fill, '#').c_str(),
               std::string(width - fill, '.').c_str(), done_, total_, label.c_str());
  std::fflush(stderr);
}

void CellRunner::Finish() {
  if (progress_) std::fprintf(stderr, "\n");
}

}  // namespace hqekv::eval
