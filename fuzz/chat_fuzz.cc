// libFuzzer target for chat templates: the input is split at NUL bytes into a
// Jinja template (detection), an override name, a system and a user message;
// every family renders them. Any input gives a format or an error, and the
// rendering contains the user's message (trimmed of ASCII whitespace, as
// some families trim it).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "tokenizer/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 16384) return 0;
  std::vector<std::string> parts(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0 && parts.size() < 4) {
      parts.emplace_back();
    } else {
      parts.back() += static_cast<char>(data[i]);
    }
  }
  parts.resize(4);
  (void)hqekv::DetectChatFormat(parts[0]);
  (void)hqekv::ChatFormatFromName(parts[1]);
  (void)hqekv::ResolveChatFormat(parts[0], parts[1]);
  const std::string ws = " \t\n\r\f\v";
  const size_t a = parts[3].find_first_not_of(ws), b = parts[3].find_last_not_of(ws);
  const std::string core = a == std::string::npos ? "" : parts[3].substr(a, b - a + 1);
  const std::vector<hqekv::ChatMessage> msgs = {{"system", parts[2]}, {"user", parts[3]}};
  for (auto f : {hqekv::ChatFormat::kChatML, hqekv::ChatFormat::kLlama3, hqekv::ChatFormat::kPhi3,
                 hqekv::ChatFormat::kGemma}) {
    for (const bool gen : {false, true}) {
      const std::string out = hqekv::RenderChat(f, msgs, gen);
      if (out.find(core) == std::string::npos) std::abort();
    }
  }
  return 0;
}
