// One cell of the evaluation matrix and its JSON form (DIR/cells/<hash>.json
// and the "cells" array of results.json).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace hqekv::eval {

// Format version of a cell; part of CodeVersion().
inline constexpr const char* kCellFormat = "cell-v2";

// The version of the code that computes cells: kCellFormat + "+" + `git
// describe --always --dirty` of the source tree when CMake configured the
// build (HQEKV_GIT_DESCRIBE), "+unknown" outside a git checkout.
std::string CodeVersion();

struct CellResult {
  std::string hash;  // config hash (16 hex digits)
  std::string kind;  // "quality" or "speed"
  std::string model;
  // Task (quality cells).
  std::string task;      // "passkey", "copy", ...
  std::string task_key;  // TaskSpec::Key()
  std::string corpus;
  int context = 0;  // quality: target context tokens; speed: prompt tokens
  double depth = -1;
  int seeds = 0;
  // Policy.
  std::string policy;  // spec given to MakeKvCache
  std::string family;
  double budget = -1;    // bits=B asked for (-1: natural bits)
  std::string describe;  // KvCache::Describe()
  // Memory (means over instances, measured at the end of each run).
  double true_bits = 0;          // bytes * 8 / kept elements
  double bits_per_original = 0;  // bytes * 8 / every element ever appended
  double kv_bytes = 0;
  double kept_fraction = 0;  // kept / original elements
  // Quality.
  int n = 0;            // instances
  double accuracy = 0;  // exact match rate, or teacher-forced top-1 vs the true tokens
  double chance = 0;
  double kl =
      0;  // mean KL(fp16 || this) per scored step (teacher-forced), or of the first answer token
  double agreement = 0;  // top-1 agreement with fp16
  double ppl = 0;        // teacher-forced tasks
  int64_t steps = 0;     // scored teacher-forced steps
  // 95% intervals (eval/run/intervals.h): Wilson for the accuracy and the
  // agreement (over instances, or over steps for teacher-forced tasks), the
  // standard error of the mean KL. trials: the n of those intervals.
  double trials = 0;
  double acc_lo = 0, acc_hi = 0, agree_lo = 0, agree_hi = 0, kl_se = 0;
  std::vector<std::string> examples;  // first generations (exact-match tasks), for the report
  // Speed.
  double prefill_tok_s = 0, decode_tok_s = 0;
  int64_t peak_rss_kb = 0;   // no longer measured (a process high-water mark cannot isolate a cell)
  std::string code_version;  // CodeVersion() of the build that computed the cell
  double seconds = 0;        // wall time of the cell
  int threads = 0;
  std::string error;  // non-empty: the policy could not run this cell (e.g. infeasible budget)
};

nlohmann::json ToJson(const CellResult& c);
// Missing fields keep their defaults; a field of the wrong type is an error.
Result<CellResult> CellFromJson(const nlohmann::json& j);

}  // namespace hqekv::eval
