// SentencePiece-style and byte-level BPE tokenizers (see tokenizer.h).
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <queue>
#include <sstream>
#include <unordered_map>

#include "tokenizer/tokenizer_pretokenize.h"
#include "tokenizer/tokenizer_unicode.h"

namespace hqekv {
namespace {

constexpr const char* kSpmSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK "▁"

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using PieceMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// Parses "<0xXX>" (exactly, upper- or lower-case hex); -1 otherwise.
int ParseByteToken(std::string_view p) {
  if (p.size() != 6 || p.substr(0, 3) != "<0x" || p[5] != '>') return -1;
  int v = 0;
  for (int k = 3; k < 5; ++k) {
    const char c = p[k];
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= c - '0';
    else if (c >= 'A' && c <= 'F')
      v |= c - 'A' + 10;
    else if (c >= 'a' && c <= 'f')
      v |= c - 'a' + 10;
    else
      return -1;
  }
  return v;
}

}  // namespace

bool IsEndOfGenerationText(std::string_view piece) {
  for (const char* t : kEndOfGenerationTexts)
    if (piece == t) return true;
  return false;
}

namespace {

// State shared by both kinds: pieces, types, special-token splitting.
class TokenizerBase : public Tokenizer {
 public:
  explicit TokenizerBase(TokenizerVocab v) : v_(std::move(v)) {
    for (int32_t id = 0; id < static_cast<int32_t>(v_.tokens.size()); ++id) {
      all_.emplace(v_.tokens[id], id);  // first occurrence wins
      const int32_t t = v_.types[id];
      // llama.cpp splits on the same three kinds: control, user-defined and
      // the unknown token ("<unk>" written in the text is id 0 in Llama 2).
      if ((t == kTokControl || t == kTokUserDefined || t == kTokUnknown) && !v_.tokens[id].empty())
        specials_.push_back(id);
      if (IsEndOfGenerationText(v_.tokens[id])) eog_.push_back(id);
    }
    for (int32_t id : {v_.eos, v_.eot, v_.eom})
      if (id >= 0) eog_.push_back(id);
    std::sort(eog_.begin(), eog_.end());
    eog_.erase(std::unique(eog_.begin(), eog_.end()), eog_.end());
    // Longest special first, so "<|eot_id|>" beats a shorter prefix.
    std::stable_sort(specials_.begin(), specials_.end(), [&](int32_t a, int32_t b) {
      return v_.tokens[a].size() > v_.tokens[b].size();
    });
    for (int32_t id : specials_)
      specials_by_byte_[static_cast<uint8_t>(v_.tokens[id][0])].push_back(id);
  }

  std::vector<int32_t> Encode(std::string_view text, bool add_bos,
                              bool parse_special) const override {
    std::vector<int32_t> out;
    if (add_bos && v_.bos >= 0) out.push_back(v_.bos);
    size_t start = 0;
    // Every text fragment (at the start or after a special token) gets the
    // SPM space prefix, as llama.cpp does.
    const bool first = true;
    if (!specials_.empty()) {
      for (size_t i = 0; i < text.size();) {
        int32_t hit = -1;
        for (int32_t id : specials_by_byte_[static_cast<uint8_t>(text[i])]) {
          // llama.cpp: user-defined tokens always, control and unknown only when asked.
          if (!parse_special && (v_.types[id] == kTokControl || v_.types[id] == kTokUnknown))
            continue;
          const std::string& p = v_.tokens[id];
          if (text.compare(i, p.size(), p) == 0) {
            hit = id;
            break;
          }
        }
        if (hit < 0) {
          ++i;
          continue;
        }
        if (i > start) EncodeText(text.substr(start, i - start), first, out);
        out.push_back(hit);
        i += v_.tokens[hit].size();
        start = i;
      }
    }
    if (start < text.size()) EncodeText(text.substr(start), first, out);
    return out;
  }

  int32_t bos() const override { return v_.bos; }
  int32_t eos() const override { return v_.eos; }
  bool add_bos() const override { return v_.add_bos; }
  int vocab_size() const override { return static_cast<int>(v_.tokens.size()); }
  bool IsEndOfGeneration(int32_t t) const override {
    return std::binary_search(eog_.begin(), eog_.end(), t);
  }
  const std::vector<int32_t>& EndOfGenerationIds() const override { return eog_; }
  const std::string& chat_template() const override { return v_.chat_template; }
  bool IsControl(int32_t t) const override { return InRange(t) && v_.types[t] == kTokControl; }
  const std::string& Piece(int32_t t) const override { return InRange(t) ? v_.tokens[t] : empty_; }
  int32_t FindPiece(std::string_view p) const override {
    auto it = all_.find(p);
    return it == all_.end() ? -1 : it->second;
  }

 protected:
  // Encodes plain text (no special tokens). `at_start`: the fragment begins the
  // text or follows a special token (SPM adds its dummy-prefix space then).
  virtual void EncodeText(std::string_view text, bool at_start,
                          std::vector<int32_t>& out) const = 0;
  bool InRange(int32_t t) const { return t >= 0 && t < static_cast<int32_t>(v_.tokens.size()); }
  std::string Ids() const {
    std::ostringstream os;
    os << "bos=" << v_.bos << " eos=" << v_.eos << " add_bos=" << (v_.add_bos ? 1 : 0);
    if (v_.eot >= 0) os << " eot=" << v_.eot;
    os << ", " << specials_.size() << " special";
    return os.str();
  }

  TokenizerVocab v_;
  PieceMap all_;
  std::vector<int32_t> specials_;
  std::vector<int32_t> eog_;  // sorted: eos, eot, eom and the end-of-generation texts
  std::vector<int32_t> specials_by_byte_[256];  // specials_ by first byte, longest first
  std::string empty_;
};

// A symbol of the merge loops: a span of the text (or of ids) in a doubly
// linked list; merged-away symbols get len 0.
struct Symbol {
  uint32_t start, len;
  int prev, next;
  int32_t id;
};

// Runs a BPE-style merge queue over the linked symbols: pops the best
// candidate (heap order), skips it when `stale(c)` (one of its symbols has
// changed since it was queued), else joins its right symbol into its left
// one with id c.merged and queues the new neighbour pairs via try_pair.
template <typename Heap, typename Stale, typename TryPair>
void RunMerges(std::vector<Symbol>& sym, Heap& heap, Stale stale, TryPair try_pair) {
  while (!heap.empty()) {
    const auto c = heap.top();
    heap.pop();
    Symbol& l = sym[c.left];
    Symbol& r = sym[c.right];
    if (l.len == 0 || r.len == 0 || l.next != c.right || stale(c, l, r)) continue;
    l.len += r.len;
    l.id = c.merged;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = c.left;
    try_pair(l.prev, c.left);
    try_pair(c.left, l.next);
  }
}

// ---------------------------------------------------------------- SPM
class SpmTokenizer final : public TokenizerBase {
 public:
  explicit SpmTokenizer(TokenizerVocab v) : TokenizerBase(std::move(v)) {
    for (int32_t id = 0; id < static_cast<int32_t>(v_.tokens.size()); ++id) {
      const int32_t t = v_.types[id];
      if (t == kTokByte) {
        const int b = ParseByteToken(v_.tokens[id]);
        if (b >= 0 && byte_ids_[b] < 0) byte_ids_[b] = id;
      } else if (t != kTokControl) {
        mergeable_.emplace(v_.tokens[id], id);
      }
    }
  }

  TokenizerKind kind() const override { return TokenizerKind::kSpm; }

  std::string DecodePiece(int32_t prev, int32_t token) const override {
    if (!InRange(token)) return "";
    const int32_t t = v_.types[token];
    if (t == kTokControl) return "";
    const std::string& p = v_.tokens[token];
    if (t == kTokByte) {
      const int b = ParseByteToken(p);
      if (b >= 0) return std::string(1, static_cast<char>(b));
    }
    std::string out;
    for (size_t i = 0; i < p.size();) {
      if (p.compare(i, 3, kSpmSpace) == 0) {
        out += ' ';
        i += 3;
      } else {
        out += p[i++];
      }
    }
    // llama2.c: the first piece after BOS loses its leading (dummy-prefix) space.
    if (prev >= 0 && prev == v_.bos && !out.empty() && out[0] == ' ') out.erase(0, 1);
    return out;
  }

  std::string Describe() const override {
    bool fallback = false;
    for (int32_t id : byte_ids_) fallback |= id >= 0;
    return "spm (llama), " + std::to_string(v_.tokens.size()) + " tokens, " + Ids() +
           (fallback ? ", byte fallback" : "") + (v_.add_space_prefix ? ", space prefix" : "");
  }

 protected:
  void EncodeText(std::string_view text, bool at_start, std::vector<int32_t>& out) const override {
    // Normalize: spaces -> "▁", plus the dummy prefix (llama2.c prepends " ").
    std::string s;
    s.reserve(text.size() + 3);
    if (at_start && v_.add_space_prefix && !text.empty()) s += kSpmSpace;
    for (char c : text) {
      if (c == ' ')
        s += kSpmSpace;
      else
        s += c;
    }
    if (s.empty()) return;
    // One symbol per UTF-8 character.
    const unicode::Codepoints u = unicode::DecodeUtf8(s);
    std::vector<Symbol> sym(u.cp.size());
    for (size_t k = 0; k < sym.size(); ++k) {
      sym[k] = {u.offset[k], u.offset[k + 1] - u.offset[k], static_cast<int>(k) - 1,
                k + 1 < sym.size() ? static_cast<int>(k) + 1 : -1, -1};
    }
    // Greedy: repeatedly merge the adjacent pair whose concatenation is the
    // best-scoring piece (leftmost on ties), as llama2.c's encode does; a
    // heap with lazy invalidation makes it O(n log n) instead of O(n^2).
    struct Cand {
      float score;
      uint32_t start;  // left symbol's start: tie-break to the leftmost
      int left, right;
      uint32_t len;    // merged length, to detect stale candidates
      int32_t merged;  // the merged piece's id
    };
    auto worse = [](const Cand& a, const Cand& b) {
      return a.score != b.score ? a.score < b.score : a.start > b.start;
    };
    std::priority_queue<Cand, std::vector<Cand>, decltype(worse)> heap(worse);
    auto try_pair = [&](int l, int r) {
      if (l < 0 || r < 0) return;
      auto it = mergeable_.find(std::string_view(s).substr(sym[l].start, sym[l].len + sym[r].len));
      if (it == mergeable_.end()) return;
      heap.push({Score(it->second), sym[l].start, l, r, sym[l].len + sym[r].len, it->second});
    };
    for (size_t k = 0; k + 1 < sym.size(); ++k)
      try_pair(static_cast<int>(k), static_cast<int>(k) + 1);
    RunMerges(
        sym, heap,
        [](const Cand& c, const Symbol& l, const Symbol& r) { return l.len + r.len != c.len; },
        try_pair);
    for (int k = 0; k >= 0 && k < static_cast<int>(sym.size()); k = sym[k].next) {
      const Symbol& x = sym[k];
      int32_t id = x.id;
      if (id < 0) {
        auto it = mergeable_.find(std::string_view(s).substr(x.start, x.len));
        if (it != mergeable_.end()) id = it->second;
      }
      if (id >= 0) {
        out.push_back(id);
        continue;
      }
      // Byte fallback: one <0xXX> token per byte, else <unk>.
      for (uint32_t b = 0; b < x.len; ++b) {
        const int32_t bid = byte_ids_[static_cast<uint8_t>(s[x.start + b])];
        if (bid >= 0)
          out.push_back(bid);
        else if (v_.unk >= 0)
          out.push_back(v_.unk);
      }
    }
  }

 private:
  float Score(int32_t id) const { return v_.scores.empty() ? 0.0f : v_.scores[id]; }
  PieceMap mergeable_;  // non-control, non-byte pieces
  int32_t byte_ids_[256] = {
#define R16 -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1
      R16, R16, R16, R16, R16, R16, R16, R16, R16,
      R16, R16, R16, R16, R16, R16, R16
#undef R16
  };
};

// ---------------------------------------------------------------- BPE
// GPT-2 byte-to-unicode table: printable bytes ('!'..'~', 0xA1..0xAC,
// 0xAE..0xFF) map to themselves, the other 68 to U+0100.. in byte order.
struct ByteUnicode {
  uint32_t to_cp[256];
  std::unordered_map<uint32_t, uint8_t> to_byte;
  ByteUnicode() {
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      to_cp[b] = printable ? static_cast<uint32_t>(b) : next++;
      to_byte[to_cp[b]] = static_cast<uint8_t>(b);
    }
  }
};
const ByteUnicode& Bytes() {
  static const ByteUnicode t;
  return t;
}

class BpeTokenizer final : public TokenizerBase {
 public:
  BpeTokenizer(TokenizerVocab v, std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges,
               size_t skipped)
      : TokenizerBase(std::move(v)), merges_(std::move(merges)), skipped_merges_(skipped) {
    // TokenizerFromGguf refuses unknown names; a vocab built in memory with
    // one gets llama.cpp's DEFAULT set.
    pre_ = PreTokenizerByName(v_.pre).value_or(PreTokenizer::kDefault);
    // llama.cpp looks a whole Llama 3 / Tekken word up first ("ignore_merges").
    ignore_merges_ = v_.pre == "llama-bpe" || v_.pre == "llama3" || v_.pre == "tekken";
    for (int b = 0; b < 256; ++b) {
      std::string p;
      unicode::AppendUtf8(p, Bytes().to_cp[b]);
      byte_ids_[b] = FindPiece(p);
    }
  }

  TokenizerKind kind() const override { return TokenizerKind::kBpe; }

  std::string DecodePiece(int32_t /*prev*/, int32_t token) const override {
    if (!InRange(token)) return "";
    const int32_t t = v_.types[token];
    if (t == kTokControl) return "";
    const std::string& p = v_.tokens[token];
    if (t == kTokUserDefined) return p;  // stored unmapped
    std::string out;
    const unicode::Codepoints u = unicode::DecodeUtf8(p);
    const auto& to_byte = Bytes().to_byte;
    for (size_t k = 0; k < u.cp.size(); ++k) {
      auto it = to_byte.find(u.cp[k]);
      if (it != to_byte.end())
        out += static_cast<char>(it->second);
      else
        out.append(p, u.offset[k], u.offset[k + 1] - u.offset[k]);
    }
    return out;
  }

  std::string Describe() const override {
    return std::string("bpe (gpt2, pre=") + v_.pre + "), " + std::to_string(v_.tokens.size()) +
           " tokens, " + std::to_string(v_.merges.size()) + " merges" +
           (skipped_merges_ ? " (" + std::to_string(skipped_merges_) + " unusable, skipped)"
                            : std::string()) +
           ", " + Ids();
  }

 protected:
  void EncodeText(std::string_view text, bool /*at_start*/,
                  std::vector<int32_t>& out) const override {
    for (std::string_view word : PreTokenize(text, pre_)) EncodeWord(word, out);
  }

 private:
  void EncodeWord(std::string_view word, std::vector<int32_t>& out) const {
    if (ignore_merges_) {
      std::string mapped;
      for (char c : word) unicode::AppendUtf8(mapped, Bytes().to_cp[static_cast<uint8_t>(c)]);
      const int32_t id = FindPiece(mapped);
      if (id >= 0 && v_.types[id] != kTokControl) {
        out.push_back(id);
        return;
      }
    }
    std::vector<Symbol> sym(word.size());
    for (size_t k = 0; k < word.size(); ++k) {
      sym[k] = {static_cast<uint32_t>(k), 1, static_cast<int>(k) - 1,
                k + 1 < word.size() ? static_cast<int>(k) + 1 : -1,
                byte_ids_[static_cast<uint8_t>(word[k])]};
    }
    struct Cand {
      int32_t rank;
      uint32_t start;
      int left, right;
      int32_t lid, rid, merged;
    };
    auto worse = [](const Cand& a, const Cand& b) {
      return a.rank != b.rank ? a.rank > b.rank : a.start > b.start;
    };
    std::priority_queue<Cand, std::vector<Cand>, decltype(worse)> heap(worse);
    auto try_pair = [&](int l, int r) {
      if (l < 0 || r < 0 || sym[l].id < 0 || sym[r].id < 0) return;
      auto it = merges_.find(Key(sym[l].id, sym[r].id));
      if (it == merges_.end()) return;
      heap.push({it->second.first, sym[l].start, l, r, sym[l].id, sym[r].id, it->second.second});
    };
    for (size_t k = 0; k + 1 < sym.size(); ++k)
      try_pair(static_cast<int>(k), static_cast<int>(k) + 1);
    RunMerges(
        sym, heap,
        [](const Cand& c, const Symbol& l, const Symbol& r) {
          return l.id != c.lid || r.id != c.rid;
        },
        try_pair);
    for (int k = 0; k >= 0 && k < static_cast<int>(sym.size()); k = sym[k].next) {
      if (sym[k].id >= 0)
        out.push_back(sym[k].id);
      else if (v_.unk >= 0)
        out.push_back(v_.unk);  // byte missing from the vocab
    }
  }

  static uint64_t Key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>>
      merges_;  // (left, right) -> (rank, merged id)
  size_t skipped_merges_ = 0;
  PreTokenizer pre_;
  bool ignore_merges_ = false;
  int32_t byte_ids_[256];
};

}  // namespace

std::string Tokenizer::Decode(const std::vector<int32_t>& ids, int32_t prev) const {
  std::string out;
  for (int32_t id : ids) {
    out += DecodePiece(prev, id);
    prev = id;
  }
  return out;
}

Result<std::unique_ptr<Tokenizer>> MakeTokenizer(TokenizerVocab v, const std::string& source) {
  auto fail = [&](const std::string& m) {
    return MakeError("tokenizer of '" + source + "': " + m);
  };
  const size_t n = v.tokens.size();
  if (n == 0) return fail("empty vocabulary");
  if (n > (size_t{1} << 30)) return fail("vocabulary too large");
  if (!v.scores.empty() && v.scores.size() != n)
    return fail(std::to_string(v.scores.size()) + " scores for " + std::to_string(n) + " tokens");
  if (v.types.empty()) {
    v.types.assign(n, kTokNormal);
    for (size_t k = 0; k < n; ++k)
      if (ParseByteToken(v.tokens[k]) >= 0) v.types[k] = kTokByte;
  }
  if (v.types.size() != n)
    return fail(std::to_string(v.types.size()) + " token types for " + std::to_string(n) +
                " tokens");
  for (size_t k = 0; k < n; ++k)
    if (v.types[k] < 0 || v.types[k] > kTokByte)
      return fail("token " + std::to_string(k) + " has invalid type " + std::to_string(v.types[k]));
  for (int32_t* id : {&v.bos, &v.eos, &v.unk, &v.pad, &v.eot, &v.eom}) {
    if (*id >= static_cast<int64_t>(n))
      return fail("special token id " + std::to_string(*id) + " is out of range");
    if (*id < -1) *id = -1;
  }
  if (v.kind == TokenizerKind::kSpm) {
    if (!v.merges.empty()) return fail("SentencePiece vocabulary with merges");
    return std::unique_ptr<Tokenizer>(new SpmTokenizer(std::move(v)));
  }
  // BPE: resolve every merge "left right" to ids once.
  PieceMap ids;
  for (int32_t id = 0; id < static_cast<int32_t>(n); ++id) ids.emplace(v.tokens[id], id);
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges;
  merges.reserve(v.merges.size());
  size_t skipped = 0;
  for (size_t r = 0; r < v.merges.size(); ++r) {
    const std::string& m = v.merges[r];
    const size_t sp =
        m.find(' ', 1);  // a left piece never starts with a space (it is mapped to U+0120)
    if (sp == std::string::npos)
      return fail("merge #" + std::to_string(r) + " '" + m + "' has no space");
    const std::string left = m.substr(0, sp), right = m.substr(sp + 1);
    auto a = ids.find(left), b = ids.find(right), c = ids.find(left + right);
    if (a == ids.end() || b == ids.end() || c == ids.end()) {
      // Such a merge can never apply (llama.cpp keeps it and never uses it):
      // skip it, count it, and fail only if no merge is usable at all.
      ++skipped;
      continue;
    }
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(a->second)) << 32) |
                         static_cast<uint32_t>(b->second);
    merges.emplace(key,
                   std::make_pair(static_cast<int32_t>(r), c->second));  // first (lowest) rank wins
  }
  if (!v.merges.empty() && merges.empty())
    return fail("none of the " + std::to_string(v.merges.size()) +
                " merges refers to pieces of the vocabulary");
  return std::unique_ptr<Tokenizer>(new BpeTokenizer(std::move(v), std::move(merges), skipped));
}

}  // namespace hqekv
