// Cells cached by an earlier run: DIR/cells/<hash>.json, one file per cell,
// keyed by the hash of the cell's canonical configuration.
#pragma once

#include <optional>
#include <string>

#include "core/status.h"
#include "eval/run/cell.h"

namespace hqekv::eval {

// Config hash of a cell: FNV-1a over a canonical description (harness
// version, model identity, task or speed config, corpus, seeds, policy),
// as 16 hex digits.
std::string CellHash(const std::string& canonical);

class CellStore {
 public:
  // dir "": no cache (Load finds nothing, Save writes nothing).
  explicit CellStore(std::string dir) : dir_(std::move(dir)) {}

  // The cell stored under `hash`, or nothing when it is absent, unreadable or
  // stored under another hash.
  std::optional<CellResult> Load(const std::string& hash) const;

  // Writes DIR/cells/<c.hash>.json (through a temporary file and a rename,
  // so an interrupted run leaves no half-written cell).
  Status Save(const CellResult& c) const;

 private:
  std::string dir_;
};

}  // namespace hqekv::eval
