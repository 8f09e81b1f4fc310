// Format descriptors: named constructors, parsing/printing, validation and
// the exact plane sizes. The chunk entry points live in quant/dispatch.cc.
#include <charconv>
#include <limits>
#include <string_view>
#include <vector>

#include "core/number.h"

#include "quant/format_traits.h"
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
Format Uniform3(Grouping grouping, int group) {
  return Format{Kind::kUniform3, 3, grouping, group, false};
}
Format Normal(int bits, Grouping grouping, int group) {
  return Format{Kind::kNormal, bits, grouping, group, false};
}

Format GgmlBlock(Kind kind) {
  return Format{kind, Traits(kind).default_bits, Grouping::kPerToken, 32, false};
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

// A width or group size: decimal, through the one checked parser (core/number.h).
bool ParseSmallInt(std::string_view s, int* out) {
  Result<int64_t> r = ParseInt(s, "", 0, std::numeric_limits<int>::max());
  if (!r.ok()) return false;
  *out = static_cast<int>(*r);
  return true;
}

bool IsQuantKind(Kind k) { return Traits(k).grouped; }

// "1, 2, 4 or 8" for the legal widths of a row.
std::string BitsList(uint64_t legal) {
  std::vector<std::string> widths;
  for (int b = 0; b < 64; ++b) {
    if ((legal >> b) & 1u) widths.push_back(std::to_string(b));
  }
  std::string s;
  for (size_t i = 0; i < widths.size(); ++i) {
    if (i > 0) s += i + 1 == widths.size() ? " or " : ", ";
    s += widths[i];
  }
  return s;
}

Status CheckBits(const Format& f) {
  const FormatTraits& tr = Traits(f.kind);
  if (f.bits >= 0 && f.bits < 64 && ((tr.legal_bits >> f.bits) & 1u) != 0) return Status::Ok();
  if (tr.bits_in_name) {
    return MakeError(std::string(tr.description) + " supports " + BitsList(tr.legal_bits) +
                     " bits, got " + std::to_string(f.bits));
  }
  return MakeError("format '" + FormatName(f) + "' has an illegal bit width " +
                   std::to_string(f.bits));
}

// "f16, f32, ..., u1, u2, u4, u8, n1, n2, n4": every spec head the table knows.
std::string KnownHeads() {
  size_t n = 0;
  const FormatTraits* rows = AllTraits(&n);
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    for (int b = 0; b < 64; ++b) {
      if (rows[i].bits_in_name ? ((rows[i].legal_bits >> b) & 1u) != 0 : b == 0) {
        if (!s.empty()) s += ", ";
        s += rows[i].bits_in_name ? rows[i].name + std::to_string(b) : std::string(rows[i].name);
      }
    }
  }
  return s;
}

// "u*/n*": the spec heads of the grouped kinds.
std::string GroupedHeads() {
  size_t n = 0;
  const FormatTraits* rows = AllTraits(&n);
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    if (!rows[i].grouped) continue;
    if (!s.empty()) s += "/";
    s += std::string(rows[i].name) + "*";
  }
  return s;
}

// The format named by a spec head ("u4", "int8"), with the kind's defaults;
// an error when no row matches.
Result<Format> FormatFromHead(std::string_view head, const std::string& text) {
  size_t n = 0;
  const FormatTraits* rows = AllTraits(&n);
  for (size_t i = 0; i < n; ++i) {
    if (!rows[i].bits_in_name && head == rows[i].name) {
      Format f;
      f.kind = rows[i].kind;
      f.bits = rows[i].default_bits;
      return f;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const std::string_view prefix = rows[i].name;
    if (!rows[i].bits_in_name || head.size() <= prefix.size() ||
        head.substr(0, prefix.size()) != prefix) {
      continue;
    }
    Format f;
    f.kind = rows[i].kind;
    if (!ParseSmallInt(head.substr(prefix.size()), &f.bits)) {
      return MakeError("unknown format '" + std::string(head) + "' in '" + text + "'");
    }
    if (Status s = CheckBits(f); !s.ok()) return MakeError(s.message() + " in '" + text + "'");
    return f;
  }
  return MakeError("unknown format '" + std::string(head) + "' in '" + text + "' (expected " +
                   KnownHeads() + ")");
}

}  // namespace

Result<Format> ParseFormat(const std::string& text) {
  const std::vector<std::string_view> parts = Split(text, ':');
  const std::string_view head = parts[0];
  HQEKV_ASSIGN_OR_RETURN(Format f, FormatFromHead(head, text));
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string_view p = parts[i];
    if (p == "had") {
      f.hadamard = true;
    } else if (p == "tok" || p == "chan") {
      if (!IsQuantKind(f.kind)) {
        return MakeError("grouping ':" + std::string(p) + "' only applies to " + GroupedHeads() +
                         " formats, in '" + text + "'");
      }
      f.grouping = p == "tok" ? Grouping::kPerToken : Grouping::kPerChannel;
    } else if (p.substr(0, 2) == "g=") {
      int g = 0;
      if (!IsQuantKind(f.kind)) {
        return MakeError("group size only applies to " + GroupedHeads() + " formats, in '" + text +
                         "'");
      }
      if (!ParseSmallInt(p.substr(2), &g) || g <= 0) {
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

bool IsGroupedKind(Kind kind) { return IsQuantKind(kind); }

std::string FormatName(const Format& f) {
  const FormatTraits& tr = Traits(f.kind);
  std::string s = tr.name;
  if (tr.bits_in_name) s += std::to_string(f.bits);
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
  if (const int b = Traits(f.kind).d_block; b > 0 && D % b != 0) {
    return MakeError("format '" + FormatName(f) + "' quantizes blocks of " + std::to_string(b) +
                     " values along the head dimension, which D = " + std::to_string(D) +
                     " is not a multiple of");
  }
  if (f.hadamard && (D & (D - 1)) != 0) {
    return MakeError("Hadamard rotation needs a power-of-two head dimension, got D = " +
                     std::to_string(D));
  }
  return Status::Ok();
}

size_t CodeBytes(const Format& f, int T, int D) {
  if (T <= 0 || D <= 0) return 0;
  return Traits(f.kind).code_bytes(f, T, D);
}

size_t MetaBytes(const Format& f, int T, int D) {
  if (T <= 0 || D <= 0) return 0;
  return Traits(f.kind).meta_bytes(f, T, D);
}

}  // namespace hqekv::quant
