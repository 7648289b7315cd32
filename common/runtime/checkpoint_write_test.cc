// The write side of checkpoints (save_safetensors) when things go wrong around it: a target that
// is not a regular file, temporary files left by a killed writer, and a save stopped by SIGINT or
// SIGTERM half-way (a forked writer with signals.h's handlers, signalled while its temporary file
// exists): the old checkpoint must survive byte for byte and no temporary file may remain.
//
// Glossary: tmp = "<target>.tmp.<pid>", the file a save writes before rename(2).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "common/runtime/checkpoint.h"
#include "common/runtime/signals.h"
#include "common/testing/files.h"

namespace llmp {
namespace {

using testing::fresh_dir;
using testing::read_bytes;
using testing::error_of;

namespace fs = std::filesystem;

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

const std::vector<float> kSmall = {1, 2, 3, 4};

void save_small(const std::string& path) {
  save_safetensors(path, {{"w", {2, 2}, kSmall.data()}}, {{"step", "1"}});
}

// A pid that no longer runs: a child that exited and was reaped.
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

TEST(SaveSafetensors, RefusesAFifoByNameAndLeavesIt) {
  const std::string d = fresh_dir("fifo");
  const std::string fifo = d + "/ckpt.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { save_small(fifo); }),
            "checkpoint " + fifo + ": it is a FIFO, not a regular file; refusing to replace it");
  struct stat st;
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced";
  EXPECT_EQ(names_in(d), std::vector<std::string>{"ckpt.safetensors"})
      << "a temporary file remains";
}

TEST(SaveSafetensors, RefusesADirectoryAndADeviceNode) {
  const std::string d = fresh_dir("dir");
  fs::create_directories(d + "/ckpt.safetensors");
  EXPECT_EQ(error_of([&] { save_small(d + "/ckpt.safetensors"); }),
            "checkpoint " + d +
                "/ckpt.safetensors: it is a directory, not a regular file; refusing to replace it");
  EXPECT_TRUE(fs::is_directory(d + "/ckpt.safetensors"));
  // /dev/null itself: the check runs before anything is created next to it.
  EXPECT_EQ(error_of([&] { save_small("/dev/null"); }),
            "checkpoint /dev/null: it is a character device, not a regular file; refusing to "
            "replace it");
  struct stat st;
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST(SaveSafetensors, RemovesStaleTempFilesOfWritersNoLongerRunning) {
  const std::string d = fresh_dir("stale");
  const std::string target = d + "/ckpt.safetensors";
  const std::string dead = target + ".tmp." + std::to_string(dead_pid());
  const std::string alive = target + ".tmp." + std::to_string(::getppid());  // a running writer
  const std::string other = d + "/other.safetensors.tmp." + std::to_string(dead_pid());
  for (const std::string& p : {dead, alive, other}) std::ofstream(p) << "half a checkpoint";
  ::testing::internal::CaptureStderr();
  save_small(target);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(fs::exists(dead)) << "the dead writer's file remains";
  EXPECT_TRUE(fs::exists(alive)) << "a running writer's file was removed";
  EXPECT_TRUE(fs::exists(other)) << "another checkpoint's temporary file was removed";
  EXPECT_NE(err.find("warning: removed stale temporary checkpoint file(s)"), std::string::npos)
      << err;
  EXPECT_NE(err.find(dead), std::string::npos) << "the line does not name " << dead << ": " << err;
  EXPECT_EQ(load_safetensors(target).metadata.at("step"), "1");
}

// Saves ~256 MB (64 entries over one 4 MiB buffer) in a forked child with the handlers of
// signals.h, signals it as soon as its temporary file appears (or the target changes), and checks
// the child's exit status, that the old checkpoint is byte for byte intact and that no temporary
// file remains.
void interrupt_a_save(int sig, int want_status) {
  const std::string d = fresh_dir("interrupt_" + std::to_string(sig));
  const std::string target = d + "/ckpt.safetensors";
  save_small(target);
  const std::string before = read_bytes(target);

  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    install_signal_handlers(false);
    std::vector<float> block(1 << 20, 0.5f);
    std::vector<CheckpointEntry> entries;
    for (int i = 0; i < 64; ++i)
      entries.push_back({"t" + std::to_string(i), {1 << 20}, block.data()});
    try {
      save_safetensors(target, entries, {{"step", "2"}});
    } catch (...) {
      ::_exit(90);
    }
    ::_exit(0);  // finished before the signal came: the parent reports it
  }
  const std::string tmp = target + ".tmp." + std::to_string(child);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool seen = false;
  while (std::chrono::steady_clock::now() < deadline) {
    if (fs::exists(tmp) || read_bytes(target) != before) {
      seen = true;
      break;
    }
    int status = 0;
    if (::waitpid(child, &status, WNOHANG) == child) break;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  ::kill(child, sig);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0) == child || errno == ECHILD, true);
  EXPECT_TRUE(seen) << "neither " << tmp << " appeared nor did the target change";
  ASSERT_TRUE(WIFEXITED(status)) << "the writer died of signal " << WTERMSIG(status)
                                 << " instead of exiting " << want_status;
  EXPECT_EQ(WEXITSTATUS(status), want_status) << "(0: the save finished before the signal)";
  EXPECT_FALSE(fs::exists(tmp)) << "the signal handler left " << tmp;
  EXPECT_TRUE(read_bytes(target) == before) << "the old checkpoint was changed";
  EXPECT_EQ(names_in(d), std::vector<std::string>{"ckpt.safetensors"});
}

TEST(SaveSafetensors, SigintMidSaveExits130KeepsTheOldFileAndRemovesTheTempFile) {
  interrupt_a_save(SIGINT, 130);
}

TEST(SaveSafetensors, SigtermMidSaveExits143KeepsTheOldFileAndRemovesTheTempFile) {
  interrupt_a_save(SIGTERM, 143);
}

}  // namespace
}  // namespace llmp
