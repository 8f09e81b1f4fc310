#include "core/number.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <system_error>

namespace hqekv {
namespace {

std::string Quote(std::string_view what, std::string_view text) {
  // Long inputs are cut so that a message stays one readable line.
  std::string t(text.substr(0, 64));
  if (text.size() > 64) t += "...";
  return std::string(what) + ": '" + t + "'";
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Length of the longest run of digits from `i`.
size_t Digits(std::string_view s, size_t i) {
  size_t n = 0;
  while (i + n < s.size() && IsDigit(s[i + n])) ++n;
  return n;
}

bool IsDecimalInteger(std::string_view s) {
  size_t i = (!s.empty() && (s[0] == '+' || s[0] == '-')) ? 1 : 0;
  return Digits(s, i) > 0 && i + Digits(s, i) == s.size();
}

bool IsDecimalReal(std::string_view s) {
  size_t i = (!s.empty() && (s[0] == '+' || s[0] == '-')) ? 1 : 0;
  const size_t whole = Digits(s, i);
  i += whole;
  size_t frac = 0;
  if (i < s.size() && s[i] == '.') {
    frac = Digits(s, i + 1);
    i += 1 + frac;
  }
  if (whole + frac == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    const size_t exp = Digits(s, i);
    if (exp == 0) return false;
    i += exp;
  }
  return i == s.size();
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string G(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.12g", x);
  return buf;
}

}  // namespace

Result<int64_t> ParseInt(std::string_view text, std::string_view what, int64_t min, int64_t max) {
  const std::string range = "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
  if (text.empty()) return MakeError(std::string(what) + ": empty value, expected an integer");
  if (!IsDecimalInteger(text)) return MakeError(Quote(what, text) + " is not a decimal integer");
  std::string_view digits = text[0] == '+' ? text.substr(1) : text;
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec == std::errc::result_out_of_range || v < min || v > max)
    return MakeError(Quote(what, text) + " is out of range " + range);
  if (ec != std::errc() || ptr != digits.data() + digits.size())
    return MakeError(Quote(what, text) + " is not a decimal integer");
  return v;
}

Result<uint64_t> ParseUint(std::string_view text, std::string_view what, uint64_t max) {
  const std::string range = "[0, " + std::to_string(max) + "]";
  if (text.empty()) return MakeError(std::string(what) + ": empty value, expected an integer");
  if (!IsDecimalInteger(text)) return MakeError(Quote(what, text) + " is not a decimal integer");
  if (text[0] == '-') {
    // "-0" is zero; any other negative number is below the range.
    if (text.find_first_not_of("0", 1) != std::string_view::npos)
      return MakeError(Quote(what, text) + " is out of range " + range);
    return uint64_t{0};
  }
  std::string_view digits = text[0] == '+' ? text.substr(1) : text;
  uint64_t v = 0;
  const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec == std::errc::result_out_of_range || v > max)
    return MakeError(Quote(what, text) + " is out of range " + range);
  if (ec != std::errc() || ptr != digits.data() + digits.size())
    return MakeError(Quote(what, text) + " is not a decimal integer");
  return v;
}

std::string RangeText(const RealRange& r) {
  return std::string(r.min_open ? "(" : "[") + G(r.min) + ", " + G(r.max) + "]";
}

Result<double> ParseReal(std::string_view text, std::string_view what, RealRange range) {
  if (text.empty()) return MakeError(std::string(what) + ": empty value, expected a number");
  double v = 0;
  const std::string low = Lower(text);
  if (low == "nan" || low == "+nan" || low == "-nan" || low == "inf" || low == "+inf" ||
      low == "-inf" || low == "infinity" || low == "+infinity" || low == "-infinity") {
    if (!range.allow_nonfinite) return MakeError(Quote(what, text) + " is not a finite number");
    v = low.find("nan") != std::string::npos ? std::nan("")
        : low[0] == '-'                      ? -std::numeric_limits<double>::infinity()
                                             : std::numeric_limits<double>::infinity();
    if (std::isnan(v)) return v;
  } else {
    if (!IsDecimalReal(text)) return MakeError(Quote(what, text) + " is not a decimal number");
    std::string_view body = text[0] == '+' ? text.substr(1) : text;
    const auto [ptr, ec] = std::from_chars(body.data(), body.data() + body.size(), v);
    if (ec == std::errc::result_out_of_range) {
      // Underflow (1e-999) reads as 0 as any calculator would; overflow is refused.
      const bool tiny = body.find_first_of("123456789") != std::string_view::npos &&
                        (low.find("e-") != std::string::npos);
      if (!tiny) return MakeError(Quote(what, text) + " is out of range " + RangeText(range));
      v = 0.0;
    } else if (ec != std::errc() || ptr != body.data() + body.size()) {
      return MakeError(Quote(what, text) + " is not a decimal number");
    }
  }
  if (v < range.min || v > range.max || (range.min_open && v == range.min))
    return MakeError(Quote(what, text) + " is out of range " + RangeText(range));
  return v;
}

}  // namespace hqekv
