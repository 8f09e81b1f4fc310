// The KV-cache type flags of other engines, mapped onto `--kv` policy specs
// for run, ppl, bench and serve:
//   llama.cpp  -ctk/--cache-type-k TYPE, -ctv/--cache-type-v TYPE
//              (f16, q8_0, q5_1, q5_0, q4_1, q4_0 -> `llama:ctk=,ctv=`; f16 for
//              both -> fp16; f32 for both -> fp32; an unset one is f16, as there)
//   vLLM       --kv-cache-dtype auto|fp8|fp8_e4m3 (auto -> the command's
//              default, fp8 / fp8_e4m3 -> the `fp8` policy, whose codes are E4M3)
// Giving one of them with --kv, or --kv-cache-dtype with -ctk/-ctv, is an
// error naming both flags. main.cc reads "-ctk"/"-ctv" as the long names
// (CLI11 has no multi-letter short options).
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <string>

#include "core/status.h"
#include "policy/llama_cache.h"

namespace hqekv::cli {

class KvTypeFlags {
 public:
  // Adds the three flags to `cmd`; `kv` is the command's --kv option (its
  // count() tells whether the user gave it).
  void Add(CLI::App* cmd, CLI::Option* kv) {
    kv_ = kv;
    ctk_ = cmd->add_option("--cache-type-k", k_,
                           "llama.cpp's -ctk: K cache type (f16, q8_0, q5_1, q5_0, q4_1, q4_0; "
                           "instead of --kv)");
    ctv_ = cmd->add_option("--cache-type-v", v_, "llama.cpp's -ctv: V cache type (as -ctk)");
    dtype_ = cmd->add_option("--kv-cache-dtype", dtype_value_,
                             "vLLM's KV cache dtype: auto, fp8, fp8_e4m3 (instead of --kv)");
  }

  // True when -ctk, -ctv or --kv-cache-dtype was given.
  bool Given() const { return ctk_->count() + ctv_->count() + dtype_->count() > 0; }

  // The spec the flags ask for: `kv_value` when none of the three was given
  // (--kv's value or the command's default), else their mapping. Errors name
  // the flags.
  Result<std::string> Resolve(const std::string& kv_value) const {
    const bool llama = ctk_->count() > 0 || ctv_->count() > 0;
    const bool vllm = dtype_->count() > 0;
    const std::string llama_flag =
        ctk_->count() > 0 ? "-ctk/--cache-type-k" : "-ctv/--cache-type-v";
    if (kv_ && kv_->count() > 0 && (llama || vllm)) {
      return MakeError("--kv and " + std::string(vllm ? "--kv-cache-dtype" : llama_flag) +
                       " both choose the KV cache: give one of them");
    }
    if (llama && vllm) {
      return MakeError("--kv-cache-dtype and " + llama_flag +
                       " both choose the KV cache: give one of them");
    }
    if (vllm) return FromDtype(kv_value);
    if (llama) return FromLlamaTypes();
    return kv_value;
  }

 private:
  Result<std::string> FromDtype(const std::string& default_spec) const {
    if (dtype_value_ == "auto") return default_spec;
    if (dtype_value_ == "fp8" || dtype_value_ == "fp8_e4m3") return std::string("fp8");
    if (dtype_value_ == "fp8_e5m2") return std::string("fp8:format=e5m2");
    if (dtype_value_ == "fp8_inc" || dtype_value_ == "fp8_ds_mla" || dtype_value_ == "bfloat16") {
      return MakeError("--kv-cache-dtype " + dtype_value_ +
                       " is not supported (use auto, fp8, fp8_e4m3 or fp8_e5m2, or --kv for the "
                       "other policies)");
    }
    return MakeError("--kv-cache-dtype: unknown dtype '" + dtype_value_ +
                     "' (supported: auto, fp8, fp8_e4m3, fp8_e5m2)");
  }

  Result<std::string> FromLlamaTypes() const {
    const std::string k = k_.empty() ? "f16" : k_, v = v_.empty() ? "f16" : v_;
    if (k == "f32" && v == "f32") return std::string("fp32");
    if (k == "f16" && v == "f16") return std::string("fp16");
    const auto& types = policy::LlamaCacheTypes();
    for (const auto& [flag, type] :
         {std::pair{"-ctk/--cache-type-k", k}, {"-ctv/--cache-type-v", v}}) {
      if (std::find(types.begin(), types.end(), type) == types.end()) {
        std::string list;
        for (const std::string& t : types) list += (list.empty() ? "" : ", ") + t;
        return MakeError(std::string(flag) + " " + type + " is not supported (supported: " + list +
                         "; f32 for both K and V)");
      }
    }
    return "llama:ctk=" + k + ",ctv=" + v;
  }

  CLI::Option *kv_ = nullptr, *ctk_ = nullptr, *ctv_ = nullptr, *dtype_ = nullptr;
  std::string k_, v_, dtype_value_;
};

}  // namespace hqekv::cli
