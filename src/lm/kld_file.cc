#include "lm/kld_file.h"

#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <vector>

#include "core/hash.h"

namespace hqekv::lm {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the base file is written in the host's byte order, assumed little-endian");

constexpr char kMagic[8] = {'H', 'Q', 'E', 'K', 'V', 'K', 'L', 'D'};
constexpr uint32_t kMaxString = 4096;
constexpr int kMaxDim = 1 << 24;  // vocab, ctx: far above any model

Status CheckInfo(const KldBaseInfo& i, const std::string& where) {
  auto bad = [&](const std::string& what) {
    return MakeError(where + ": " + what + " (vocab " + std::to_string(i.vocab) + ", ctx " +
                     std::to_string(i.ctx) + ", prefill " + std::to_string(i.prefill) +
                     ", chunks " + std::to_string(i.chunks) + ", top_k " + std::to_string(i.top_k) +
                     ")");
  };
  if (i.vocab < 1 || i.vocab > kMaxDim) return bad("vocabulary size out of range");
  if (i.ctx < 2 || i.ctx > kMaxDim) return bad("chunk length out of range");
  if (i.prefill < 1 || i.prefill >= i.ctx) return bad("prefill out of range");
  if (i.chunks < 1) return bad("no chunks");
  if (i.top_k < 1 || i.top_k > i.vocab) return bad("top-k out of range");
  for (const std::string* s :
       {&i.model_name, &i.model_identity, &i.tokenizer_fingerprint, &i.base_cache, &i.text}) {
    if (s->size() > kMaxString) return bad("a header string is longer than 4096 bytes");
  }
  return Status::Ok();
}

// Bytes of one chunk's record.
uint64_t ChunkBytes(const KldBaseInfo& i) {
  const uint64_t per_pos = 8 + 8 * static_cast<uint64_t>(i.top_k);
  return 4 * static_cast<uint64_t>(i.ctx) + static_cast<uint64_t>(i.ctx - i.prefill) * per_pos;
}

void AppendU32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); }

std::string HeaderBytes(const KldBaseInfo& i) {
  std::string h(kMagic, sizeof kMagic);
  AppendU32(h, kKldFileVersion);
  for (int v : {i.vocab, i.ctx, i.prefill, i.chunks, i.top_k})
    AppendU32(h, static_cast<uint32_t>(v));
  for (const std::string* s :
       {&i.model_name, &i.model_identity, &i.tokenizer_fingerprint, &i.base_cache, &i.text}) {
    AppendU32(h, static_cast<uint32_t>(s->size()));
    h += *s;
  }
  return h;
}

Status PreadExact(int fd, void* out, size_t n, uint64_t offset, const std::string& path) {
  char* p = static_cast<char*>(out);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return MakeError("cannot read '" + path + "': " + std::strerror(errno));
    if (r == 0) return MakeError("'" + path + "' is truncated (unexpected end of file)");
    p += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return Status::Ok();
}

}  // namespace

Status CheckBaseFits(const KldBaseInfo& info, const std::string& path, const KldBaseInfo& model,
                     int max_ctx, bool any_model) {
  const std::string where = "KL base file '" + path + "'";
  if (info.vocab != model.vocab) {
    return MakeError(where + " was written for model '" + info.model_name +
                     "' with a vocabulary of " + std::to_string(info.vocab) +
                     " tokens; this model ('" + model.model_name + "') has " +
                     std::to_string(model.vocab));
  }
  if (info.tokenizer_fingerprint != model.tokenizer_fingerprint) {
    return MakeError(where + " was written with another tokenizer (fingerprint " +
                     info.tokenizer_fingerprint + ", this model's is " +
                     model.tokenizer_fingerprint + ")");
  }
  if (info.model_identity != model.model_identity && !any_model) {
    return MakeError(where + " was written for model '" + info.model_name + "' (identity " +
                     info.model_identity + "); this is '" + model.model_name + "' (identity " +
                     model.model_identity +
                     "); pass --kl-any-model to score other weights against it");
  }
  if (info.ctx > max_ctx) {
    return MakeError(where + " has chunks of " + std::to_string(info.ctx) +
                     " tokens, more than the model's context length " + std::to_string(max_ctx));
  }
  return Status::Ok();
}

Result<KldBaseWriter> KldBaseWriter::Create(const std::string& path, const KldBaseInfo& info) {
  HQEKV_RETURN_IF_ERROR(CheckInfo(info, "KL base file '" + path + "'"));
  HQEKV_ASSIGN_OR_RETURN(AtomicFileWriter w, AtomicFileWriter::Create(path));
  KldBaseWriter out(std::move(w), info);
  out.hash_ = kFnv1a64Offset;
  const std::string h = HeaderBytes(info);
  HQEKV_RETURN_IF_ERROR(out.Put(h.data(), h.size()));
  return out;
}

Status KldBaseWriter::Put(const void* data, size_t n) {
  hash_ = Fnv1a64(data, n, hash_);
  return w_.Write(data, n);
}

Status KldBaseWriter::Add(const ReferenceScores& r) {
  const KldBaseInfo& i = info_;
  if (added_ >= i.chunks || static_cast<int>(r.tokens.size()) != i.ctx || r.prefill != i.prefill ||
      r.top_k != i.top_k || r.vocab != i.vocab) {
    return MakeError("KL base file '" + w_.path() + "': chunk " + std::to_string(added_) +
                     " does not fit the header");
  }
  HQEKV_RETURN_IF_ERROR(Put(r.tokens.data(), r.tokens.size() * 4));
  const size_t k = static_cast<size_t>(i.top_k);
  std::string rec;
  for (int s = 0; s < r.positions(); ++s) {
    rec.clear();
    rec.append(reinterpret_cast<const char*>(&r.target_logprob[s]), 4);
    rec.append(reinterpret_cast<const char*>(&r.argmax[s]), 4);
    rec.append(reinterpret_cast<const char*>(&r.top_ids[s * k]), 4 * k);
    rec.append(reinterpret_cast<const char*>(&r.top_logprobs[s * k]), 4 * k);
    HQEKV_RETURN_IF_ERROR(Put(rec.data(), rec.size()));
  }
  ++added_;
  return Status::Ok();
}

Status KldBaseWriter::Commit() {
  if (added_ != info_.chunks) {
    return MakeError("KL base file '" + w_.path() + "': " + std::to_string(added_) +
                     " chunks written, the header says " + std::to_string(info_.chunks));
  }
  const uint64_t sum = hash_;
  HQEKV_RETURN_IF_ERROR(w_.Write(&sum, 8));
  return w_.Commit();
}

Result<KldBaseReader> KldBaseReader::Open(const std::string& path) {
  HQEKV_ASSIGN_OR_RETURN(RegularFile f, RegularFile::Open(path, kMaxMappedFileBytes));
  const std::string where = "KL base file '" + path + "'";
  const uint64_t size = f.size();
  uint64_t off = 0;
  auto read = [&](void* out, size_t n) -> Status {
    if (off + n > size) return MakeError(where + " is truncated (header incomplete)");
    HQEKV_RETURN_IF_ERROR(PreadExact(f.fd(), out, n, off, path));
    off += n;
    return Status::Ok();
  };
  char magic[8];
  HQEKV_RETURN_IF_ERROR(read(magic, 8));
  if (std::memcmp(magic, kMagic, 8) != 0) {
    return MakeError(where +
                     " is not a KL base file (no HQEKVKLD magic; write one with "
                     "`hqekv ppl --kl-divergence-base FILE`)");
  }
  uint32_t v[6];
  HQEKV_RETURN_IF_ERROR(read(v, sizeof v));
  if (v[0] != kKldFileVersion) {
    return MakeError(where + " has format version " + std::to_string(v[0]) +
                     ", this build reads version " + std::to_string(kKldFileVersion) +
                     " (write it again with this build)");
  }
  KldBaseInfo info;
  if (v[1] > kMaxDim || v[2] > kMaxDim || v[3] > kMaxDim || v[4] > (1u << 30) || v[5] > kMaxDim)
    return MakeError(where + " is corrupt (header values out of range)");
  info.vocab = static_cast<int>(v[1]);
  info.ctx = static_cast<int>(v[2]);
  info.prefill = static_cast<int>(v[3]);
  info.chunks = static_cast<int>(v[4]);
  info.top_k = static_cast<int>(v[5]);
  for (std::string* s : {&info.model_name, &info.model_identity, &info.tokenizer_fingerprint,
                         &info.base_cache, &info.text}) {
    uint32_t len = 0;
    HQEKV_RETURN_IF_ERROR(read(&len, 4));
    if (len > kMaxString) return MakeError(where + " is corrupt (header string too long)");
    s->resize(len);
    HQEKV_RETURN_IF_ERROR(read(s->data(), len));
  }
  HQEKV_RETURN_IF_ERROR(CheckInfo(info, where + " is corrupt"));
  const unsigned __int128 want = static_cast<unsigned __int128>(off) +
                                 static_cast<unsigned __int128>(info.chunks) * ChunkBytes(info) + 8;
  if (size < want) {
    return MakeError(where + " is truncated: " + std::to_string(size) + " bytes, its header (" +
                     std::to_string(info.chunks) + " chunks of " + std::to_string(info.ctx) +
                     " tokens, top-" + std::to_string(info.top_k) + ") needs " +
                     std::to_string(static_cast<uint64_t>(want)));
  }
  if (size > want) {
    return MakeError(where + " is corrupt: " + std::to_string(size - static_cast<uint64_t>(want)) +
                     " bytes after the end its header describes");
  }
  // The checksum over everything before the last 8 bytes.
  uint64_t h = kFnv1a64Offset;
  std::vector<char> buf(1 << 20);
  for (uint64_t at = 0; at < size - 8;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), size - 8 - at));
    HQEKV_RETURN_IF_ERROR(PreadExact(f.fd(), buf.data(), n, at, path));
    h = Fnv1a64(buf.data(), n, h);
    at += n;
  }
  uint64_t stored = 0;
  HQEKV_RETURN_IF_ERROR(PreadExact(f.fd(), &stored, 8, size - 8, path));
  if (stored != h) return MakeError(where + " is corrupt (checksum mismatch)");
  return KldBaseReader(std::move(f), std::move(info), off);
}

Status KldBaseReader::ReadAt(void* out, size_t n) {
  HQEKV_RETURN_IF_ERROR(PreadExact(file_.fd(), out, n, offset_, file_.path()));
  offset_ += n;
  return Status::Ok();
}

Result<ReferenceScores> KldBaseReader::Next() {
  const KldBaseInfo& i = info_;
  if (next_ >= i.chunks) return MakeError("KL base file: no chunk " + std::to_string(next_));
  ReferenceScores r;
  r.vocab = i.vocab;
  r.prefill = i.prefill;
  r.top_k = i.top_k;
  std::vector<char> buf(ChunkBytes(i));
  HQEKV_RETURN_IF_ERROR(ReadAt(buf.data(), buf.size()));
  const char* p = buf.data();
  auto take = [&p](void* out, size_t n) {
    std::memcpy(out, p, n);
    p += n;
  };
  r.tokens.resize(i.ctx);
  take(r.tokens.data(), r.tokens.size() * 4);
  const int S = i.ctx - i.prefill;
  const size_t k = static_cast<size_t>(i.top_k);
  r.target_logprob.resize(S);
  r.argmax.resize(S);
  r.top_ids.resize(S * k);
  r.top_logprobs.resize(S * k);
  for (int s = 0; s < S; ++s) {
    take(&r.target_logprob[s], 4);
    take(&r.argmax[s], 4);
    take(&r.top_ids[s * k], 4 * k);
    take(&r.top_logprobs[s * k], 4 * k);
  }
  auto in_vocab = [&](int32_t t) { return t >= 0 && t < i.vocab; };
  bool ok = true;
  for (int32_t t : r.tokens) ok = ok && in_vocab(t);
  for (int32_t t : r.argmax) ok = ok && in_vocab(t);
  for (int32_t t : r.top_ids) ok = ok && in_vocab(t);
  if (!ok) {
    return MakeError("KL base file '" + file_.path() + "' is corrupt: chunk " +
                     std::to_string(next_) + " holds a token id outside the vocabulary of " +
                     std::to_string(i.vocab));
  }
  ++next_;
  return r;
}

}  // namespace hqekv::lm
