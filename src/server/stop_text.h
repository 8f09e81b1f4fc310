// Generated text on its way to a client, held back only as far as a stop
// string could still be completing (OpenAI `stop`: the text ends before the
// first occurrence, which is not sent).
#pragma once

#include <string>
#include <vector>

namespace hqekv::server {

class StopText {
 public:
  explicit StopText(std::vector<std::string> stops);
  // Appends a token's text; true when a stop string now occurs (the text is
  // cut there and nothing more may be added).
  bool Add(const std::string& piece);
  // The text that no stop string can still claim, not sent before.
  std::string Release();
  // Everything not sent yet (the end of the generation).
  std::string Flush();

 private:
  std::string Take(size_t end);
  std::vector<std::string> stops_;
  size_t hold_ = 0;  // bytes: longest stop string - 1
  std::string text_;
  size_t sent_ = 0;
};

}  // namespace hqekv::server
