// Reading a typed value out of a parsed JSON document (results.json, cached
// cells) without undefined behaviour. nlohmann's get<int>() static_casts a
// JSON float to the integer type, so a hostile or corrupt file holding
// 2e19 where an int belongs is UB (found by fuzz_results). JsonTo accepts,
// for an integer target, only a JSON integer or an integral float that fits
// the type; for a floating target, any JSON number; anything else goes
// through get_to (strings, arrays of strings) and its type errors are
// caught. Returns false on a wrong type or a value out of range.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include <nlohmann/json.hpp>

namespace hqekv::eval {

template <class T>
bool JsonTo(const nlohmann::json& v, T* out) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) return false;
    *out = v.get<bool>();
    return true;
  } else if constexpr (std::is_integral_v<T>) {
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (!std::in_range<T>(u)) return false;
      *out = static_cast<T>(u);
      return true;
    }
    if (v.is_number_integer()) {
      const int64_t i = v.get<int64_t>();
      if (!std::in_range<T>(i)) return false;
      *out = static_cast<T>(i);
      return true;
    }
    if (v.is_number_float()) {
      const double d = v.get<double>();
      // Bounds as doubles: T's max may round up (2^63 - 1 -> 2^63), so the
      // upper test is strict.
      if (!std::isfinite(d) || d != std::trunc(d) ||
          d < static_cast<double>(std::numeric_limits<T>::min()) ||
          d >= static_cast<double>(std::numeric_limits<T>::max()) + 1.0)
        return false;
      *out = static_cast<T>(d);
      return true;
    }
    return false;
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) return false;
    *out = v.get<T>();
    return true;
  } else {
    try {
      v.get_to(*out);
    } catch (const nlohmann::json::exception&) {
      return false;
    }
    return true;
  }
}

}  // namespace hqekv::eval
