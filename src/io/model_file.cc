#include "io/model_file.h"

#include <cstdio>
#include <cstdlib>

namespace hqekv {

int64_t Tensor::rows() const {
  int64_t r = 1;
  for (size_t k = 1; k < ne.size(); ++k) r *= ne[k];
  return r;
}

int64_t Tensor::elements() const { return ne.empty() ? 0 : ne[0] * rows(); }

size_t Tensor::row_bytes() const {
  const int64_t r = rows();
  return r > 0 ? nbytes / static_cast<size_t>(r) : 0;
}

const Tensor* ModelSource::Find(const std::string& name) const {
  auto it = tensors.find(name);
  return it == tensors.end() ? nullptr : &it->second;
}

const Tensor& ModelSource::Get(const std::string& name) const {
  const Tensor* t = Find(name);
  if (!t) {
    // Programming error: LoadModel validated every tensor the config needs.
    std::fprintf(stderr, "hqekv: internal error: model '%s' has no tensor '%s'\n", path.c_str(),
                 name.c_str());
    std::abort();
  }
  return *t;
}

const Tensor& ModelSource::Output() const {
  const Tensor* t = Find("output.weight");
  return t ? *t : Get("token_embd.weight");
}

int64_t ModelSource::ParameterCount() const {
  int64_t n = 0;
  for (const auto& [name, t] : tensors) n += t.elements();
  return n;
}

}  // namespace hqekv
