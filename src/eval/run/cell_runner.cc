#include "eval/run/cell_runner.h"

#include <unistd.h>

#include <cstdio>
#include <sstream>

#include "core/parallel.h"

namespace hqekv::eval {
namespace {

constexpr const char* kHarnessVersion = "hqekv-eval v1";

}  // namespace

std::string CodeVersion() {
#ifdef HQEKV_GIT_DESCRIBE
  return std::string(kCellFormat) + "+" + HQEKV_GIT_DESCRIBE;
#else
  return std::string(kCellFormat) + "+unknown";
#endif
}

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
      tty_(isatty(STDERR_FILENO) == 1),
      total_(n_cells),
      code_version_(opt.code_version.empty() ? CodeVersion() : opt.code_version) {}

Status CellRunner::Run(const std::string& kind, const std::string& config,
                       const PolicyPoint& policy, const std::string& label,
                       const Compute& compute) {
  std::ostringstream canon;
  canon << kHarnessVersion << "|" << code_version_ << "|" << run_->model_identity << "|" << kind
        << "|" << config << "|" << policy.spec;
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
  cell.code_version = code_version_;
  if (cacheable) HQEKV_RETURN_IF_ERROR(store_.Save(cell));
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
  if (!tty_) {  // a log file: one plain line per cell, no carriage returns
    std::fprintf(stderr, "[%d/%d] %s\n", done_, total_, label.c_str());
    std::fflush(stderr);
    return;
  }
  const int width = 30;
  const int fill = total_ ? done_ * width / total_ : width;
  std::fprintf(stderr, "\r[%s%s] %d/%d %-48.48s", std::string(fill, '#').c_str(),
               std::string(width - fill, '.').c_str(), done_, total_, label.c_str());
  std::fflush(stderr);
}

void CellRunner::Finish() {
  if (progress_ && tty_) std::fprintf(stderr, "\n");
}

}  // namespace hqekv::eval
