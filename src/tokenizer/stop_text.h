// Generated text on its way to a reader (a server client, `run`'s stdout),
// held back only as far as a stop string could still be completing (OpenAI
// `stop`, `run --stop`: the text ends before the first occurrence, which is
// not sent). One home for `serve` and `run`.
#pragma once

#include <string>
#include <vector>

namespace hqekv {

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
  // All the text so far (cut at a stop string), sent or not.
  const std::string& text() const { return text_; }
  // The stop string that occurred ("" before one did): the earliest in the
  // text, the first listed of those that start there.
  const std::string& matched() const { return matched_; }

 private:
  std::string Take(size_t end);
  std::vector<std::string> stops_;
  size_t hold_ = 0;  // bytes: longest stop string - 1
  std::string text_;
  std::string matched_;
  size_t sent_ = 0;
};

}  // namespace hqekv
