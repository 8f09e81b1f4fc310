// Runs a call that must not hang (reading a FIFO, /dev/zero, ...) with a
// watchdog: when it has not returned after `seconds`, the test binary prints
// what hung and exits 1 at once, so a hang fails the test instead of blocking
// ctest until its global timeout. The call runs on a detached thread that the
// exit abandons.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <utility>

namespace hqekv::testing_util {

template <class Fn>
auto WithinSeconds(double seconds, const std::string& what, Fn fn) -> decltype(fn()) {
  using R = decltype(fn());
  auto promise = std::make_shared<std::promise<R>>();
  std::future<R> done = promise->get_future();
  std::thread([promise, fn = std::move(fn)]() mutable { promise->set_value(fn()); }).detach();
  if (done.wait_for(std::chrono::duration<double>(seconds)) != std::future_status::ready) {
    std::fprintf(stderr, "HANG: %s did not return within %.0f s\n", what.c_str(), seconds);
    std::fflush(stderr);
    std::_Exit(1);
  }
  return done.get();
}

}  // namespace hqekv::testing_util
