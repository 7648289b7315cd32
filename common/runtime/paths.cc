// Output path checks (see paths.h).
#include "common/runtime/paths.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace llmp {

std::string non_regular_kind(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "";  // absent (or unreadable: the writer will say)
  if (S_ISREG(st.st_mode)) return "";
  if (S_ISDIR(st.st_mode)) return "a directory";
  if (S_ISFIFO(st.st_mode)) return "a FIFO";
  if (S_ISCHR(st.st_mode)) return "a character device";
  if (S_ISBLK(st.st_mode)) return "a block device";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  return "not a regular file";
}

std::string parent_directory(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  std::string dir = p.substr(0, slash);
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

std::string output_path_error(const std::string& flag, const std::string& path) {
  if (path.empty()) return "";
  const std::string head = flag + " " + path + ": ";
  if (path.back() == '/') return head + "names a directory (ends with /), not a file";
  const std::string dir = parent_directory(path);
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) return head + "directory " + dir + " does not exist";
    return head + "directory " + dir + " cannot be read (" + std::strerror(errno) + ")";
  }
  if (!S_ISDIR(st.st_mode)) return head + dir + " is not a directory";
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return head + "directory " + dir + " is not writable (" + std::strerror(errno) + ")";
  const std::string kind = non_regular_kind(path);
  if (!kind.empty()) return head + "it is " + kind + ", not a regular file";
  return "";
}

}  // namespace llmp
