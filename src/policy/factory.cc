#include "policy/factory.h"

#include "policy/profile.h"

namespace hqekv {
namespace policy {

Result<std::unique_ptr<KvCache>> CreateCache(const PolicySpec& spec, const KvGeometry& g,
                                             const CacheContext& ctx) {
  const PolicyInfo* p = FindPolicy(spec.name);
  if (!p) return MakeError("unknown KV policy '" + spec.name + "'");
  if (!p->create)
    return MakeError("KV policy '" + spec.name + "' is listed but has no implementation");
  return p->create(spec, g, ctx);
}

Status CheckSpecForModel(const PolicySpec& spec, const CacheContext& ctx) {
  if (!spec.Has("profile")) return Status::Ok();
  const int n_layers = ctx.model ? ctx.model->n_layers : 0;
  HQEKV_RETURN_IF_ERROR(LoadSpecProfile(spec, ctx, n_layers));
  return Status::Ok();
}

CacheContext ForModel(std::string name, std::string identity, int n_layers) {
  CacheContext ctx;
  ctx.model = ModelIdentity{std::move(name), std::move(identity), n_layers};
  return ctx;
}

}  // namespace policy

Result<std::unique_ptr<KvCache>> MakeKvCache(const std::string& text, const KvGeometry& g) {
  HQEKV_ASSIGN_OR_RETURN(const policy::PolicySpec spec, policy::ParseSpec(text));
  return policy::CreateCache(spec, g, policy::CacheContext{});
}

}  // namespace hqekv
