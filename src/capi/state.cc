// C API: a context's KV state to and from a file or a buffer (cache/kv_state.h,
// the format of `hqekv run --prompt-cache` and the server's slot files).
#include <cstring>
#include <string>

#include "cache/kv_state.h"
#include "capi/handles.h"
#include "core/file.h"

using hqekv::capi::Fail;
using hqekv::capi::Guard;

namespace {

// The state file's bytes for ctx, or a failed status (message recorded).
hqekv_status Encode(const char* fn, const hqekv_context* ctx, std::string* out) {
  if (!ctx) return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string(fn) + ": ctx is NULL");
  if (!ctx->seq.has_logits || ctx->seq.window.empty())
    return Fail(HQEKV_ERR_STATE, std::string(fn) + ": nothing to save (decode a prompt first)");
  hqekv::KvStateMeta meta;
  meta.model_identity = ctx->src->identity;
  meta.spec = ctx->describe;
  meta.geometry = ctx->cache->geometry();
  meta.tokens = ctx->seq.window;
  meta.logits = ctx->seq.logits;
  auto bytes = hqekv::EncodeKvState(*ctx->cache, meta);
  if (!bytes.ok()) return Fail(HQEKV_ERR_STATE, std::string(fn) + ": " + bytes.message());
  *out = std::move(*bytes);
  return HQEKV_OK;
}

// Loads `file` into ctx: checked against the context's model, spec and
// geometry before anything changes.
hqekv_status Decode(const char* fn, hqekv_context* ctx, std::string_view file) {
  auto header = hqekv::ReadKvStateHeader(file);
  if (!header.ok()) return Fail(HQEKV_ERR_LOAD, std::string(fn) + ": " + header.message());
  if (header->logits.size() != ctx->seq.logits.size()) {
    return Fail(HQEKV_ERR_LOAD, std::string(fn) + ": the state's logits (" +
                                    std::to_string(header->logits.size()) +
                                    ") do not match this model's vocabulary");
  }
  hqekv::KvStateMeta expect;
  expect.model_identity = ctx->src->identity;
  expect.spec = ctx->describe;
  expect.geometry = ctx->cache->geometry();
  auto meta = hqekv::LoadKvState(file, expect, *ctx->cache);
  if (!meta.ok()) return Fail(HQEKV_ERR_LOAD, std::string(fn) + ": " + meta.message());
  hqekv::Sequence& seq = ctx->seq;
  seq.Clear();
  seq.window = meta->tokens;
  seq.history = meta->tokens;
  seq.logits = std::move(meta->logits);
  seq.has_logits = true;
  return HQEKV_OK;
}

}  // namespace

extern "C" {

hqekv_status hqekv_context_save_state(const hqekv_context* ctx, const char* path) {
  return Guard("hqekv_context_save_state", [&] {
    if (!path) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_context_save_state: path is NULL");
    std::string bytes;
    const hqekv_status s = Encode("hqekv_context_save_state", ctx, &bytes);
    if (s != HQEKV_OK) return s;
    const hqekv::Status w = hqekv::WriteFileAtomic(path, bytes);
    if (!w.ok()) return Fail(HQEKV_ERR_LOAD, "hqekv_context_save_state: " + w.message());
    return HQEKV_OK;
  });
}

hqekv_status hqekv_context_load_state(hqekv_context* ctx, const char* path) {
  return Guard("hqekv_context_load_state", [&] {
    if (!ctx) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_context_load_state: ctx is NULL");
    if (!path) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_context_load_state: path is NULL");
    auto file = hqekv::ReadFileChecked(path, uint64_t{1} << 36);
    if (!file.ok()) return Fail(HQEKV_ERR_LOAD, "hqekv_context_load_state: " + file.message());
    return Decode("hqekv_context_load_state", ctx, *file);
  });
}

hqekv_status hqekv_context_state_get_data(const hqekv_context* ctx, uint8_t* buf, size_t cap,
                                          size_t* len) {
  return Guard("hqekv_context_state_get_data", [&] {
    if (!len) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_context_state_get_data: len is NULL");
    *len = 0;
    if (cap > 0 && !buf)
      return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_context_state_get_data: buf is NULL");
    std::string bytes;
    const hqekv_status s = Encode("hqekv_context_state_get_data", ctx, &bytes);
    if (s != HQEKV_OK) return s;
    *len = bytes.size();
    if (cap < bytes.size()) {
      return Fail(HQEKV_ERR_BUFFER_TOO_SMALL, "hqekv_context_state_get_data: the state needs " +
                                                  std::to_string(bytes.size()) + " bytes, cap is " +
                                                  std::to_string(cap));
    }
    std::memcpy(buf, bytes.data(), bytes.size());
    return HQEKV_OK;
  });
}

hqekv_status hqekv_context_state_set_data(hqekv_context* ctx, const uint8_t* data, size_t len) {
  return Guard("hqekv_context_state_set_data", [&] {
    if (!ctx) return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_context_state_set_data: ctx is NULL");
    if (!data && len > 0)
      return Fail(HQEKV_ERR_INVALID_ARGUMENT, "hqekv_context_state_set_data: data is NULL");
    return Decode("hqekv_context_state_set_data", ctx,
                  std::string_view(reinterpret_cast<const char*>(data), len));
  });
}

}  // extern "C"
