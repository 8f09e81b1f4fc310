#include "io/tokenizer_gguf.h"

#include <limits>

#include "tokenizer/tokenizer_pretokenize.h"

namespace hqekv {
namespace {

// A special token id: absent, "none" (-1 as i32, 0xFFFFFFFF as u32: how
// converters write it) or a token of the vocabulary. Any other negative
// number is refused. An id past the vocabulary is refused for BOS and EOS,
// which every prompt and generation use; for the others it means "none", as
// llama.cpp reads them.
Status ReadId(const GgufFile& f, const std::string& key, size_t n_tokens, bool required_in_range,
              int32_t* out) {
  HQEKV_ASSIGN_OR_RETURN(auto v, f.GetOptionalInt(key));
  if (!v.has_value()) return Status::Ok();
  const int64_t id = *v;
  const std::string where = "GGUF file '" + f.path + "': ";
  if (id == -1 || id == 0xFFFFFFFFll) {
    *out = -1;
  } else if (id < 0) {
    return MakeError(where + key + " = " + std::to_string(id) +
                     " is not a token id (-1 or 0xFFFFFFFF mean none)");
  } else if (static_cast<uint64_t>(id) >= n_tokens) {
    if (required_in_range)
      return MakeError(where + key + " = " + std::to_string(id) +
                       " is out of range (the vocabulary has " + std::to_string(n_tokens) +
                       " tokens)");
    *out = -1;
  } else {
    *out = static_cast<int32_t>(id);
  }
  return Status::Ok();
}

}  // namespace

Result<TokenizerVocab> TokenizerVocabFromGguf(const GgufFile& f) {
  const std::string where = "GGUF file '" + f.path + "': ";
  TokenizerVocab v;
  HQEKV_ASSIGN_OR_RETURN(auto model, f.GetString("tokenizer.ggml.model"));
  if (model == "llama") {
    v.kind = TokenizerKind::kSpm;
    v.add_bos = true;
  } else if (model == "gpt2") {
    v.kind = TokenizerKind::kBpe;
    v.add_bos = false;
  } else {
    return MakeError(where + "unsupported tokenizer.ggml.model '" + model +
                     "' (supported: llama, gpt2)");
  }
  HQEKV_ASSIGN_OR_RETURN(auto pre, f.GetOptionalString("tokenizer.ggml.pre"));
  if (pre.has_value()) v.pre = *pre;
  if (v.kind == TokenizerKind::kBpe && !PreTokenizerByName(v.pre))
    return MakeError(where + "unsupported BPE pre-tokenizer tokenizer.ggml.pre '" + v.pre +
                     "' (supported: " + SupportedPreTokenizerNames() + ")");

  const GgufValue* tokens = f.Find("tokenizer.ggml.tokens");
  if (!tokens) return MakeError(where + "required key 'tokenizer.ggml.tokens' is missing");
  if (tokens->type != GgufType::kArray || tokens->array_type != GgufType::kString)
    return MakeError(where + "tokenizer.ggml.tokens must be an array of strings");
  v.tokens = tokens->strings;

  if (const GgufValue* s = f.Find("tokenizer.ggml.scores")) {
    if (s->type != GgufType::kArray || (s->array_size() > 0 && s->floats.empty()))
      return MakeError(where + "tokenizer.ggml.scores must be an array of floats");
    v.scores.assign(s->floats.begin(), s->floats.end());
  }
  if (const GgufValue* t = f.Find("tokenizer.ggml.token_type")) {
    if (t->type != GgufType::kArray || (t->array_size() > 0 && t->ints.empty()))
      return MakeError(where + "tokenizer.ggml.token_type must be an array of integers");
    v.types.reserve(t->ints.size());
    for (int64_t x : t->ints) {
      if (x < 0 || x > kTokByte)
        return MakeError(where + "tokenizer.ggml.token_type holds invalid type " +
                         std::to_string(x));
      v.types.push_back(static_cast<int32_t>(x));
    }
  }
  if (const GgufValue* m = f.Find("tokenizer.ggml.merges")) {
    if (m->type != GgufType::kArray || (m->array_size() > 0 && m->strings.empty()))
      return MakeError(where + "tokenizer.ggml.merges must be an array of strings");
    v.merges = m->strings;
  }
  if (v.kind == TokenizerKind::kBpe && v.merges.empty())
    return MakeError(where + "gpt2 tokenizer without tokenizer.ggml.merges");
  if (v.kind == TokenizerKind::kSpm) v.merges.clear();

  const size_t n = v.tokens.size();
  HQEKV_RETURN_IF_ERROR(ReadId(f, "tokenizer.ggml.bos_token_id", n, true, &v.bos));
  HQEKV_RETURN_IF_ERROR(ReadId(f, "tokenizer.ggml.eos_token_id", n, true, &v.eos));
  HQEKV_RETURN_IF_ERROR(ReadId(f, "tokenizer.ggml.unknown_token_id", n, false, &v.unk));
  HQEKV_RETURN_IF_ERROR(ReadId(f, "tokenizer.ggml.padding_token_id", n, false, &v.pad));
  HQEKV_RETURN_IF_ERROR(ReadId(f, "tokenizer.ggml.eot_token_id", n, false, &v.eot));
  HQEKV_RETURN_IF_ERROR(ReadId(f, "tokenizer.ggml.eom_token_id", n, false, &v.eom));
  HQEKV_ASSIGN_OR_RETURN(auto add_bos, f.GetOptionalBool("tokenizer.ggml.add_bos_token"));
  if (add_bos.has_value()) v.add_bos = *add_bos;
  // Asked to add a BOS it does not have: every prompt would silently start
  // differently from what the model was trained on.
  if (add_bos.value_or(false) && v.bos < 0)
    return MakeError(where +
                     "tokenizer.ggml.add_bos_token is true but there is no "
                     "tokenizer.ggml.bos_token_id");
  HQEKV_ASSIGN_OR_RETURN(auto prefix, f.GetOptionalBool("tokenizer.ggml.add_space_prefix"));
  if (prefix.has_value()) v.add_space_prefix = *prefix;
  HQEKV_ASSIGN_OR_RETURN(auto tmpl, f.GetOptionalString("tokenizer.chat_template"));
  if (tmpl.has_value()) v.chat_template = *tmpl;
  return v;
}

Result<std::unique_ptr<Tokenizer>> TokenizerFromGguf(const GgufFile& file) {
  HQEKV_ASSIGN_OR_RETURN(auto v, TokenizerVocabFromGguf(file));
  return MakeTokenizer(std::move(v), file.path);
}

}  // namespace hqekv
