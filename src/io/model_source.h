// Loading a model file into a ModelSource (model_file.h): GGUF here,
// llama2.c checkpoints through llama2c.h, chosen by the file's magic.
//
//   auto m = LoadModel("models/stories260K.gguf");
//   if (!m.ok()) { fprintf(stderr, "%s\n", m.message().c_str()); ... }
//   const ModelSource& src = **m;
//   const Tensor& wq = src.Get("blk.0.attn_q.weight");  // ne = {d_model, n_heads*head_dim}
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "io/model_file.h"

namespace hqekv {

// Loads a .gguf file (magic "GGUF"), or a llama2.c checkpoint (anything
// else) with its tokenizer (tokenizer_path "" -> tok<vocab>.bin, then
// tokenizer.bin next to the checkpoint). Validates the config (positive
// sizes, n_heads % n_kv_heads == 0, ...) and every tensor's type and shape;
// errors name the file and the tensor or key at fault.
Result<std::unique_ptr<ModelSource>> LoadModel(const std::string& path,
                                               const std::string& tokenizer_path = "");

// LoadModel for a GGUF image already in memory (tests, fuzzing): the tensors
// point into `data`, which the caller keeps alive as long as the result.
// `name` is used as the path in errors.
Result<std::unique_ptr<ModelSource>> LoadGgufImage(const uint8_t* data, size_t size,
                                                   const std::string& name);

// Architecture-level part of LoadModel, shared by both formats: checks that
// every required tensor is present with the right shape, that norms/biases
// are F32, and fills `identity`. Exposed for tests.
Status ValidateModel(ModelSource& model);

}  // namespace hqekv
