// Format descriptors: named constructors, parsing/printing, validation and
// the exact plane sizes. The chunk entry points live in quant/dispatch.cc.
#include <charconv>
#include <limits>
#include <string_view>
#include <vector>

#include "quant/internal.h"

namespace hqekv::quant {

Format F16() { return Format{Kind::kF16, 16, Grouping::kPerToken, 32, false}; }
Format F32() { return Format{Kind::kF32, 32, Grouping::kPerToken, 32, false}; }
Format Fp8E4M3() { return Format{Kind::kFp8E4M3, 8, Grouping::kPerToken, 32, false}; }
Format Fp8E5M2() { return Format{Kind::kFp8E5M2, 8, Grouping::kPerToken, 32, false}; }
Format Int8PerToken() { return Format{Kind::kInt8, 8, Grouping::kPerToken, 32, false}; }
Format Uniform(int bits, Grouping grouping, int group) {
  return Format{Kind::kUniform, bits, grouping, group, false};
}
Format Normal(int bits, Grouping grouping, int group) {
  return Format{Kind::kNormal, bits, grouping, group, false};
}

namespace {

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t pos = s.find(sep, start);
    parts.push_back(s.substr(start, pos == std::string_view::npos ? pos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return parts;
}

bool ParseInt(std::string_view s, int* out) {
  if (s.empty()) return false;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

bool IsQuantKind(Kind k) { return k == Kind::kUniform || k == Kind::kNormal; }

Status CheckBits(const Format& f) {
  switch (f.kind) {
    case Kind::kF16:
      if (f.bits == 16) return Status::Ok();
      break;
    case Kind::kF32:
      if (f.bits == 32) return Status::Ok();
      break;
    case Kind::kFp8E4M3:
    case Kind::kFp8E5M2:
    case Kind::kInt8:
      if (f.bits == 8) return Status::Ok();
      break;
    case Kind::kUniform:
      if (f.bits == 1 || f.bits == 2 || f.bits == 4 || f.bits == 8) return Status::Ok();
      return MakeError("uniform quantization supports 1, 2, 4 or 8 bits, got " +
                       std::to_string(f.bits));
    case Kind::kNormal:
      if (f.bits == 1 || f.bits == 2 || f.bits == 4) return Status::Ok();
      return MakeError("normalized quantization supports 1, 2 or 4 bits, got " +
                       std::to_string(f.bits));
  }
  return MakeError("format '" + FormatName(f) + "' has an illegal bit width " +
                   std::to_string(f.bits));
}

}  // namespace

Result<Format> ParseFormat(const std::string& text) {
  const std::vector<std::string_view> parts = Split(text, ':');
  const std::string_view head = parts[0];
  Format f;
  if (head == "f16") {
    f = F16();
  } else if (head == "f32") {
    f = F32();
  } else if (head == "fp8e4m3") {
    f = Fp8E4M3();
  } else if (head == "fp8e5m2") {
    f = Fp8E5M2();
  } else if (head == "int8") {
    f = Int8PerToken();
  } else if (head.size() >= 2 && (head[0] == 'u' || head[0] == 'n')) {
    int bits = 0;
    if (!ParseInt(head.substr(1), &bits)) {
      return MakeError("unknown format '" + std::string(head) + "' in '" + text + "'");
    }
    f = head[0] == 'u' ? Uniform(bits, Grouping::kPerToken) : Normal(bits, Grouping::kPerToken);
    if (Status s = CheckBits(f); !s.ok()) return MakeError(s.message() + " in '" + text + "'");
  } else {
    return MakeError("unknown format '" + std::string(head) + "' in '" + text +
                     "' (expected f16, f32, fp8e4m3, fp8e5m2, int8, u1, u2, u4, u8, n1, n2, n4)");
  }
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string_view p = parts[i];
    if (p == "had") {
      f.hadamard = true;
    } else if (p == "tok" || p == "chan") {
      if (!IsQuantKind(f.kind)) {
        return MakeError("grouping ':" + std::string(p) + "' only applies to u*/n* formats, in '" +
                         text + "'");
      }
      f.grouping = p == "tok" ? Grouping::kPerToken : Grouping::kPerChannel;
    } else if (p.substr(0, 2) == "g=") {
      int g = 0;
      if (!IsQuantKind(f.kind)) {
        return MakeError("group size only applies to u*/n* formats, in '" + text + "'");
      }
      if (!ParseInt(p.substr(2), &g) || g <= 0) {
        return MakeError("bad group size '" + std::string(p) + "' in '" + text +
                         "' (expected g=N with N > 0)");
      }
      f.group = g;
    } else {
      return MakeError("unknown format option ':" + std::string(p) + "' in '" + text +
                       "' (expected :tok, :chan, :g=N, :had)");
    }
  }
  return f;
}

std::string FormatName(const Format& f) {
  std::string s;
  switch (f.kind) {
    case Kind::kF16: s = "f16"; break;
    case Kind::kF32: s = "f32"; break;
    case Kind::kFp8E4M3: s = "fp8e4m3"; break;
    case Kind::kFp8E5M2: s = "fp8e5m2"; break;
    case Kind::kInt8: s = "int8"; break;
    case Kind::kUniform: s = "u" + std::to_string(f.bits); break;
    case Kind::kNormal: s = "n" + std::to_string(f.bits); break;
  }
  if (IsQuantKind(f.kind)) {
    if (f.grouping == Grouping::kPerChannel) {
      s += ":chan";
    } else {
      s += ":tok";
      if (f.group != 32) s += ":g=" + std::to_string(f.group);
    }
  }
  if (f.hadamard) s += ":had";
  return s;
}

Status Validate(const Format& f, int T, int D) {
  if (T <= 0) return MakeError("chunk token count T must be > 0, got " + std::to_string(T));
  if (D <= 0) return MakeError("head dimension D must be > 0, got " + std::to_string(D));
  // Keep every byte count well inside size_t and int arithmetic.
  if (static_cast<int64_t>(T) * D > (int64_t{1} << 28)) {
    return MakeError("chunk of " + std::to_string(T) + " x " + std::to_string(D) +
                     " values is too large (limit 2^28)");
  }
  HQEKV_RETURN_IF_ERROR(CheckBits(f));
  if (IsQuantKind(f.kind) && f.grouping == Grouping::kPerToken) {
    if (f.group <= 0 || D % f.group != 0) {
      return MakeError("group size " + std::to_string(f.group) + " of format '" + FormatName(f) +
                       "' does not divide head dimension D = " + std::to_string(D));
    }
  }
  if (f.hadamard && (D & (D - 1)) != 0) {
    return MakeError("Hadamard rotation needs a power-of-two head dimension, got D = " +
                     std::to_string(D));
  }
  return Status::Ok();
}

size_t CodeBytes(const Format& f, int T, int D) {
  if (T <= 0 || D <= 0) return 0;
  const size_t n = NumCodes(T, D);
  switch (f.kind) {
    case Kind::kF16: return 2 * n;
    case Kind::kF32: return 4 * n;
    case Kind::kFp8E4M3:
    case Kind::kFp8E5M2:
    case Kind::kInt8: return n;
    case Kind::kUniform:
    case Kind::kNormal: return (n * static_cast<size_t>(f.bits) + 7) / 8;
  }
  return 0;
}

size_t MetaBytes(const Format& f, int T, int D) {
  if (T <= 0 || D <= 0) return 0;
  switch (f.kind) {
    case Kind::kF16:
    case Kind::kF32: return 0;
    case Kind::kFp8E4M3:
    case Kind::kFp8E5M2: return 2;
    case Kind::kInt8: return 2 * static_cast<size_t>(T);
    case Kind::kUniform:
    case Kind::kNormal:
      if (f.grouping == Grouping::kPerToken && (f.group <= 0 || D % f.group != 0)) return 0;
      return 4 * static_cast<size_t>(NumGroups(f, T, D));  // two fp16 planes
  }
  return 0;
}

}  // namespace hqekv::quant
