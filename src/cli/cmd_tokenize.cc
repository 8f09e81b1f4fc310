// `hqekv tokenize`: token ids of texts under a GGUF file's tokenizer (a model,
// or a tokenizer-only file from scripts/hf_tokenizer_to_gguf.py). Reads a
// JSON array of strings, writes a JSON array of id arrays, one per string;
// for comparing hqekv's tokenization with other tokenizers
// (tests/peers/tokenizer_parity.sh).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/registry.h"
#include "core/file.h"
#include "io/gguf.h"
#include "io/mmap_file.h"
#include "io/tokenizer_gguf.h"

namespace hqekv::cli::cmd_tokenize {
namespace {

struct TokenizeArgs {
  std::string model, texts_file;
  bool parse_special = false;
  bool bos = false;
};

Result<std::string> Tokenize(const TokenizeArgs& a) {
  HQEKV_ASSIGN_OR_RETURN(auto mapped, MappedFile::Open(a.model));
  HQEKV_ASSIGN_OR_RETURN(GgufFile gguf, ParseGguf(mapped->data(), mapped->size(), a.model));
  HQEKV_ASSIGN_OR_RETURN(auto tok, TokenizerFromGguf(gguf));
  HQEKV_ASSIGN_OR_RETURN(std::string text, ReadTextFile(a.texts_file));
  const auto texts = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!texts.is_array()) return MakeError(a.texts_file + ": not a JSON array of strings");
  nlohmann::json out = nlohmann::json::array();
  for (const auto& t : texts) {
    if (!t.is_string()) return MakeError(a.texts_file + ": not a JSON array of strings");
    out.push_back(tok->Encode(t.get<std::string>(), a.bos && tok->add_bos(), a.parse_special));
  }
  return out.dump() + "\n";
}

const CommandRegistrar kRegister(13, [](CLI::App& app, int* rc) {
  auto a = std::make_shared<TokenizeArgs>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Token ids of texts (JSON in, JSON out)");
  cmd->add_option("-m,--model", a->model, "GGUF file with tokenizer.ggml.* keys")->required();
  cmd->add_option("--texts", a->texts_file, "JSON file: an array of strings")->required();
  cmd->add_flag("--parse-special", a->parse_special,
                "Control tokens written in the text become their ids");
  cmd->add_flag("--bos", a->bos, "Put BOS first when the file asks for it (add_bos_token)");
  cmd->callback([a, rc] {
    auto out = Tokenize(*a);
    if (!out.ok()) {
      std::fprintf(stderr, "hqekv tokenize: error: %s\n", out.message().c_str());
      *rc = 1;
      return;
    }
    std::fwrite(out->data(), 1, out->size(), stdout);
    *rc = 0;
  });
});

}  // namespace
}  // namespace hqekv::cli::cmd_tokenize
