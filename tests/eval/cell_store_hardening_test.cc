// Cached cells under hostile disk states (issue 19): a FIFO or device planted
// as a cell is skipped without blocking, and a cell write that fails (a full
// disk, simulated by RLIMIT_FSIZE) is an error naming the file and installs
// no 0-byte cell, keeping the cell stored before.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <string>

#include "../within_time.h"
#include "eval/run/cell_store.h"

namespace hqekv::eval {
namespace {
namespace fs = std::filesystem;

std::string FreshDir(const std::string& name) {
  const std::string d = ::testing::TempDir() + "/" + name + "." + std::to_string(::getpid());
  fs::remove_all(d);
  fs::create_directories(d + "/cells");
  return d;
}

TEST(CellStoreHardening, FifoOrDeviceAsCellIsSkippedWithoutBlocking) {
  const std::string dir = FreshDir("cells_fifo");
  CellStore store(dir);
  const std::string fifo_hash = CellHash("fifo");
  ASSERT_EQ(::mkfifo((dir + "/cells/" + fifo_hash + ".json").c_str(), 0600), 0);
  EXPECT_FALSE(testing_util::WithinSeconds(5, "CellStore::Load(FIFO)",
                                           [&] { return store.Load(fifo_hash).has_value(); }));
  const std::string dev_hash = CellHash("dev");
  fs::create_symlink("/dev/zero", dir + "/cells/" + dev_hash + ".json");
  EXPECT_FALSE(testing_util::WithinSeconds(5, "CellStore::Load(/dev/zero)",
                                           [&] { return store.Load(dev_hash).has_value(); }));
  fs::remove_all(dir);
}

TEST(CellStoreHardening, FailedSaveKeepsTheOldCellAndNamesIt) {
  const std::string dir = FreshDir("cells_full");
  CellStore store(dir);
  CellResult c;
  c.hash = CellHash("full|disk");
  c.kind = "quality";
  c.policy = "fp16";
  c.kl = 0.25;
  ASSERT_TRUE(store.Save(c).ok());
  const std::string path = dir + "/cells/" + c.hash + ".json";
  const auto old_size = fs::file_size(path);
  c.kl = 0.5;
  c.describe = std::string(1 << 16, 'x');  // bigger than the limit below
  std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  struct rlimit tiny = saved;
  tiny.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &tiny), 0);
  const Status st = store.Save(c);
  ::setrlimit(RLIMIT_FSIZE, &saved);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
  EXPECT_EQ(fs::file_size(path), old_size);
  auto back = store.Load(c.hash);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->kl, 0.25);
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir + "/cells")) ++entries;
  EXPECT_EQ(entries, 1);  // no temporary and no 0-byte cell left
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hqekv::eval
