// `hqekv study quant`: the two measurements HqeKV rests on, on KV-like vectors.
//  (a) how well a vector's range (max - min) predicts its conversion loss under
//      b-bit uniform quantization and under eviction (Pearson correlation);
//  (b) conversion loss of uniform vs normalized quantization at each bit width,
//      in the K layout (per-channel groups over chunks of G tokens) and the V
//      layout (per-token groups of g channels).
// Conversion loss of one vector x in R^D: sum_d (x_d - x^_d)^2, where x^ is
// its reconstruction; eviction reconstructs 0, so its loss is sum_d x_d^2.
// The vectors are seeded standard-Gaussian samples, or (later) real K/V.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace hqekv::eval {

struct QuantStudyOptions {
  uint64_t seed = 0;
  int vectors = 4096;                 // number of D-dimensional vectors; a multiple of chunk
  int dim = 128;                      // D
  int chunk = 32;                     // G: tokens per K chunk (per-channel group)
  int group = 32;                     // g: channels per V group (per-token); divides dim
  std::vector<int> bits = {4, 2, 1};  // bit widths of tables (a) and (b), each in {1, 2, 4}
  // Extra formats (quant::ParseFormat specs, e.g. "int8", "u4:chan:had"),
  // reported with their mean loss and range correlation in table (c).
  std::vector<std::string> formats = {"int8", "fp8e4m3", "u4:tok:had", "u2:chan:had",
                                      "n1:chan:had"};
};

struct CorrelationRow {
  std::string conversion;  // "uniform 4-bit", ..., "eviction"
  std::string format;      // quant format spec ("" for eviction)
  double pearson = 0;      // corr(range, loss) over the vectors
  double mean_loss = 0;    // mean per-vector loss
};

struct LayoutLossRow {
  int bits = 0;
  std::string layout;  // "K per-channel" or "V per-token"
  std::string uniform_format, normal_format;
  double uniform_loss = 0, normal_loss = 0;  // mean per-vector loss
  std::string better;                        // "uniform" or "normalized"
};

struct QuantStudyResult {
  QuantStudyOptions options;
  std::string source;  // "synthetic standard-Gaussian" or where the vectors came from
  std::vector<CorrelationRow> correlation;  // table (a)
  std::vector<LayoutLossRow> layouts;       // table (b)
  std::vector<CorrelationRow> formats;      // table (c)
};

// Checks the options (sizes > 0, chunk divides vectors, group divides dim,
// bits in {1, 2, 4}, every extra format parses and fits a chunk).
Status ValidateQuantStudy(const QuantStudyOptions& o);

// Runs the study on seeded standard-Gaussian vectors.
Result<QuantStudyResult> RunQuantStudy(const QuantStudyOptions& o);

// Runs it on given vectors, row-major [o.vectors][o.dim], consecutive rows
// forming the K chunks (e.g. one layer/head's keys in token order).
Result<QuantStudyResult> RunQuantStudyOn(const std::vector<float>& vectors,
                                         const QuantStudyOptions& o, std::string source);

// Pearson correlation of two equally long series (0 if either is constant).
double Pearson(const std::vector<double>& a, const std::vector<double>& b);

nlohmann::json QuantStudyJson(const QuantStudyResult& r);
std::string QuantStudyTables(const QuantStudyResult& r);  // human-readable tables

// One-paragraph definition of the loss, shared by --help and the tables.
extern const char* const kConversionLossHelp;

}  // namespace hqekv::eval
