// The repository root, where tests find bundled models and texts (CMake
// passes it as HQEKV_SOURCE_DIR to every test executable).
#pragma once

#include <string>

namespace hqekv::test {

inline const std::string kSourceRoot = HQEKV_SOURCE_DIR;

}  // namespace hqekv::test
