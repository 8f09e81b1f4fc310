#include "io/llama2c.h"

#include <sys/stat.h>

#include <cstring>
#include <limits>

#include "io/mmap_file.h"

namespace hqekv {
namespace {

std::string DirOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

bool Exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

Result<TokenizerVocab> ParseLlama2cTokenizer(const uint8_t* data, size_t size, int vocab_size,
                                             const std::string& name) {
  const std::string where = "llama2.c tokenizer '" + name + "': ";
  if (vocab_size <= 0)
    return MakeError(where + "vocabulary size " + std::to_string(vocab_size) + " is invalid");
  // Each token needs >= 8 bytes (score + length): bound before allocating.
  if (size < 4 || static_cast<uint64_t>(vocab_size) > (size - 4) / 8)
    return MakeError(where + "file of " + std::to_string(size) + " bytes is too small for " +
                     std::to_string(vocab_size) + " tokens");
  size_t pos = 4;  // skip max_token_length (not needed: pieces are std::string)
  TokenizerVocab v;
  v.kind = TokenizerKind::kSpm;
  v.tokens.reserve(static_cast<size_t>(vocab_size));
  v.scores.reserve(static_cast<size_t>(vocab_size));
  for (int id = 0; id < vocab_size; ++id) {
    if (size - pos < 8) return MakeError(where + "truncated at token " + std::to_string(id));
    float score;
    int32_t len;
    std::memcpy(&score, data + pos, 4);
    std::memcpy(&len, data + pos + 4, 4);
    pos += 8;
    if (len < 0 || static_cast<size_t>(len) > size - pos)
      return MakeError(where + "token " + std::to_string(id) + " has length " +
                       std::to_string(len) + " beyond the end of the file");
    std::string piece(reinterpret_cast<const char*>(data + pos), static_cast<size_t>(len));
    pos += static_cast<size_t>(len);
    // llama2.c's export writes BOS/EOS as "\n<s>\n" / "\n</s>\n" and spaces
    // as ' ' instead of SentencePiece's U+2581; undo both so the vocab is the
    // one the GGUF of the same model holds.
    if (piece == "\n<s>\n") piece = "<s>";
    if (piece == "\n</s>\n") piece = "</s>";
    std::string normalized;
    for (char ch : piece) {
      if (ch == ' ')
        normalized += "\xE2\x96\x81";
      else
        normalized += ch;
    }
    v.tokens.push_back(std::move(normalized));
    v.scores.push_back(score);
  }
  // Types: <unk>=0 unknown, <s>=1 and </s>=2 control, <0xXX> byte, else normal.
  v.types.assign(v.tokens.size(), kTokNormal);
  for (size_t k = 0; k < v.tokens.size(); ++k) {
    const std::string& p = v.tokens[k];
    if (p.size() == 6 && p.compare(0, 3, "<0x") == 0 && p[5] == '>') v.types[k] = kTokByte;
  }
  if (vocab_size > 0) v.types[0] = kTokUnknown, v.unk = 0;
  if (vocab_size > 1) v.types[1] = kTokControl, v.bos = 1;
  if (vocab_size > 2) v.types[2] = kTokControl, v.eos = 2;
  v.add_bos = true;
  v.add_space_prefix = true;
  return v;
}

Result<std::unique_ptr<Tokenizer>> LoadLlama2cTokenizer(const std::string& path, int vocab_size) {
  HQEKV_ASSIGN_OR_RETURN(auto map, MappedFile::Open(path));
  HQEKV_ASSIGN_OR_RETURN(auto v, ParseLlama2cTokenizer(map->data(), map->size(), vocab_size, path));
  return MakeTokenizer(std::move(v), path);
}

Result<std::unique_ptr<ModelSource>> LoadLlama2c(std::shared_ptr<MappedFile> map,
                                                 const std::string& path,
                                                 const std::string& tokenizer_path) {
  const std::string where = "llama2.c checkpoint '" + path + "': ";
  if (map->size() < 28)
    return MakeError(where + "too small (" + std::to_string(map->size()) +
                     " bytes) for the 28-byte header; not a GGUF or llama2.c file");
  int32_t h[7];
  std::memcpy(h, map->data(), sizeof h);
  const int dim = h[0], hidden = h[1], n_layers = h[2], n_heads = h[3], n_kv_heads = h[4],
            seq_len = h[6];
  const bool shared = h[5] > 0;
  const int vocab = h[5] == std::numeric_limits<int32_t>::min() ? 0 : (h[5] < 0 ? -h[5] : h[5]);
  const char* names[] = {"dim",        "hidden_dim", "n_layers", "n_heads",
                         "n_kv_heads", "vocab_size", "seq_len"};
  const int vals[] = {dim, hidden, n_layers, n_heads, n_kv_heads, vocab, seq_len};
  for (int k = 0; k < 7; ++k)
    if (vals[k] <= 0 || vals[k] > kMaxConfigDim)
      return MakeError(where + "header field " + names[k] + " = " + std::to_string(vals[k]) +
                       " is out of range (not a llama2.c checkpoint, or corrupt)");
  if (dim % n_heads != 0 || n_heads % n_kv_heads != 0 || (dim / n_heads) % 2 != 0)
    return MakeError(where + "inconsistent header: dim " + std::to_string(dim) + ", n_heads " +
                     std::to_string(n_heads) + ", n_kv_heads " + std::to_string(n_kv_heads));
  const int64_t head_dim = dim / n_heads, kv_dim = head_dim * n_kv_heads;
  const int64_t L = n_layers, D = dim, F = hidden, V = vocab;

  auto m = std::make_unique<ModelSource>();
  m->path = path;
  m->format = "llama2c";
  m->file_bytes = map->size();
  ModelConfig& c = m->config;
  c.arch = "llama";
  {
    const size_t slash = path.find_last_of('/');
    std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
    const size_t dot = base.find_last_of('.');
    c.name = dot == std::string::npos || dot == 0 ? base : base.substr(0, dot);
  }
  c.n_layers = n_layers;
  c.d_model = dim;
  c.n_heads = n_heads;
  c.n_kv_heads = n_kv_heads;
  c.head_dim = static_cast<int>(head_dim);
  c.rope_dim = c.head_dim;
  c.d_ff = hidden;
  c.vocab_size = vocab;
  c.max_ctx = seq_len;
  c.rms_eps = 1e-5f;  // run.c's rmsnorm constant
  c.rope_theta = 10000.0f;
  c.rope = RopeStyle::kNormal;
  c.tied_output = shared;

  // Walk the weights in file order; every size is < 2^62 (bounded dims).
  uint64_t offset = 28;
  const uint64_t file_size = map->size();
  bool overflow = false;
  auto take = [&](const std::string& name, std::vector<int64_t> ne) {
    uint64_t n = 4;
    for (int64_t x : ne) n *= static_cast<uint64_t>(x);
    if (offset + n > file_size) overflow = true;
    if (!overflow) {
      Tensor t;
      t.name = name;
      t.type = TensorType::kF32;
      t.ne = std::move(ne);
      t.data = map->data() + offset;
      t.nbytes = static_cast<size_t>(n);
      m->tensors.emplace(name, std::move(t));
    }
    offset += n;
  };
  // Per-layer stacks: [L][out][in] -> layer l at l * out * in floats.
  auto stack = [&](const std::string& suffix, int64_t in, int64_t out) {
    for (int l = 0; l < n_layers; ++l)
      take("blk." + std::to_string(l) + "." + suffix,
           out > 0 ? std::vector<int64_t>{in, out} : std::vector<int64_t>{in});
  };
  take("token_embd.weight", {D, V});
  stack("attn_norm.weight", D, 0);
  stack("attn_q.weight", D, D);
  stack("attn_k.weight", D, kv_dim);
  stack("attn_v.weight", D, kv_dim);
  stack("attn_output.weight", D, D);
  stack("ffn_norm.weight", D, 0);
  stack("ffn_gate.weight", D, F);  // w1
  stack("ffn_down.weight", F, D);  // w2
  stack("ffn_up.weight", D, F);    // w3
  take("output_norm.weight", {D});
  offset += 2 * static_cast<uint64_t>(seq_len) * static_cast<uint64_t>(head_dim / 2) *
            4;  // freq_cis_real/imag
  if (!shared) take("output.weight", {D, V});
  if (overflow || offset != file_size)
    return MakeError(where + "size mismatch: the header (dim " + std::to_string(D) + ", hidden " +
                     std::to_string(F) + ", layers " + std::to_string(L) + ", vocab " +
                     std::to_string(V) + (shared ? ", tied" : ", untied") + ") needs " +
                     std::to_string(offset) + " bytes, the file has " + std::to_string(file_size) +
                     " (truncated or not a llama2.c checkpoint)");

  std::string tok = tokenizer_path;
  if (tok.empty()) {
    const std::string dir = DirOf(path);
    const std::string a = dir + "/tok" + std::to_string(vocab) + ".bin", b = dir + "/tokenizer.bin";
    if (Exists(a))
      tok = a;
    else if (Exists(b))
      tok = b;
    else
      return MakeError(where + "no tokenizer given and neither '" + a + "' nor '" + b + "' exists");
  }
  HQEKV_ASSIGN_OR_RETURN(auto tk, LoadLlama2cTokenizer(tok, vocab));
  m->tokenizer = std::move(tk);
  m->tokenizer_path = tok;
  m->mapping = std::move(map);
  return m;
}

}  // namespace hqekv
