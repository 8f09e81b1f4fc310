// Byte writer and bounded reader for KV cache states (KvCache::SaveState /
// LoadState): little-endian plain values, and arrays saved with their
// capacity, so that a loaded container holds the bytes the saved one held
// (the caches count capacities as held bytes). The reader never reads past
// its input and never allocates more than its caller allows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace hqekv::cache {

class StateWriter {
 public:
  explicit StateWriter(std::string* out) : out_(out) {}

  template <class T>
  void Put(const T& v) {
    PutArray(&v, 1);
  }
  template <class T>
  void PutArray(const T* p, size_t n) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (n) out_->append(reinterpret_cast<const char*>(p), n * sizeof(T));
  }
  // uint64 size, uint64 capacity, then the size elements.
  template <class T, class A>
  void PutVector(const std::vector<T, A>& v) {
    Put<uint64_t>(v.size());
    Put<uint64_t>(v.capacity());
    PutArray(v.data(), v.size());
  }
  void PutString(std::string_view s) {
    Put<uint64_t>(s.size());
    PutArray(s.data(), s.size());
  }
  std::string* out() { return out_; }

 private:
  std::string* out_;
};

class StateReader {
 public:
  explicit StateReader(std::string_view in) : in_(in) {}

  // False (nothing read) when fewer bytes remain.
  template <class T>
  bool Get(T* v) {
    return GetArray(v, 1);
  }
  template <class T>
  bool GetArray(T* p, size_t n) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (n > remaining() / sizeof(T)) return false;
    if (n) std::memcpy(p, in_.data() + off_, n * sizeof(T));
    off_ += n * sizeof(T);
    return true;
  }
  // What PutVector wrote, into *v with the capacity it had (v keeps its
  // allocator). False when the bytes run out, size > capacity, or the
  // capacity exceeds max_capacity elements.
  template <class T, class A>
  bool GetVector(std::vector<T, A>* v, uint64_t max_capacity) {
    uint64_t size = 0, cap = 0;
    if (!Get(&size) || !Get(&cap) || size > cap || cap > max_capacity) return false;
    if (size > remaining() / sizeof(T)) return false;
    std::vector<T, A> fresh(v->get_allocator());
    fresh.reserve(static_cast<size_t>(cap));
    fresh.resize(static_cast<size_t>(size));
    if (!GetArray(fresh.data(), fresh.size())) return false;
    v->swap(fresh);
    return true;
  }
  bool GetString(std::string* s, size_t max_len) {
    uint64_t n = 0;
    if (!Get(&n) || n > max_len || n > remaining()) return false;
    s->assign(in_.data() + off_, static_cast<size_t>(n));
    off_ += static_cast<size_t>(n);
    return true;
  }
  // The next n bytes (advancing), or an empty view when fewer remain.
  bool Bytes(size_t n, std::string_view* out) {
    if (n > remaining()) return false;
    *out = in_.substr(off_, n);
    off_ += n;
    return true;
  }
  size_t remaining() const { return in_.size() - off_; }
  bool done() const { return off_ == in_.size(); }

 private:
  std::string_view in_;
  size_t off_ = 0;
};

}  // namespace hqekv::cache
