#include "io/gguf.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

namespace hqekv {
namespace {

constexpr uint64_t kMaxAlignment = uint64_t{1} << 20;
constexpr int kMaxDims = 4;  // GGML_MAX_DIMS

// Bounds-checked little-endian reader over the file image. Every read
// checks the remaining bytes first; on failure `err` holds the reason and
// all later reads fail too.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }
  bool failed() const { return !err.empty(); }
  std::string err;

  template <class T>
  bool Read(T* out, const char* what) {
    if (failed()) return false;
    if (remaining() < sizeof(T)) return Fail(std::string("truncated while reading ") + what);
    std::memcpy(out, data_ + pos_, sizeof(T));  // host is little endian (x86-64, arm64)
    pos_ += sizeof(T);
    return true;
  }

  bool ReadString(std::string* out, const char* what) {
    uint64_t n = 0;
    if (!Read(&n, what)) return false;
    if (n > remaining()) {
      return Fail(std::string(what) + " length " + std::to_string(n) + " exceeds the " +
                  std::to_string(remaining()) + " bytes left in the file");
    }
    out->assign(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return true;
  }

  bool Fail(std::string msg) {
    if (err.empty()) err = std::move(msg) + " (at byte offset " + std::to_string(pos_) + ")";
    return false;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

bool IsValidType(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::kF64); }

// Smallest encoded size of one value of type t (for count bounds).
size_t MinValueBytes(GgufType t) {
  switch (t) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kBool:
      return 1;
    case GgufType::kU16:
    case GgufType::kI16:
      return 2;
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kF32:
      return 4;
    case GgufType::kU64:
    case GgufType::kI64:
    case GgufType::kF64:
      return 8;
    case GgufType::kString:
      return 8;
    case GgufType::kArray:
      return 12;
  }
  return 1;
}

// Reads one scalar of type t into (i, u, f). Returns false on error.
bool ReadScalar(Cursor& c, GgufType t, int64_t* i, uint64_t* u, double* f, const char* what) {
  switch (t) {
#define HQEKV_INT_CASE(tag, T)           \
  case GgufType::tag: {                  \
    T v{};                               \
    if (!c.Read(&v, what)) return false; \
    *i = static_cast<int64_t>(v);        \
    *u = static_cast<uint64_t>(v);       \
    *f = static_cast<double>(v);         \
    return true;                         \
  }
    HQEKV_INT_CASE(kU8, uint8_t)
    HQEKV_INT_CASE(kI8, int8_t)
    HQEKV_INT_CASE(kU16, uint16_t)
    HQEKV_INT_CASE(kI16, int16_t)
    HQEKV_INT_CASE(kU32, uint32_t)
    HQEKV_INT_CASE(kI32, int32_t)
    HQEKV_INT_CASE(kU64, uint64_t)
    HQEKV_INT_CASE(kI64, int64_t)
#undef HQEKV_INT_CASE
    case GgufType::kBool: {
      uint8_t v = 0;
      if (!c.Read(&v, what)) return false;
      if (v > 1)
        return c.Fail(std::string(what) + ": bool value " + std::to_string(v) + " is not 0 or 1");
      *i = v;
      *u = v;
      *f = v;
      return true;
    }
    case GgufType::kF32: {
      float v = 0;
      if (!c.Read(&v, what)) return false;
      *f = v;
      return true;
    }
    case GgufType::kF64: {
      double v = 0;
      if (!c.Read(&v, what)) return false;
      *f = v;
      return true;
    }
    default:
      return c.Fail(std::string(what) + ": not a scalar type");
  }
}

bool ReadValue(Cursor& c, GgufType t, GgufValue* v, const std::string& key) {
  v->type = t;
  const std::string what = "value of '" + key + "'";
  if (t == GgufType::kString) return c.ReadString(&v->str, what.c_str());
  if (t != GgufType::kArray) return ReadScalar(c, t, &v->i, &v->u, &v->f, what.c_str());

  uint32_t et = 0;
  uint64_t n = 0;
  if (!c.Read(&et, what.c_str()) || !c.Read(&n, what.c_str())) return false;
  if (!IsValidType(et))
    return c.Fail("array '" + key + "' has unknown element type " + std::to_string(et));
  const GgufType elem = static_cast<GgufType>(et);
  if (elem == GgufType::kArray)
    return c.Fail("array '" + key + "' is nested (arrays of arrays are not supported)");
  // Bound the count by the bytes left before allocating anything.
  if (n > c.remaining() / MinValueBytes(elem)) {
    return c.Fail("array '" + key + "' claims " + std::to_string(n) + " elements of type " +
                  GgufTypeName(elem) + ", more than the " + std::to_string(c.remaining()) +
                  " bytes left can hold");
  }
  v->array_type = elem;
  const size_t count = static_cast<size_t>(n);
  if (elem == GgufType::kString) {
    v->strings.resize(count);
    for (size_t k = 0; k < count; ++k)
      if (!c.ReadString(&v->strings[k], what.c_str())) return false;
  } else if (elem == GgufType::kF32 || elem == GgufType::kF64) {
    v->floats.resize(count);
    int64_t i;
    uint64_t u;
    for (size_t k = 0; k < count; ++k)
      if (!ReadScalar(c, elem, &i, &u, &v->floats[k], what.c_str())) return false;
  } else {
    v->ints.resize(count);
    uint64_t u;
    double f;
    for (size_t k = 0; k < count; ++k) {
      if (!ReadScalar(c, elem, &v->ints[k], &u, &f, what.c_str())) return false;
      if (elem == GgufType::kU64 && u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return c.Fail("array '" + key + "' holds a u64 value above INT64_MAX");
    }
  }
  return true;
}

std::string Prefix(const std::string& name) { return "GGUF file '" + name + "': "; }

}  // namespace

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kU16:
    case GgufType::kI16:
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kU64:
    case GgufType::kI64:
      return true;
    default:
      return false;
  }
}

bool GgufValue::is_float() const { return type == GgufType::kF32 || type == GgufType::kF64; }

size_t GgufValue::array_size() const {
  if (type != GgufType::kArray) return 0;
  return strings.size() + ints.size() + floats.size();
}

std::string GgufValue::ToString(size_t max_items) const {
  std::ostringstream os;
  switch (type) {
    case GgufType::kString:
      os << '"' << str << '"';
      break;
    case GgufType::kBool:
      os << (u ? "true" : "false");
      break;
    case GgufType::kF32:
    case GgufType::kF64:
      os << f;
      break;
    case GgufType::kU64:
      os << u;
      break;
    case GgufType::kArray: {
      os << GgufTypeName(array_type) << "[" << array_size() << "] {";
      const size_t n = std::min(array_size(), max_items);
      for (size_t k = 0; k < n; ++k) {
        if (k) os << ", ";
        if (!strings.empty())
          os << '"' << strings[k] << '"';
        else if (!floats.empty())
          os << floats[k];
        else
          os << ints[k];
      }
      if (array_size() > n) os << ", ...";
      os << "}";
      break;
    }
    default:
      os << i;
      break;
  }
  return os.str();
}

const GgufValue* GgufFile::Find(const std::string& key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &metadata[it->second].second;
}

const GgufTensorInfo* GgufFile::FindTensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors[it->second];
}

Result<std::optional<int64_t>> GgufFile::GetOptionalInt(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (!v) return std::optional<int64_t>();
  if (!v->is_integer())
    return MakeError(Prefix(path) + "key '" + key + "' has type " + GgufTypeName(v->type) +
                     ", expected an integer");
  if (v->type == GgufType::kU64 &&
      v->u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return MakeError(Prefix(path) + "key '" + key + "' is out of range");
  return std::optional<int64_t>(v->i);
}

Result<std::optional<double>> GgufFile::GetOptionalFloat(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (!v) return std::optional<double>();
  if (!v->is_float() && !v->is_integer())
    return MakeError(Prefix(path) + "key '" + key + "' has type " + GgufTypeName(v->type) +
                     ", expected a number");
  return std::optional<double>(v->f);
}

Result<std::optional<std::string>> GgufFile::GetOptionalString(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (!v) return std::optional<std::string>();
  if (v->type != GgufType::kString)
    return MakeError(Prefix(path) + "key '" + key + "' has type " + GgufTypeName(v->type) +
                     ", expected a string");
  return std::optional<std::string>(v->str);
}

Result<std::optional<bool>> GgufFile::GetOptionalBool(const std::string& key) const {
  const GgufValue* v = Find(key);
  if (!v) return std::optional<bool>();
  if (v->type != GgufType::kBool && !v->is_integer())
    return MakeError(Prefix(path) + "key '" + key + "' has type " + GgufTypeName(v->type) +
                     ", expected a bool");
  return std::optional<bool>(v->u != 0);
}

Result<std::string> GgufFile::GetString(const std::string& key) const {
  HQEKV_ASSIGN_OR_RETURN(auto r, GetOptionalString(key));
  if (!r.has_value()) return MakeError(Prefix(path) + "required key '" + key + "' is missing");
  return *r;
}

Result<int64_t> GgufFile::GetInt(const std::string& key) const {
  HQEKV_ASSIGN_OR_RETURN(auto r, GetOptionalInt(key));
  if (!r.has_value()) return MakeError(Prefix(path) + "required key '" + key + "' is missing");
  return *r;
}

Result<double> GgufFile::GetFloat(const std::string& key) const {
  HQEKV_ASSIGN_OR_RETURN(auto r, GetOptionalFloat(key));
  if (!r.has_value()) return MakeError(Prefix(path) + "required key '" + key + "' is missing");
  return *r;
}

Result<GgufFile> ParseGguf(const uint8_t* data, size_t size, const std::string& name) {
  GgufFile file;
  file.path = name;
  file.file_size = size;
  auto fail = [&](const std::string& msg) { return MakeError(Prefix(name) + msg); };

  Cursor c(data, size);
  char magic[4] = {};
  if (size < 4) return fail("too small to be a GGUF file (" + std::to_string(size) + " bytes)");
  if (!c.Read(&magic, "magic")) return fail(c.err);
  if (std::memcmp(magic, "GGUF", 4) != 0) return fail("bad magic (not a GGUF file)");
  uint32_t version = 0;
  uint64_t n_tensors = 0, n_kv = 0;
  if (!c.Read(&version, "version")) return fail(c.err);
  if (version != 2 && version != 3)
    return fail("unsupported GGUF version " + std::to_string(version) + " (supported: 2, 3)");
  file.version = version;
  if (!c.Read(&n_tensors, "tensor count") || !c.Read(&n_kv, "metadata count")) return fail(c.err);
  // A key/value takes >= 13 bytes (u64 length, u32 type, 1-byte value); a
  // tensor info >= 32 bytes (u64 length, u32 n_dims, u64 ne, u32 type, u64 offset).
  if (n_kv > c.remaining() / 13)
    return fail("metadata count " + std::to_string(n_kv) + " is larger than the file can hold");
  if (n_tensors > c.remaining() / 32)
    return fail("tensor count " + std::to_string(n_tensors) + " is larger than the file can hold");

  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key;
    if (!c.ReadString(&key, "metadata key")) return fail(c.err);
    if (key.empty()) return fail("metadata key #" + std::to_string(k) + " is empty");
    uint32_t t = 0;
    if (!c.Read(&t, "metadata type")) return fail(c.err);
    if (!IsValidType(t))
      return fail("key '" + key + "' has unknown value type " + std::to_string(t));
    GgufValue v;
    if (!ReadValue(c, static_cast<GgufType>(t), &v, key)) return fail(c.err);
    if (file.index_.count(key)) return fail("duplicate metadata key '" + key + "'");
    file.index_[key] = file.metadata.size();
    file.metadata.emplace_back(std::move(key), std::move(v));
  }

  if (const GgufValue* a = file.Find("general.alignment")) {
    if (!a->is_integer()) return fail("general.alignment must be an integer");
    if (a->i <= 0 || static_cast<uint64_t>(a->i) > kMaxAlignment || (a->u & (a->u - 1)) != 0)
      return fail("general.alignment " + a->ToString() + " is not a power of two in 1.." +
                  std::to_string(kMaxAlignment));
    file.alignment = a->u;
  }

  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensorInfo ti;
    if (!c.ReadString(&ti.name, "tensor name")) return fail(c.err);
    if (ti.name.empty()) return fail("tensor #" + std::to_string(k) + " has an empty name");
    const std::string tn = "tensor '" + ti.name + "'";
    uint32_t n_dims = 0;
    if (!c.Read(&n_dims, "tensor n_dims")) return fail(c.err);
    if (n_dims < 1 || n_dims > kMaxDims)
      return fail(tn + " has " + std::to_string(n_dims) + " dimensions (supported: 1.." +
                  std::to_string(kMaxDims) + ")");
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t n = 0;
      if (!c.Read(&n, "tensor dimension")) return fail(c.err);
      if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return fail(tn + " dimension " + std::to_string(d) + " is out of range");
      ti.ne.push_back(static_cast<int64_t>(n));
    }
    uint32_t gt = 0;
    if (!c.Read(&gt, "tensor type") || !c.Read(&ti.offset, "tensor offset")) return fail(c.err);
    auto type = TensorTypeFromGgml(gt);
    if (!type)
      return fail(tn + " has unsupported ggml type " + std::to_string(gt) +
                  " (supported: " + SupportedTensorTypeNames() + ")");
    ti.type = *type;
    auto nbytes = TensorBytes(ti.type, ti.ne);
    if (!nbytes) {
      std::string shape;
      for (int64_t n : ti.ne) shape += (shape.empty() ? "" : ", ") + std::to_string(n);
      return fail(tn + " has an invalid shape {" + shape + "} for type " + TensorTypeName(ti.type) +
                  " (row length must be a multiple of " + std::to_string(BlockSize(ti.type)) + ")");
    }
    ti.nbytes = *nbytes;
    if (ti.offset % file.alignment != 0)
      return fail(tn + " offset " + std::to_string(ti.offset) +
                  " is not a multiple of the alignment " + std::to_string(file.alignment));
    if (file.tensor_index_.count(ti.name)) return fail("duplicate tensor name '" + ti.name + "'");
    file.tensor_index_[ti.name] = file.tensors.size();
    file.tensors.push_back(std::move(ti));
  }

  // Data section starts at the next multiple of the alignment.
  const uint64_t header_end = c.pos();
  const uint64_t data_offset = (header_end + file.alignment - 1) / file.alignment * file.alignment;
  if (!file.tensors.empty() && data_offset > size)
    return fail("truncated: data section would start at byte " + std::to_string(data_offset) +
                " but the file has " + std::to_string(size) + " bytes");
  file.data_offset = data_offset;
  const uint64_t data_size = size > data_offset ? size - data_offset : 0;

  // Every tensor inside the file, none overlapping another.
  std::vector<size_t> order(file.tensors.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  for (const auto& ti : file.tensors) {
    if (ti.offset > data_size || ti.nbytes > data_size - ti.offset)
      return fail("tensor '" + ti.name + "' (offset " + std::to_string(ti.offset) + ", " +
                  std::to_string(ti.nbytes) +
                  " bytes) extends past the end of the file (data section holds " +
                  std::to_string(data_size) + " bytes): truncated or corrupt");
  }
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return file.tensors[a].offset < file.tensors[b].offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const auto& prev = file.tensors[order[k - 1]];
    const auto& cur = file.tensors[order[k]];
    if (prev.nbytes > 0 && cur.nbytes > 0 && prev.offset + prev.nbytes > cur.offset)
      return fail("tensors '" + prev.name + "' and '" + cur.name + "' overlap");
  }
  for (auto& ti : file.tensors) ti.data = data + data_offset + ti.offset;
  return file;
}

}  // namespace hqekv
