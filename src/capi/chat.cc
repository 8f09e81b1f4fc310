// C API: chat-template application (hqekv_chat_apply_template).
#include <string>
#include <vector>

#include "capi/handles.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

using hqekv::capi::Fail;
using hqekv::capi::Guard;

extern "C" {

hqekv_status hqekv_chat_apply_template(const hqekv_model* model, const char* tmpl,
                                       const hqekv_chat_message* msgs, size_t n_msg,
                                       int add_assistant, char* buf, size_t cap, size_t* len) {
  static constexpr char kFn[] = "hqekv_chat_apply_template";
  return Guard(kFn, [&] {
    if (!len) return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string(kFn) + ": len is NULL");
    *len = 0;
    if (!model && !tmpl) {
      return Fail(HQEKV_ERR_INVALID_ARGUMENT,
                  std::string(kFn) + ": model and tmpl are both NULL (one names the template)");
    }
    if (n_msg > 0 && !msgs)
      return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string(kFn) + ": msgs is NULL but n_msg > 0");
    std::vector<hqekv::ChatMessage> conv;
    conv.reserve(n_msg);
    for (size_t i = 0; i < n_msg; ++i) {
      const std::string at = std::string(kFn) + ": msgs[" + std::to_string(i) + "]";
      if (!msgs[i].role || !msgs[i].content)
        return Fail(HQEKV_ERR_INVALID_ARGUMENT, at + ": role or content is NULL");
      const std::string role = msgs[i].role;
      if (role != "system" && role != "user" && role != "assistant") {
        return Fail(HQEKV_ERR_INVALID_ARGUMENT,
                    at + ": role '" + role + "' is not system, user or assistant");
      }
      conv.push_back({role, msgs[i].content});
    }
    // tmpl: a family name, else Jinja source to recognise; NULL: the model's.
    const std::string_view jinja =
        tmpl ? std::string_view(tmpl) : std::string_view(model->src->tokenizer->chat_template());
    const bool is_name = tmpl && hqekv::ChatFormatFromName(tmpl).has_value();
    // The model's own bos/eos texts where there is a model; a template given
    // alone gets its family's usual ones.
    auto format = model ? hqekv::ResolveChatFormat(is_name ? "" : jinja, is_name ? tmpl : "",
                                                   hqekv::ChatTokensOf(*model->src->tokenizer))
                        : hqekv::ResolveChatFormat(is_name ? "" : jinja, is_name ? tmpl : "");
    if (!format.ok())
      return Fail(HQEKV_ERR_INVALID_ARGUMENT, std::string(kFn) + ": " + format.message());
    return hqekv::capi::CopyOut(kFn, hqekv::RenderChat(*format, conv, add_assistant != 0), buf, cap,
                                len);
  });
}

}  // extern "C"
