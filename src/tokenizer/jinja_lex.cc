#include "tokenizer/jinja_lex.h"

#include "tokenizer/tokenizer_unicode.h"

#include <cctype>
#include <cstdlib>

namespace hqekv::jinja {
namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool IsNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {}

  Result<std::vector<Token>> Run() {
    size_t text_start = 0;
    bool strip_next = false;  // a `-` closed the previous tag
    bool trim_next = false;   // trim_blocks after the previous block tag or comment
    while (pos_ < src_.size()) {
      const size_t open = FindOpen(pos_);
      std::string text(src_.substr(pos_, open - pos_));
      if (strip_next) {
        size_t k = 0;
        while (k < text.size() && IsSpace(text[k])) ++k;
        text.erase(0, k);
      } else if (trim_next) {
        if (text.rfind("\r\n", 0) == 0) {
          text.erase(0, 2);
        } else if (!text.empty() && text[0] == '\n') {
          text.erase(0, 1);
        }
      }
      strip_next = trim_next = false;
      if (open == src_.size()) {
        PushText(std::move(text), pos_);
        break;
      }
      const char kind = src_[open + 1];  // '{', '%' or '#'
      const char flag = open + 2 < src_.size() ? src_[open + 2] : '\0';
      if (flag == '-') {
        while (!text.empty() && IsSpace(text.back())) text.pop_back();
      } else if (kind != '{' && flag != '+' && AtLineStart(open, text_start)) {
        while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.pop_back();
      }
      PushText(std::move(text), pos_);
      pos_ = open + 2 + (flag == '-' || flag == '+' ? 1 : 0);
      if (kind == '#') {
        const size_t close = src_.find("#}", pos_);
        if (close == std::string_view::npos) return Fail(open, "unclosed comment");
        strip_next = close > pos_ && src_[close - 1] == '-';
        trim_next = !strip_next;
        pos_ = close + 2;
      } else {
        const bool block = kind == '%';
        Push(block ? Token::Kind::kBlockOpen : Token::Kind::kOutputOpen, block ? "{%" : "{{", open);
        bool closed = false;
        HQEKV_RETURN_IF_ERROR(LexTag(block, &closed, &strip_next));
        if (!closed) return Fail(open, block ? "unclosed '{%'" : "unclosed '{{'");
        trim_next = block && !strip_next;
        if (block && EndsRaw()) HQEKV_RETURN_IF_ERROR(LexRaw(&strip_next, &trim_next));
      }
      text_start = pos_;
    }
    Push(Token::Kind::kEnd, "", src_.size());
    return std::move(tokens_);
  }

 private:
  size_t FindOpen(size_t from) const {
    for (size_t p = from; p + 1 < src_.size(); ++p) {
      if (src_[p] == '{' && (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#'))
        return p;
    }
    return src_.size();
  }

  // Only spaces and tabs between the start of the tag's line and the tag, and
  // that stretch lies in the text just read (no tag earlier on the line).
  bool AtLineStart(size_t open, size_t text_start) const {
    size_t p = open;
    while (p > 0 && (src_[p - 1] == ' ' || src_[p - 1] == '\t')) --p;
    if (p < text_start) return false;
    return p == 0 || src_[p - 1] == '\n';
  }

  void PushText(std::string text, size_t at) {
    if (!text.empty()) Push(Token::Kind::kText, std::move(text), at);
  }

  void Push(Token::Kind k, std::string text, size_t at) {
    Token t;
    t.kind = k;
    t.text = std::move(text);
    Position(at, &t.line, &t.col);
    tokens_.push_back(std::move(t));
  }

  // Tokens come in source order, so the scan goes on from the last one.
  void Position(size_t at, int* line, int* col) const {
    if (at < pos_at_) pos_at_ = 0, pos_line_ = 1, pos_col_ = 1;
    for (; pos_at_ < at && pos_at_ < src_.size(); ++pos_at_) {
      if (src_[pos_at_] == '\n') {
        ++pos_line_;
        pos_col_ = 1;
      } else {
        ++pos_col_;
      }
    }
    *line = pos_line_;
    *col = pos_col_;
  }

  Error Fail(size_t at, const std::string& what) const {
    int l, c;
    Position(at, &l, &c);
    return MakeError("template line " + std::to_string(l) + ", column " + std::to_string(c) + ": " +
                     what);
  }

  // `{% raw %}` just lexed: the text up to `{% endraw %}` is one text token.
  bool EndsRaw() const {
    const size_t n = tokens_.size();
    return n >= 3 && tokens_[n - 1].kind == Token::Kind::kBlockClose &&
           tokens_[n - 2].kind == Token::Kind::kName && tokens_[n - 2].text == "raw" &&
           tokens_[n - 3].kind == Token::Kind::kBlockOpen;
  }

  Status LexRaw(bool* strip_next, bool* trim_next) {
    const size_t raw_open = pos_;
    tokens_.resize(tokens_.size() - 3);
    for (size_t p = pos_; p < src_.size(); ++p) {
      if (src_.compare(p, 2, "{%") != 0) continue;
      size_t q = p + 2;
      const bool strip_before = q < src_.size() && src_[q] == '-';
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) ++q;
      while (q < src_.size() && IsSpace(src_[q])) ++q;
      if (src_.compare(q, 6, "endraw") != 0) continue;
      q += 6;
      while (q < src_.size() && IsSpace(src_[q])) ++q;
      const bool strip_after = q < src_.size() && src_[q] == '-';
      if (strip_after) ++q;
      if (src_.compare(q, 2, "%}") != 0) continue;
      std::string text(src_.substr(pos_, p - pos_));
      if (*strip_next) {
        size_t k = 0;
        while (k < text.size() && IsSpace(text[k])) ++k;
        text.erase(0, k);
      } else if (*trim_next && !text.empty() && text[0] == '\n') {
        text.erase(0, 1);
      }
      if (strip_before)
        while (!text.empty() && IsSpace(text.back())) text.pop_back();
      PushText(std::move(text), pos_);
      pos_ = q + 2;
      *strip_next = strip_after;
      *trim_next = !strip_after;
      return Status::Ok();
    }
    return Fail(raw_open, "'{% raw %}' without '{% endraw %}'");
  }

  Status LexTag(bool block, bool* closed, bool* strip_after) {
    const char end0 = block ? '%' : '}';
    while (pos_ < src_.size()) {
      const char c = src_[pos_];
      if (IsSpace(c)) {
        ++pos_;
        continue;
      }
      if (c == '-' && src_.compare(pos_ + 1, 2, std::string{end0, '}'}) == 0) {
        *strip_after = true;
        Push(block ? Token::Kind::kBlockClose : Token::Kind::kOutputClose, "", pos_);
        pos_ += 3;
        *closed = true;
        return Status::Ok();
      }
      if (c == end0 && pos_ + 1 < src_.size() && src_[pos_ + 1] == '}') {
        Push(block ? Token::Kind::kBlockClose : Token::Kind::kOutputClose, "", pos_);
        pos_ += 2;
        *closed = true;
        return Status::Ok();
      }
      if (c == '\'' || c == '"') {
        HQEKV_RETURN_IF_ERROR(LexString(c));
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        LexNumber();
      } else if (IsNameStart(c)) {
        const size_t b = pos_;
        while (pos_ < src_.size() && IsNameChar(src_[pos_])) ++pos_;
        Push(Token::Kind::kName, std::string(src_.substr(b, pos_ - b)), b);
      } else {
        static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
        std::string op;
        for (auto t : kTwo)
          if (src_.compare(pos_, 2, t) == 0) op = std::string(t);
        if (op.empty()) {
          if (std::string_view("+-*/%~<>=()[]{},.:|").find(c) == std::string_view::npos)
            return Fail(pos_, std::string("unexpected character '") + c + "'");
          op = std::string(1, c);
        }
        Push(Token::Kind::kOp, op, pos_);
        pos_ += op.size();
      }
    }
    return Status::Ok();
  }

  Status LexString(char quote) {
    const size_t b = pos_++;
    std::string s;
    while (pos_ < src_.size() && src_[pos_] != quote) {
      char c = src_[pos_++];
      if (c == '\\' && pos_ < src_.size()) {
        const char e = src_[pos_++];
        switch (e) {
          case 'n':
            c = '\n';
            break;
          case 't':
            c = '\t';
            break;
          case 'r':
            c = '\r';
            break;
          case 'b':
            c = '\b';
            break;
          case 'f':
            c = '\f';
            break;
          case 'u':
            if (pos_ + 4 <= src_.size()) {
              unicode::AppendUtf8(s, static_cast<uint32_t>(std::strtoul(
                                         std::string(src_.substr(pos_, 4)).c_str(), nullptr, 16)));
              pos_ += 4;
              continue;
            }
            c = e;
            break;
          default:
            c = e;  // \\ \' \" and unknown escapes keep the character
        }
      }
      s += c;
    }
    if (pos_ >= src_.size()) return Fail(b, "unterminated string");
    ++pos_;
    Push(Token::Kind::kString, std::move(s), b);
    return Status::Ok();
  }

  void LexNumber() {
    const size_t b = pos_;
    while (pos_ < src_.size() && std::isdigit(static_cast<unsigned char>(src_[pos_]))) ++pos_;
    bool is_float = false;
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' &&
        std::isdigit(static_cast<unsigned char>(src_[pos_ + 1]))) {
      is_float = true;
      ++pos_;
      while (pos_ < src_.size() && std::isdigit(static_cast<unsigned char>(src_[pos_]))) ++pos_;
    }
    Push(is_float ? Token::Kind::kFloat : Token::Kind::kInt, std::string(src_.substr(b, pos_ - b)),
         b);
  }

  std::string_view src_;
  size_t pos_ = 0;
  std::vector<Token> tokens_;
  mutable size_t pos_at_ = 0;  // Position's scan: offset, line and column reached
  mutable int pos_line_ = 1, pos_col_ = 1;
};

}  // namespace

Result<std::vector<Token>> LexJinja(std::string_view source) { return Lexer(source).Run(); }

}  // namespace hqekv::jinja
