// Test helper shared by the store attention tests: a format with its
// Hadamard rotation switched on.
#pragma once

#include "quant/format.h"

namespace hqekv::cache::test_util {

inline quant::Format Had(quant::Format f) {
  f.hadamard = true;
  return f;
}

}  // namespace hqekv::cache::test_util
