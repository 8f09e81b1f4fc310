// Small UTF-8 and Unicode-category helpers for the tokenizers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hqekv::unicode {

// Decodes UTF-8 into codepoints with their byte offsets. An invalid byte
// (bad lead, truncated or overlong sequence, surrogate) becomes one
// "codepoint" 0xFFFFFFFF covering that single byte, so byte offsets always
// tile the input and no text is lost.
struct Codepoints {
  std::vector<uint32_t> cp;
  std::vector<uint32_t> offset;  // size cp.size() + 1; offset[k]..offset[k+1] are cp[k]'s bytes
};
Codepoints DecodeUtf8(std::string_view s);
void AppendUtf8(std::string& out, uint32_t cp);
// Byte length of the UTF-8 sequence starting with lead byte b (1 for invalid).
int Utf8SequenceLength(uint8_t b);

constexpr uint32_t kInvalid = 0xFFFFFFFFu;

bool IsLetter(uint32_t cp);       // \p{L}
bool IsNumber(uint32_t cp);       // \p{N}
bool IsWhitespace(uint32_t cp);   // \s (Unicode White_Space)
bool IsPunctuation(uint32_t cp);  // \p{P}
bool IsSymbol(uint32_t cp);       // \p{S}
bool IsMark(uint32_t cp);         // \p{M}

}  // namespace hqekv::unicode
