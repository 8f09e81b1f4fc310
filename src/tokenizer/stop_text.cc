#include "tokenizer/stop_text.h"

#include <algorithm>

namespace hqekv {

StopText::StopText(std::vector<std::string> stops) : stops_(std::move(stops)) {
  for (const auto& s : stops_) hold_ = std::max(hold_, s.empty() ? 0 : s.size() - 1);
}

bool StopText::Add(const std::string& piece) {
  const size_t from = text_.size() > hold_ ? text_.size() - hold_ : 0;
  text_ += piece;
  size_t cut = std::string::npos;
  for (const auto& s : stops_) {
    const size_t at = s.empty() ? std::string::npos : text_.find(s, from);
    if (at < cut) cut = at, matched_ = s;
  }
  if (cut == std::string::npos) return false;
  text_.resize(std::max(cut, sent_));
  return true;
}

std::string StopText::Take(size_t end) {
  if (end <= sent_) return "";
  std::string out = text_.substr(sent_, end - sent_);
  sent_ = end;
  return out;
}

std::string StopText::Release() { return Take(text_.size() > hold_ ? text_.size() - hold_ : 0); }

std::string StopText::Flush() { return Take(text_.size()); }

}  // namespace hqekv
