// C API: a context's KV state to and from a file or a buffer (cache/kv_state.h,
// the format of `hqekv run --prompt-cache` and the server's slot files).
#include <cstring>
#include <string>

#include "cache/kv_state.h"
#include "capi/handles.h"
#include "core/file.h"

using hqekv::capi::Fail;
using hqekv::capi::Guard;

namespace hqekv::capi {

hqekv_status EncodeSeqState(const char* fn, const hqekv_context* ctx, const SeqRef& s,
                            std::string* out) {
  if (!s.seq->has_logits || s.seq->window.empty())
    return Fail(HQEKV_ERR_STATE, std::string(fn) + ": nothing to save (decode a prompt first)");
  hqekv::KvStateMeta meta;
  meta.model_identity = ctx->src->identity;
  meta.spec = *s.describe;
  meta.geometry = s.cache->geometry();
  meta.tokens = s.seq->window;
  meta.logits = s.seq->logits;
  auto bytes = hqekv::EncodeKvState(*s.cache, meta);
  if (!bytes.ok()) return Fail(HQEKV_ERR_STATE, std::string(fn) + ": " + bytes.message());
  *out = std::move(*bytes);
  return HQEKV_OK;
}

hqekv_status DecodeSeqState(const char* fn, const hqekv_context* ctx, const SeqRef& s,
                            std::string_view file) {
  auto header = hqekv::ReadKvStateHeader(file);
  if (!header.ok()) return Fail(HQEKV_ERR_LOAD, std::string(fn) + ": " + header.message());
  const size_t vocab = static_cast<size_t>(ctx->src->config.vocab_size);
  if (header->logits.size() != vocab) {
    return Fail(HQEKV_ERR_LOAD, std::string(fn) + ": the state's logits (" +
                                    std::to_string(header->logits.size()) +
                                    ") do not match this model's vocabulary");
  }
  hqekv::KvStateMeta expect;
  expect.model_identity = ctx->src->identity;
  expect.spec = *s.describe;
  expect.geometry = s.cache->geometry();
  auto meta = hqekv::LoadKvState(file, expect, *s.cache);
  if (!meta.ok()) return Fail(HQEKV_ERR_LOAD, std::string(fn) + ": " + meta.message());
  hqekv::Sequence& seq = *s.seq;
  seq.Clear();
  seq.window = meta->tokens;
  seq.history = meta->tokens;
  seq.logits = std::move(meta->logits);
  seq.has_logits = true;
  return HQEKV_OK;
}

}  // namespace hqekv::capi

namespace {

// The state file's bytes for ctx's sequence 0, or a failed status.
hqekv_status Encode(const char* fn, const hqekv_context* ctx, std::string* out) {
  if (!ctx) return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string(fn) + ": ctx is NULL");
  return hqekv::capi::EncodeSeqState(fn, ctx, hqekv::capi::FindSeq(ctx, 0), out);
}

hqekv_status Decode(const char* fn, hqekv_context* ctx, std::string_view file) {
  return hqekv::capi::DecodeSeqState(fn, ctx, hqekv::capi::FindSeq(ctx, 0), file);
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
