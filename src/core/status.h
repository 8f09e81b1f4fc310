// Error handling for the hqekv library: errors are values, never exit() or
// escaping exceptions. A Result<T> holds either a T or an Error with a
// human-readable message that names the input at fault.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace hqekv {

struct Error {
  std::string message;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const { return std::get<1>(v_); }
  const std::string& message() const { return error().message; }

 private:
  std::variant<T, Error> v_;
};

// Result<void>: success or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT

  static Status Ok() { return Status(); }
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }
  const std::string& message() const { return error_.message; }

 private:
  Error error_;
  bool ok_ = true;
};

inline Error MakeError(std::string message) { return Error{std::move(message)}; }

}  // namespace hqekv

// Propagate an error from an expression returning Status or Result<T>.
#define HQEKV_RETURN_IF_ERROR(expr)                        \
  do {                                                     \
    auto&& hqekv_status_ = (expr);                         \
    if (!hqekv_status_.ok()) return hqekv_status_.error(); \
  } while (0)

// Declares `lhs` from an expression returning Result<T>, or returns its error:
//   HQEKV_ASSIGN_OR_RETURN(auto model, LoadModel(path));
#define HQEKV_CONCAT_INNER_(a, b) a##b
#define HQEKV_CONCAT_(a, b) HQEKV_CONCAT_INNER_(a, b)
#define HQEKV_ASSIGN_OR_RETURN(lhs, expr) \
  HQEKV_ASSIGN_OR_RETURN_IMPL_(HQEKV_CONCAT_(hqekv_result_, __LINE__), lhs, expr)
#define HQEKV_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.error();                 \
  lhs = std::move(tmp).value()
