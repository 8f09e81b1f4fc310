// The regex-list pre-tokenizers (default, gpt-2, smollm, deepseek-llm,
// deepseek-v3, tekken): each regex is a hand-written matcher, and the lists are applied
// one after the other as tokenizer_pretokenize.h describes.
#include <iterator>
#include <utility>

#include "tokenizer/tokenizer_pretokenize.h"
#include "tokenizer/tokenizer_unicode.h"
#include "tokenizer/tokenizer_unicode_tables.h"

namespace hqekv {
namespace {

using unicode::IsLetter;
using unicode::IsNumber;
using unicode::IsPunctuation;
using unicode::IsWhitespace;
using Cps = std::vector<uint32_t>;

// A matcher for one regex: the end of its match starting at cp[i] inside a
// piece ending at cp[e] (lookaheads and $ see the piece's end), or i when
// the regex does not match at i. Every regex here matches >= 1 codepoint.
using Matcher = size_t (*)(const Cps& cp, size_t i, size_t e);

struct Span {
  size_t begin, end;  // codepoints [begin, end)
};

// Re-splits every piece into the regex's leftmost matches and the text
// between them (llama.cpp keeps the unmatched text as pieces too).
std::vector<Span> SplitBy(const Cps& cp, const std::vector<Span>& pieces, Matcher match) {
  std::vector<Span> out;
  for (const Span& s : pieces) {
    size_t gap = s.begin, i = s.begin;
    while (i < s.end) {
      const size_t m = match(cp, i, s.end);
      if (m == i) {
        ++i;
        continue;
      }
      if (gap < i) out.push_back({gap, i});
      out.push_back({i, m});
      i = gap = m;
    }
    if (gap < s.end) out.push_back({gap, s.end});
  }
  return out;
}

bool IsOther(uint32_t c) { return !IsWhitespace(c) && !IsLetter(c) && !IsNumber(c); }
bool IsLineBreak(uint32_t c) { return c == '\r' || c == '\n'; }

template <class Pred>
size_t RunOf(const Cps& cp, size_t i, size_t e, Pred p) {
  while (i < e && p(cp[i])) ++i;
  return i;
}

// GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
// (contractions are case-sensitive here, unlike Llama 3's).
size_t MatchGpt2(const Cps& cp, size_t i, size_t e) {
  const uint32_t c = cp[i];
  if (c == '\'' && i + 1 < e) {
    const uint32_t a = cp[i + 1], b = i + 2 < e ? cp[i + 2] : 0;
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
  }
  const size_t j = c == ' ' && i + 1 < e ? i + 1 : i;  // the optional leading space
  for (auto* cls : {&IsLetter, &IsNumber, &IsOther}) {
    if (cls(cp[j])) return RunOf(cp, j, e, cls);
  }
  if (!IsWhitespace(c)) return i;
  const size_t run = RunOf(cp, i, e, IsWhitespace);
  if (run == e) return run;
  return run - i >= 2 ? run - 1 : i;  // a single space before \S does not match
}

// DEFAULT's first regex: [\p{P}$\+<=>\^~\|]+
size_t MatchPunctRun(const Cps& cp, size_t i, size_t e) {
  return RunOf(cp, i, e, [](uint32_t c) {
    return IsPunctuation(c) || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' ||
           c == '^' || c == '~' || c == '|';
  });
}

size_t MatchNumberRun(const Cps& cp, size_t i, size_t e) { return RunOf(cp, i, e, IsNumber); }

size_t MatchOneNumber(const Cps& cp, size_t i, size_t) { return IsNumber(cp[i]) ? i + 1 : i; }

// [0-9][0-9][0-9]
size_t MatchThreeAsciiDigits(const Cps& cp, size_t i, size_t e) {
  auto d = [](uint32_t c) { return c >= '0' && c <= '9'; };
  return i + 3 <= e && d(cp[i]) && d(cp[i + 1]) && d(cp[i + 2]) ? i + 3 : i;
}

// [\r\n]
size_t MatchLineBreak(const Cps& cp, size_t i, size_t) { return IsLineBreak(cp[i]) ? i + 1 : i; }

// DeepSeek-LLM's letter class, as codepoint ranges (the class written out in
// llama.cpp's LLAMA_VOCAB_PRE_TYPE_DEEPSEEK_LLM regex, sorted).
constexpr unicode::CodepointRange kDeepseekLetters[] = {
    {0x41, 0x5A},       {0x61, 0x7A},       {0xB5, 0xB5},       {0xC0, 0xD6},
    {0xD8, 0xF6},       {0xF8, 0x1BA},      {0x1BC, 0x1BF},     {0x1C4, 0x293},
    {0x295, 0x2AF},     {0x370, 0x373},     {0x376, 0x377},     {0x37B, 0x37D},
    {0x37F, 0x37F},     {0x386, 0x386},     {0x388, 0x38A},     {0x38C, 0x38C},
    {0x38E, 0x3A1},     {0x3A3, 0x3F5},     {0x3F7, 0x481},     {0x48A, 0x52F},
    {0x531, 0x556},     {0x10A0, 0x10C5},   {0x13A0, 0x13F5},   {0x13F8, 0x13FD},
    {0x1C90, 0x1CBA},   {0x1CBD, 0x1CBF},   {0x1D00, 0x1D2B},   {0x1D6B, 0x1D77},
    {0x1D79, 0x1D9A},   {0x1E00, 0x1F15},   {0x1F18, 0x1F1D},   {0x1F20, 0x1F45},
    {0x1F48, 0x1F4D},   {0x1F50, 0x1F57},   {0x1F59, 0x1F59},   {0x1F5B, 0x1F5B},
    {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},   {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE},   {0x1FC2, 0x1FC4},   {0x1FC6, 0x1FCC},   {0x1FD0, 0x1FD3},
    {0x1FD6, 0x1FDB},   {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FF4},   {0x1FF6, 0x1FFC},
    {0x2102, 0x2102},   {0x2107, 0x2107},   {0x210A, 0x2113},   {0x2115, 0x2115},
    {0x2119, 0x211D},   {0x2124, 0x2124},   {0x2126, 0x2126},   {0x2128, 0x2128},
    {0x212A, 0x212D},   {0x212F, 0x2134},   {0x2139, 0x2139},   {0x213C, 0x213F},
    {0x2145, 0x2149},   {0x214E, 0x214E},   {0x2183, 0x2184},   {0x2C00, 0x2C7B},
    {0x2C7E, 0x2CE4},   {0x2CEB, 0x2CEE},   {0x2CF2, 0x2CF3},   {0xA640, 0xA66D},
    {0xA680, 0xA69B},   {0xA722, 0xA76F},   {0xA771, 0xA787},   {0xA78B, 0xA78E},
    {0xAB70, 0xABBF},   {0xFB00, 0xFB06},   {0xFB13, 0xFB17},   {0xFF21, 0xFF3A},
    {0xFF41, 0xFF5A},   {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};

bool IsDeepseekLetter(uint32_t c) {
  for (const auto& r : kDeepseekLetters) {
    if (c < r.first) return false;
    if (c <= r.last) return true;
  }
  return false;
}

// \s?CLASS+ (backtracks to no space when no CLASS codepoint follows it; the
// space itself may be in CLASS, as U+3000 is in DeepSeek's punctuation).
template <bool (*kClass)(uint32_t)>
size_t MatchSpaceThenRun(const Cps& cp, size_t i, size_t e) {
  if (IsWhitespace(cp[i]) && i + 1 < e && kClass(cp[i + 1])) return RunOf(cp, i + 1, e, kClass);
  return kClass(cp[i]) ? RunOf(cp, i, e, kClass) : i;
}

// [!-/:-~！-／：-～‘-‟　-。]
bool IsDeepseekPunct(uint32_t c) {
  return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x7E) || (c >= 0xFF01 && c <= 0xFF0F) ||
         (c >= 0xFF1A && c <= 0xFF5E) || (c >= 0x2018 && c <= 0x201F) ||
         (c >= 0x3000 && c <= 0x3002);
}

// [一-龥ࠀ-一가-퟿] = U+4E00..U+9FA5, U+0800..U+4E00, U+AC00..U+D7FF
bool IsDeepseekCjk(uint32_t c) {
  return (c >= 0x800 && c <= 0x9FA5) || (c >= 0xAC00 && c <= 0xD7FF);
}

size_t MatchCjkRun(const Cps& cp, size_t i, size_t e) { return RunOf(cp, i, e, IsDeepseekCjk); }

// \s+$ : the whitespace run must reach the end of the piece.
size_t MatchTrailingSpace(const Cps& cp, size_t i, size_t e) {
  if (!IsWhitespace(cp[i])) return i;
  const size_t run = RunOf(cp, i, e, IsWhitespace);
  return run == e ? run : i;
}

// Tekken (see the header): U = a letter but a-z, W = a letter but A-Z.
size_t MatchTekken(const Cps& cp, size_t i, size_t e) {
  auto upper = [](uint32_t c) { return IsLetter(c) && !(c >= 'a' && c <= 'z'); };
  auto lower = [](uint32_t c) { return IsLetter(c) && !(c >= 'A' && c <= 'Z'); };
  const uint32_t c = cp[i];
  size_t p = i;  // after the optional [^\r\n\p{L}\p{N}] prefix
  if (!IsLetter(c) && !IsNumber(c) && !IsLineBreak(c) && i + 1 < e && IsLetter(cp[i + 1]))
    p = i + 1;
  if (IsLetter(cp[p])) {
    const size_t u = RunOf(cp, p, e, upper);
    const size_t w = RunOf(cp, u, e, lower);
    if (w > u) return w;  // U*W+ with the greedy U*
    // U* gives back codepoints until a W can start (letters outside ASCII are both).
    for (size_t k = u; k > p; --k) {
      if (lower(cp[k - 1])) return RunOf(cp, k - 1, e, lower);
    }
    return u;  // U+W*: here W* is empty (cp[u] is not a W)
  }
  if (IsNumber(c)) return i + 1;
  const size_t j = c == ' ' && i + 1 < e ? i + 1 : i;
  if (IsOther(cp[j])) {
    const size_t run = RunOf(cp, j, e, IsOther);
    return RunOf(cp, run, e, [](uint32_t x) { return IsLineBreak(x) || x == '/'; });
  }
  return IsWhitespace(c) ? pretokenize_detail::MatchSpaceTail(cp, i, e) : i;
}

// \p{N}{1,3}
size_t MatchUpToThreeNumbers(const Cps& cp, size_t i, size_t e) {
  size_t j = i;
  while (j < e && j - i < 3 && IsNumber(cp[j])) ++j;
  return j;
}

// [一-龥぀-ゟ゠-ヿ]+ : U+4E00..U+9FA5 (CJK), U+3040..U+30FF (hiragana, katakana)
size_t MatchCjkKanaRun(const Cps& cp, size_t i, size_t e) {
  return RunOf(cp, i, e, [](uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FA5) || (c >= 0x3040 && c <= 0x30FF);
  });
}

bool IsLetterOrMark(uint32_t c) { return IsLetter(c) || unicode::IsMark(c); }
bool IsPunctOrSymbol(uint32_t c) { return IsPunctuation(c) || unicode::IsSymbol(c); }
bool IsAsciiLetter(uint32_t c) { return c < 0x80 && IsLetter(c); }

// DeepSeek-V3's last regex, its alternatives tried in order (see the header).
size_t MatchDeepseekV3(const Cps& cp, size_t i, size_t e) {
  const uint32_t c = cp[i];
  // [!-/:-@[-`{-~][A-Za-z]+ : one ASCII punctuation or symbol, then ASCII letters
  const bool ascii_punct = c >= 0x21 && c <= 0x7E && !IsLetter(c) && !IsNumber(c);
  if (ascii_punct && i + 1 < e && IsAsciiLetter(cp[i + 1]))
    return RunOf(cp, i + 1, e, IsAsciiLetter);
  // [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
  if (!IsLineBreak(c) && !IsLetter(c) && !IsPunctOrSymbol(c) && i + 1 < e &&
      IsLetterOrMark(cp[i + 1]))
    return RunOf(cp, i + 1, e, IsLetterOrMark);
  if (IsLetterOrMark(c)) return RunOf(cp, i, e, IsLetterOrMark);
  // ' ?[\p{P}\p{S}]+[\r\n]*'
  const size_t j = c == ' ' && i + 1 < e ? i + 1 : i;
  if (IsPunctOrSymbol(cp[j])) return RunOf(cp, RunOf(cp, j, e, IsPunctOrSymbol), e, IsLineBreak);
  return IsWhitespace(c) ? pretokenize_detail::MatchSpaceTail(cp, i, e) : i;
}

std::vector<Matcher> MatchersOf(PreTokenizer kind) {
  switch (kind) {
    case PreTokenizer::kDefault:
      return {MatchPunctRun, MatchGpt2, MatchNumberRun, MatchThreeAsciiDigits};
    case PreTokenizer::kGpt2:
      return {MatchGpt2};
    case PreTokenizer::kSmollm:
      return {MatchOneNumber, MatchGpt2};
    case PreTokenizer::kDeepseekLlm:
      return {MatchLineBreak,
              MatchSpaceThenRun<IsDeepseekLetter>,
              MatchSpaceThenRun<IsDeepseekPunct>,
              MatchTrailingSpace,
              MatchCjkRun,
              MatchNumberRun};
    case PreTokenizer::kDeepseekV3:
      return {MatchUpToThreeNumbers, MatchCjkKanaRun, MatchDeepseekV3};
    case PreTokenizer::kTekken:
      return {MatchTekken};
    case PreTokenizer::kLlama3:
    case PreTokenizer::kQwen2:
      break;
  }
  return {};
}

struct NamedSet {
  const char* name;
  PreTokenizer kind;
};
constexpr NamedSet kNames[] = {
    {"llama-bpe", PreTokenizer::kLlama3},
    {"llama3", PreTokenizer::kLlama3},
    {"smaug-bpe", PreTokenizer::kLlama3},
    {"qwen2", PreTokenizer::kQwen2},
    {"megrez", PreTokenizer::kQwen2},
    {"default", PreTokenizer::kDefault},
    {"gpt-2", PreTokenizer::kGpt2},
    {"smollm", PreTokenizer::kSmollm},
    {"deepseek-llm", PreTokenizer::kDeepseekLlm},
    {"tekken", PreTokenizer::kTekken},
    {"deepseek-v3", PreTokenizer::kDeepseekV3},
};

}  // namespace

std::optional<PreTokenizer> PreTokenizerByName(std::string_view name) {
  for (const NamedSet& n : kNames) {
    if (name == n.name) return n.kind;
  }
  return std::nullopt;
}

const char* SupportedPreTokenizerNames() {
  return "llama-bpe, llama3, smaug-bpe, qwen2, megrez, default, gpt-2, smollm, deepseek-llm, "
         "deepseek-v3, tekken";
}

std::vector<std::string_view> PreTokenize(std::string_view text, PreTokenizer kind) {
  if (kind == PreTokenizer::kLlama3 || kind == PreTokenizer::kQwen2)
    return pretokenize_detail::ScanLlama3(text, kind == PreTokenizer::kQwen2);
  const unicode::Codepoints u = unicode::DecodeUtf8(text);
  std::vector<Span> pieces;
  if (!u.cp.empty()) pieces.push_back({0, u.cp.size()});
  for (Matcher m : MatchersOf(kind)) pieces = SplitBy(u.cp, pieces, m);
  std::vector<std::string_view> out;
  out.reserve(pieces.size());
  for (const Span& s : pieces)
    out.push_back(text.substr(u.offset[s.begin], u.offset[s.end] - u.offset[s.begin]));
  return out;
}

}  // namespace hqekv
