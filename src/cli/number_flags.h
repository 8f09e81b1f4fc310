// Numeric CLI flags through core/number.h's checked parser. Every numeric
// option of every subcommand gets a validator named kNumberCheck: either one
// the subcommand attaches with its own range (IntFlag / UintFlag / RealFlag),
// or, for any left without one, CheckAllNumericFlags (called once by main)
// attaches the type's default (integers: decimal only, in the type's range;
// reals: finite). The validator runs before CLI11 converts the text and
// rewrites it in canonical decimal, because CLI11's own conversion reads
// "010" as octal 8 and "0x2" as hex. Errors come out as
//   "--seed: '-1' is out of range [0, 18446744073709551615]".
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <limits>
#include <random>
#include <string>

#include "core/number.h"

namespace hqekv::cli {

inline constexpr const char* kNumberCheck = "checked-number";

// Parse errors of the checked parser start with `what`; CLI11 prefixes the
// option name itself, so the validator passes an empty name and strips ": ".
inline std::string StripWhat(const std::string& message) {
  return message.rfind(": ", 0) == 0 ? message.substr(2) : message;
}

inline CLI::Validator IntFlag(int64_t min = std::numeric_limits<int64_t>::min(),
                              int64_t max = std::numeric_limits<int64_t>::max()) {
  return CLI::Validator(
      [min, max](std::string& v) -> std::string {
        Result<int64_t> r = ParseInt(v, "", min, max);
        if (!r.ok()) return StripWhat(r.message());
        v = std::to_string(*r);
        return "";
      },
      "", kNumberCheck);
}

inline CLI::Validator UintFlag(uint64_t max = std::numeric_limits<uint64_t>::max()) {
  return CLI::Validator(
      [max](std::string& v) -> std::string {
        Result<uint64_t> r = ParseUint(v, "", max);
        if (!r.ok()) return StripWhat(r.message());
        v = std::to_string(*r);
        return "";
      },
      "", kNumberCheck);
}

inline CLI::Validator RealFlag(RealRange range = {}) {
  return CLI::Validator(
      [range](std::string& v) -> std::string {
        Result<double> r = ParseReal(v, "", range);
        if (!r.ok()) return StripWhat(r.message());
        return "";  // the text is decimal already: CLI11 reads it as written
      },
      "", kNumberCheck);
}

// -s/--seed as llama.cpp reads it: a uint64, or -1 for a random seed (drawn
// here, from std::random_device, and written back as the flag's text).
inline CLI::Validator SeedFlag() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        if (v == "-1") {
          std::random_device rd;
          v = std::to_string((uint64_t{rd()} << 32) | rd());
          return "";
        }
        Result<uint64_t> r = ParseUint(v, "", std::numeric_limits<uint64_t>::max());
        if (!r.ok()) return StripWhat(r.message()) + " (-1 = a random seed)";
        v = std::to_string(*r);
        return "";
      },
      "", kNumberCheck);
}

// Attaches the default checked parser to every INT / UINT / FLOAT option of
// `app` and its subcommands (recursively) that has none yet.
inline void CheckAllNumericFlags(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    const std::string type = opt->get_type_name();
    if (type != "INT" && type != "UINT" && type != "FLOAT") continue;
    bool has = false;
    try {
      has = opt->get_validator(kNumberCheck) != nullptr;
    } catch (const CLI::OptionNotFound&) {
      has = false;
    }
    if (has) continue;
    if (type == "INT") opt->check(IntFlag());
    if (type == "UINT") opt->check(UintFlag());
    if (type == "FLOAT") opt->check(RealFlag());
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    CheckAllNumericFlags(*sub);
}

}  // namespace hqekv::cli
