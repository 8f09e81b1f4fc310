// C API: quantize / dequantize one chunk in any quantization format.
#include <cmath>
#include <string>

#include "capi/handles.h"
#include "core/finite.h"
#include "quant/format.h"

using hqekv::capi::Fail;
using hqekv::capi::Guard;

namespace {

// Parses and validates the format for a T x D chunk.
hqekv_status ParseChecked(const char* fn, const char* format, int T, int D,
                          hqekv::quant::Format* f) {
  if (!format) return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string(fn) + ": format is NULL");
  auto r = hqekv::quant::ParseFormat(format);
  if (!r.ok())
    return Fail(HQEKV_ERR_SPEC, std::string(fn) + ": format '" + format + "': " + r.message());
  if (T <= 0 || D <= 0) {
    return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string(fn) + ": T and D must be > 0, got T=" +
                                                std::to_string(T) + " D=" + std::to_string(D));
  }
  hqekv::Status s = hqekv::quant::Validate(*r, T, D);
  if (!s.ok())
    return Fail(HQEKV_ERR_SPEC, std::string(fn) + ": format '" + format + "': " + s.message());
  *f = *r;
  return HQEKV_OK;
}

hqekv_status CheckPlane(const char* fn, const char* what, const void* p, size_t have, size_t need) {
  if (need > 0 && !p)
    return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string(fn) + ": " + what + " is NULL");
  if (have < need) {
    return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string(fn) + ": " + what + " has " +
                                                std::to_string(have) + " bytes, the format needs " +
                                                std::to_string(need));
  }
  return HQEKV_OK;
}

}  // namespace

extern "C" {

hqekv_status hqekv_quant_sizes(const char* format, int T, int D, size_t* code_bytes,
                               size_t* meta_bytes) {
  return Guard("hqekv_quant_sizes", [&] {
    hqekv::quant::Format f;
    const hqekv_status s = ParseChecked("hqekv_quant_sizes", format, T, D, &f);
    if (s != HQEKV_OK) return s;
    if (!code_bytes || !meta_bytes) {
      return Fail(HQEKV_ERR_INVALID_ARGUMENT,
                  "hqekv_quant_sizes: code_bytes or meta_bytes is NULL");
    }
    *code_bytes = hqekv::quant::CodeBytes(f, T, D);
    *meta_bytes = hqekv::quant::MetaBytes(f, T, D);
    return HQEKV_OK;
  });
}

hqekv_status hqekv_quantize(const char* format, const float* src, int T, int D, uint8_t* codes,
                            size_t code_cap, uint8_t* meta, size_t meta_cap) {
  return Guard("hqekv_quantize", [&] {
    const char* fn = "hqekv_quantize";
    hqekv::quant::Format f;
    hqekv_status s = ParseChecked(fn, format, T, D, &f);
    if (s != HQEKV_OK) return s;
    if (!src) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_quantize: src is NULL");
    if ((s = CheckPlane(fn, "codes", codes, code_cap, hqekv::quant::CodeBytes(f, T, D))) !=
        HQEKV_OK)
      return s;
    if ((s = CheckPlane(fn, "meta", meta, meta_cap, hqekv::quant::MetaBytes(f, T, D))) != HQEKV_OK)
      return s;
    // A NaN or infinity has no code in any format (it would come back as 0
    // or the format's largest value): refused, naming the element.
    const size_t count = size_t(T) * size_t(D);
    if (const size_t at = hqekv::FirstNonFinite(src, count); at < count) {
      return Fail(HQEKV_ERR_INVALID_ARGUMENT,
                  std::string("hqekv_quantize: src[") + std::to_string(at / size_t(D)) + "][" +
                      std::to_string(at % size_t(D)) + "] is " +
                      (std::isnan(src[at]) ? "NaN" : "infinite") + ": only finite values quantize");
    }
    hqekv::quant::QuantizeChunk(f, src, T, D, codes, meta);
    return HQEKV_OK;
  });
}

hqekv_status hqekv_dequantize(const char* format, const uint8_t* codes, size_t code_size,
                              const uint8_t* meta, size_t meta_size, int T, int D, float* dst) {
  return Guard("hqekv_dequantize", [&] {
    const char* fn = "hqekv_dequantize";
    hqekv::quant::Format f;
    hqekv_status s = ParseChecked(fn, format, T, D, &f);
    if (s != HQEKV_OK) return s;
    if (!dst) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_dequantize: dst is NULL");
    if ((s = CheckPlane(fn, "codes", codes, code_size, hqekv::quant::CodeBytes(f, T, D))) !=
        HQEKV_OK)
      return s;
    if ((s = CheckPlane(fn, "meta", meta, meta_size, hqekv::quant::MetaBytes(f, T, D))) != HQEKV_OK)
      return s;
    hqekv::quant::DequantizeChunk(f, codes, meta, T, D, dst);
    return HQEKV_OK;
  });
}

}  // extern "C"
