// Reading user-named files, and where the default model is found.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace hqekv {

// The whole file as bytes (an empty file gives ""). Errors name the path:
// "file 'P' does not exist", "'P' is a directory, not a text file",
// "cannot open 'P'", "error reading 'P'".
Result<std::string> ReadTextFile(const std::string& path);

// The model used when a subcommand gets no -m: $HQEKV_MODEL when set and not
// empty; else the first models/stories260K.gguf found next to the running
// executable (its ../ and ../../, i.e. a build tree inside the repository),
// in `source_dir` (the source tree the binary was built from; "" skips it),
// or in the working directory. When none exists, the relative path
// "models/stories260K.gguf" (loading it then reports it missing).
std::string DefaultModelPath(std::string_view source_dir);

// The rule above in one line, for every subcommand's --help of -m.
inline constexpr const char* kDefaultModelHelp =
    "model file, GGUF or llama2.c .bin (default: $HQEKV_MODEL, else the bundled "
    "models/stories260K.gguf)";

}  // namespace hqekv
