#include "eval/run/corpus.h"

#include <cctype>
#include <sstream>

#include "core/file.h"

namespace hqekv::eval {

Corpus SplitSentences(const std::string& name, const std::string& text) {
  Corpus c;
  c.name = name;
  std::string cur;
  auto flush = [&] {
    while (!cur.empty() && cur.back() == ' ') cur.pop_back();
    if (cur.size() >= 2) c.sentences.push_back(cur);
    cur.clear();
  };
  const size_t n = text.size();
  for (size_t i = 0; i < n; ++i) {
    const char ch = text[i];
    if (ch == '\n' && i + 1 < n && text[i + 1] == '\n') {  // blank line: paragraph end
      flush();
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(ch))) {
      if (!cur.empty() && cur.back() != ' ') cur.push_back(' ');
      continue;
    }
    cur.push_back(ch);
    if (ch == '.' || ch == '!' || ch == '?') {
      size_t j = i + 1;
      while (j < n && (text[j] == '"' || text[j] == '\'' || text[j] == ')'))
        cur.push_back(text[j++]);
      if (j >= n || std::isspace(static_cast<unsigned char>(text[j]))) {
        i = j - 1;
        flush();
      }
    }
  }
  flush();
  return c;
}

Result<Corpus> LoadCorpus(const std::string& name, const std::string& path) {
  auto text = ReadFileChecked(path, uint64_t{64} << 20);  // regular file, at most 64 MiB
  if (!text.ok()) return MakeError("text file: " + text.message());
  Corpus c = SplitSentences(name, *text);
  if (c.sentences.empty()) return MakeError("text file '" + path + "' contains no sentence");
  return c;
}

Result<std::string> BundledTextPath(const std::string& root, const std::string& name) {
  if (name == "tinystories") return root + "/data/text/tinystories_val_subset.txt";
  if (name == "wiki") return root + "/data/text/wiki.test.raw";
  if (name == "pg11") return root + "/data/text/pg11_alice_in_wonderland.txt";
  return MakeError("unknown bundled text '" + name + "' (known: tinystories, wiki, pg11)");
}

}  // namespace hqekv::eval
