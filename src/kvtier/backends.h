// The backends of kvtier/tier.h, made by OpenKvTier.
#pragma once

#include <memory>
#include <string>

#include "kvtier/tier.h"

namespace hqekv::kvtier {

Result<std::unique_ptr<KvTier>> OpenDirTier(const std::string& path, const TierOptions& o);
// host, port, key prefix from "redis://HOST:PORT[/prefix]"; an error when
// this build has no hiredis.
Result<std::unique_ptr<KvTier>> OpenRedisTier(const std::string& host, int port,
                                              const std::string& prefix, const TierOptions& o);

}  // namespace hqekv::kvtier
