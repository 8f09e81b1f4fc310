// A weights file rewritten in place under a running server (same inode:
// `cp new.gguf model.gguf`, a truncate) changes what the mapping reads, and a
// truncation turns a read into SIGBUS. The engine refuses new requests with
// a 503 naming the file instead of computing with other weights; a file
// replaced by a rename is fine (the mapping keeps the old inode).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "io/model_source.h"
#include "server/engine.h"
#include "../temp_path.h"

namespace hqekv::server {
namespace {

namespace fs = std::filesystem;

std::string CopyOfTheModel(const std::string& name) {
  const std::string dir = hqekv::test::TempPath(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string p = dir + "/model.gguf";
  fs::copy_file(std::string(HQEKV_SOURCE_DIR) + "/models/stories260K.gguf", p);
  return p;
}

CompletionRequest Short() {
  CompletionRequest r;
  r.prompt = "Once upon a time";
  r.max_tokens = 2;
  r.ignore_eos = true;
  return r;
}

std::optional<FinishEvent> Finish(RequestChannel& ch) {
  std::vector<TokenEvent> ev;
  std::optional<FinishEvent> fin;
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fin && std::chrono::steady_clock::now() < limit)
    ch.Wait(std::chrono::milliseconds(20), &ev, &fin);
  return fin;
}

TEST(ModelFileChange, AFileRewrittenInPlaceIsRefusedNamingIt) {
  const std::string path = CopyOfTheModel("model_rewritten");
  auto src = LoadModel(path);
  ASSERT_TRUE(src.ok()) << src.message();
  EngineOptions o;
  o.ctx = 64;
  auto e = Engine::Create(**src, o);
  ASSERT_TRUE(e.ok()) << e.message();
  ApiError err;
  auto ch = (*e)->Submit(Short(), &err);
  ASSERT_NE(ch, nullptr) << err.message;
  ASSERT_TRUE(Finish(*ch).has_value());
  // Rewrite in place: same inode, one byte longer (a later mtime too).
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  {
    std::ofstream f(path, std::ios::binary | std::ios::app);
    f.put('\0');
  }
  err = ApiError{};
  EXPECT_EQ((*e)->Submit(Short(), &err), nullptr) << "a request ran on a rewritten file";
  EXPECT_EQ(err.status, 503);
  EXPECT_NE(err.message.find(path), std::string::npos) << err.message;
  EXPECT_NE(err.message.find("modified in place"), std::string::npos) << err.message;
}

TEST(ModelFileChange, AFileReplacedByARenameKeepsServing) {
  const std::string path = CopyOfTheModel("model_renamed");
  auto src = LoadModel(path);
  ASSERT_TRUE(src.ok()) << src.message();
  EngineOptions o;
  o.ctx = 64;
  auto e = Engine::Create(**src, o);
  ASSERT_TRUE(e.ok()) << e.message();
  fs::copy_file(path, path + ".new");
  { std::ofstream(path + ".new", std::ios::binary | std::ios::app).put('\0'); }
  fs::rename(path + ".new", path);
  ApiError err;
  auto ch = (*e)->Submit(Short(), &err);
  ASSERT_NE(ch, nullptr) << err.message;
  auto fin = Finish(*ch);
  ASSERT_TRUE(fin.has_value());
  EXPECT_EQ(fin->reason, "length");
}

}  // namespace
}  // namespace hqekv::server
