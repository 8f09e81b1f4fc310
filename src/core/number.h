// Checked parsing of numbers typed by a person: CLI flags, KV policy spec
// values, list items (`--bits 2,3.2`, `ratios=0.5/0.5/0/0`). One grammar and
// one range policy for all of them, so `--seed -1`, `bits=0x2`, `-t 4x`,
// `--temp nan` and `--ctx 99999999999999999999` are refused the same way
// everywhere instead of wrapping, saturating or reading as another number.
//
// Grammar (nothing else, no surrounding spaces):
//   integer: [+-]?[0-9]+                     (decimal only: "010" is ten, "0x2" is refused)
//   real:    [+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?
//            and, only where allowed, "nan", "inf", "-inf" (any case).
// Errors name `what` (the flag or key) and the text, e.g.
//   "--seed: '-1' is out of range [0, 18446744073709551615]"
//   "kivi:bits: '0x2' is not a decimal number".
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "core/status.h"

namespace hqekv {

// Integer in [min, max]; overflow of int64 is "out of range" too.
Result<int64_t> ParseInt(std::string_view text, std::string_view what,
                         int64_t min = std::numeric_limits<int64_t>::min(),
                         int64_t max = std::numeric_limits<int64_t>::max());

// Unsigned integer in [0, max] (a minus sign is "out of range").
Result<uint64_t> ParseUint(std::string_view text, std::string_view what,
                           uint64_t max = std::numeric_limits<uint64_t>::max());

// How ParseReal bounds a value. By default finite and any value.
struct RealRange {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_open = false;         // (min, ...: min itself refused
  bool allow_nonfinite = false;  // accept nan / inf / -inf
};

// Real number; a finite literal beyond double's range ("1e999") is "out of
// range", never rounded to inf.
Result<double> ParseReal(std::string_view text, std::string_view what, RealRange range = {});

// "[min, max]" / "(min, max]" as ParseReal's messages write it (%g).
std::string RangeText(const RealRange& range);

}  // namespace hqekv
