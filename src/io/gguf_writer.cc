#include "io/gguf_writer.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <algorithm>
#include <cstring>

#include "core/file.h"

namespace hqekv {
namespace {

template <class T>
void Put(std::vector<uint8_t>& out, T v) {
  const size_t n = out.size();
  out.resize(n + sizeof(T));
  std::memcpy(out.data() + n, &v, sizeof(T));  // little-endian host
}

void PutString(std::vector<uint8_t>& out, const std::string& s) {
  Put<uint64_t>(out, s.size());
  const size_t n = out.size();
  out.resize(n + s.size());
  if (!s.empty()) std::memcpy(out.data() + n, s.data(), s.size());
}

void PutScalar(std::vector<uint8_t>& out, GgufType t, int64_t i, double f) {
  switch (t) {
    case GgufType::kU8:
      Put<uint8_t>(out, static_cast<uint8_t>(i));
      break;
    case GgufType::kI8:
      Put<int8_t>(out, static_cast<int8_t>(i));
      break;
    case GgufType::kU16:
      Put<uint16_t>(out, static_cast<uint16_t>(i));
      break;
    case GgufType::kI16:
      Put<int16_t>(out, static_cast<int16_t>(i));
      break;
    case GgufType::kU32:
      Put<uint32_t>(out, static_cast<uint32_t>(i));
      break;
    case GgufType::kI32:
      Put<int32_t>(out, static_cast<int32_t>(i));
      break;
    case GgufType::kU64:
      Put<uint64_t>(out, static_cast<uint64_t>(i));
      break;
    case GgufType::kI64:
      Put<int64_t>(out, i);
      break;
    case GgufType::kBool:
      Put<uint8_t>(out, i ? 1 : 0);
      break;
    case GgufType::kF32:
      Put<float>(out, static_cast<float>(f));
      break;
    case GgufType::kF64:
      Put<double>(out, f);
      break;
    default:
      break;
  }
}

void PutValue(std::vector<uint8_t>& out, const GgufValue& v) {
  Put<uint32_t>(out, static_cast<uint32_t>(v.type));
  if (v.type == GgufType::kString) {
    PutString(out, v.str);
  } else if (v.type == GgufType::kArray) {
    Put<uint32_t>(out, static_cast<uint32_t>(v.array_type));
    Put<uint64_t>(out, v.array_size());
    if (v.array_type == GgufType::kString) {
      for (const auto& s : v.strings) PutString(out, s);
    } else {
      for (double f : v.floats) PutScalar(out, v.array_type, 0, f);
      for (int64_t i : v.ints) PutScalar(out, v.array_type, i, static_cast<double>(i));
    }
  } else if (v.type == GgufType::kU64) {
    Put<uint64_t>(out, v.u);
  } else {
    PutScalar(out, v.type, v.i, v.f);
  }
}

GgufValue Scalar(GgufType t, int64_t i, uint64_t u, double f) {
  GgufValue v;
  v.type = t;
  v.i = i;
  v.u = u;
  v.f = f;
  return v;
}

}  // namespace

void GgufWriter::Set(const std::string& key, GgufValue value) {
  for (auto& kv : metadata_) {
    if (kv.first == key) {
      kv.second = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(key, std::move(value));
}

void GgufWriter::SetU8(const std::string& k, uint8_t v) { Set(k, Scalar(GgufType::kU8, v, v, v)); }
void GgufWriter::SetI8(const std::string& k, int8_t v) {
  Set(k, Scalar(GgufType::kI8, v, static_cast<uint64_t>(v), v));
}
void GgufWriter::SetU16(const std::string& k, uint16_t v) {
  Set(k, Scalar(GgufType::kU16, v, v, v));
}
void GgufWriter::SetI16(const std::string& k, int16_t v) {
  Set(k, Scalar(GgufType::kI16, v, static_cast<uint64_t>(v), v));
}
void GgufWriter::SetU32(const std::string& k, uint32_t v) {
  Set(k, Scalar(GgufType::kU32, v, v, v));
}
void GgufWriter::SetI32(const std::string& k, int32_t v) {
  Set(k, Scalar(GgufType::kI32, v, static_cast<uint64_t>(v), v));
}
void GgufWriter::SetU64(const std::string& k, uint64_t v) {
  Set(k, Scalar(GgufType::kU64, static_cast<int64_t>(v), v, static_cast<double>(v)));
}
void GgufWriter::SetI64(const std::string& k, int64_t v) {
  Set(k, Scalar(GgufType::kI64, v, static_cast<uint64_t>(v), static_cast<double>(v)));
}
void GgufWriter::SetF32(const std::string& k, float v) { Set(k, Scalar(GgufType::kF32, 0, 0, v)); }
void GgufWriter::SetF64(const std::string& k, double v) { Set(k, Scalar(GgufType::kF64, 0, 0, v)); }
void GgufWriter::SetBool(const std::string& k, bool v) { Set(k, Scalar(GgufType::kBool, v, v, v)); }

void GgufWriter::SetString(const std::string& k, const std::string& s) {
  GgufValue v;
  v.type = GgufType::kString;
  v.str = s;
  Set(k, std::move(v));
}

void GgufWriter::SetStringArray(const std::string& k, const std::vector<std::string>& a) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.array_type = GgufType::kString;
  v.strings = a;
  Set(k, std::move(v));
}

void GgufWriter::SetF32Array(const std::string& k, const std::vector<float>& a) {
  SetFloatArray(k, GgufType::kF32, std::vector<double>(a.begin(), a.end()));
}

void GgufWriter::SetI32Array(const std::string& k, const std::vector<int32_t>& a) {
  SetIntArray(k, GgufType::kI32, std::vector<int64_t>(a.begin(), a.end()));
}

void GgufWriter::SetIntArray(const std::string& k, GgufType elem, const std::vector<int64_t>& a) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.array_type = elem;
  v.ints = a;
  Set(k, std::move(v));
}

void GgufWriter::SetFloatArray(const std::string& k, GgufType elem, const std::vector<double>& a) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.array_type = elem;
  v.floats = a;
  Set(k, std::move(v));
}

Status GgufWriter::AddTensor(const std::string& name, TensorType type, std::vector<int64_t> ne,
                             std::vector<uint8_t> bytes) {
  auto n = TensorBytes(type, ne);
  if (!n)
    return MakeError("GgufWriter: tensor '" + name + "' has an invalid shape for " +
                     TensorTypeName(type));
  if (*n != bytes.size())
    return MakeError("GgufWriter: tensor '" + name + "' needs " + std::to_string(*n) +
                     " bytes, got " + std::to_string(bytes.size()));
  for (const auto& t : tensors_)
    if (t.name == name) return MakeError("GgufWriter: duplicate tensor '" + name + "'");
  PendingTensor t;
  t.name = name;
  t.type = type;
  t.ne = std::move(ne);
  t.nbytes = *n;
  t.bytes = std::move(bytes);
  tensors_.push_back(std::move(t));
  return Status::Ok();
}

Status GgufWriter::AddTensor(const std::string& name, TensorType type, std::vector<int64_t> ne,
                             const void* bytes, size_t nbytes) {
  const auto* p = static_cast<const uint8_t*>(bytes);
  return AddTensor(name, type, std::move(ne), std::vector<uint8_t>(p, p + nbytes));
}

Status GgufWriter::AddTensorFill(const std::string& name, TensorType type, std::vector<int64_t> ne,
                                 Filler fill) {
  auto n = TensorBytes(type, ne);
  if (!n)
    return MakeError("GgufWriter: tensor '" + name + "' has an invalid shape for " +
                     TensorTypeName(type));
  for (const auto& t : tensors_)
    if (t.name == name) return MakeError("GgufWriter: duplicate tensor '" + name + "'");
  PendingTensor t;
  t.name = name;
  t.type = type;
  t.ne = std::move(ne);
  t.nbytes = *n;
  t.fill = std::move(fill);
  tensors_.push_back(std::move(t));
  return Status::Ok();
}

static uint64_t AlignUp(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

std::vector<uint8_t> GgufWriter::Header() const {
  auto metadata = metadata_;
  if (alignment_ != 32) {
    bool present = false;
    for (auto& kv : metadata) present |= kv.first == "general.alignment";
    if (!present)
      metadata.emplace_back("general.alignment",
                            Scalar(GgufType::kU32, alignment_, alignment_, alignment_));
  }
  std::vector<uint8_t> out = {'G', 'G', 'U', 'F'};
  Put<uint32_t>(out, version_);
  Put<uint64_t>(out, tensors_.size());
  Put<uint64_t>(out, metadata.size());
  for (const auto& [key, value] : metadata) {
    PutString(out, key);
    PutValue(out, value);
  }
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    PutString(out, t.name);
    Put<uint32_t>(out, static_cast<uint32_t>(t.ne.size()));
    for (int64_t n : t.ne) Put<uint64_t>(out, static_cast<uint64_t>(n));
    Put<uint32_t>(out, GgmlTypeId(t.type));
    Put<uint64_t>(out, offset);
    offset = AlignUp(offset + t.nbytes, alignment_);
  }
  out.resize(AlignUp(out.size(), alignment_), 0);
  return out;
}

std::vector<uint8_t> GgufWriter::Serialize() const {
  std::vector<uint8_t> out = Header();
  for (const auto& t : tensors_) {
    const size_t start = out.size();
    out.resize(start + t.nbytes);
    if (t.fill)
      t.fill(0, out.data() + start, t.nbytes);
    else if (t.nbytes)
      std::memcpy(out.data() + start, t.bytes.data(), t.nbytes);
    out.resize(AlignUp(out.size(), alignment_), 0);
  }
  return out;
}

Status GgufWriter::WriteFile(const std::string& path, bool overwrite) const {
  struct stat st {};
  if (!overwrite && ::stat(path.c_str(), &st) == 0)
    return MakeError("refusing to overwrite existing file '" + path + "'");
  // Atomic: a failed write (full disk) leaves no half file and keeps an old one.
  HQEKV_ASSIGN_OR_RETURN(AtomicFileWriter f, AtomicFileWriter::Create(path));
  Status status;
  auto write = [&](const uint8_t* p, size_t n) {
    if (status.ok() && n) status = f.Write(p, n);
  };
  const std::vector<uint8_t> header = Header();
  write(header.data(), header.size());
  std::vector<uint8_t> buf;
  const std::vector<uint8_t> zeros(alignment_, 0);
  for (const auto& t : tensors_) {
    if (t.fill) {
      constexpr uint64_t kPiece = uint64_t{4} << 20;  // 4 MiB pieces keep memory flat
      buf.resize(static_cast<size_t>(std::min<uint64_t>(kPiece, t.nbytes)));
      for (uint64_t off = 0; off < t.nbytes && status.ok(); off += kPiece) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(kPiece, t.nbytes - off));
        t.fill(off, buf.data(), n);
        write(buf.data(), n);
      }
    } else {
      write(t.bytes.data(), t.nbytes);
    }
    const uint64_t pad = AlignUp(t.nbytes, alignment_) - t.nbytes;
    write(zeros.data(), pad);
  }
  HQEKV_RETURN_IF_ERROR(status);
  return f.Commit();
}

}  // namespace hqekv
