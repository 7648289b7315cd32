// Small helpers the unit tests share for files and errors: a fresh folder under the test's
// temporary directory, a file's bytes, and the message a call throws.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace llmp {
namespace testing {

/// An empty folder `name` under gtest's TempDir() (Bazel gives every test target its own), made
/// anew: whatever an earlier case left there is removed. Returns its path.
inline std::string fresh_dir(const std::string& name) {
  const std::filesystem::path p = std::filesystem::path(::testing::TempDir()) / name;
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

/// The whole content of the file at `path` ("" when it cannot be opened).
inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// The what() of the std::exception `f()` throws, or "" when it throws none.
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace testing
}  // namespace llmp
