#include "tokenizer/tokenizer_pretokenize.h"

#include "tokenizer/tokenizer_unicode.h"

namespace hqekv {

using unicode::IsLetter;
using unicode::IsNumber;
using unicode::IsWhitespace;

namespace pretokenize_detail {

size_t MatchSpaceTail(const std::vector<uint32_t>& cp, size_t i, size_t e) {
  size_t run_end = i;
  while (run_end < e && IsWhitespace(cp[run_end])) ++run_end;
  // \s*[\r\n]+ : greedy up to the last line break inside the run.
  for (size_t k = run_end; k > i; --k) {
    if (cp[k - 1] == '\r' || cp[k - 1] == '\n') return k;
  }
  if (run_end == e) return run_end;          // \s+(?!\S) at the end of the piece
  if (run_end - i >= 2) return run_end - 1;  // \s+(?!\S): the last space goes to the next piece
  return run_end;                            // \s+
}

std::vector<std::string_view> ScanLlama3(std::string_view text, bool one_digit) {
  const unicode::Codepoints u = unicode::DecodeUtf8(text);
  const std::vector<uint32_t>& cp = u.cp;
  const size_t n = cp.size();
  const size_t max_digits = one_digit ? 1 : 3;
  auto lower = [](uint32_t c) { return c < 0x80 ? (c | 0x20) : c; };
  auto is_other = [](uint32_t c) { return !IsWhitespace(c) && !IsLetter(c) && !IsNumber(c); };

  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < n) {
    size_t end = i;  // exclusive end of the match, in codepoints
    const uint32_t c = cp[i];
    // 1. contractions, case-insensitive
    if (c == '\'' && i + 1 < n) {
      const uint32_t a = lower(cp[i + 1]);
      const uint32_t b = i + 2 < n ? lower(cp[i + 2]) : 0;
      if (a == 's' || a == 't' || a == 'm' || a == 'd')
        end = i + 2;
      else if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
        end = i + 3;
    }
    // 2. [^\r\n\p{L}\p{N}]?\p{L}+
    if (end == i) {
      size_t j = i;
      if (!IsLetter(c) && c != '\r' && c != '\n' && !IsNumber(c) && i + 1 < n &&
          IsLetter(cp[i + 1]))
        ++j;
      if (IsLetter(cp[j])) {
        while (j < n && IsLetter(cp[j])) ++j;
        end = j;
      }
    }
    // 3. \p{N}{1,max_digits}
    if (end == i && IsNumber(c)) {
      size_t j = i;
      while (j < n && j - i < max_digits && IsNumber(cp[j])) ++j;
      end = j;
    }
    // 4. ' ?[^\s\p{L}\p{N}]+[\r\n]*'
    if (end == i) {
      size_t j = i;
      if (c == ' ' && i + 1 < n) ++j;
      if (is_other(cp[j])) {
        while (j < n && is_other(cp[j])) ++j;
        while (j < n && (cp[j] == '\r' || cp[j] == '\n')) ++j;
        end = j;
      }
    }
    if (end == i && IsWhitespace(c)) end = pretokenize_detail::MatchSpaceTail(cp, i, n);
    if (end == i) end = i + 1;  // unreachable in practice; guarantees progress
    out.push_back(text.substr(u.offset[i], u.offset[end] - u.offset[i]));
    i = end;
  }
  return out;
}

}  // namespace pretokenize_detail
}  // namespace hqekv
