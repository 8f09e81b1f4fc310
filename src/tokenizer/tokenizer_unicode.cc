#include "tokenizer/tokenizer_unicode.h"

#include <algorithm>
#include <iterator>

#include "tokenizer/tokenizer_unicode_tables.h"

namespace hqekv::unicode {
namespace {

template <size_t N>
bool InRanges(const CodepointRange (&r)[N], uint32_t cp) {
  auto it = std::upper_bound(std::begin(r), std::end(r), cp,
                             [](uint32_t v, const CodepointRange& x) { return v < x.first; });
  if (it == std::begin(r)) return false;
  --it;
  return cp <= it->last;
}

}  // namespace

int Utf8SequenceLength(uint8_t b) {
  if (b < 0x80) return 1;
  if ((b & 0xE0) == 0xC0) return 2;
  if ((b & 0xF0) == 0xE0) return 3;
  if ((b & 0xF8) == 0xF0) return 4;
  return 1;
}

Codepoints DecodeUtf8(std::string_view s) {
  Codepoints out;
  out.cp.reserve(s.size());
  out.offset.reserve(s.size() + 1);
  size_t i = 0;
  while (i < s.size()) {
    const uint8_t b = static_cast<uint8_t>(s[i]);
    out.offset.push_back(static_cast<uint32_t>(i));
    int len = Utf8SequenceLength(b);
    uint32_t cp = kInvalid;
    if (len == 1) {
      if (b < 0x80) cp = b;
    } else if (i + len <= s.size()) {
      uint32_t v = b & (0x7F >> len);
      bool ok = true;
      for (int k = 1; k < len; ++k) {
        const uint8_t c = static_cast<uint8_t>(s[i + k]);
        if ((c & 0xC0) != 0x80) ok = false;
        v = (v << 6) | (c & 0x3F);
      }
      static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
      if (ok && v >= kMin[len] && v <= 0x10FFFF && !(v >= 0xD800 && v <= 0xDFFF)) cp = v;
    }
    if (cp == kInvalid) len = 1;
    out.cp.push_back(cp);
    i += static_cast<size_t>(len);
  }
  out.offset.push_back(static_cast<uint32_t>(s.size()));
  return out;
}

void AppendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool IsLetter(uint32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  return cp != kInvalid && InRanges(kLetterRanges, cp);
}

bool IsNumber(uint32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return cp != kInvalid && InRanges(kNumberRanges, cp);
}

bool IsPunctuation(uint32_t cp) { return cp != kInvalid && InRanges(kPunctuationRanges, cp); }

bool IsSymbol(uint32_t cp) { return cp != kInvalid && InRanges(kSymbolRanges, cp); }

bool IsMark(uint32_t cp) { return cp != kInvalid && InRanges(kMarkRanges, cp); }

bool IsWhitespace(uint32_t cp) {
  // Unicode White_Space property (PropList.txt).
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

}  // namespace hqekv::unicode
