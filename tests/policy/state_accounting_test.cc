// Accounting from real allocations, for every policy of the policy table: the
// bytes a cache reports (Stats(), hence --kv-report and true bits) equal the
// bytes its allocators counted (KvCache::LayerAllocatedBytes: the store's
// instrumented pages and arrays plus every container of the policy's own
// state, which allocates through StoreBackedCache::StateAlloc), after prefill,
// after every decode step (compression events included) and after Reset.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "policy_harness.h"
#include "policy/spec.h"

namespace hqekv::policy {
namespace {

using testing::Driver;
using testing::MustMake;
using testing::SmallGeometry;

// Specs that exercise each policy's state: windows, accumulators, per-head
// units, byte budgets. Every policy of the table must appear (by name) at
// least once, bare names are tried too (a new policy is covered at its
// defaults without editing this list).
const std::vector<std::string>& Specs() {
  static const std::vector<std::string> s = {"kivi:nominal_bits=2,residual=32",
                                             "kivi:nominal_bits=4",
                                             "streaming:sink=4,window=40",
                                             "h2o:keep=0.5",
                                             "h2o:bits=4",
                                             "snapkv:keep=0.4,window=8",
                                             "snapkv:bits=6,window=8",
                                             "pyramid:keep=0.4,window=8",
                                             "hqekv:nominal_bits=2",
                                             "hqekv:nominal_bits=3.2,per_head=1",
                                             "hqekv:bits=3,m=8",
                                             "hqekv:nominal_bits=2.8,hadamard=1"};
  return s;
}

// Reported == allocated for every layer; also returns the policy-state part
// allocated (0 for caches without policy state).
void ExpectExact(const KvCache& c, const std::string& spec, const std::string& when) {
  const KvStats st = c.Stats();
  ASSERT_EQ(static_cast<int>(st.layers.size()), c.geometry().n_layers) << spec;
  int64_t total = 0;
  for (int l = 0; l < c.geometry().n_layers; ++l) {
    const int64_t counted = c.LayerAllocatedBytes(l);
    ASSERT_GE(counted, 0) << spec << ": the cache does not count its allocations";
    EXPECT_EQ(st.layers[l].bytes.total(), counted) << spec << " layer " << l << " " << when;
    total += counted;
  }
  EXPECT_EQ(st.bytes.total(), total) << spec << " " << when;
}

void RunOne(const std::string& spec, std::set<std::string>* covered) {
  auto c = MustMake(spec, SmallGeometry());
  ASSERT_NE(c, nullptr) << spec;
  covered->insert(spec.substr(0, spec.find(':')));
  Driver d(c.get(), 21);
  d.Step(150, true, false);
  ExpectExact(*c, spec, "after prefill");
  int64_t state_seen = 0;
  for (int s = 0; s < 70; ++s) {
    d.Step(1, false, false);
    ExpectExact(*c, spec, "after decode step " + std::to_string(s));
    if (const auto* sc = dynamic_cast<const StoreBackedCache*>(c.get()))
      state_seen = std::max(state_seen, sc->StateAllocatedBytes(0));
  }
  d.Step(3, false, false);  // a multi-token batch
  ExpectExact(*c, spec, "after a 3-token batch");
  // Policies that keep state allocate it through the counted allocator (H2O's
  // scores always exist; HqeKV always holds Range(V) and tiers).
  if (spec.rfind("h2o", 0) == 0 || spec.rfind("hqekv", 0) == 0) {
    EXPECT_GT(state_seen, 0) << spec << ": no policy state went through StateAlloc";
  }
  c->Reset();
  ExpectExact(*c, spec, "after Reset");
  if (const auto* sc = dynamic_cast<const StoreBackedCache*>(c.get())) {
    for (int l = 0; l < c->geometry().n_layers; ++l)
      EXPECT_EQ(sc->StateAllocatedBytes(l), 0) << spec << ": Reset kept policy state";
  }
  d.Step(100, true, false);  // the cache is usable again and still exact
  ExpectExact(*c, spec, "after a second prefill");
}

TEST(StateAccounting, EveryPolicyReportsWhatItsAllocatorsHold) {
  std::set<std::string> covered;
  for (const std::string& spec : Specs()) RunOne(spec, &covered);
  for (const PolicyInfo& p : PolicyTable()) {
    if (MakeKvCache(p.name, SmallGeometry()).ok()) RunOne(p.name, &covered);
  }
  for (const PolicyInfo& p : PolicyTable())
    EXPECT_TRUE(covered.count(p.name)) << "policy " << p.name << " has no accounting test";
}

}  // namespace
}  // namespace hqekv::policy
