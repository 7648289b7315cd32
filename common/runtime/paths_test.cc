// output_path_error and non_regular_kind against real files, folders, a FIFO and a device node:
// each refusal names the flag, the path and what is wrong.
#include "common/runtime/paths.h"
#include "common/testing/files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace llmp {
namespace {

using testing::fresh_dir;

namespace fs = std::filesystem;

TEST(ParentDirectory, FolderPartOrDot) {
  EXPECT_EQ(parent_directory("/x/y"), "/x");
  EXPECT_EQ(parent_directory("/y"), "/");
  EXPECT_EQ(parent_directory("y"), ".");
  EXPECT_EQ(parent_directory("a/b/c.json"), "a/b");
  EXPECT_EQ(parent_directory("a//b"), "a");
}

TEST(OutputPathError, UnsetAbsentAndRegularFilesAreFine) {
  const std::string d = fresh_dir("fine");
  EXPECT_EQ(output_path_error("--save", ""), "");
  EXPECT_EQ(output_path_error("--save", d + "/new.safetensors"), "");
  std::ofstream(d + "/old.safetensors") << "x";
  EXPECT_EQ(output_path_error("--save", d + "/old.safetensors"), "");
}

TEST(OutputPathError, MissingDirectoryIsNamed) {
  const std::string d = fresh_dir("missing");
  EXPECT_EQ(output_path_error("--save", d + "/no/such/x.safetensors"),
            "--save " + d + "/no/such/x.safetensors: directory " + d + "/no/such does not exist");
}

TEST(OutputPathError, ParentThatIsAFileIsNamed) {
  const std::string d = fresh_dir("parent_file");
  std::ofstream(d + "/f") << "x";
  EXPECT_EQ(output_path_error("--trace", d + "/f/t.json"),
            "--trace " + d + "/f/t.json: " + d + "/f is not a directory");
}

TEST(OutputPathError, UnwritableDirectoryIsNamed) {
  // /proc/sys is mounted read-only (no file can be created there, even by root, whom access(2)
  // otherwise lets write anywhere).
  if (::access("/proc/sys", W_OK | X_OK) == 0) GTEST_SKIP() << "/proc/sys is writable here";
  const std::string err = output_path_error("--save", "/proc/sys/x.safetensors");
  EXPECT_NE(err.find("--save /proc/sys/x.safetensors: directory /proc/sys is not writable ("),
            std::string::npos)
      << err;
}

TEST(OutputPathError, NonRegularTargetsAreRefusedByKind) {
  const std::string d = fresh_dir("kinds");
  fs::create_directories(d + "/sub");
  ASSERT_EQ(::mkfifo((d + "/fifo").c_str(), 0600), 0);
  EXPECT_EQ(output_path_error("--save", d + "/sub"),
            "--save " + d + "/sub: it is a directory, not a regular file");
  EXPECT_EQ(output_path_error("--save", d + "/fifo"),
            "--save " + d + "/fifo: it is a FIFO, not a regular file");
  EXPECT_EQ(output_path_error("--save", "/dev/null"),
            "--save /dev/null: it is a character device, not a regular file");
  EXPECT_EQ(output_path_error("--save", d + "/"),
            "--save " + d + "/: names a directory (ends with /), not a file");
}

TEST(NonRegularKind, NamesEachKind) {
  const std::string d = fresh_dir("kind");
  std::ofstream(d + "/file") << "x";
  ASSERT_EQ(::mkfifo((d + "/fifo").c_str(), 0600), 0);
  EXPECT_EQ(non_regular_kind(d + "/file"), "");
  EXPECT_EQ(non_regular_kind(d + "/absent"), "");
  EXPECT_EQ(non_regular_kind(d), "a directory");
  EXPECT_EQ(non_regular_kind(d + "/fifo"), "a FIFO");
  EXPECT_EQ(non_regular_kind("/dev/null"), "a character device");
}

}  // namespace
}  // namespace llmp
