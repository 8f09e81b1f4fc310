// The calibration side of profiles. The profile itself (struct, JSON file
// format, loading, the check against a model) lives in policy/profile.h,
// where the cache reads it; calib/search.h fills a Profile's search fields
// and `hqekv calibrate` the rest, including the hash of the calibration text.
#pragma once

#include <string>

#include "policy/profile.h"

namespace hqekv::calib {

// FNV-1a 64-bit of the bytes, as "fnv1a64:<16 lowercase hex>".
std::string TextHash(const std::string& bytes);

}  // namespace hqekv::calib
