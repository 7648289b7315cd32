// Tests for Corpus::load: file and folder loading, what a folder walk skips, the 90/10 split,
// and the one-line errors for missing, empty and too-short inputs.
#include "common/data/corpus.h"
#include "common/testing/files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace llmp {
namespace {

using testing::fresh_dir;
using testing::error_of;

namespace fs = std::filesystem;

void write_file(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string as_string(const Corpus::Split& s) { return std::string(s.bytes.begin(), s.bytes.end()); }

TEST(Corpus, FileIsSplitNinetyTen) {
  const std::string dir = fresh_dir("file");
  std::string text;
  for (int i = 0; i < 1000; ++i) text.push_back(static_cast<char>('a' + i % 26));
  write_file(dir + "/text", text);
  const Corpus c = Corpus::load(dir + "/text", 8);
  EXPECT_EQ(c.size(), 1000);
  EXPECT_EQ(c.train().size(), 900);
  EXPECT_EQ(c.val().size(), 100);
  EXPECT_EQ(as_string(c.train()), text.substr(0, 900));
  EXPECT_EQ(as_string(c.val()), text.substr(900));
  EXPECT_EQ(c.train().kind, SplitKind::kTrain);
  EXPECT_EQ(c.split(SplitKind::kVal).kind, SplitKind::kVal);
}

TEST(Corpus, FolderIsWalkedSortedAndSkipsIndexesAndSymlinks) {
  const std::string dir = fresh_dir("folder");
  const std::string a(60, 'A'), b(60, 'B'), c(60, 'C');
  write_file(dir + "/b", b);
  write_file(dir + "/a/nested", a);  // "a/nested" sorts before "b"
  write_file(dir + "/c", c);
  write_file(dir + "/b.dat", "INDEX");   // strfile index: skipped
  write_file(dir + "/other.u8", "U8");   // skipped
  fs::create_symlink(dir + "/b", dir + "/link");  // symlink: skipped
  fs::create_directory_symlink(dir + "/a", dir + "/alink");  // not followed
  const Corpus corpus = Corpus::load(dir, 4);
  ASSERT_EQ(corpus.files().size(), 3u);
  EXPECT_EQ(corpus.files()[0], dir + "/a/nested");
  EXPECT_EQ(corpus.files()[1], dir + "/b");
  EXPECT_EQ(corpus.files()[2], dir + "/c");
  EXPECT_EQ(as_string(corpus.train()) + as_string(corpus.val()), a + b + c);
}

TEST(Corpus, MissingPathNamesThePath) {
  const std::string path = fresh_dir("missing") + "/nope";
  const std::string msg = error_of([&] { Corpus::load(path, 8); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("no such file or folder"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
}

TEST(Corpus, EmptyFileAndEmptyFolderAreErrors) {
  const std::string dir = fresh_dir("empty");
  write_file(dir + "/empty_file", "");
  std::string msg = error_of([&] { Corpus::load(dir + "/empty_file", 8); });
  EXPECT_NE(msg.find(dir + "/empty_file"), std::string::npos) << msg;
  EXPECT_NE(msg.find("empty"), std::string::npos) << msg;

  const std::string only_index = fresh_dir("only_index");
  write_file(only_index + "/x.dat", "INDEX BYTES ARE NOT TEXT");
  msg = error_of([&] { Corpus::load(only_index, 8); });
  EXPECT_NE(msg.find(only_index), std::string::npos) << msg;
  EXPECT_NE(msg.find("no readable files"), std::string::npos) << msg;

  // A folder of empty files has files but no bytes.
  msg = error_of([&] { Corpus::load(dir, 8); });
  EXPECT_NE(msg.find("is empty"), std::string::npos) << msg;
}

TEST(Corpus, OnlyRegularFilesAndFoldersAreRead) {
  // /dev/zero would be read forever, a FIFO would block on open: refused before reading.
  try {
    Corpus::load("/dev/zero", 4);
    FAIL() << "expected a throw";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "corpus /dev/zero: not a regular file or directory (a character device)");
  }
  const std::string fifo = ::testing::TempDir() + "/corpus_test_fifo";
  fs::remove(fifo);
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(Corpus::kind_error(fifo), "not a regular file or directory (a FIFO)");
  EXPECT_THROW(Corpus::load(fifo, 4), std::runtime_error);
  fs::remove(fifo);
  EXPECT_EQ(Corpus::kind_error(::testing::TempDir()), "");
  EXPECT_EQ(Corpus::kind_error("/no/such/corpus"), "no such file or folder");
}

TEST(Corpus, TooShortForOneSequenceInEitherSplit) {
  const std::string dir = fresh_dir("short");
  // 100 bytes: train 90, val 10. T=9 needs 10 bytes per split: fits. T=10 does not (val).
  write_file(dir + "/t", std::string(100, 'x'));
  EXPECT_NO_THROW(Corpus::load(dir + "/t", 9));
  const std::string msg = error_of([&] { Corpus::load(dir + "/t", 10); });
  EXPECT_NE(msg.find(dir + "/t"), std::string::npos) << msg;
  EXPECT_NE(msg.find("too short"), std::string::npos) << msg;
  EXPECT_NE(msg.find("T+1 = 11"), std::string::npos) << msg;
}

TEST(Corpus, NonPositiveSequenceLengthIsRejected) {
  const std::string dir = fresh_dir("badT");
  write_file(dir + "/t", std::string(100, 'x'));
  EXPECT_THROW(Corpus::load(dir + "/t", 0), std::invalid_argument);
}

TEST(Corpus, DefaultFortunesCorpus) {
  if (!fs::exists(kDefaultCorpusPath)) GTEST_SKIP() << "Debian package `fortunes` not installed";
  const Corpus c = Corpus::load(kDefaultCorpusPath, 64);
  EXPECT_GT(c.size(), 1000000) << "fortunes is ~2.6 MB of text";
  for (const std::string& f : c.files()) {
    EXPECT_NE(fs::path(f).extension(), ".dat") << f;
    EXPECT_NE(fs::path(f).extension(), ".u8") << f;
  }
  EXPECT_EQ(c.val().size(), c.size() - static_cast<int64_t>(c.size() * 0.9));
}

}  // namespace
}  // namespace llmp
