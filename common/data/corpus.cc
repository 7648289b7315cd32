// Corpus loading: walk, filter, concatenate, split 90/10. See corpus.h.
#include "common/data/corpus.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <system_error>

namespace llmp {

namespace fs = std::filesystem;

const char* to_string(SplitKind s) { return s == SplitKind::kTrain ? "train" : "val"; }

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error("corpus " + path + ": " + what);
}

// Regular files under `dir`, recursively, sorted by path. Symlinks (to files or folders) are
// skipped, as are strfile indexes (.dat) and the fortunes package's .u8 names.
std::vector<std::string> list_files(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec), end;
  if (ec) fail(dir, "cannot read folder: " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) fail(dir, "cannot read folder: " + ec.message());
    const fs::directory_entry& e = *it;
    if (e.is_symlink(ec)) continue;  // symlink_status: the link itself, never its target
    if (!e.is_regular_file(ec)) continue;
    const std::string ext = e.path().extension().string();
    if (ext == ".dat" || ext == ".u8") continue;
    out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

void append_file(const std::string& file, std::vector<uint8_t>* bytes) {
  std::ifstream in(file, std::ios::binary);
  if (!in) fail(file, "cannot open file");
  bytes->insert(bytes->end(), std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (in.bad()) fail(file, "read error");
}

}  // namespace

std::string Corpus::kind_error(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);  // follows symlinks: what would be read
  if (!fs::exists(st)) return "no such file or folder";
  if (fs::is_regular_file(st) || fs::is_directory(st)) return "";
  const char* what = fs::is_character_file(st) ? "a character device"
                     : fs::is_block_file(st)   ? "a block device"
                     : fs::is_fifo(st)         ? "a FIFO"
                     : fs::is_socket(st)       ? "a socket"
                                               : "an unknown kind of file";
  return std::string("not a regular file or directory (") + what + ")";
}

Corpus Corpus::load(const std::string& path, int T) {
  if (T < 1) throw std::invalid_argument("corpus " + path + ": sequence length T=" +
                                         std::to_string(T) + " must be at least 1");
  std::error_code ec;
  const std::string kind = kind_error(path);
  if (!kind.empty()) fail(path, kind);

  Corpus c;
  c.path_ = path;
  if (fs::is_directory(path, ec)) {
    c.files_ = list_files(path);
  } else {
    c.files_ = {path};  // an explicit file is read even when it is a symlink
  }
  std::vector<uint8_t> all;
  for (const std::string& f : c.files_) append_file(f, &all);
  if (all.empty()) {
    fail(path, c.files_.empty() ? "no readable files (symlinks, .dat and .u8 are skipped)"
                                : "is empty (0 bytes)");
  }

  // First 90% train, last 10% validation (floor of the byte count).
  const int64_t n = static_cast<int64_t>(all.size());
  const int64_t n_train = static_cast<int64_t>(static_cast<double>(n) * kTrainFraction);
  const int64_t need = static_cast<int64_t>(T) + 1;
  if (n_train < need || n - n_train < need) {
    fail(path, "too short: " + std::to_string(n) + " bytes give a train split of " +
                   std::to_string(n_train) + " and a validation split of " +
                   std::to_string(n - n_train) + " bytes; each needs at least T+1 = " +
                   std::to_string(need));
  }
  c.train_.kind = SplitKind::kTrain;
  c.train_.bytes.assign(all.begin(), all.begin() + n_train);
  c.val_.kind = SplitKind::kVal;
  c.val_.bytes.assign(all.begin() + n_train, all.end());
  return c;
}

}  // namespace llmp
